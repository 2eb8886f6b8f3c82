package zarena

/*
#include "shim.h"
*/
import "C"

// The floor and the region (zarena.h, "Reset, floors and steps"). Base, CapacityBytes and
// Contains make no cgo call; the others apply every queued free first and run with every
// shard locked (freequeue.go).

// SetFloor moves the floor to offset bytes from the region's base, a block boundary
// between 0 and the top (RegionInfo says where they are): live blocks below it survive
// resets; lowering it gives the blocks between the new and the old floor back to the
// current epoch. ErrInvalidArgument (not a multiple of the alignment, above the top, or
// inside a block) changes nothing; so does ErrCaptureUnsafe (a captured graph holds the step
// plan's zone and the floor would move over it: graph.go).
func (a *Arena) SetFloor(offset uint64) error {
	return a.whole("SetFloor", func(h C.uintptr_t) C.shim_result {
		r := C.shim_set_floor(h, C.uint64_t(offset))
		a.keptAskLocked(h) // the plans may learn again (lane_cache.go)
		return r
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
	return wholeValue(a, "RegionInfo", func(h C.uintptr_t) (C.shim_region_result, C.shim_result) {
		r := C.shim_region_info(h)
		return r, r.r
	}, regionFromC)
}

func regionFromC(r *C.shim_region_result) Region {
	return Region{
		Base:           DevicePtr(r.base),
		CapacityBytes:  uint64(r.region.capacity_bytes),
		TopBytes:       uint64(r.region.top_bytes),
		FloorBytes:     uint64(r.region.floor_bytes),
		CommittedBytes: uint64(r.region.committed_bytes),
		Managed:        r.region.managed != 0,
		Expandable:     r.region.expandable != 0,
	}
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
