package zarena

/*
#include "shim.h"

static inline const char* shim_status_string(zarena_status s) { return zarena_status_string(s); }
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"
)

// Status is a zarena_status code (the constants: status_gen.go). The numbers are the C
// ABI's and never change.
type Status int32

// String is the library's zarena_status_string ("out of memory"; "unknown status" for
// codes this library does not know); the package's own text while the library is not
// loaded (zarena_dlopen mode).
func (s Status) String() string {
	if ready() != nil {
		if s == StatusOK {
			return "ok"
		}
		if sent, ok := statusSentinel(s).(*sentinel); ok {
			return sent.text
		}
		return "unknown status"
	}
	return C.GoString(C.shim_status_string(C.zarena_status(s)))
}

// sentinel is the error that each status code unwraps to (the sentinels and the Status
// constants are in status_gen.go, generated from the library's table of status codes).
type sentinel struct {
	status Status
	text   string
}

func (s *sentinel) Error() string { return "zarena: " + s.text }

// ErrNotLoaded: the library could not be loaded (zarena_dlopen mode; see Available).
// The *Error is also ErrUnsupported.
var ErrNotLoaded = errors.New("zarena: library not loaded")

// Error is a failed zarena call: its status and the library's zarena_last_error text,
// captured on the thread that failed. It unwraps to the status's sentinel (nil for a
// status newer than this package).
//
// Verdict and Advice are the diagnosis when the message carries one (a failed overflow:
// "verdict never_reset ... Fix: call zarena_reset after every step"); empty otherwise.
type Error struct {
	Status  Status
	Message string
	Verdict string // never_reset, runaway_buffer, working_set_full, fragmentation, ...
	Advice  string // the one-sentence fix that goes with the verdict

	also error // a second sentinel this error is (ErrNotLoaded), or nil
}

// newError builds an *Error and reads the diagnosis out of its message.
func newError(status Status, msg string) *Error {
	e := &Error{Status: status, Message: msg}
	e.Verdict, e.Advice = parseDiagnosis(msg)
	return e
}

// Is makes errors.Is(err, ErrNotLoaded) true for a library that could not be loaded.
func (e *Error) Is(target error) bool { return e.also != nil && target == e.also }

func (e *Error) Error() string {
	name := "unknown status"
	if s, ok := e.Unwrap().(*sentinel); ok {
		name = s.text
	}
	if e.Message == "" {
		return "zarena: " + name
	}
	if e.also == ErrNotLoaded { // the message says what happened and what to do
		return "zarena: " + e.Message
	}
	return "zarena: " + e.Message + " [" + name + "]"
}

// Unwrap returns the sentinel of e.Status, so errors.Is(err, ErrStale) works.
func (e *Error) Unwrap() error { return statusSentinel(e.Status) }

func statusSentinel(s Status) error {
	if s > 0 && int(s) < len(sentinels) {
		return sentinels[s]
	}
	return nil
}

// StatusOf returns the status carried by err: that of the first *Error (or sentinel)
// found in err's tree, in the order errors.As searches it (so also through fmt.Errorf's
// %w and errors.Join, which Step returns); StatusOK for nil, and StatusInternal for an
// error that carries none.
func StatusOf(err error) Status {
	if err == nil {
		return StatusOK
	}
	var ze *Error
	if errors.As(err, &ze) {
		return ze.Status
	}
	var se *sentinel
	if errors.As(err, &se) {
		return se.status
	}
	return StatusInternal
}

// DiagnosisOf returns the verdict and advice of the first *Error in err's tree that
// carries one ("" when none does).
func DiagnosisOf(err error) (verdict, advice string) {
	var found *Error
	walkErrors(err, func(e error) bool {
		if ze, ok := e.(*Error); ok && ze.Verdict != "" {
			found = ze
			return true
		}
		return false
	})
	if found == nil {
		return "", ""
	}
	return found.Verdict, found.Advice
}

// walkErrors visits err's tree depth-first, as errors.As does, until visit says stop.
func walkErrors(err error, visit func(error) bool) bool {
	if err == nil {
		return false
	}
	if visit(err) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return walkErrors(u.Unwrap(), visit)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if walkErrors(e, visit) {
				return true
			}
		}
	}
	return false
}

// parseDiagnosis reads the verdict and the advice out of a library message. It is the
// one place that knows their spelling: the stable suffix of a failed call,
// ". verdict=NAME; fix: ADVICE" (ADVICE runs to the end), and the log line's
// "verdict NAME ... Fix: ADVICE" (also "verdict: NAME", "advice: "), the advice ending at
// a period followed by " (", a newline, or the end. Messages without them give "".
func parseDiagnosis(msg string) (verdict, advice string) {
	if i := strings.Index(msg, "verdict"); i >= 0 {
		rest := strings.TrimLeft(msg[i+len("verdict"):], " =:")
		n := 0
		for n < len(rest) && (rest[n] == '_' || (rest[n] >= 'a' && rest[n] <= 'z')) {
			n++
		}
		verdict = rest[:n]
	}
	for _, key := range []string{"; fix: ", "Fix: ", "advice: "} {
		i := strings.Index(msg, key)
		if i < 0 {
			continue
		}
		rest := msg[i+len(key):]
		end := len(rest)
		for _, stop := range []string{". (", ".\n", "\n"} {
			if j := strings.Index(rest, stop); j >= 0 && j < end {
				end = j
			}
		}
		advice = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest[:end]), "."))
		break
	}
	if verdict == "" {
		advice = "" // advice without a verdict is some other sentence
	}
	return verdict, advice
}

// FreeError is a queued free that failed (see Arena.Free): the block, the epoch it was
// freed with (AnyEpoch for Free) and the library's status for it.
type FreeError struct {
	Ptr    DevicePtr
	Epoch  uint64
	Status Status
}

func (e *FreeError) Error() string {
	ep := "any epoch"
	if e.Epoch != AnyEpoch {
		ep = fmt.Sprintf("epoch %d", e.Epoch)
	}
	return fmt.Sprintf("zarena: queued free of %#x (%s) failed: %s", uintptr(e.Ptr), ep,
		e.Status)
}

// Unwrap returns the status's sentinel (ErrDoubleFree, ErrNotOwned, ErrStale, ...).
func (e *FreeError) Unwrap() error { return statusSentinel(e.Status) }

// errClosed is the error of op on a closed arena.
func errClosed(op string) error {
	return &Error{Status: StatusClosed, Message: op + ": the arena is closed"}
}

// errorFrom builds the error of a failed call. msg is a malloc'ed copy of
// zarena_last_error made by the C wrapper in the same call (the thread-local text
// could be overwritten by another goroutine's call on this thread before Go reads it);
// errorFrom frees it. msg may be NULL when the copy could not be made.
func errorFrom(status C.zarena_status, msg *C.char) error {
	if status == C.ZARENA_OK {
		return nil
	}
	text := ""
	if msg != nil {
		text = C.GoString(msg)
		C.free(unsafe.Pointer(msg))
	}
	return newError(Status(status), text)
}
