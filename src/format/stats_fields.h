// The fields of zarena_stats by name: the one list the readable formats (TEXT, JSON) and
// their tests use, so that a field added to the struct without a name here fails to
// compile (the static_assert below) instead of silently missing from the output.
#pragma once

#include <cstddef>
#include <cstdint>

#include "zarena/zarena.h"

namespace zarena_core {

enum class StatsUnit : uint8_t { kCount, kBytes, kNanos };

// Groups of the TEXT table, in the order it prints them.
enum class StatsGroup : uint8_t {
  kRegion,
  kEpoch,
  kRequests,
  kFreeIndex,
  kOverflow,
  kPins,
  kExpandable,
  kDiagnosis,
};
inline constexpr const char* kStatsGroupTitles[] = {
    "region",   "this epoch",      "requests and frees", "free index",
    "overflow", "pins and poison", "expandable region", "diagnosis",
};

struct StatsField {
  const char* name;  // the zarena_stats member's name: the JSON key, the TEXT label
  uint64_t zarena_stats::*member;
  StatsUnit unit;
  StatsGroup group;
};

#define ZARENA_STATS_FIELD(f, unit, group) \
  StatsField { #f, &zarena_stats::f, StatsUnit::unit, StatsGroup::group }

// In struct order (the JSON order).
inline constexpr StatsField kStatsFields[] = {
    ZARENA_STATS_FIELD(capacity_bytes, kBytes, kRegion),
    ZARENA_STATS_FIELD(used_bytes, kBytes, kRegion),
    ZARENA_STATS_FIELD(floor_bytes, kBytes, kRegion),
    ZARENA_STATS_FIELD(high_water_bytes, kBytes, kRegion),
    ZARENA_STATS_FIELD(epoch, kCount, kRegion),
    ZARENA_STATS_FIELD(epoch_allocs, kCount, kEpoch),
    ZARENA_STATS_FIELD(epoch_max_alloc_bytes, kBytes, kEpoch),
    ZARENA_STATS_FIELD(epoch_high_water_bytes, kBytes, kEpoch),
    ZARENA_STATS_FIELD(hits, kCount, kRequests),
    ZARENA_STATS_FIELD(misses, kCount, kRequests),
    ZARENA_STATS_FIELD(reuses, kCount, kRequests),
    ZARENA_STATS_FIELD(resets, kCount, kRegion),
    ZARENA_STATS_FIELD(free_list_len, kCount, kFreeIndex),
    ZARENA_STATS_FIELD(free_list_bytes, kBytes, kFreeIndex),
    ZARENA_STATS_FIELD(largest_free_block_bytes, kBytes, kFreeIndex),
    ZARENA_STATS_FIELD(live_allocs, kCount, kRegion),
    ZARENA_STATS_FIELD(stale_frees, kCount, kRequests),
    ZARENA_STATS_FIELD(invalid_frees, kCount, kRequests),
    ZARENA_STATS_FIELD(overflow_allocs, kCount, kOverflow),
    ZARENA_STATS_FIELD(overflow_live_bytes, kBytes, kOverflow),
    ZARENA_STATS_FIELD(overflow_peak_bytes, kBytes, kOverflow),
    ZARENA_STATS_FIELD(overflow_max_latency_ns, kNanos, kOverflow),
    ZARENA_STATS_FIELD(overflow_reclaimed, kCount, kOverflow),
    ZARENA_STATS_FIELD(overflow_failures, kCount, kOverflow),
    ZARENA_STATS_FIELD(pinned_bytes, kBytes, kPins),
    ZARENA_STATS_FIELD(pinned_blocks, kCount, kPins),
    ZARENA_STATS_FIELD(pin_retained_bytes, kBytes, kPins),
    ZARENA_STATS_FIELD(deferred_frees, kCount, kPins),
    ZARENA_STATS_FIELD(overflow_deferred_gives, kCount, kOverflow),
    ZARENA_STATS_FIELD(poison_fills, kCount, kPins),
    ZARENA_STATS_FIELD(poison_skipped, kCount, kPins),
    ZARENA_STATS_FIELD(top_bytes, kBytes, kRegion),
    ZARENA_STATS_FIELD(committed_bytes, kBytes, kExpandable),
    ZARENA_STATS_FIELD(commit_events, kCount, kExpandable),
    ZARENA_STATS_FIELD(trim_events, kCount, kExpandable),
    ZARENA_STATS_FIELD(commit_failures, kCount, kExpandable),
    ZARENA_STATS_FIELD(steps, kCount, kDiagnosis),
    ZARENA_STATS_FIELD(epoch_steps, kCount, kDiagnosis),
    ZARENA_STATS_FIELD(overflow_epochs, kCount, kDiagnosis),
    ZARENA_STATS_FIELD(overflow_records, kCount, kDiagnosis),
    ZARENA_STATS_FIELD(overflow_summaries, kCount, kDiagnosis),
    ZARENA_STATS_FIELD(needed_bytes, kBytes, kDiagnosis),
    ZARENA_STATS_FIELD(used_peak_bytes, kBytes, kRegion),
};

#undef ZARENA_STATS_FIELD

// Every uint64_t member after struct_size has a name above (members are appended, never
// inserted, so a count check catches a missing one; the test checks the offsets).
static_assert(sizeof(kStatsFields) / sizeof(kStatsFields[0]) * sizeof(uint64_t) ==
                  sizeof(zarena_stats) - offsetof(zarena_stats, capacity_bytes),
              "a zarena_stats field has no entry in kStatsFields");

}  // namespace zarena_core
