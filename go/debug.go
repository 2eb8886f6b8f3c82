package zarena

/*
#include "shim.h"
*/
import "C"

import (
	"time"

	"github.com/zarena/zarena/go/internal/testhook"
)

// The test hooks live in package zarenatest (zarenatest.InjectOverflowFault); this
// package's own tests call the methods below directly.
func init() {
	testhook.InjectOverflowFault = func(a any, failNth, delayNth uint64, delay time.Duration) error {
		return a.(*Arena).injectOverflowFault(failNth, delayNth, delay)
	}
}

func (a *Arena) injectOverflowFault(failNth, delayNth uint64, delay time.Duration) error {
	ns := C.uint64_t(max(delay, 0).Nanoseconds())
	return a.whole("InjectOverflowFault", func(h C.uintptr_t) C.shim_result {
		return C.shim_inject_overflow_fault(h, C.uint64_t(failNth), C.uint64_t(delayNth), ns)
	})
}

// endOverflowDelay ends an injected overflow delay in progress (the sleeping allocation
// goes on at once), for tests that wait for an event rather than a time. It takes no
// shard lock: the allocation that sleeps holds one. The arena must stay open meanwhile.
func (a *Arena) endOverflowDelay() error {
	r := C.shim_inject_overflow_fault(a.h, 0, 0, 0)
	return callError(r.status, r.err)
}
