package zarena

/*
#include "shim.h"
*/
import "C"

import "time"

// InjectOverflowFault drives the overflow path of a host-backend arena for tests
// (zarena_debug_inject_overflow_fault, EXPERIMENTAL in the C ABI): the failNth-th
// overflow allocation from now (1 = the next; 0 = never) fails with ErrBackend, and the
// delayNth-th (1 = the next; 0 = every one) sleeps delay inside the C call first.
// ErrUnsupported on an arena that is not on the host backend.
func (a *Arena) InjectOverflowFault(failNth, delayNth uint64, delay time.Duration) error {
	a.q.mu.Lock()
	h := a.q.h
	a.q.mu.Unlock()
	if h == nil {
		return errClosed("InjectOverflowFault")
	}
	if delay < 0 {
		delay = 0
	}
	r := C.shim_inject_overflow_fault(h, C.uint64_t(failNth), C.uint64_t(delayNth),
		C.uint64_t(delay.Nanoseconds()))
	keepAlive(a)
	return errorFrom(r.status, r.err)
}
