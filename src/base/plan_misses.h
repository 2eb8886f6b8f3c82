// Why a planned step stopped being planned (zarena_plan_view.miss_reason,
// zarena_stats.plan_first_miss): the one list of the reasons. zarena_plan.h's
// ZARENA_PLAN_MISS_* defines, Python's PLAN_MISS_* and docs/PLANS.md's table are generated
// from it by tools/gen; the "arena.plan_abandoned" record and zarena-replay read its words.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zarena_core {

struct PlanMiss {
  const char* name;   // the record's "reason"; ZARENA_PLAN_MISS_<NAME>
  const char* text;   // the record's sentence, and zarena_plan.h's comment
  const char* words;  // a few words, for zarena-replay's summary
};

// In value order (the value is the index: ZARENA_PLAN_MISS_NONE is 0).
inline constexpr PlanMiss kPlanMisses[] = {
    {"none", "no deviation", "none"},
    {"size", "a request of another size than the plan's", "another size"},
    {"tag", "a request with another tag than the plan's", "another tag"},
    {"extra", "more allocations than the learned step", "an extra allocation"},
    {"short", "the step ended before its last planned allocation", "a short step"},
    {"late", "a block the plan reuses was still live (freed later than in the learned step)",
     "a late free"},
    {"floor", "the floor moved over the plan's zone", "a floor over the zone"},
};

inline constexpr size_t kPlanMissCount = sizeof(kPlanMisses) / sizeof(kPlanMisses[0]);

// The row of a reason; a value the table does not have reads as "none".
constexpr const PlanMiss& plan_miss(uint64_t reason) {
  return kPlanMisses[reason < kPlanMissCount ? reason : 0];
}

}  // namespace zarena_core
