package zarena

/*
#include <stdlib.h>
#include <zarena/zarena.h>
*/
import "C"

import "unsafe"

// Status is a zarena_status code. The numbers are the C ABI's and never change.
type Status int32

// The status codes of zarena.h.
const (
	StatusOK              Status = 0
	StatusInvalidArgument Status = 1
	StatusOutOfMemory     Status = 2
	StatusNotOwned        Status = 3
	StatusDoubleFree      Status = 4
	StatusStale           Status = 5
	StatusCaptureUnsafe   Status = 6
	StatusNoDevice        Status = 7
	StatusBackend         Status = 8
	StatusUnsupported     Status = 9
	StatusInternal        Status = 10
)

// String is the library's zarena_status_string ("out of memory"; "unknown status" for
// codes this library does not know).
func (s Status) String() string {
	return C.GoString(C.zarena_status_string(C.zarena_status(s)))
}

// sentinel is the error that each status code unwraps to. Its text is fixed here
// rather than read from the library so that the sentinels exist before any cgo call.
type sentinel struct {
	status Status
	text   string
}

func (s *sentinel) Error() string { return "zarena: " + s.text }

// One sentinel per status code; test with errors.Is. Every error the package returns
// for a failed C call is an *Error that unwraps to one of these.
var (
	ErrInvalidArgument error = &sentinel{StatusInvalidArgument, "invalid argument"}
	ErrOutOfMemory     error = &sentinel{StatusOutOfMemory, "out of memory"}
	ErrNotOwned        error = &sentinel{StatusNotOwned, "pointer not owned by this arena"}
	ErrDoubleFree      error = &sentinel{StatusDoubleFree, "double free"}
	ErrStale           error = &sentinel{StatusStale, "stale pointer (reclaimed by a reset)"}
	ErrCaptureUnsafe   error = &sentinel{StatusCaptureUnsafe, "unsafe during stream capture"}
	ErrNoDevice        error = &sentinel{StatusNoDevice, "no usable CUDA device"}
	ErrBackend         error = &sentinel{StatusBackend, "backend error"}
	ErrUnsupported     error = &sentinel{StatusUnsupported, "unsupported"}
	ErrInternal        error = &sentinel{StatusInternal, "internal error"}
)

var sentinels = [...]error{
	StatusInvalidArgument: ErrInvalidArgument,
	StatusOutOfMemory:     ErrOutOfMemory,
	StatusNotOwned:        ErrNotOwned,
	StatusDoubleFree:      ErrDoubleFree,
	StatusStale:           ErrStale,
	StatusCaptureUnsafe:   ErrCaptureUnsafe,
	StatusNoDevice:        ErrNoDevice,
	StatusBackend:         ErrBackend,
	StatusUnsupported:     ErrUnsupported,
	StatusInternal:        ErrInternal,
}

// Error is a failed zarena call: its status and the library's zarena_last_error text,
// captured on the thread that failed. It unwraps to the status's sentinel (nil for a
// status newer than this package).
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string {
	name := "unknown status"
	if s, ok := e.Unwrap().(*sentinel); ok {
		name = s.text
	}
	if e.Message == "" {
		return "zarena: " + name
	}
	return "zarena: " + e.Message + " [" + name + "]"
}

// Unwrap returns the sentinel of e.Status, so errors.Is(err, ErrStale) works.
func (e *Error) Unwrap() error {
	if e.Status > 0 && int(e.Status) < len(sentinels) {
		return sentinels[e.Status]
	}
	return nil
}

// StatusOf returns the status carried by err (an *Error or a sentinel, possibly
// wrapped), StatusOK for nil, and StatusInternal for any other error.
func StatusOf(err error) Status {
	if err == nil {
		return StatusOK
	}
	for e := err; e != nil; {
		switch v := e.(type) {
		case *Error:
			return v.Status
		case *sentinel:
			return v.status
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			break
		}
		e = u.Unwrap()
	}
	return StatusInternal
}

// errorFrom builds the error of a failed call. msg is a malloc'ed copy of
// zarena_last_error made by the C wrapper in the same call (the thread-local text
// could be overwritten by another goroutine's call on this thread before Go reads it);
// errorFrom frees it. msg may be NULL when the copy could not be made.
func errorFrom(status C.zarena_status, msg *C.char) error {
	if status == C.ZARENA_OK {
		return nil
	}
	e := &Error{Status: Status(status)}
	if msg != nil {
		e.Message = C.GoString(msg)
		C.free(unsafe.Pointer(msg))
	}
	return e
}
