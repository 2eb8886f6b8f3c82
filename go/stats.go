package zarena

/*
#include "shim.h"
*/
import "C"

import (
	"expvar"
	"fmt"
	"sync"
	"unsafe"
)

// Stats mirrors zarena_stats: one consistent snapshot of an arena's counters. Its JSON
// keys (encoding/json, expvar) are the C field names, the same in C
// (zarena_format_stats), Go and Python.
type Stats struct {
	CapacityBytes         uint64 `json:"capacity_bytes"`           // region size
	UsedBytes             uint64 `json:"used_bytes"`               // bytes in live region blocks (aligned sizes)
	FloorBytes            uint64 `json:"floor_bytes"`              // floor offset (survives resets below it)
	HighWaterBytes        uint64 `json:"high_water_bytes"`         // highest top offset since create
	Epoch                 uint64 `json:"epoch"`                    // resets since create
	EpochAllocs           uint64 `json:"epoch_allocs"`             // allocation requests (size > 0) this epoch
	EpochMaxAllocBytes    uint64 `json:"epoch_max_alloc_bytes"`    // largest request this epoch
	EpochHighWaterBytes   uint64 `json:"epoch_high_water_bytes"`   // highest top offset this epoch
	Hits                  uint64 `json:"hits"`                     // requests served by the region
	Misses                uint64 `json:"misses"`                   // requests the region could not serve
	Reuses                uint64 `json:"reuses"`                   // hits served by a freed block
	Resets                uint64 `json:"resets"`                   // Reset calls
	FreeListLen           uint64 `json:"free_list_len"`            // free blocks in the index
	FreeListBytes         uint64 `json:"free_list_bytes"`          // bytes in those blocks
	LargestFreeBlockBytes uint64 `json:"largest_free_block_bytes"` // largest block in the index
	LiveAllocs            uint64 `json:"live_allocs"`              // live blocks, region and overflow
	StaleFrees            uint64 `json:"stale_frees"`              // frees answered ErrStale (queued ones included)
	InvalidFrees          uint64 `json:"invalid_frees"`            // frees answered ErrNotOwned or ErrDoubleFree (queued ones included)
	OverflowAllocs        uint64 `json:"overflow_allocs"`          // successful overflow allocations
	OverflowLiveBytes     uint64 `json:"overflow_live_bytes"`      // bytes in live overflow blocks
	OverflowPeakBytes     uint64 `json:"overflow_peak_bytes"`      // highest OverflowLiveBytes
	OverflowMaxLatencyNs  uint64 `json:"overflow_max_latency_ns"`  // slowest overflow backend allocation
	OverflowReclaimed     uint64 `json:"overflow_reclaimed"`       // overflow blocks reclaimed by resets
	OverflowFailures      uint64 `json:"overflow_failures"`        // overflow attempts refused, capped or failed
	PinnedBytes           uint64 `json:"pinned_bytes"`             // bytes in pinned blocks, region and overflow
	PinnedBlocks          uint64 `json:"pinned_blocks"`            // blocks with at least one pin
	PinRetainedBytes      uint64 `json:"pin_retained_bytes"`       // at the last reset: unpinned bytes kept below the highest pin
	DeferredFrees         uint64 `json:"deferred_frees"`           // frees of pinned blocks waiting for their last Unpin
	OverflowDeferredGives uint64 `json:"overflow_deferred_gives"`  // overflow blocks given back only after a capture ends
	PoisonFills           uint64 `json:"poison_fills"`             // poison fills made
	PoisonSkipped         uint64 `json:"poison_skipped"`           // fills skipped because a capture was active
	TopBytes              uint64 `json:"top_bytes"`                // the top now
	CommittedBytes        uint64 `json:"committed_bytes"`          // memory backing the region (expandable: committed so far)
	CommitEvents          uint64 `json:"commit_events"`            // expandable: successful commits
	TrimEvents            uint64 `json:"trim_events"`              // expandable: decommits at reset
	CommitFailures        uint64 `json:"commit_failures"`          // expandable: commits the backend refused
	Steps                 uint64 `json:"steps"`                    // Step calls since create
	EpochSteps            uint64 `json:"epoch_steps"`              // Step calls since the last reset
	OverflowEpochs        uint64 `json:"overflow_epochs"`          // epochs whose region was exhausted at least once
	OverflowRecords       uint64 `json:"overflow_records"`         // of those, reported one by one (arena.first_overflow)
	OverflowSummaries     uint64 `json:"overflow_summaries"`       // arena.overflow_summary records (the later epochs)
	NeededBytes           uint64 `json:"needed_bytes"`             // the capacity the workload needed so far
	UsedPeakBytes         uint64 `json:"used_peak_bytes"`          // highest UsedBytes since create or ResetPeakStats
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
		PinnedBytes:           uint64(s.pinned_bytes),
		PinnedBlocks:          uint64(s.pinned_blocks),
		PinRetainedBytes:      uint64(s.pin_retained_bytes),
		DeferredFrees:         uint64(s.deferred_frees),
		OverflowDeferredGives: uint64(s.overflow_deferred_gives),
		PoisonFills:           uint64(s.poison_fills),
		PoisonSkipped:         uint64(s.poison_skipped),
		TopBytes:              uint64(s.top_bytes),
		CommittedBytes:        uint64(s.committed_bytes),
		CommitEvents:          uint64(s.commit_events),
		TrimEvents:            uint64(s.trim_events),
		CommitFailures:        uint64(s.commit_failures),
		Steps:                 uint64(s.steps),
		EpochSteps:            uint64(s.epoch_steps),
		OverflowEpochs:        uint64(s.overflow_epochs),
		OverflowRecords:       uint64(s.overflow_records),
		OverflowSummaries:     uint64(s.overflow_summaries),
		NeededBytes:           uint64(s.needed_bytes),
		UsedPeakBytes:         uint64(s.used_peak_bytes),
	}
}

