// The arena at one instant: what one acquisition of the writer lock reads (the region,
// the overflow pool, the arena's own counters, and, when asked, the live bytes of each
// tag). Everything a caller shows is built from one of these, so that the numbers of one
// answer agree: zarena_get_stats, the error text of a failed allocation, the diagnosis's
// facts, the top tags of its record, the epoch a reset ends.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "diagnosis/arena_diagnosis.h"
#include "diagnosis/diagnostics.h"
#include "overflow/overflow.h"
#include "plan/step_plans.h"
#include "region/region.h"
#include "zarena/zarena.h"

namespace zarena_core {

struct ArenaSnapshot {
  RegionSnapshot region;
  OverflowStats overflow;
  uint64_t capacity = 0;
  uint64_t alignment = 0;
  uint64_t resets = 0;
  uint64_t committed_bytes = 0, commit_events = 0, trim_events = 0, commit_failures = 0;
  uint64_t steps = 0, epoch_steps = 0;
  uint64_t overflow_fills = 0;  // overflow blocks poisoned before going back
  uint64_t pinned_peak = 0;     // highest pinned bytes, region and overflow (PinTally)
  // Step plans: their counters, the zone's region blocks' bytes (0: none) and count (the
  // region counts them as pinned blocks, the stats count the planned blocks live in them
  // instead), and the planned blocks poisoned at their free.
  PlanStats plan;
  uint64_t plan_zone_block = 0;
  uint64_t plan_zone_blocks = 0;
  uint64_t plan_fills = 0;
  uint64_t poison_skips = 0;  // fills the arena skipped during a capture (planned, custom)
  // Live bytes per tag of the snapshot's epoch, region and overflow (only when asked:
  // the walk is O(blocks)); unordered.
  std::vector<std::pair<uint32_t, uint64_t>> tag_bytes;
};

// The region's live blocks as the user sees them: the zone's pinned blocks replaced by the
// planned blocks live in them (what zarena_get_stats shows as used_bytes and, with the
// overflow pool's, live_allocs).
struct UserLive {
  uint64_t bytes = 0, count = 0;
};
UserLive region_user_live(const ArenaSnapshot& s);
// zarena_get_stats from a snapshot and the diagnosis's counters.
void fill_stats(const ArenaSnapshot& s, const DiagnosisCounters& d, zarena_stats* out);
// The facts of an exhaustion that only the snapshot knows (the diagnosis adds the rest:
// ArenaDiagnosis::complete_facts).
ExhaustionFacts exhaustion_facts(const ArenaSnapshot& s, const char* path, uint64_t size,
                                 uint64_t aligned, bool commit_failed,
                                 const std::string& commit_error);
// What a reset reads of the epoch it ends. A reset fills only these fields of its snapshot
// (Arena::epoch_snapshot_w): a field read here must be filled there too.
EpochEnd epoch_end(const ArenaSnapshot& s);
// The arena's counters a step or a warning needs. A step boundary fills only these fields
// (Arena::step_counters_now): a field read here must be filled there too.
StepCounters step_counters(const ArenaSnapshot& s);
// "matmul.grad 38.0 GiB, ...": the top tags by live bytes ("" when none).
std::string top_tags_text(const ArenaSnapshot& s);

}  // namespace zarena_core
