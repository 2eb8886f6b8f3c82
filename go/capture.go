package zarena

/*
#include "shim.h"
*/
import "C"

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
