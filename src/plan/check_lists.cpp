// The check lists of a plan (plan.h, "CHECK LISTS"), in one sweep over two turns of the
// circle.
#include <iterator>
#include <map>

#include "plan/instances.h"

namespace zarena_core {
namespace plan {

Result build_check_lists(const Instances& inst, const std::vector<uint64_t>& offsets,
                         std::vector<uint32_t>* check_begin, std::vector<uint32_t>* check_ids) {
  const uint32_t L = inst.ticks();
  const EndBuckets ending = bucket_by_end(inst);

  // Sweep ticks T = 0 .. 2L-1. "Waiting": instances whose arc has ended by T and whose
  // deadline is not yet found. At T, the instances ending at T start waiting; then the
  // instance allocated at T (slot T mod L) is the deadline of every waiting instance its
  // space overlaps. Each instance's deadline lies in [end, start + L] with start + L < 2L.
  // Two waiting instances never overlap in space (docs/PLANS.md: had the later-allocated
  // one been allocated after the other ended, it would have been the other's deadline; had
  // it been allocated before, their arcs would share a tick), so the waiting ones are
  // disjoint byte ranges, kept by offset.
  std::vector<uint32_t> deadline(L, 0);  // the slot whose check list holds the instance
  std::map<uint64_t, uint32_t> waiting;  // offset -> instance
  for (uint32_t T = 0; T < 2 * L; ++T) {
    for (uint32_t x = ending.begin[T]; x < ending.begin[T + 1]; ++x) {
      const uint32_t id = ending.ids[x];
      // Clear of both neighbours by offset, so clear of every waiting instance.
      const auto placed = waiting.emplace(offsets[id], id);
      bool clear = placed.second;
      if (clear && placed.first != waiting.begin()) {
        const auto prev = std::prev(placed.first);
        clear = offsets[prev->second] + inst.size(prev->second) <= offsets[id];
      }
      if (clear) {
        const auto next = std::next(placed.first);
        clear = next == waiting.end() || offsets[id] + inst.size(id) <= next->first;
      }
      if (!clear) {
        return Result::fail(Status::kInternal,
                            "plan check lists: instance " + std::to_string(id) +
                                " overlaps another whose deadline is pending; the plan " +
                                "places conflicting instances in the same bytes");
      }
    }
    const uint32_t y = T < L ? T : T - L;
    if (!inst.planned(y) || waiting.empty()) continue;
    const uint64_t lo = offsets[y], hi = lo + inst.size(y);
    auto it = waiting.upper_bound(lo);
    if (it != waiting.begin()) {
      auto prev = std::prev(it);
      if (prev->first + inst.size(prev->second) > lo) it = prev;
    }
    while (it != waiting.end() && it->first < hi) {
      deadline[it->second] = y;
      it = waiting.erase(it);
    }
  }
  if (!waiting.empty()) {
    return Result::fail(Status::kInternal, "plan check lists: instance " +
                                               std::to_string(waiting.begin()->second) +
                                               " has no deadline");
  }

  // CSR, each list in ascending instance order.
  check_begin->assign(size_t{L} + 1, 0);
  for (uint32_t id = 0; id < L; ++id) {
    if (inst.planned(id)) ++(*check_begin)[deadline[id] + 1];
  }
  for (uint32_t t = 1; t <= L; ++t) (*check_begin)[t] += (*check_begin)[t - 1];
  check_ids->assign((*check_begin)[L], 0);
  std::vector<uint32_t> fill(check_begin->begin(), check_begin->end() - 1);
  for (uint32_t id = 0; id < L; ++id) {
    if (inst.planned(id)) (*check_ids)[fill[deadline[id]]++] = id;
  }
  return Result::ok();
}

}  // namespace plan
}  // namespace zarena_core
