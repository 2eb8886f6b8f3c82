package zarena

/*
#include "shim.h"
*/
import "C"

// Capture, stream and poison (zarena.h, "Capture, stream and poison"). The arena calls
// apply every queued free first and run with every shard locked (freequeue.go).

// CaptureScope says which arenas a capture declared with CaptureBegin covers.
type CaptureScope int32

const (
	// CaptureProcess covers every arena of the process (the stream is ignored).
	CaptureProcess CaptureScope = C.ZARENA_CAPTURE_PROCESS
	// CaptureStream covers every arena whose stream (Config.Stream, or the last
	// SetStream) is the one named; 0 and cudaStreamLegacy (1) are the same stream.
	CaptureStream CaptureScope = C.ZARENA_CAPTURE_STREAM
)

// CaptureBegin declares a CUDA graph capture for every arena the scope covers, with the
// effects of SetCaptureActive(true) on each: SYNC overflow refused with
// ErrCaptureUnsafe, poison fills skipped, overflow blocks freed meanwhile given back only
// after the capture. For engines that keep their capture state per process or per stream
// rather than per arena (zarena_capture_begin has the rules):
//   - begins and ends nest: the capture is active while a scope's begins outnumber its
//     ends; CaptureEnd without its begin is refused (ErrInvalidArgument);
//   - coverage is decided at each use: an arena created during the capture, or moved
//     onto the scope's stream, is covered at once;
//   - a scope adds to an arena's own SetCaptureActive, never clears it;
//   - the end that closes a scope releases what arenas closed during it left waiting;
//     an arena's overflow blocks freed during it go back at its next overflow
//     allocation, overflow free, Reset, SetCaptureActive(false) or Close.
//
// Call CaptureBegin before cudaStreamBeginCapture and CaptureEnd after
// cudaStreamEndCapture. Safe from any goroutine. stream is a cudaStream_t as an integer
// (see SetStream); cudaStreamPerThread (2) is refused.
func CaptureBegin(scope CaptureScope, stream uintptr) error {
	return captureScope(1, scope, stream)
}

// CaptureEnd ends one CaptureBegin of the same scope and stream.
func CaptureEnd(scope CaptureScope, stream uintptr) error {
	return captureScope(0, scope, stream)
}

func captureScope(begin C.int, scope CaptureScope, stream uintptr) error {
	if err := ready(); err != nil {
		return err
	}
	r := C.shim_capture_scope(begin, C.int32_t(scope), C.uintptr_t(stream))
	return errorFrom(r.status, r.err)
}

// SetCaptureActive tells the arena whether the engine is capturing a CUDA graph: while
// active, SYNC overflow is refused with ErrCaptureUnsafe before any CUDA call, poison
// fills are skipped, and overflow blocks freed meanwhile are given back only after the
// capture (zarena_set_capture_active).
func (a *Arena) SetCaptureActive(active bool) error {
	on := C.int(0)
	if active {
		on = 1
	}
	return a.whole("SetCaptureActive", func(h C.uintptr_t) C.shim_result {
		return C.shim_set_capture_active(h, on)
	})
}

// SetStream replaces the arena's cudaStream_t (an integer here: a C pointer Go must not
// hold as a pointer); 0 is the legacy stream. See zarena_set_stream for what it means for
// blocks already handed out.
func (a *Arena) SetStream(stream uintptr) error {
	return a.whole("SetStream", func(h C.uintptr_t) C.shim_result {
		return C.shim_set_stream(h, C.uintptr_t(stream))
	})
}

// DefaultPoisonWord is the poison word 0 selects: a quiet NaN read as float32 and as
// float64.
const DefaultPoisonWord uint32 = 0x7FF80000

// SetPoison switches poisoning at run time: while on, freed blocks, blocks a reset
// reclaims and overflow blocks given back are filled with word (0: DefaultPoisonWord),
// so a kernel that reads a stale tensor sees NaN. Every free path fills before it returns:
// while poison is on, Free and FreeBlock do not queue but free at once (FlagPoison at New
// likewise), and the frees queued before SetPoison(true) are applied, unpoisoned, before it
// takes effect. A debugging mode: one fill, and one cgo call, per free.
func (a *Arena) SetPoison(enabled bool, word uint32) error {
	on := C.int(0)
	if enabled {
		on = 1
	}
	return a.whole("SetPoison", func(h C.uintptr_t) C.shim_result {
		r := C.shim_set_poison(h, on, C.uint32_t(word))
		if r.status == C.ZARENA_OK {
			a.setPoisonLocked(enabled)
			a.setPlanLocked(C.shim_plan_view(h))
		}
		return r
	})
}
