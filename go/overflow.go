package zarena

/*
#include <stdlib.h>
#include "overflow_hook.h"
#include "log_queue.h"
#include "shim.h"

static inline shim_result shim_set_overflow_policy(uintptr_t a, int32_t policy) {
  return shim_wrap(zarena_set_overflow_policy((zarena*)a, policy));
}
static inline int32_t shim_overflow_policy(uintptr_t a) {
  return zarena_overflow_policy((const zarena*)a);
}
// handle 0: remove the installed allocator.
static inline shim_result shim_set_overflow_allocator(uintptr_t a, uintptr_t handle,
                                                      const char* name) {
  if (handle == 0) return shim_wrap(zarena_set_overflow_allocator((zarena*)a, NULL));
  zarena_overflow_allocator alloc = zarena_go_overflow_allocator(handle, name);
  return shim_wrap(zarena_set_overflow_allocator((zarena*)a, &alloc));
}
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

// OverflowCustom is the policy of an arena whose overflow goes to the program's own
// allocator (SetOverflowAllocator); it is set by that call, never in a Config.
const OverflowCustom OverflowPolicy = 4

// OverflowAllocator is an engine's own overflow allocator (a pool of its own, as ztensor's
// MemPool): with SetOverflowAllocator, every overflow block of the arena comes from
// AllocOverflow and goes back to FreeOverflow (zarena_overflow_allocator in zarena.h).
//
// AllocOverflow returns a block of bytes (the request rounded up to the arena's
// alignment) aligned to alignment, usable as the arena's memory (device memory of the
// arena's device; host memory for BackendHost); stream is the arena's stream now (a
// cudaStream_t, 0 for the legacy stream), on which the block is used in stream order. An
// error is the allocation's overflow failure: ErrOutOfMemory and ErrCaptureUnsafe (errors.Is)
// keep their status, any other error reads as ErrBackend; the caller's error names the
// allocator. A pointer that is 0 or misaligned fails the allocation with ErrBackend
// (a misaligned one is given back first).
//
// FreeOverflow gives a block back (p and bytes as AllocOverflow made them) when the
// program frees it (the free queue applies it), a reset reclaims it or the arena closes;
// stream is the arena's stream now. Custom blocks are never held back for a capture.
//
// Both are called from inside the binding's calls on this arena (Alloc, Free, Reset,
// Close, ...), from any goroutine, several at once, while the arena's locks are held: they
// must not call methods of this arena. A panic is recovered and reported on stderr
// (AllocOverflow's allocation then fails with ErrBackend; FreeOverflow's block is lost).
type OverflowAllocator interface {
	AllocOverflow(bytes, alignment uint64, stream uintptr) (DevicePtr, error)
	FreeOverflow(p DevicePtr, bytes uint64, stream uintptr)
}

// overflowHook is what the library's ctx (a cgo.Handle) leads back to.
type overflowHook struct {
	alloc OverflowAllocator
	name  string
}

// overflowState is the Arena's part for this file; it changes only while every shard lock
// is held (a.whole), and diagnoseSync only at New.
type overflowState struct {
	hook         cgo.Handle // the installed Go allocator; 0: none
	diagnoseSync bool       // FlagDiagnoseSync: Alloc returns after the logger has the diagnosis
}

// SetOverflowPolicy makes p the overflow policy from now on (zarena_set_overflow_policy):
// live overflow blocks keep the route that made them (a block made under OverflowSync and
// freed under OverflowAsync goes back by the synchronous route). OverflowDefault resolves
// now (async with a stream, else sync); OverflowCustom needs an allocator installed
// (SetOverflowAllocator). Errors: ErrInvalidArgument (no policy, or OverflowCustom without an
// allocator), ErrUnsupported (async without memory pools), ErrCaptureUnsafe (the arena's
// first switch to async during a capture), ErrClosed; nothing changes then. Logs
// "arena.overflow_policy". Safe while other goroutines allocate and free.
func (a *Arena) SetOverflowPolicy(p OverflowPolicy) error {
	return a.whole("SetOverflowPolicy", func(h C.uintptr_t) C.shim_result {
		return C.shim_set_overflow_policy(h, C.int32_t(p))
	})
}

// OverflowPolicy is the policy in force (OverflowDefault resolved), or OverflowDefault
// once the arena is closed.
func (a *Arena) OverflowPolicy() OverflowPolicy {
	var frame byte
	s := a.lockHome(uintptr(unsafe.Pointer(&frame)))
	defer s.mu.Unlock()
	if a.h == 0 {
		return OverflowDefault
	}
	return OverflowPolicy(C.shim_overflow_policy(a.h))
}

// SetOverflowAllocator routes the arena's overflow to alloc and makes OverflowCustom the
// policy (zarena_set_overflow_allocator); name labels it in errors, records and the
// diagnosis ("" = "custom"). alloc nil removes the installed allocator (a custom policy
// becomes what OverflowDefault resolves to). Frees queued by Free are applied first; the
// change is refused with ErrInvalidArgument, changing nothing, while blocks of the
// installed allocator are still live (free them, Reset, or Close). The binding keeps
// alloc until it is removed or the arena is closed; the library holds only a
// runtime/cgo.Handle, an integer. Safe while other goroutines allocate and free.
func (a *Arena) SetOverflowAllocator(alloc OverflowAllocator, name string) error {
	var h cgo.Handle
	if alloc != nil {
		h = cgo.NewHandle(&overflowHook{alloc: alloc, name: name})
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	err := a.whole("SetOverflowAllocator", func(ah C.uintptr_t) C.shim_result {
		r := C.shim_set_overflow_allocator(ah, C.uintptr_t(h), cname)
		if r.status == C.ZARENA_OK {
			a.overflow.hook, h = h, a.overflow.hook // the old one is deleted below
		}
		return r
	})
	if h != 0 {
		h.Delete()
	}
	return err
}

// releaseOverflowLocked forgets the Go allocator once the arena is destroyed (every shard
// locked): the library gave every block back to it during the destroy.
func (a *Arena) releaseOverflowLocked() {
	if a.overflow.hook != 0 {
		a.overflow.hook.Delete()
		a.overflow.hook = 0
	}
}

// overflowed runs after an allocation that returned a block with flags: with
// FlagDiagnoseSync, the diagnosis the library logged inside the call reaches the Go
// logger before the allocation returns (the binding's own queue is flushed, not the
// library's reporter: the record did not go through it).
func (a *Arena) overflowed(flags BlockFlags) {
	if a.overflow.diagnoseSync && flags&BlockOverflow != 0 {
		C.zarena_go_logq_flush()
	}
}