// Stats returns a consistent snapshot of the arena's counters, after every queued free
// was applied. The error is ErrClosed after Close.
func (a *Arena) Stats() (Stats, error) {
	var r C.shim_stats_result
	err := a.whole("Stats", func(h C.uintptr_t) C.shim_result {
		r = C.shim_get_stats(h)
		return r.r
	})
	if err != nil {
		return Stats{}, err
	}
	return statsFromC(&r.stats), nil
}

// ResetPeakStats restarts the peaks from the arena's state now (zarena_reset_peak_stats,
// as PyTorch's reset_peak_memory_stats): HighWaterBytes becomes the current TopBytes,
// OverflowPeakBytes the current OverflowLiveBytes, UsedPeakBytes the current UsedBytes;
// each rises again from there. The epoch figures (Epoch*) are left alone. The queued
// frees are applied first, so the peaks restart from the state they leave. Measure one
// step's peak with ResetPeakStats before it and Stats after it. ErrClosed after Close.
func (a *Arena) ResetPeakStats() error {
	return a.whole("ResetPeakStats", func(h C.uintptr_t) C.shim_result {
		return C.shim_reset_peak_stats(h)
	})
}

// Format is the form of FormatStats' and FormatLiveBlocks' text (ZARENA_FORMAT_*).
type Format int32

const (
	FormatText Format = 0 // a table for people, ending with a newline
	FormatJSON Format = 1 // one JSON object on one line
)

// FormatStats formats one consistent stats snapshot, taken after the queued frees were
// applied, as the library does (zarena_format_stats): FormatText, a titled table for
// people, one field a line (the zarena_stats field names, grouped, sizes also in
// KiB/MiB/GiB), ending with a newline; FormatJSON, one JSON object on one line whose keys
// are exactly Stats' JSON keys, in struct order. ErrInvalidArgument for another Format;
// ErrClosed after Close.
func (a *Arena) FormatStats(f Format) (string, error) {
	return a.format("FormatStats", 0, f)
}

// format is FormatStats (what 0) and FormatLiveBlocks (what 1): one cgo call that asks
// the size and formats (again while the text grew meanwhile).
func (a *Arena) format(op string, what C.int, f Format) (string, error) {
	var r C.shim_text_result
	err := a.whole(op, func(h C.uintptr_t) C.shim_result {
		r = C.shim_format(h, what, C.int32_t(f))
		return r.r
	})
	if err != nil {
		return "", err
	}
	defer C.free(unsafe.Pointer(r.text))
	return C.GoStringN(r.text, C.int(r.len)), nil
}

// PublishExpvar publishes the arena's Stats under name in expvar (so /debug/vars shows a
// fresh snapshot at every read, keys as in Stats' JSON). expvar names are process-wide
// and cannot be removed: publishing a name twice is an error, and the published arena
// stays reachable (its finalizer never runs; Close it) and reads as the zero Stats after
// Close.
func (a *Arena) PublishExpvar(name string) error {
	if name == "" {
		return &Error{Status: StatusInvalidArgument, Message: "PublishExpvar: empty name"}
	}
	expvarMu.Lock()
	defer expvarMu.Unlock()
	if expvar.Get(name) != nil {
		return &Error{Status: StatusInvalidArgument,
			Message: fmt.Sprintf("PublishExpvar: expvar %q is published already", name)}
	}
	expvar.Publish(name, expvar.Func(func() any {
		s, _ := a.Stats()
		return s
	}))
	return nil
}

// expvarMu makes PublishExpvar's check-then-publish atomic (expvar.Publish panics on a
// name that exists).
var expvarMu sync.Mutex
