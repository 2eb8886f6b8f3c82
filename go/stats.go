package zarena

/*
#include "zgo.h"
*/
import "C"

// Stats mirrors zarena_stats: one consistent snapshot of an arena's counters.
type Stats struct {
	CapacityBytes         uint64 // region size
	UsedBytes             uint64 // bytes in live region blocks (aligned sizes)
	FloorBytes            uint64 // floor offset (survives resets below it)
	HighWaterBytes        uint64 // highest top offset since create
	Epoch                 uint64 // resets since create
	EpochAllocs           uint64 // allocation requests (size > 0) this epoch
	EpochMaxAllocBytes    uint64 // largest request this epoch
	EpochHighWaterBytes   uint64 // highest top offset this epoch
	Hits                  uint64 // requests served by the region
	Misses                uint64 // requests the region could not serve
	Reuses                uint64 // hits served by a freed block
	Resets                uint64 // Reset calls
	FreeListLen           uint64 // free blocks in the index
	FreeListBytes         uint64 // bytes in those blocks
	LargestFreeBlockBytes uint64 // largest block in the index
	LiveAllocs            uint64 // live blocks, region and overflow
	StaleFrees            uint64 // Free calls answered ErrStale
	InvalidFrees          uint64 // Free calls answered ErrNotOwned or ErrDoubleFree
	OverflowAllocs        uint64 // successful overflow allocations
	OverflowLiveBytes     uint64 // bytes in live overflow blocks
	OverflowPeakBytes     uint64 // highest OverflowLiveBytes
	OverflowMaxLatencyNs  uint64 // slowest overflow backend allocation
	OverflowReclaimed     uint64 // overflow blocks reclaimed by resets
	OverflowFailures      uint64 // overflow attempts refused, capped or failed
}

func statsFromC(s *C.zarena_stats) Stats {
	return Stats{
		CapacityBytes:         uint64(s.capacity_bytes),
		UsedBytes:             uint64(s.used_bytes),
		FloorBytes:            uint64(s.floor_bytes),
		HighWaterBytes:        uint64(s.high_water_bytes),
		Epoch:                 uint64(s.epoch),
		EpochAllocs:           uint64(s.epoch_allocs),
		EpochMaxAllocBytes:    uint64(s.epoch_max_alloc_bytes),
		EpochHighWaterBytes:   uint64(s.epoch_high_water_bytes),
		Hits:                  uint64(s.hits),
		Misses:                uint64(s.misses),
		Reuses:                uint64(s.reuses),
		Resets:                uint64(s.resets),
		FreeListLen:           uint64(s.free_list_len),
		FreeListBytes:         uint64(s.free_list_bytes),
		LargestFreeBlockBytes: uint64(s.largest_free_block_bytes),
		LiveAllocs:            uint64(s.live_allocs),
		StaleFrees:            uint64(s.stale_frees),
		InvalidFrees:          uint64(s.invalid_frees),
		OverflowAllocs:        uint64(s.overflow_allocs),
		OverflowLiveBytes:     uint64(s.overflow_live_bytes),
		OverflowPeakBytes:     uint64(s.overflow_peak_bytes),
		OverflowMaxLatencyNs:  uint64(s.overflow_max_latency_ns),
		OverflowReclaimed:     uint64(s.overflow_reclaimed),
		OverflowFailures:      uint64(s.overflow_failures),
	}
}

// Stats returns a consistent snapshot of the arena's counters (the zero Stats after
// Close).
func (a *Arena) Stats() Stats {
	s, _ := a.StatsErr()
	return s
}

// StatsErr is Stats with the error of a failed call (a closed arena).
func (a *Arena) StatsErr() (Stats, error) {
	h := a.handle()
	if h == nil {
		return Stats{}, errClosed("Stats")
	}
	r := C.zgo_get_stats(h)
	keepAlive(a)
	if err := errorFrom(r.status, r.err); err != nil {
		return Stats{}, err
	}
	return statsFromC(&r.stats), nil
}
