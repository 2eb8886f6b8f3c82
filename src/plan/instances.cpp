// The model of plan.h: validating a step, its period, its instances' arcs, the lower bound.
#include "plan/instances.h"

#include <algorithm>
#include <new>
#include <string>

namespace zarena_core {
namespace plan {
namespace {

// Keeps every sum of planned bytes (the peak is at most the sum over instances) far from
// overflowing uint64_t.
constexpr uint64_t kMaxTotalBytes = uint64_t{1} << 62;

Result invalid_item(uint32_t i, const std::string& what) {
  return Result::fail(Status::kInvalidArgument, "step item " + std::to_string(i) + ": " + what);
}

}  // namespace

Result validate_request(const StepRequest& request, const PlanLimits& limits) noexcept {
  try {
    const uint64_t g = request.granule;
    if (g == 0 || (g & (g - 1)) != 0) {
      return Result::fail(Status::kInvalidArgument,
                          "plan granule " + std::to_string(g) + " is not a power of two");
    }
    const uint32_t n = request.count;
    const uint32_t max_items = std::min(limits.max_items, kMaxItems);
    if (n > max_items) {
      return Result::fail(Status::kUnsupported,
                          "step of " + std::to_string(n) + " allocations exceeds the planner's " +
                              "limit of " + std::to_string(max_items) + " (PlanLimits.max_items)");
    }
    if (n > 0 && request.items == nullptr) {
      return Result::fail(Status::kInvalidArgument, "step items are NULL");
    }
    if (request.obstacle_count > 0 && request.obstacles == nullptr) {
      return Result::fail(Status::kInvalidArgument, "step obstacles are NULL");
    }
    uint64_t prev_end = 0;
    for (uint32_t j = 0; j < request.obstacle_count; ++j) {
      const ByteRange& o = request.obstacles[j];
      if (o.size == 0 || o.offset % g != 0 || o.size % g != 0 || o.offset < prev_end ||
          o.size > kMaxTotalBytes - o.offset) {
        return Result::fail(Status::kInvalidArgument,
                            "obstacle " + std::to_string(j) + " [" + std::to_string(o.offset) +
                                ", +" + std::to_string(o.size) +
                                ") is empty, not granule-aligned, unsorted or overlapping");
      }
      prev_end = o.offset + o.size;
    }
    if (request.leftover_count > 0 && request.leftovers == nullptr) {
      return Result::fail(Status::kInvalidArgument, "step leftovers are NULL");
    }
    prev_end = 0;
    for (uint32_t j = 0; j < request.leftover_count; ++j) {
      const Leftover& o = request.leftovers[j];
      if (o.size == 0 || o.offset % g != 0 || o.size % g != 0 || o.offset < prev_end ||
          o.size > kMaxTotalBytes - o.offset || o.until > n) {
        return Result::fail(Status::kInvalidArgument,
                            "leftover " + std::to_string(j) + " [" + std::to_string(o.offset) +
                                ", +" + std::to_string(o.size) + ") until " +
                                std::to_string(o.until) +
                                " is empty, not granule-aligned, unsorted, overlapping or "
                                "freed after the step's last allocation");
      }
      prev_end = o.offset + o.size;
    }
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; ++i) {
      const StepItem& it = request.items[i];
      if (it.size == 0) return invalid_item(i, "size 0");
      if (it.size % g != 0) {
        return invalid_item(i, "size " + std::to_string(it.size) +
                                   " is not a multiple of the granule " + std::to_string(g));
      }
      const uint32_t k = it.free_before;
      switch (it.free_kind) {
        case FreeKind::kSameStep:
          if (k <= i || k > n) {
            return invalid_item(i, "freed in its own step before allocation " + std::to_string(k) +
                                       ", outside [" + std::to_string(i + 1) + ", " +
                                       std::to_string(n) + "]");
          }
          break;
        case FreeKind::kNextStep:
          if (k > n) {
            return invalid_item(i, "freed in the next step before allocation " + std::to_string(k) +
                                       ", beyond the step's " + std::to_string(n) + " allocations");
          }
          break;
        case FreeKind::kNotPlanned:
          continue;
        default:
          return invalid_item(
              i, "unknown free kind " + std::to_string(static_cast<unsigned>(it.free_kind)));
      }
      if (it.size > kMaxTotalBytes / 2 - total) {
        return invalid_item(
            i, "the step's planned bytes exceed " + std::to_string(kMaxTotalBytes / 2));
      }
      total += it.size;
    }
    return Result::ok();
  } catch (const std::bad_alloc&) {
    return Result::fail(Status::kOutOfMemory, "out of memory validating a step plan request");
  }
}

uint32_t period_steps(const StepRequest& request) noexcept {
  for (uint32_t i = 0; i < request.count; ++i) {
    const StepItem& it = request.items[i];
    if (it.free_kind == FreeKind::kNextStep && it.free_before > i) return 2;
  }
  return 1;
}

Instances::Instances(const StepRequest& request)
    : items_(request.items),
      n_(request.count),
      period_(period_steps(request)),
      ticks_(period_ * n_),
      end_(ticks_, 0) {
  for (uint32_t q = 0; q < period_; ++q) {
    for (uint32_t i = 0; i < n_; ++i) {
      const StepItem& it = items_[i];
      if (it.free_kind == FreeKind::kSameStep) {
        end_[q * n_ + i] = q * n_ + it.free_before;
      } else if (it.free_kind == FreeKind::kNextStep) {
        end_[q * n_ + i] = (q + 1) * n_ + it.free_before;
      }
    }
  }
}

EndBuckets bucket_by_end(const Instances& inst) {
  const uint32_t L = inst.ticks();
  EndBuckets b;
  b.begin.assign(2 * size_t{L} + 2, 0);
  for (uint32_t id = 0; id < L; ++id) {
    if (inst.planned(id)) ++b.begin[inst.end(id) + 1];
  }
  for (size_t t = 1; t < b.begin.size(); ++t) b.begin[t] += b.begin[t - 1];
  b.ids.resize(b.begin.back());
  std::vector<uint32_t> fill(b.begin.begin(), b.begin.end() - 1);
  for (uint32_t id = 0; id < L; ++id) {
    if (inst.planned(id)) b.ids[fill[inst.end(id)]++] = id;
  }
  return b;
}

bool arcs_conflict(const Instances& inst, uint32_t a, uint32_t b) {
  TickRange ra[2], rb[2];
  const int na = inst.ranges(a, ra);
  const int nb = inst.ranges(b, rb);
  for (int x = 0; x < na; ++x) {
    for (int y = 0; y < nb; ++y) {
      if (ra[x].begin < rb[y].end && rb[y].begin < ra[x].end) return true;
    }
  }
  return false;
}

uint64_t max_live_bytes(const Instances& inst) {
  // delta[t]: bytes that become live at tick t minus bytes that die at t (modular
  // arithmetic: every prefix sum is a true byte count).
  std::vector<uint64_t> delta(inst.ticks() + 1, 0);
  for (uint32_t id = 0; id < inst.ticks(); ++id) {
    if (!inst.planned(id)) continue;
    TickRange r[2];
    const int nr = inst.ranges(id, r);
    for (int x = 0; x < nr; ++x) {
      delta[r[x].begin] += inst.size(id);
      delta[r[x].end] -= inst.size(id);
    }
  }
  uint64_t live = 0, most = 0;
  for (uint32_t t = 0; t < inst.ticks(); ++t) {
    live += delta[t];
    most = std::max(most, live);
  }
  return most;
}

Result lower_bound_bytes(const StepRequest& request, uint64_t* bytes) noexcept {
  PlanLimits unlimited;
  unlimited.max_items = kMaxItems;
  Result r = validate_request(request, unlimited);
  if (!r.is_ok()) return r;
  try {
    *bytes = max_live_bytes(Instances(request));
    return Result::ok();
  } catch (const std::bad_alloc&) {
    return Result::fail(Status::kOutOfMemory, "out of memory computing a step's lower bound");
  }
}

}  // namespace plan
}  // namespace zarena_core
