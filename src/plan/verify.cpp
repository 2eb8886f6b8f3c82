// verify_plan: a plan checked against its request and plan.h's definitions, by a sweep or by
// brute force. Written apart from the planner's own construction (plan.cpp,
// check_lists.cpp) so that one does not vouch for itself: the conflicts are found by
// sweeping live instances, the check lists by testing each entry against the definition.
#include <algorithm>
#include <exception>
#include <iterator>
#include <map>
#include <new>
#include <string>

#include "plan/instances.h"

namespace zarena_core {
namespace plan {
namespace {

std::string describe(const Instances& inst, uint32_t id) {
  std::string s = "instance " + std::to_string(id) + " (item " + std::to_string(id % inst.items());
  if (inst.period() > 1) s += " of step " + std::to_string(id / inst.items()) + " of the period";
  return s + ")";
}

std::string overlap_text(const Instances& inst, const std::vector<uint64_t>& offsets, uint32_t a,
                         uint32_t b) {
  return describe(inst, a) + " at [" + std::to_string(offsets[a]) + ", " +
         std::to_string(offsets[a] + inst.size(a)) + ") and " + describe(inst, b) + " at [" +
         std::to_string(offsets[b]) + ", " + std::to_string(offsets[b] + inst.size(b)) +
         ") are live at the same tick and overlap";
}

bool space_overlaps(const Instances& inst, const std::vector<uint64_t>& offsets, uint32_t a,
                    uint32_t b) {
  return offsets[a] < offsets[b] + inst.size(b) && offsets[b] < offsets[a] + inst.size(a);
}

// Period, offsets, peak, lower bound, the shape of the check lists. Fills `owner`: the slot
// whose list holds each planned instance.
std::string check_shape(const StepRequest& request, const OffsetPlan& plan, const Instances& inst,
                        std::vector<uint32_t>* owner) {
  const uint32_t L = inst.ticks();
  if (plan.period_steps != inst.period()) {
    return "the period is " + std::to_string(plan.period_steps) + " steps; the step's is " +
           std::to_string(inst.period());
  }
  if (plan.step_items != inst.items()) {
    return "the plan is for " + std::to_string(plan.step_items) + " items; the step has " +
           std::to_string(inst.items());
  }
  if (plan.offsets.size() != L) {
    return std::to_string(plan.offsets.size()) + " offsets for " + std::to_string(L) + " instances";
  }
  uint64_t peak = 0;
  for (uint32_t id = 0; id < L; ++id) {
    const uint64_t off = plan.offsets[id];
    if (!inst.planned(id)) {
      if (off != kNoOffset) return describe(inst, id) + " is not planned but has an offset";
      continue;
    }
    if (off == kNoOffset) return describe(inst, id) + " has no offset";
    if (off % request.granule != 0 || off > (uint64_t{1} << 62)) {
      return describe(inst, id) + " has offset " + std::to_string(off) +
             ", not a multiple of the granule or out of range";
    }
    peak = std::max(peak, off + inst.size(id));
  }
  if (plan.peak_bytes != peak) {
    return "peak_bytes is " + std::to_string(plan.peak_bytes) + "; the offsets reach " +
           std::to_string(peak);
  }
  const uint64_t bound = max_live_bytes(inst);
  if (plan.lower_bound_bytes != bound) {
    return "lower_bound_bytes is " + std::to_string(plan.lower_bound_bytes) +
           "; the most bytes live at one tick are " + std::to_string(bound);
  }
  const auto& begin = plan.check_begin;
  const auto& ids = plan.check_ids;
  if (begin.size() != size_t{L} + 1 || begin[0] != 0 || begin[L] != ids.size()) {
    return "check_begin does not have " + std::to_string(L + 1) +
           " entries from 0 to the number of check_ids";
  }
  owner->assign(L, L);  // L: in no list yet
  for (uint32_t y = 0; y < L; ++y) {
    if (begin[y] > begin[y + 1]) return "check_begin decreases at " + std::to_string(y);
    if (begin[y] < begin[y + 1] && !inst.planned(y)) {
      return describe(inst, y) + " is not planned but has a check list";
    }
    for (uint32_t x = begin[y]; x < begin[y + 1]; ++x) {
      const uint32_t id = ids[x];
      if (id >= L || !inst.planned(id)) {
        return "the check list of " + describe(inst, y) + " names " + std::to_string(id) +
               ", not a planned instance";
      }
      if ((*owner)[id] != L) {
        return describe(inst, id) + " is in the check lists of both " +
               describe(inst, (*owner)[id]) + " and " + describe(inst, y);
      }
      (*owner)[id] = y;
    }
  }
  for (uint32_t id = 0; id < L; ++id) {
    if (inst.planned(id) && (*owner)[id] == L) return describe(inst, id) + " is in no check list";
  }
  return "";
}

std::string conflicts_brute_force(const Instances& inst, const std::vector<uint64_t>& offsets) {
  for (uint32_t a = 0; a < inst.ticks(); ++a) {
    if (!inst.planned(a)) continue;
    for (uint32_t b = a + 1; b < inst.ticks(); ++b) {
      if (inst.planned(b) && arcs_conflict(inst, a, b) && space_overlaps(inst, offsets, a, b)) {
        return overlap_text(inst, offsets, a, b);
      }
    }
  }
  return "";
}

// Two turns of the circle: during the second, the live incarnations at tick T are exactly
// the instances live at T - L on the circle, and every pair that shares a tick is live
// together at some tick there; the one allocated later meets the other when it is inserted.
// Live instances are disjoint until the first overlap, so neighbours by offset suffice.
std::string conflicts_sweep(const Instances& inst, const std::vector<uint64_t>& offsets) {
  const uint32_t L = inst.ticks();
  const EndBuckets ending = bucket_by_end(inst);
  std::map<uint64_t, uint32_t> live;  // offset -> instance
  auto retire = [&](uint32_t from, uint32_t to) {
    for (uint32_t x = from; x < to; ++x) live.erase(offsets[ending.ids[x]]);
  };
  for (uint32_t T = 0; T < 2 * L; ++T) {
    retire(ending.begin[T], ending.begin[T + 1]);  // first incarnations ending at T
    if (T >= L) retire(ending.begin[T - L], ending.begin[T - L + 1]);  // second ones
    const uint32_t y = T < L ? T : T - L;
    if (!inst.planned(y)) continue;
    auto [at, inserted] = live.emplace(offsets[y], y);
    if (!inserted) return overlap_text(inst, offsets, at->second, y);
    if (at != live.begin() && space_overlaps(inst, offsets, std::prev(at)->second, y)) {
      return overlap_text(inst, offsets, std::prev(at)->second, y);
    }
    auto next = std::next(at);
    if (next != live.end() && space_overlaps(inst, offsets, next->second, y)) {
      return overlap_text(inst, offsets, next->second, y);
    }
  }
  return "";
}

std::string wrong_deadline(const Instances& inst, uint32_t x, uint32_t listed, uint32_t due) {
  return describe(inst, x) + " is in the check list of " + describe(inst, listed) +
         "; by the definition it belongs to that of " + describe(inst, due) +
         " (the first planned allocation after its end that overlaps its bytes)";
}

std::string lists_brute_force(const Instances& inst, const std::vector<uint64_t>& offsets,
                              const std::vector<uint32_t>& owner) {
  const uint32_t L = inst.ticks();
  for (uint32_t x = 0; x < L; ++x) {
    if (!inst.planned(x)) continue;
    for (uint32_t T = inst.end(x); T <= x + L; ++T) {
      const uint32_t y = T % L;
      if (inst.planned(y) && space_overlaps(inst, offsets, x, y)) {
        if (owner[x] != y) return wrong_deadline(inst, x, owner[x], y);
        break;
      }
    }
  }
  return "";
}

// Each entry is a candidate deadline (allocated between the end and the next incarnation,
// overlapping the bytes); then a sweep shows no allocation before it qualifies: between an
// instance's end and its listed deadline, no allocation overlaps it.
std::string lists_sweep(const Instances& inst, const std::vector<uint64_t>& offsets,
                        const std::vector<uint32_t>& owner) {
  const uint32_t L = inst.ticks();
  std::vector<uint32_t> due(L, 0);  // the listed deadline, unrolled
  for (uint32_t x = 0; x < L; ++x) {
    if (!inst.planned(x)) continue;
    const uint32_t y = owner[x];
    const uint32_t T = y >= inst.end(x) ? y : y + L;
    if (T < inst.end(x) || T > x + L || !space_overlaps(inst, offsets, x, y)) {
      return describe(inst, x) + " is in the check list of " + describe(inst, y) +
             ", which is not allocated over its bytes between its end and its next " +
             "incarnation";
    }
    due[x] = T;
  }
  const EndBuckets ending = bucket_by_end(inst);
  std::map<uint64_t, uint32_t> waiting;  // ended, listed deadline not reached; by offset
  for (uint32_t T = 0; T < 2 * L; ++T) {
    for (uint32_t i = ending.begin[T]; i < ending.begin[T + 1]; ++i) {
      const uint32_t x = ending.ids[i];
      auto [at, inserted] = waiting.emplace(offsets[x], x);
      if (!inserted)
        return describe(inst, x) + " and " + describe(inst, at->second) +
               " wait for their deadlines over the same bytes";
    }
    const uint32_t y = T < L ? T : T - L;
    if (!inst.planned(y)) continue;
    const uint64_t lo = offsets[y], hi = lo + inst.size(y);
    auto it = waiting.upper_bound(lo);
    while (it != waiting.begin() &&
           offsets[std::prev(it)->second] + inst.size(std::prev(it)->second) > lo) {
      --it;
    }
    while (it != waiting.end() && it->first < hi) {
      if (due[it->second] != T) return wrong_deadline(inst, it->second, owner[it->second], y);
      it = waiting.erase(it);
    }
  }
  return "";
}

}  // namespace

// No planned instance overlaps an obstacle (they are sorted and disjoint).
static std::string obstacle_overlap(const StepRequest& request, const OffsetPlan& plan) {
  const ByteRange* ob = request.obstacles;
  const ByteRange* end = ob + request.obstacle_count;
  for (uint32_t id = 0; id < plan.offsets.size(); ++id) {
    const uint64_t off = plan.offsets[id];
    if (off == kNoOffset) continue;
    const uint64_t size = request.items[id % request.count].size;
    // The first obstacle ending above off.
    const ByteRange* o = std::upper_bound(
        ob, end, off, [](uint64_t v, const ByteRange& r) { return v < r.offset + r.size; });
    if (o != end && o->offset < off + size) {
      return "instance " + std::to_string(id) + " at [" + std::to_string(off) + ", " +
             std::to_string(off + size) + ") overlaps the obstacle at [" +
             std::to_string(o->offset) + ", " + std::to_string(o->offset + o->size) + ")";
    }
  }
  return "";
}

// No planned instance of the first step overlaps a leftover freed after it is allocated.
static std::string leftover_overlap(const StepRequest& request, const OffsetPlan& plan) {
  const Leftover* lo = request.leftovers;
  const Leftover* end = lo + request.leftover_count;
  for (uint32_t id = 0; id < request.count && id < plan.offsets.size(); ++id) {
    const uint64_t off = plan.offsets[id];
    if (off == kNoOffset) continue;
    const uint64_t size = request.items[id].size;
    const Leftover* o = std::upper_bound(
        lo, end, off, [](uint64_t v, const Leftover& r) { return v < r.offset + r.size; });
    for (; o != end && o->offset < off + size; ++o) {
      if (o->until > id) {
        return "instance " + std::to_string(id) + " at [" + std::to_string(off) + ", " +
               std::to_string(off + size) + ") overlaps the leftover at [" +
               std::to_string(o->offset) + ", " + std::to_string(o->offset + o->size) +
               ") freed before allocation " + std::to_string(o->until);
      }
    }
  }
  return "";
}

std::string verify_plan(const StepRequest& request, const OffsetPlan& plan,
                        VerifyMode mode) noexcept {
  try {
    PlanLimits unlimited;
    unlimited.max_items = kMaxItems;
    const Result r = validate_request(request, unlimited);
    if (!r.is_ok()) return "the request is not valid: " + r.message;
    const Instances inst(request);
    std::vector<uint32_t> owner;
    std::string s = check_shape(request, plan, inst, &owner);
    if (s.empty()) s = obstacle_overlap(request, plan);
    if (s.empty()) s = leftover_overlap(request, plan);
    if (s.empty()) {
      s = mode == VerifyMode::kBruteForce ? conflicts_brute_force(inst, plan.offsets)
                                          : conflicts_sweep(inst, plan.offsets);
    }
    if (s.empty()) {
      s = mode == VerifyMode::kBruteForce ? lists_brute_force(inst, plan.offsets, owner)
                                          : lists_sweep(inst, plan.offsets, owner);
    }
    return s;
  } catch (const std::bad_alloc&) {
    return "verify_plan: out of memory";
  } catch (const std::exception& e) {
    return std::string("verify_plan: ") + e.what();
  }
}

}  // namespace plan
}  // namespace zarena_core
