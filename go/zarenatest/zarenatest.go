// Package zarenatest holds what the tests of a program that uses zarena need and the
// program itself must not: fault injection into an arena's overflow path, so the paths
// that handle a failing or stalling GPU allocation run on a machine without a GPU.
package zarenatest

import (
	"time"

	zarena "github.com/zarena/zarena/go"
	"github.com/zarena/zarena/go/internal/testhook"
)

// InjectOverflowFault drives the overflow path of a host-backend arena
// (zarena_debug_inject_overflow_fault): the failNth-th overflow allocation from now (1 =
// the next; 0 = never) fails with zarena.ErrBackend, and the delayNth-th (1 = the next; 0
// = every one) sleeps delay inside the C call first (a negative delay is 0).
// zarena.ErrUnsupported on an arena that is not on the host backend; zarena.ErrClosed
// after Close.
func InjectOverflowFault(a *zarena.Arena, failNth, delayNth uint64, delay time.Duration) error {
	return testhook.InjectOverflowFault(a, failNth, delayNth, delay)
}
