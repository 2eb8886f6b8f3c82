// The fields of zarena_stats by name: the one list of them. The readable formats (TEXT,
// JSON) and their tests use it, and tools/gen writes from it the Go mirror
// (go/stats_gen.go: the Stats struct and its conversion), the Python one
// (python/zarena/_stats_fields.py) and docs/STATS.md; CTest fails when a committed copy
// differs. A field added to the struct without a row here fails to compile (the
// static_assert below) instead of silently missing from the output.
//
// Adding a field: append it to zarena_stats (zarena.h), append its row here, then
// regenerate (cmake --build <build> --target zarena_generate).
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
  kPlans,
};
inline constexpr const char* kStatsGroupTitles[] = {
    "region",   "this epoch",      "requests and frees", "free index",
    "overflow", "pins and poison", "expandable region",  "diagnosis",
    "step plans",
};

struct StatsField {
  const char* name;  // the zarena_stats member's name: the JSON key, the TEXT label
  uint64_t zarena_stats::*member;
  StatsUnit unit;
  StatsGroup group;
  const char* doc;  // one line, for docs/STATS.md and the Go and Python mirrors
};

#define ZARENA_STATS_FIELD(f, unit, group, doc) \
  StatsField { #f, &zarena_stats::f, StatsUnit::unit, StatsGroup::group, doc }

// In struct order (the JSON order).
// One row is two lines, the doc on the second (clang-format would join the short ones).
// clang-format off
inline constexpr StatsField kStatsFields[] = {
    ZARENA_STATS_FIELD(capacity_bytes, kBytes, kRegion,
        "region size (the maximum, for an expandable arena)"),
    ZARENA_STATS_FIELD(used_bytes, kBytes, kRegion,
        "bytes in live region blocks (aligned sizes)"),
    ZARENA_STATS_FIELD(floor_bytes, kBytes, kRegion,
        "the floor's offset: live blocks below it survive resets"),
    ZARENA_STATS_FIELD(high_water_bytes, kBytes, kRegion,
        "highest top since create or the last peak reset"),
    ZARENA_STATS_FIELD(epoch, kCount, kRegion,
        "resets since create"),
    ZARENA_STATS_FIELD(epoch_allocs, kCount, kEpoch,
        "allocation requests (size > 0) this epoch"),
    ZARENA_STATS_FIELD(epoch_max_alloc_bytes, kBytes, kEpoch,
        "largest request this epoch"),
    ZARENA_STATS_FIELD(epoch_high_water_bytes, kBytes, kEpoch,
        "highest top this epoch"),
    ZARENA_STATS_FIELD(hits, kCount, kRequests,
        "requests the region served, since create"),
    ZARENA_STATS_FIELD(misses, kCount, kRequests,
        "requests the region could not serve"),
    ZARENA_STATS_FIELD(reuses, kCount, kRequests,
        "hits served by a freed block (a subset of hits)"),
    ZARENA_STATS_FIELD(resets, kCount, kRegion,
        "resets since create (equal to epoch)"),
    ZARENA_STATS_FIELD(free_list_len, kCount, kFreeIndex,
        "free blocks in the index (not the space above the top)"),
    ZARENA_STATS_FIELD(free_list_bytes, kBytes, kFreeIndex,
        "bytes in those blocks"),
    ZARENA_STATS_FIELD(largest_free_block_bytes, kBytes, kFreeIndex,
        "largest block in the index"),
    ZARENA_STATS_FIELD(live_allocs, kCount, kRegion,
        "live blocks, region and overflow"),
    ZARENA_STATS_FIELD(stale_frees, kCount, kRequests,
        "frees answered \"stale\": the block was reclaimed by a reset"),
    ZARENA_STATS_FIELD(invalid_frees, kCount, kRequests,
        "frees answered \"not owned\" or \"double free\""),
    ZARENA_STATS_FIELD(overflow_allocs, kCount, kOverflow,
        "successful overflow allocations since create"),
    ZARENA_STATS_FIELD(overflow_live_bytes, kBytes, kOverflow,
        "bytes in live overflow blocks"),
    ZARENA_STATS_FIELD(overflow_peak_bytes, kBytes, kOverflow,
        "highest overflow_live_bytes since create or the last peak reset"),
    ZARENA_STATS_FIELD(overflow_max_latency_ns, kNanos, kOverflow,
        "slowest overflow backend allocation"),
    ZARENA_STATS_FIELD(overflow_reclaimed, kCount, kOverflow,
        "overflow blocks reclaimed by resets"),
    ZARENA_STATS_FIELD(overflow_failures, kCount, kOverflow,
        "overflow attempts refused, capped or failed"),
    ZARENA_STATS_FIELD(pinned_bytes, kBytes, kPins,
        "bytes in pinned blocks, region and overflow"),
    ZARENA_STATS_FIELD(pinned_blocks, kCount, kPins,
        "blocks with at least one pin"),
    ZARENA_STATS_FIELD(pin_retained_bytes, kBytes, kPins,
        "at the last reset: unpinned bytes between the floor and the top the pins held up"),
    ZARENA_STATS_FIELD(deferred_frees, kCount, kPins,
        "frees of pinned blocks waiting for their last unpin"),
    ZARENA_STATS_FIELD(overflow_deferred_gives, kCount, kOverflow,
        "overflow blocks freed or reclaimed in a capture, given back once it ends"),
    ZARENA_STATS_FIELD(poison_fills, kCount, kPins,
        "poison fills made"),
    ZARENA_STATS_FIELD(poison_skipped, kCount, kPins,
        "poison fills skipped because a capture was active"),
    ZARENA_STATS_FIELD(top_bytes, kBytes, kRegion,
        "the top now (the highest end of the tiled part)"),
    ZARENA_STATS_FIELD(committed_bytes, kBytes, kExpandable,
        "memory backing the region (expandable: committed so far; else the capacity)"),
    ZARENA_STATS_FIELD(commit_events, kCount, kExpandable,
        "expandable: successful commits"),
    ZARENA_STATS_FIELD(trim_events, kCount, kExpandable,
        "expandable: trims that gave memory back (resets, zarena_trim, plans engaging)"),
    ZARENA_STATS_FIELD(commit_failures, kCount, kExpandable,
        "expandable: commits the backend refused"),
    ZARENA_STATS_FIELD(steps, kCount, kDiagnosis,
        "step begins since create"),
    ZARENA_STATS_FIELD(epoch_steps, kCount, kDiagnosis,
        "step begins since the last reset"),
    ZARENA_STATS_FIELD(overflow_epochs, kCount, kDiagnosis,
        "epochs in which the region was exhausted at least once"),
    ZARENA_STATS_FIELD(overflow_records, kCount, kDiagnosis,
        "of those, the ones reported one by one (arena.first_overflow)"),
    ZARENA_STATS_FIELD(overflow_summaries, kCount, kDiagnosis,
        "arena.overflow_summary records (the later epochs)"),
    ZARENA_STATS_FIELD(needed_bytes, kBytes, kDiagnosis,
        "the capacity the workload needed: the highest top plus live overflow, over the epochs"),
    ZARENA_STATS_FIELD(used_peak_bytes, kBytes, kRegion,
        "highest used_bytes since create or the last peak reset (a plan's zone counts whole; "
        "a bound when threads free each other's blocks)"),
    ZARENA_STATS_FIELD(pinned_peak_bytes, kBytes, kPins,
        "highest pinned_bytes since create or the last peak reset (a plan's zone counts)"),
    ZARENA_STATS_FIELD(epoch_max_alloc_aligned_bytes, kBytes, kEpoch,
        "largest request this epoch rounded up to the alignment (the bytes its block took)"),
    ZARENA_STATS_FIELD(overflow_live_blocks, kCount, kOverflow,
        "live overflow blocks"),
    ZARENA_STATS_FIELD(plan_steps, kCount, kPlans,
        "steps served whole under a plan"),
    ZARENA_STATS_FIELD(plan_hits, kCount, kPlans,
        "allocations a plan served (not counted in hits or epoch_allocs)"),
    ZARENA_STATS_FIELD(plan_misses, kCount, kPlans,
        "steps a deviation took off their plan"),
    ZARENA_STATS_FIELD(plan_first_miss, kCount, kPlans,
        "why the first deviation happened: ZARENA_PLAN_MISS_* (0: none)"),
    ZARENA_STATS_FIELD(plans_learned, kCount, kPlans,
        "plans laid out"),
    ZARENA_STATS_FIELD(plan_bytes, kBytes, kPlans,
        "the latest plan's peak less the live blocks it lies around"),
    ZARENA_STATS_FIELD(plan_lower_bound_bytes, kBytes, kPlans,
        "the most bytes the latest plan's step has live at once"),
    ZARENA_STATS_FIELD(plan_zone_bytes, kBytes, kPlans,
        "the zone held now (its region blocks; 0: none)"),
    ZARENA_STATS_FIELD(plan_live_bytes, kBytes, kPlans,
        "bytes of planned blocks live now (counted in used_bytes)"),
};
// clang-format on

#undef ZARENA_STATS_FIELD

// Every uint64_t member after struct_size has a name above (members are appended, never
// inserted, so a count check catches a missing one; the test checks the offsets).
static_assert(sizeof(kStatsFields) / sizeof(kStatsFields[0]) * sizeof(uint64_t) ==
                  sizeof(zarena_stats) - offsetof(zarena_stats, capacity_bytes),
              "a zarena_stats field has no entry in kStatsFields");

}  // namespace zarena_core
