// The commits of an expandable region (ZARENA_FLAG_EXPANDABLE): the region reserves
// address space only, and memory is committed as the top grows and decommitted at resets
// (trim_keep_bytes). Both can wait on the GPU (a CUDA decommit waits for the arena's
// stream), so neither runs under a region lock: they run under this class's mutex, with
// the region's ceiling (region.h) keeping every thread out of memory that is not there.
//
//   grow:  an allocation found no room below the ceiling (Placement::commit_to). With no
//          region lock held: take the mutex, commit up to what it asked for (in chunks),
//          raise the ceiling, release; the allocation tries again. A thread that needs no
//          commit never waits for one.
//   trim:  after a reset released its locks: take the mutex, lower the ceiling to
//          max(keep, the top) (under the central lock: from then on no span reaches above
//          it), decommit whole commits above it from the top down, raise the ceiling to
//          what is still committed. Allocations below the lowered ceiling go on; one that
//          needs the space waits on the mutex and commits it again afterwards.
//
// Which ranges are committed is the backend's CommitMap, read under the mutex; this class
// keeps counters only (their atomic copies feed the stats without the mutex).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "backend/backend.h"
#include "base/spin_lock.h"
#include "base/status.h"
#include "region/region.h"

namespace zarena_core {

class ExpandableCommits {
 public:
  // granularity: the backend's commit granularity; chunk: commits are rounded up to it
  // (a multiple of the granularity). A fixed region (enabled false) never grows or trims.
  ExpandableCommits(Backend& backend, Region& region, bool enabled, uint64_t capacity,
                    uint64_t granularity, uint64_t chunk);

  bool enabled() const { return enabled_; }
  uint64_t chunk() const { return chunk_; }

  // Makes [0, want) committed (else at least [0, least)) and raises the region's ceiling
  // to the committed end. Call with no region lock held. *failure gets the backend's
  // message of a commit that failed on the way ("" when none did), even when the fallback
  // to `least` then succeeded. Returns false when not even [0, least) could be committed.
  bool grow(uint64_t want, uint64_t least, std::string* failure);
  // Decommits the whole commits that lie above max(keep, the region's top). Call with no
  // region lock held and no capture active. Returns the backend's failure of a decommit
  // (what it could not give back stays committed, and the next trim tries again).
  Result trim(uint64_t keep);

  uint64_t committed_bytes() const { return committed_bytes_.load(std::memory_order_relaxed); }
  uint64_t commit_events() const { return commit_events_.load(std::memory_order_relaxed); }
  uint64_t trim_events() const { return trim_events_.load(std::memory_order_relaxed); }
  uint64_t commit_failures() const { return commit_failures_.load(std::memory_order_relaxed); }
  // The backend's message of the latest commit that failed ("" when none did).
  std::string last_failure() const;

 private:
  // Under mu_: commits from the committed end up to `end` rounded up to a chunk (else to
  // the granularity), one backend range per chunk (a trim gives back whole ranges: a
  // growth of many chunks goes back chunk by chunk, down to the top). false: [0, end) is
  // not all committed (*failure: why; the chunks committed before the refusal stay).
  bool commit_up_to(uint64_t end, std::string* failure);

  Backend& backend_;
  Region& region_;
  const bool enabled_;
  const uint64_t granularity_;
  const uint64_t chunk_;
  const uint64_t limit_;  // the committable end: the capacity rounded up to the granularity
  std::mutex mu_;         // serialises commit, decommit and reading the CommitMap
  std::atomic<uint64_t> committed_bytes_;
  std::atomic<uint64_t> commit_events_{0}, trim_events_{0}, commit_failures_{0};
  mutable SpinLock failure_mu_;  // a leaf lock: the facts of an overflow read it anywhere
  std::string last_failure_;
};

}  // namespace zarena_core
