// The arena's lanes (zarena/zarena_lane.h, engine/lanes.h): the table, a lane's calls, and
// the lanes' part in the whole-arena paths (every lane's plans visited where the arena's
// are: zones, learners, resets, floors, stats).
#include <fmt/format.h>

#include <mutex>

#include "base/last_error.h"
#include "engine/arena.h"

namespace zarena_core {

Status Arena::lane_create(zarena_lane** out) noexcept {
  try {
    auto h = std::make_unique<zarena_lane>();
    h->arena = this;
    Lane* lane = nullptr;
    {
      std::lock_guard<std::mutex> g(lanes_mu_);
      lane_handles_.reserve(lane_handles_.size() + 1);
      const uint32_t made = lanes_made_.load(std::memory_order_relaxed);
      for (uint32_t i = 0; i < made && lane == nullptr; ++i) {
        Lane& l = *lanes_[i];
        if (l.live) continue;
        // A destroyed lane: its place is free once its zone went back.
        if (l.holds_zone) l.holds_zone = !l.plans.retire(*this);
        if (!l.holds_zone) lane = &l;
      }
      if (lane == nullptr) {
        if (made == Lane::kMax || made >= region_.lane_slots()) {
          return fail_with(
              Status::kOutOfMemory,
              fmt::format("zarena_lane_create: arena '{}' has {} lanes already, the most it may "
                          "have at once (ZARENA_LANE_MAX); destroy one first",
                          source_.name, made));
        }
        lanes_[made] = std::make_unique<Lane>(plans_.enabled() && trace_ == nullptr, granule_, made,
                                              region_.lane_slot(made));
        lane = lanes_[made].get();
        lanes_made_.store(made + 1, std::memory_order_release);
      } else {
        lane->plans.revive();
      }
      lane->live = true;
      lane->busy.store(0, std::memory_order_relaxed);
      h->lane.store(lane, std::memory_order_release);
      lane_handles_.push_back(std::move(h));  // reserved: cannot throw
      *out = lane_handles_.back().get();
    }
    return Status::kOk;
  } catch (...) {
    return fail_with(Status::kOutOfMemory, "zarena_lane_create: out of host memory");
  }
}

Lane* Arena::lane_enter(zarena_lane* h, const char* fn) noexcept {
  const char* why = nullptr;
  Lane* l = nullptr;
  if (h == nullptr) {
    why = "the lane is NULL";
  } else if (h->magic != zarena_lane::kMagic) {
    why = "not a lane handle";
  } else if (h->arena != this) {
    why = "the lane belongs to another arena";
  } else if ((l = h->lane.load(std::memory_order_acquire)) == nullptr) {
    why = "the lane was destroyed";
  } else if (l->busy.exchange(1, std::memory_order_acquire) != 0) {
    why =
        "the lane is in use by another caller (a lane serves one caller at a time, "
        "zarena_lane.h): nothing was done";
    l = nullptr;
  } else if (h->lane.load(std::memory_order_acquire) != l) {
    lane_leave(*l);  // destroyed meanwhile (a call racing its lane's destroy)
    why = "the lane was destroyed";
    l = nullptr;
  }
  if (l != nullptr) return l;
  try {
    set_last_error(fmt::format("{}: {}", fn, why));
  } catch (...) {
  }
  return nullptr;
}

Status Arena::lane_destroy(zarena_lane* h) noexcept {
  Lane* l = lane_enter(h, "zarena_lane_destroy");
  if (l == nullptr) return Status::kInvalidArgument;
  std::lock_guard<std::mutex> g(lanes_mu_);
  h->lane.store(nullptr, std::memory_order_release);
  l->live = false;
  l->holds_zone = !l->plans.retire(*this);
  lane_leave(*l);
  return Status::kOk;
}

void Arena::lane_step_begin(Lane& l) {
  if (!l.plans.enabled()) return;
  PlanEvents events;
  l.plans.on_boundary(*this, &events);
  if (events.zone_claimed) trim_after_engage();
  emit_queued_warnings();
  log_plan_events(events);
}

void Arena::lanes_boundary() {
  const uint32_t n = lanes_made_.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < n; ++i) {
    Lane& l = *lanes_[i];
    bool live = true;
    {
      std::lock_guard<std::mutex> g(lanes_mu_);
      live = l.live;
      // A destroyed lane's zone goes back once none of its blocks is live (a reset just
      // killed the unpinned ones).
      if (!live && l.holds_zone) l.holds_zone = !l.plans.retire(*this);
    }
    if (live) lane_step_begin(l);
  }
}

void Arena::lane_stats(Lane& l, zarena_lane_stats* out) {
  PlanStats ps;
  {
    Region::WriterLock w(region_);
    l.plans.stats(&ps);
  }
  out->slot = l.slot;
  out->plan_steps = ps.steps;
  out->plan_hits = ps.hits;
  out->plan_misses = ps.misses;
  out->plan_first_miss = ps.first_miss;
  out->plans_learned = ps.learned;
  out->plan_bytes = ps.peak_bytes;
  out->plan_zone_bytes = ps.zone_bytes;
  out->plan_live_bytes = ps.live_bytes;
  out->plan_live_count = ps.live_count;
}

PlanRun* Arena::lane_zone_run_of(uintptr_t p) const noexcept {
  const uint32_t n = lanes_made_.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < n; ++i) {
    if (PlanRun* r = lanes_[i]->plans.zone_of(p)) return r;
  }
  return nullptr;
}

const StepPlans& Arena::plans_of_zone(uintptr_t p) const noexcept {
  const uint32_t n = lanes_made_.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < n; ++i) {
    if (lanes_[i]->plans.zone_of(p) != nullptr) return lanes_[i]->plans;
  }
  return plans_;
}

void Arena::learn_free_all(uintptr_t p) noexcept {
  for_each_plans([&](StepPlans& plans) {
    if (plans.learning()) plans.learn_free(p);
  });
}

void Arena::learn_pin_all(uintptr_t p) noexcept {
  for_each_plans([&](StepPlans& plans) {
    if (plans.learning()) plans.learn_pin(p);
  });
}

void Arena::add_lane_plans_w(ArenaSnapshot* out) {
  const uint32_t n = lanes_made_.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < n; ++i) {
    const StepPlans& plans = lanes_[i]->plans;
    PlanStats ps;
    plans.stats(&ps);
    PlanStats& o = out->plan;
    o.steps += ps.steps;
    o.hits += ps.hits;
    o.misses += ps.misses;
    if (o.first_miss == 0) o.first_miss = ps.first_miss;
    o.peak_bytes += ps.peak_bytes;
    o.lower_bound_bytes += ps.lower_bound_bytes;
    o.learned += ps.learned;
    o.zone_bytes += ps.zone_bytes;
    o.live_bytes += ps.live_bytes;
    o.live_count += ps.live_count;
    o.pinned_bytes += ps.pinned_bytes;
    o.pinned_count += ps.pinned_count;
    o.deferred += ps.deferred;
    o.host_bytes += ps.host_bytes;
    o.host_budget += ps.host_budget;
    out->plan_zone_block += plans.zone_w().bytes();
    out->plan_zone_blocks += plans.zone_w().pieces.size();
  }
}

}  // namespace zarena_core
