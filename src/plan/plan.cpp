// plan_step: the period, the placement of every instance, the check lists.
#include <algorithm>
#include <exception>
#include <new>
#include <string>

#include "plan/instances.h"
#include "plan/occupancy.h"

namespace zarena_core {
namespace plan {
namespace {

// The planned instances in placement order: largest first, then longer arc, then earlier
// start (an instance's id is its start tick).
std::vector<uint32_t> placement_order(const Instances& inst) {
  struct Key {
    uint64_t size;
    uint32_t length;
    uint32_t id;
  };
  std::vector<Key> keys;
  keys.reserve(inst.ticks());
  for (uint32_t id = 0; id < inst.ticks(); ++id) {
    if (inst.planned(id)) keys.push_back({inst.size(id), inst.length(id), id});
  }
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    if (a.size != b.size) return a.size > b.size;
    if (a.length != b.length) return a.length > b.length;
    return a.id < b.id;
  });
  std::vector<uint32_t> order(keys.size());
  for (size_t x = 0; x < keys.size(); ++x) order[x] = keys[x].id;
  return order;
}

// The leftovers each instance must stay clear of: those the first step (phase 0) frees
// after allocating it (until > id). One union per distinct `until`, of the leftovers freed
// at or after it; past kMaxSpans spans in all, one union of every leftover for every
// instance of the first step allocated before the last of them is freed (stricter, still a
// valid plan).
class LeftoverUnions {
 public:
  explicit LeftoverUnions(const StepRequest& r) {
    for (uint32_t j = 0; j < r.leftover_count; ++j) {
      if (r.leftovers[j].until > 0) untils_.push_back(r.leftovers[j].until);
    }
    std::sort(untils_.begin(), untils_.end());
    untils_.erase(std::unique(untils_.begin(), untils_.end()), untils_.end());
    if (untils_.size() * r.leftover_count > kMaxSpans)
      untils_.erase(untils_.begin(), untils_.end() - 1);
    const bool all = untils_.size() == 1;
    unions_.resize(untils_.size());
    for (size_t k = 0; k < untils_.size(); ++k) {
      for (uint32_t j = 0; j < r.leftover_count; ++j) {
        const Leftover& o = r.leftovers[j];
        if (o.until > 0 && (all || o.until >= untils_[k]))
          unions_[k].add(o.offset, o.offset + o.size);
      }
    }
  }
  // Null: none (an instance of the second step of a period, or allocated after them all).
  const SpanUnion* for_instance(uint32_t id) const {
    const auto it = std::upper_bound(untils_.begin(), untils_.end(), id);
    return it == untils_.end() ? nullptr : &unions_[static_cast<size_t>(it - untils_.begin())];
  }

 private:
  static constexpr size_t kMaxSpans = size_t{1} << 20;
  std::vector<uint32_t> untils_;
  std::vector<SpanUnion> unions_;
};

Result plan_valid_step(const StepRequest& request, Placement placement, OffsetPlan* out) {
  const Instances inst(request);
  OffsetPlan plan;
  plan.period_steps = inst.period();
  plan.step_items = inst.items();
  plan.offsets.assign(inst.ticks(), kNoOffset);
  {  // the occupancy is the largest structure: gone before the check lists are built
    Occupancy occupancy(inst.ticks());
    if (inst.ticks() > 0 && request.obstacle_count > 0) {  // taken at every tick
      const TickRange all{0, inst.ticks()};
      occupancy.select(&all, 1);
      for (uint32_t j = 0; j < request.obstacle_count; ++j) {
        occupancy.take(request.obstacles[j].offset, request.obstacles[j].size);
      }
    }
    const LeftoverUnions leftovers(request);
    for (uint32_t id : placement_order(inst)) {
      TickRange ranges[2];
      occupancy.select(ranges, inst.ranges(id, ranges));
      const uint64_t size = inst.size(id);
      const SpanUnion* also = id < inst.items() ? leftovers.for_instance(id) : nullptr;
      const uint64_t offset = placement == Placement::kBestFitGap
                                  ? occupancy.best_fit(size, also)
                                  : occupancy.lowest_fit(size, also);
      occupancy.take(offset, size);
      plan.offsets[id] = offset;
      plan.peak_bytes = std::max(plan.peak_bytes, offset + size);
    }
  }
  plan.lower_bound_bytes = max_live_bytes(inst);
  Result r = build_check_lists(inst, plan.offsets, &plan.check_begin, &plan.check_ids);
  if (!r.is_ok()) return r;
  *out = std::move(plan);
  return Result::ok();
}

}  // namespace

Result plan_step(const StepRequest& request, const PlanLimits& limits, OffsetPlan* plan,
                 Placement placement) noexcept {
  if (plan == nullptr) return Result::fail(Status::kInvalidArgument, "plan_step: plan is NULL");
  if (placement != Placement::kGreedyBySize && placement != Placement::kBestFitGap) {
    return Result::fail(
        Status::kInvalidArgument,
        "plan_step: unknown placement " + std::to_string(static_cast<unsigned>(placement)));
  }
  Result r = validate_request(request, limits);
  if (!r.is_ok()) return r;
  try {
    return plan_valid_step(request, placement, plan);
  } catch (const std::bad_alloc&) {
    return Result::fail(Status::kOutOfMemory, "out of memory planning a step of " +
                                                  std::to_string(request.count) + " allocations");
  } catch (const std::exception& e) {
    return Result::fail(Status::kInternal, std::string("plan_step: ") + e.what());
  }
}

}  // namespace plan
}  // namespace zarena_core
