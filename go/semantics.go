package zarena

/*
#include "zgo.h"
*/
import "C"

// Epochs, pins, floors; capture, stream and poison (zarena.h, 1.1). Each call applies the
// queued frees first, in the same cgo call.

// Pin adds a pin to the live block at p: it survives resets (a reset leaves it where it
// is) until the matching Unpin; a Free of a pinned block takes effect at its last Unpin.
// Errors: ErrNotOwned, ErrDoubleFree (freed), ErrStale (reclaimed), ErrInvalidArgument
// (65535 pins already). Use: activations saved for the backward pass across a reset.
func (a *Arena) Pin(p DevicePtr) error { return a.pin(p, 1, "Pin") }

// Unpin removes a pin (ErrInvalidArgument when the block is not pinned). The last one
// completes a free made while the block was pinned; a block unpinned but not freed is
// reclaimed by the next reset, like any other.
func (a *Arena) Unpin(p DevicePtr) error { return a.pin(p, 0, "Unpin") }

func (a *Arena) pin(p DevicePtr, on C.int, op string) error {
	b, h, err := a.q.take(op)
	if err != nil {
		return err
	}
	q, nq, qs := b.cargs()
	r := C.zgo_pin(h, q, nq, qs, C.uintptr_t(p), on)
	if b != nil {
		a.q.release(b, r.qfailed)
	}
	keepAlive(a)
	return callError(r.status, r.err)
}

// SetFloor moves the floor to offset bytes from the region's base, a block boundary
// between 0 and the top (RegionInfo says where they are): live blocks below it survive
// resets; lowering it gives the blocks between the new and the old floor back to the
// current epoch. ErrInvalidArgument (not a multiple of the alignment, above the top, or
// inside a block) changes nothing.
func (a *Arena) SetFloor(offset uint64) error {
	b, h, err := a.q.takeExclusive("SetFloor", false)
	if err != nil {
		return err
	}
	q, nq, qs := b.cargs()
	r := C.zgo_set_floor(h, q, nq, qs, C.uint64_t(offset))
	a.q.release(b, r.qfailed)
	keepAlive(a)
	return callError(r.status, r.err)
}

// Region is where an arena's region is and how far it is used (zarena_region).
type Region struct {
	Base           DevicePtr // the region's first byte
	CapacityBytes  uint64    // its size (the maximum, for an expandable arena)
	TopBytes       uint64    // offset of the top: everything at or above it is unused
	FloorBytes     uint64    // offset of the floor
	CommittedBytes uint64    // bytes backed by memory (the capacity unless expandable)
	Managed        bool      // managed (unified) memory
	Expandable     bool      // committed on demand (FlagExpandable)
}

// RegionInfo returns the region's base, size, top, floor and commit state (one
// snapshot, after the queued frees).
func (a *Arena) RegionInfo() (Region, error) {
	b, h, err := a.q.takeExclusive("RegionInfo", false)
	if err != nil {
		return Region{}, err
	}
	q, nq, qs := b.cargs()
	r := C.zgo_region_info(h, q, nq, qs)
	a.q.release(b, r.qfailed)
	keepAlive(a)
	if err := callError(r.status, r.err); err != nil {
		return Region{}, err
	}
	return Region{
		Base:           DevicePtr(r.base),
		CapacityBytes:  uint64(r.region.capacity_bytes),
		TopBytes:       uint64(r.region.top_bytes),
		FloorBytes:     uint64(r.region.floor_bytes),
		CommittedBytes: uint64(r.region.committed_bytes),
		Managed:        r.region.managed != 0,
		Expandable:     r.region.expandable != 0,
	}, nil
}

// Contains reports whether p lies inside the arena's region ([base, base+capacity)),
// without a cgo call (the region never moves; its bounds are read once, at New). Overflow
// blocks are outside the region: false, as zarena_contains says.
func (a *Arena) Contains(p DevicePtr) bool {
	return uintptr(p) >= a.base && uint64(uintptr(p)-a.base) < a.size
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
	b, h, err := a.q.take("SetCaptureActive")
	if err != nil {
		return err
	}
	q, nq, qs := b.cargs()
	r := C.zgo_set_capture_active(h, q, nq, qs, on)
	if b != nil {
		a.q.release(b, r.qfailed)
	}
	keepAlive(a)
	return callError(r.status, r.err)
}

// SetStream replaces the arena's cudaStream_t (an integer here: a C pointer Go must not
// hold as a pointer); 0 is the legacy stream. See zarena_set_stream for what it means for
// blocks already handed out.
func (a *Arena) SetStream(stream uintptr) error {
	b, h, err := a.q.takeExclusive("SetStream", false)
	if err != nil {
		return err
	}
	q, nq, qs := b.cargs()
	r := C.zgo_set_stream(h, q, nq, qs, C.uintptr_t(stream))
	a.q.release(b, r.qfailed)
	keepAlive(a)
	return callError(r.status, r.err)
}

// DefaultPoisonWord is the poison word 0 selects: a quiet NaN read as float32 and as
// float64.
const DefaultPoisonWord uint32 = 0x7FF80000

// SetPoison switches poisoning at run time: while on, freed blocks, blocks a reset
// reclaims and overflow blocks given back are filled with word (0: DefaultPoisonWord),
// so a kernel that reads a stale tensor sees NaN. A debugging mode: one fill per free.
func (a *Arena) SetPoison(enabled bool, word uint32) error {
	on := C.int(0)
	if enabled {
		on = 1
	}
	b, h, err := a.q.takeExclusive("SetPoison", false)
	if err != nil {
		return err
	}
	q, nq, qs := b.cargs()
	r := C.zgo_set_poison(h, q, nq, qs, on, C.uint32_t(word))
	a.q.release(b, r.qfailed)
	keepAlive(a)
	return callError(r.status, r.err)
}
