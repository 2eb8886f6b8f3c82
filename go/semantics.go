package zarena

/*
#include "shim.h"
*/
import "C"

// Pins, floors, region; capture, stream and poison. Each call applies every queued free
// first and runs with every shard locked (freequeue.go).

// Pin adds a pin to the live block that starts at p or holds it (a view into a tensor
// pins the tensor's block): it survives resets (a reset leaves it where it is) until the
// matching Unpin, which may name any address inside the same block; a Free of a pinned block takes effect at its last Unpin.
// Every free queued before it is applied first (Free(p) then Pin(p) is ErrDoubleFree).
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

// SetFloor moves the floor to offset bytes from the region's base, a block boundary
// between 0 and the top (RegionInfo says where they are): live blocks below it survive
// resets; lowering it gives the blocks between the new and the old floor back to the
// current epoch. ErrInvalidArgument (not a multiple of the alignment, above the top, or
// inside a block) changes nothing.
func (a *Arena) SetFloor(offset uint64) error {
	return a.whole("SetFloor", func(h C.uintptr_t) C.shim_result {
		return C.shim_set_floor(h, C.uint64_t(offset))
	})
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
	var r C.shim_region_result
	err := a.whole("RegionInfo", func(h C.uintptr_t) C.shim_result {
		r = C.shim_region_info(h)
		return r.r
	})
	if err != nil {
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

// Diagnosis is zarena_diagnose: the verdict ("ok" when nothing is wrong; else one of
// never_reset, reset_stopped, runaway_buffer, working_set_full, fragmentation,
// capture_refused, commit_failed), the one-sentence fix, what the counters show, and the
// facts behind them. A failed allocation's *Error carries the same verdict and advice.
type Diagnosis struct {
	Verdict           string
	Advice            string
	Cause             string
	Overflowed        bool   // this epoch's region was exhausted: the verdict is that one's
	Warned            bool   // the early warning (arena.reset_cadence) was logged
	Epoch             uint64 // the current epoch
	Resets            uint64
	Steps             uint64 // steps of this epoch as the loop counts them (0: none seen)
	StepsExplicit     bool   // counted by Step (facts), not recognised (a guess)
	KeptBytes         uint64 // live bytes the steps of this epoch kept
	StepsToFull       uint64 // at the rate the steps grow the top (0: unknown)
	CapacityBytes     uint64
	TopBytes          uint64
	FloorBytes        uint64
	LiveBytes         uint64 // region and overflow
	OverflowLiveBytes uint64
	EpochAllocs       uint64
	EpochPeakBytes    uint64 // this epoch's highest top above the floor
	PriorEpochs       uint64 // earlier epochs compared (up to 8)
	PriorPeakBytes    uint64
	PriorAllocs       uint64
	OverflowEpochs    uint64
	NeededBytes       uint64 // the capacity the workload needed so far
	RequestedBytes    uint64 // the request that first overflowed this epoch (0: none)
}

// Diagnose returns the diagnosis now (after the queued frees). Any goroutine, any time.
func (a *Arena) Diagnose() (Diagnosis, error) {
	var r C.shim_diagnosis_result
	err := a.whole("Diagnose", func(h C.uintptr_t) C.shim_result {
		r = C.shim_diagnose(h)
		return r.r
	})
	if err != nil {
		return Diagnosis{}, err
	}
	d := &r.d
	return Diagnosis{
		Verdict:           C.GoString(&r.verdict[0]),
		Advice:            C.GoString(&r.advice[0]),
		Cause:             C.GoString(&r.cause[0]),
		Overflowed:        d.overflowed != 0,
		Warned:            d.warned != 0,
		Epoch:             uint64(d.epoch),
		Resets:            uint64(d.resets),
		Steps:             uint64(d.steps),
		StepsExplicit:     d.steps_explicit != 0,
		KeptBytes:         uint64(d.kept_bytes),
		StepsToFull:       uint64(d.steps_to_full),
		CapacityBytes:     uint64(d.capacity_bytes),
		TopBytes:          uint64(d.top_bytes),
		FloorBytes:        uint64(d.floor_bytes),
		LiveBytes:         uint64(d.live_bytes),
		OverflowLiveBytes: uint64(d.overflow_live_bytes),
		EpochAllocs:       uint64(d.epoch_allocs),
		EpochPeakBytes:    uint64(d.epoch_peak_bytes),
		PriorEpochs:       uint64(d.prior_epochs),
		PriorPeakBytes:    uint64(d.prior_peak_bytes),
		PriorAllocs:       uint64(d.prior_allocs),
		OverflowEpochs:    uint64(d.overflow_epochs),
		NeededBytes:       uint64(d.needed_bytes),
		RequestedBytes:    uint64(d.requested_bytes),
	}, nil
}

// Base is the region's first byte and CapacityBytes its size, without a cgo call (read
// once, at New; the region never moves): region blocks lie in [Base, Base+CapacityBytes),
// overflow blocks elsewhere. Engines that keep offsets into the region use them.
func (a *Arena) Base() DevicePtr { return DevicePtr(a.base) }

// CapacityBytes is the region's size (the maximum, for an expandable arena); see Base.
func (a *Arena) CapacityBytes() uint64 { return a.size }

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
