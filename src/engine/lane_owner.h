// [lanes] The owner's planned pair (zarena/zarena_lane.h "THREADS"), inlined into the C
// entry points (capi/lane_api.cpp): a planned allocation or free of a lane's block with no
// busy word, no flag word besides the arena's one, and no call layer between the entry and
// the plan's own fast paths (PlanRun::alloc, PlanRun::free).
//
// Why the busy word is not needed here: a planned allocation is decided under the plan's
// lock and a planned free by a compare-and-swap of the block's word, as for any thread
// (the Go binding's allocations, a reset's boundary and zarena_free race them the same
// way). The busy word only detects a second caller; the paths below read it and leave the
// call to the full path (which refuses) when another call is inside the lane. A call that
// enters while one of these runs is not refused: both are served, each whole, in some order
// (zarena_lane.h says so).
//
// Every other case (not engaged, a deviation, an unplanned item, a leftover to claim,
// tracing, queued warnings, a capture, poison, a pointer outside the lane's zone) returns
// false having done nothing, and the caller takes the full path.
#pragma once

#include "engine/arena.h"

namespace zarena_core {

// Requests from here up go to the full path, which refuses them (arena.cpp's kMaxRequest).
inline constexpr uint64_t kOwnedMaxRequest = 1ull << 62;

inline Arena::OwnedAlloc Arena::lane_alloc_owned(Lane& l, uint64_t size, uint32_t tag,
                                                 zarena_block* out) noexcept {
  if (ZARENA_UNLIKELY(size - 1 >= kOwnedMaxRequest)) return OwnedAlloc::kNotAsked;
  if (ZARENA_UNLIKELY((fast_path_flags_.load(std::memory_order_relaxed) |
                       l.busy.load(std::memory_order_relaxed)) != 0)) {
    return OwnedAlloc::kNotAsked;
  }
  const uint64_t aligned = (size + granule_ - 1) & ~(granule_ - 1);
  PlanRun::Block b;
  const PlanRun::Alloc r = l.plans.alloc(aligned, tag, l.thread, &b);
  // Not served: the plan was asked (an unplanned item moved its cursor, a deviation ended
  // it), so the full path must not ask it again: the caller goes on as Arena::lane_alloc
  // does after its plan (lane_alloc_unplanned).
  if (ZARENA_UNLIKELY(r != PlanRun::Alloc::kServed)) return OwnedAlloc::kAsked;
  out->ptr = reinterpret_cast<void*>(b.ptr);
  out->epoch = b.epoch;
  out->size = b.size;
  out->flags = ZARENA_BLOCK_PLANNED;
  out->tag = tag;
  return OwnedAlloc::kServed;
}

inline bool Arena::lane_free_owned(Lane& l, void* ptr, uint64_t want_epoch, Status* st) noexcept {
  const char* p = static_cast<const char*>(ptr);
  if (ZARENA_UNLIKELY(p < base_ || p >= base_ + capacity_)) return false;
  if (ZARENA_UNLIKELY((fast_path_flags_.load(std::memory_order_relaxed) |
                       l.busy.load(std::memory_order_relaxed)) != 0 ||
                      poison_.on())) {
    return false;
  }
  PlanRun* run = l.plans.zone_of(reinterpret_cast<uintptr_t>(ptr));
  if (ZARENA_UNLIKELY(run == nullptr)) return false;
  uint64_t size = 0;
  const FreeOutcome o = run->free(reinterpret_cast<uintptr_t>(ptr), want_epoch, &size);
  // A refusal is answered here: asking the plan again could free a block handed out at the
  // same address since (a double free turned into a free of someone else's block).
  *st = ZARENA_LIKELY(o == FreeOutcome::kOk || o == FreeOutcome::kDeferred)
            ? Status::kOk
            : free_planned_refused(ptr, o, 0, want_epoch);
  return true;
}

}  // namespace zarena_core
