// The planner's view of a valid request: its instances on the circle of ticks (plan.h,
// "THE MODEL"). Shared by planning, check lists and verification; not part of the
// planner's interface.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/plan.h"

namespace zarena_core {
namespace plan {

// Ticks [begin, end) of the circle, not wrapping: 0 <= begin < end <= L.
struct TickRange {
  uint32_t begin;
  uint32_t end;
};

class Instances {
 public:
  // `request` must have passed validate_request.
  explicit Instances(const StepRequest& request);

  uint32_t items() const { return n_; }
  uint32_t period() const { return period_; }
  uint32_t ticks() const { return ticks_; }  // L = P * n, also the number of instances
  bool planned(uint32_t id) const { return end_[id] != 0; }
  uint64_t size(uint32_t id) const { return items_[id % n_].size; }
  // The arc, unrolled: [start(id), end(id)) with start(id) = id and end(id) <= id + L.
  uint32_t start(uint32_t id) const { return id; }
  uint32_t end(uint32_t id) const { return end_[id]; }
  uint32_t length(uint32_t id) const { return end_[id] - id; }
  // The arc as at most two ranges of the circle; returns how many.
  int ranges(uint32_t id, TickRange out[2]) const {
    const uint32_t e = end_[id];
    if (e <= ticks_) {
      out[0] = {id, e};
      return 1;
    }
    out[0] = {id, ticks_};
    out[1] = {0, e - ticks_};
    return 2;
  }

 private:
  const StepItem* items_;
  uint32_t n_;
  uint32_t period_;
  uint32_t ticks_;
  std::vector<uint32_t> end_;  // 0 for the instances of NotPlanned items
};

// The planned instances grouped by the (unrolled) tick their arc ends at, 1 .. 2L:
// ids[begin[t] .. begin[t + 1]) end at t, in ascending order.
struct EndBuckets {
  std::vector<uint32_t> begin;  // 2L + 2 entries
  std::vector<uint32_t> ids;
};
EndBuckets bucket_by_end(const Instances& inst);

// Whether the arcs of two planned instances share a tick of the circle (they conflict).
bool arcs_conflict(const Instances& inst, uint32_t a, uint32_t b);

// The most planned bytes live at one tick.
uint64_t max_live_bytes(const Instances& inst);

// The check lists of a plan whose conflicting instances do not overlap in space (plan.h,
// "CHECK LISTS"). Fails with kInternal if the offsets break that precondition.
Result build_check_lists(const Instances& inst, const std::vector<uint64_t>& offsets,
                         std::vector<uint32_t>* check_begin, std::vector<uint32_t>* check_ids);

}  // namespace plan
}  // namespace zarena_core
