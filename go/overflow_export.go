package zarena

// The trampolines the library calls (through overflow_hook.c) for a Go OverflowAllocator.
// A file with //export may declare, not define, in its preamble: the C glue lives in
// overflow_hook.c, and the calls into the library in overflow.go.

/*
#include <stdint.h>
#include <zarena/zarena.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/cgo"
)

//export zarenaGoOverflowAlloc
func zarenaGoOverflowAlloc(h C.uintptr_t, bytes, alignment C.uint64_t, stream C.uintptr_t, out *C.uintptr_t) (st C.int32_t) {
	hook := cgo.Handle(h).Value().(*overflowHook)
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(panicOut(), "zarena: the OverflowAllocator %q panicked in AllocOverflow: %v\n", hook.name, p)
			st = C.ZARENA_E_BACKEND
		}
	}()
	p, err := hook.alloc.AllocOverflow(uint64(bytes), uint64(alignment), uintptr(stream))
	if err != nil {
		return C.int32_t(overflowStatus(err))
	}
	*out = C.uintptr_t(p)
	return C.ZARENA_OK
}

//export zarenaGoOverflowFree
func zarenaGoOverflowFree(h C.uintptr_t, ptr C.uintptr_t, bytes C.uint64_t, stream C.uintptr_t) {
	hook := cgo.Handle(h).Value().(*overflowHook)
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(panicOut(), "zarena: the OverflowAllocator %q panicked in FreeOverflow (the block at %#x is lost): %v\n",
				hook.name, uintptr(ptr), p)
		}
	}()
	hook.alloc.FreeOverflow(DevicePtr(ptr), uint64(bytes), uintptr(stream))
}

// overflowStatus is the status an AllocOverflow error reports: ErrOutOfMemory and
// ErrCaptureUnsafe keep theirs, anything else is a backend failure.
func overflowStatus(err error) Status {
	switch {
	case errors.Is(err, ErrOutOfMemory):
		return StatusOutOfMemory
	case errors.Is(err, ErrCaptureUnsafe):
		return StatusCaptureUnsafe
	}
	return StatusBackend
}
