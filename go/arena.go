package zarena

/*
#include "zgo.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
)

// DevicePtr is an address handed out by an Arena: device memory for the CUDA backend,
// host memory for the host backend. It is not Go memory and the Go garbage collector
// does not track it.
type DevicePtr uintptr

// Arena is one zarena arena. Alloc, Free, Stats, Epoch and MarkStepBoundary may be
// called from many goroutines at once. Reset may run concurrently with them, but no
// goroutine may still use a block that the reset reclaims. Close needs exclusive use:
// no other call may be in flight or start afterwards.
type Arena struct {
	h    *C.zarena
	name string
}

// New creates an arena from cfg (see Config for what zero fields mean).
func New(cfg Config) (*Arena, error) {
	c, name := cfg.toC()
	r := C.zgo_create(c, C.uintptr_t(cfg.Stream))
	if name != nil {
		C.free(unsafe.Pointer(name)) // the library copies the name at create
	}
	if err := errorFrom(r.status, r.err); err != nil {
		return nil, err
	}
	a := &Arena{h: r.arena, name: cfg.Name}
	if a.name == "" {
		a.name = DefaultConfig().Name
		if a.name == "" {
			a.name = "zarena"
		}
	}
	runtime.SetFinalizer(a, (*Arena).leaked)
	return a, nil
}

// leaked is the finalizer: a backstop for a forgotten Close, not a substitute. It
// reports the leak through the logger and releases the region.
func (a *Arena) leaked() {
	if a.h == nil {
		return
	}
	emitGo(Record{
		Level: LevelWarn,
		Event: "go.arena_leak",
		Message: fmt.Sprintf("arena %q was garbage-collected without Close; its memory is "+
			"released now, call Close when done with an arena", a.name),
		Arena: a.name,
	})
	r := C.zgo_destroy(a.h)
	a.h = nil
	_ = errorFrom(r.status, r.err)
}

// Close destroys the arena: its region, every block and every DevicePtr it handed out
// become invalid. Closing twice is a no-op. The error reports a backend failure while
// releasing; the arena is destroyed anyway. With a Go logger set, Close returns once
// the records emitted so far (the arena's "arena.destroy" among them) reached it.
func (a *Arena) Close() error {
	if a == nil || a.h == nil {
		return nil
	}
	h := a.h
	a.h = nil
	runtime.SetFinalizer(a, nil)
	r := C.zgo_destroy(h)
	FlushLogs()
	return errorFrom(r.status, r.err)
}

// Name is the arena's label in log records.
func (a *Arena) Name() string { return a.name }

func (a *Arena) handle() *C.zarena {
	if a == nil {
		return nil
	}
	return a.h
}

// keepAlive keeps the finalizer from destroying the arena while one of its C calls
// is still running (a is otherwise dead once the handle has been loaded).
func keepAlive(a *Arena) { runtime.KeepAlive(a) }

func errClosed(op string) error {
	return &Error{Status: StatusInvalidArgument, Message: op + ": the arena is closed"}
}

// Alloc allocates n bytes, aligned to the configured alignment. n == 0 returns 0 and
// no error. When the region is full the overflow policy decides; errors: ErrOutOfMemory,
// ErrCaptureUnsafe, ErrBackend, ErrInvalidArgument (closed arena). One cgo call.
func (a *Arena) Alloc(n uint64) (DevicePtr, error) {
	h := a.handle()
	if h == nil {
		return 0, errClosed("Alloc")
	}
	r := C.zgo_alloc(h, C.uint64_t(n))
	keepAlive(a)
	if r.status != C.ZARENA_OK {
		return 0, errorFrom(r.status, r.err)
	}
	return DevicePtr(r.ptr), nil
}

// Free returns a block to the arena (0 is a no-op). Errors, none of which changes any
// state: ErrNotOwned (not a block start of this arena), ErrDoubleFree, ErrStale
// (reclaimed by a reset; the call is dropped). One cgo call.
func (a *Arena) Free(p DevicePtr) error {
	h := a.handle()
	if h == nil {
		return errClosed("Free")
	}
	r := C.zgo_free(h, C.uintptr_t(p))
	keepAlive(a)
	if r.status != C.ZARENA_OK {
		return errorFrom(r.status, r.err)
	}
	return nil
}

// Reset rewinds the arena to its floor and starts a new epoch: every block allocated
// above the floor since the last reset is reclaimed. It fails only on a closed arena.
func (a *Arena) Reset() error {
	h := a.handle()
	if h == nil {
		return errClosed("Reset")
	}
	r := C.zgo_reset(h)
	keepAlive(a)
	return errorFrom(r.status, r.err)
}

// MarkStepBoundary sets the floor to the current top: what was allocated so far
// (weights, uploaded samples) survives later resets.
func (a *Arena) MarkStepBoundary() error {
	h := a.handle()
	if h == nil {
		return errClosed("MarkStepBoundary")
	}
	r := C.zgo_mark_step_boundary(h)
	keepAlive(a)
	return errorFrom(r.status, r.err)
}

// Epoch is the number of resets since create (0 after Close).
func (a *Arena) Epoch() uint64 {
	h := a.handle()
	if h == nil {
		return 0
	}
	e := uint64(C.zarena_epoch(h))
	keepAlive(a)
	return e
}

// Backend is the backend the arena actually uses (Auto resolves at create); -1 after
// Close.
func (a *Arena) Backend() Backend {
	h := a.handle()
	if h == nil {
		return -1
	}
	b := Backend(C.zarena_backend(h))
	keepAlive(a)
	return b
}

// Step runs one step and resets the arena after it, also when step returns an error
// or panics (the panic continues after the reset). The error joins step's error and
// the reset's.
func (a *Arena) Step(step func() error) (err error) {
	defer func() {
		if rerr := a.Reset(); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	return step()
}
