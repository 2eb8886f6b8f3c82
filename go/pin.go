package zarena

/*
#include "shim.h"
*/
import "C"

// Pins (zarena.h, "Pins"). Each call applies every queued free first and runs with every
// shard locked (freequeue.go).

// Pin adds a pin to the live block that starts at p or holds it (a view into a tensor
// pins the tensor's block): it survives resets (a reset leaves it where it is) until the
// matching Unpin, which may name any address inside the same block; a Free of a pinned
// block takes effect at its last Unpin. Every free queued before it is applied first (Free(p) then Pin(p) is ErrDoubleFree).
// Errors: ErrNotOwned, ErrDoubleFree (freed), ErrStale (reclaimed), ErrTooManyPins
// (65535 pins already), ErrClosed. Use: activations saved for the backward pass across a
// reset.
func (a *Arena) Pin(p DevicePtr) error { return a.pin(p, 1, "Pin") }

// Unpin removes a pin (ErrNotPinned when the block holds none). The last one
// completes a free made while the block was pinned; a block unpinned but not freed is
// reclaimed by the next reset, like any other.
func (a *Arena) Unpin(p DevicePtr) error { return a.pin(p, 0, "Unpin") }

func (a *Arena) pin(p DevicePtr, on C.int, op string) error {
	return a.whole(op, func(h C.uintptr_t) C.shim_result {
		// p may lie inside a block: the index forgets every block, whose frees then go to
		// the library, which defers a pinned one's (lane_cache.go).
		a.kept.clearLocked()
		return C.shim_pin(h, C.uintptr_t(p), on)
	})
}
