// Per-epoch numbers of a run, computed from the arena's own stats snapshots taken after
// every call, so a replay and a direct run of the same calls are measured the same way.
#pragma once

#include <cstdint>
#include <vector>

#include "zarena/zarena.h"

namespace zarena_replay {

struct EpochStats {
  uint64_t epoch = 0;
  uint64_t first_event = 0;  // index of the epoch's first call in the run
  uint64_t events = 0;       // calls in the epoch
  uint64_t allocs = 0;       // requests of size > 0
  uint64_t peak_top = 0;     // highest top offset (equals stats.epoch_high_water_bytes)
  uint64_t peak_live = 0;    // highest live bytes: region blocks + overflow blocks
  uint64_t overflow_allocs = 0;
  uint64_t overflow_bytes = 0;  // aligned bytes of those
  uint64_t refused = 0;         // requests that failed (region full, overflow refused)
  // The free index when the top reached its peak: bytes in free blocks below the top,
  // and the largest of them. Their ratio is the fragmentation at the peak.
  uint64_t free_bytes_at_peak = 0;
  uint64_t largest_free_at_peak = 0;

  bool operator==(const EpochStats& o) const;
};

enum class Outcome { kBump, kReuse, kOverflow, kRefused };

class EpochCollector {
 public:
  // The region's top (stats.top_bytes, since 1.1).
  static uint64_t top_of(const zarena_stats& s) { return s.top_bytes; }
  static uint64_t live_of(const zarena_stats& s) { return s.used_bytes + s.overflow_live_bytes; }

  // The arena as created (stats before the first call).
  explicit EpochCollector(const zarena_stats& initial);

  // After an allocation request of size > 0 that answered status; returns what it became.
  Outcome after_alloc(const zarena_stats& s, zarena_status status, uint64_t aligned);
  // After a reset: closes the epoch and opens the next.
  void after_reset(const zarena_stats& s);
  // After any other call.
  void after_other(const zarena_stats& s);

  // The epochs so far, the open one included.
  const std::vector<EpochStats>& epochs() const { return epochs_; }

 private:
  void observe(const zarena_stats& s);

  std::vector<EpochStats> epochs_;
  zarena_stats prev_;
  uint64_t calls_ = 0;
};

}  // namespace zarena_replay
