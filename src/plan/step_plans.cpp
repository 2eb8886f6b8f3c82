#include "plan/step_plans.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <new>

#include "base/test_points.h"

namespace zarena_core {

namespace {

// Learning pauses after this many boundaries in a row at which the step had not repeated;
// the pause doubles each time (up to kMaxPause steps), so a program whose steps never
// repeat pays for learning only now and then.
constexpr uint32_t kMissesBeforePause = 16;
constexpr uint32_t kMaxPause = 1024;

// The bytes a layout needs for itself: its peak less the obstacles under it.
uint64_t own_bytes(const PlanLayout& l) {
  uint64_t b = l.peak_bytes;
  for (const plan::ByteRange& o : l.obstacles) {
    if (o.offset >= l.peak_bytes) break;
    b -= std::min(l.peak_bytes, o.offset + o.size) - o.offset;
  }
  return b;
}

bool same_items(const std::vector<LearnedItem>& a, const std::vector<LearnedItem>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size != b[i].size || a[i].tag != b[i].tag || a[i].freed != b[i].freed ||
        (a[i].freed != LearnedItem::Freed::kNotPlanned && a[i].before != b[i].before)) {
      return false;
    }
  }
  return true;
}

// The window's live blocks that are leftovers of the learned step (one of its blocks at
// that address) leave the obstacles: the plan reuses their bytes once they are freed.
void split_leftovers(const std::vector<LearnedLeftover>& left, PlanWindow* where) {
  where->leftovers.clear();
  if (left.empty() || where->address == 0) return;
  std::vector<plan::ByteRange> kept;
  kept.reserve(where->obstacles.size());
  for (const plan::ByteRange& o : where->obstacles) {
    const uintptr_t p = where->address + o.offset;
    const auto it =
        std::lower_bound(left.begin(), left.end(), p,
                         [](const LearnedLeftover& l, uintptr_t v) { return l.ptr < v; });
    if (it != left.end() && it->ptr == p && it->size <= o.size) {
      where->leftovers.push_back(plan::Leftover{o.offset, o.size, it->before});
    } else {
      kept.push_back(o);
    }
  }
  where->obstacles.swap(kept);
}

// What a zone laid out in l claims at first: the window less the obstacles and the
// leftovers (claimed one by one once freed, StepPlans::claim_leftovers).
PlanWindow claim_window(const PlanLayout& l) {
  PlanWindow w{l.window, 0, l.obstacles, {}};
  for (const plan::Leftover& o : l.leftovers) w.obstacles.push_back({o.offset, o.size});
  std::sort(w.obstacles.begin(), w.obstacles.end(),
            [](const plan::ByteRange& a, const plan::ByteRange& b) { return a.offset < b.offset; });
  return w;
}

}  // namespace

StepPlans::StepPlans(bool enabled, uint64_t granule, uint64_t run_budget_bytes)
    : enabled_(enabled), granule_(granule), run_budget_(run_budget_bytes) {
  if (enabled_) start_learning();
}

StepPlans::~StepPlans() {
  if (job_) job_->cancelled.store(true, std::memory_order_release);
}

void StepPlans::start_learning() {
  learner_.clear();
  learning_.store(true, std::memory_order_relaxed);
}

void StepPlans::stop_learning() {
  learning_.store(false, std::memory_order_relaxed);
  learner_.clear();
}

void StepPlans::learn_alloc(uintptr_t ptr, uint64_t aligned, uint32_t tag, uint32_t thread,
                            uint64_t epoch) noexcept {
  try {
    const uint64_t n = learner_.on_alloc(ptr, aligned, tag, thread, epoch);
    const uint64_t most =
        boundary_seen_.load(std::memory_order_relaxed) ? kMaxStepItems : kMaxFirstStepItems;
    if (ZARENA_UNLIKELY(n > most) && !step_too_long_.exchange(true)) {
      // No plan for so long a step: stop recording it; the next boundary starts over.
      learning_.store(false, std::memory_order_relaxed);
      learner_.clear();
    }
  } catch (...) {  // host memory: this step cannot be learned; the next boundary starts over
    learner_.clear();
  }
}

void StepPlans::learn_free(uintptr_t ptr) noexcept { learner_.on_free(ptr); }

void StepPlans::claim_leftovers(ZoneOps& zones, uintptr_t p, uint64_t size) noexcept {
  std::lock_guard<SpinLock> g(boundary_mu_);  // zone_ and zone_window_ hold still
  PlanRun* const r = engaged_.load(std::memory_order_acquire);
  if (r == nullptr) return;  // the plan ended meanwhile: the caller's next try is dynamic
  if (r != zone_run_.load(std::memory_order_relaxed) || zone_window_ == PlanLayout::kAnywhere) {
    r->disengage(ZARENA_PLAN_MISS_LATE, r->cursor());  // not expected: never an overlap
    return;
  }
  const uint64_t off = p - r->zone();
  plan::ByteRange left;
  while (r->unclaimed_leftover(off, size, &left)) {
    Zone piece;
    auto publish = [&](const RegionNow&) {
      // Under the writer lock: the zone holds the leftover's bytes from now on.
      const auto at = static_cast<size_t>(
          std::lower_bound(zone_.pieces.begin(), zone_.pieces.end(), left.offset,
                           [](const plan::ByteRange& x, uint64_t v) { return x.offset < v; }) -
          zone_.pieces.begin());
      zone_.pieces.insert(zone_.pieces.begin() + static_cast<std::ptrdiff_t>(at), left);
      zone_.bury(piece.buried);
      zone_bytes_.store(zone_.bytes(), std::memory_order_relaxed);
      r->leftover_claimed(left.offset);
    };
    bool ok = false;
    try {
      // Room for the zone's lists first: the publish must not fail once the bytes are claimed.
      zone_.pieces.reserve(zone_.pieces.size() + 1);
      ok = zones.claim_zone(PlanWindow{zone_window_ + left.offset, 0, {}, {}}, left.size, &piece,
                            publish);
    } catch (const std::bad_alloc&) {
    }
    if (!ok) {  // still live, or the dynamic engine took the bytes: a late free
      r->disengage(ZARENA_PLAN_MISS_LATE, r->cursor());
      return;
    }
  }
}

void StepPlans::learn_pin(uintptr_t ptr) noexcept { learner_.on_pin(ptr); }

void StepPlans::learn_reset(const StepLearner::ResetSurvivors& kept) noexcept {
  try {
    learner_.on_reset(kept);
  } catch (...) {  // host memory: this step cannot be learned; the next boundary starts over
    learner_.clear();
  }
}

void StepPlans::set_threads(const LearnedStep& s) {
  any_thread_.store(s.any_thread, std::memory_order_relaxed);
  for (uint32_t t = 0; t < s.thread_count; ++t) {
    threads_[t].store(s.threads[t], std::memory_order_relaxed);
  }
  thread_count_.store(s.thread_count, std::memory_order_release);
}

StepPlans::EpochGate::EpochGate(const StepPlans& plans) noexcept {
  PlanRun* const runs[3] = {plans.engaged_.load(std::memory_order_relaxed),
                            plans.zone_run_.load(std::memory_order_relaxed),
                            plans.retired_.load(std::memory_order_relaxed)};
  for (PlanRun* r : runs) {
    if (r == nullptr || std::find(held_, held_ + count_, r) != held_ + count_) continue;
    r->hold();
    held_[count_++] = r;
  }
}

StepPlans::EpochGate::~EpochGate() {
  for (int i = 0; i < count_; ++i) held_[i]->release();
}

void StepPlans::on_reset_locked(uint64_t epoch) {
  PlanRun* const e = engaged_.load(std::memory_order_relaxed);
  PlanRun* const z = zone_run_.load(std::memory_order_relaxed);
  PlanRun* const r = retired_.load(std::memory_order_relaxed);
  if (e != nullptr) e->set_epoch(epoch);
  if (z != nullptr && z != e) z->set_epoch(epoch);
  if (r != nullptr && r != e && r != z) r->set_epoch(epoch);
}

void StepPlans::take_layout(std::unique_ptr<PlanLayout> layout, std::vector<LearnedItem> items,
                            uint64_t plan_ns, PlanEvents* events) {
  events->learned = true;
  events->items = layout->n;
  events->planned = 0;
  for (uint8_t p : layout->item_planned) events->planned += p;
  events->period = layout->period;
  events->peak_bytes = own_bytes(*layout);
  events->lower_bound_bytes = layout->lower_bound_bytes;
  events->plan_ns = plan_ns;
  {
    std::lock_guard<SpinLock> g(stats_mu_);
    ++learned_;
    peak_ = own_bytes(*layout);
    lower_bound_ = layout->lower_bound_bytes;
  }
  pending_ = std::move(layout);
  pending_items_ = std::move(items);
}

void StepPlans::plan_learned(LearnedStep& step, ZoneOps& zones, PlanEvents* events) {
  if (job_ && !same_items(step.items, job_->step.items)) {
    job_->cancelled.store(true, std::memory_order_release);
    job_.reset();
  }
  if (job_) {  // the same step again: is its layout ready?
    if (!job_->done.load(std::memory_order_acquire)) return;
    std::shared_ptr<PlanJob> job = std::move(job_);
    if (!job->ok) {
      events->failure = job->failure.empty() ? "the plan thread did not finish" : job->failure;
      return;
    }
    take_layout(std::make_unique<PlanLayout>(std::move(job->layout)), std::move(job->step.items),
                job->plan_ns, events);
    return;
  }
  PlanWindow where;
  if (!zones.zone_window(zone_, &where)) where = PlanWindow{};
  leftovers_ = step.leftovers;
  split_leftovers(leftovers_, &where);
  if (step.items.size() > kInlineItems) {
    try {
      auto job = std::make_shared<PlanJob>();
      job->step = step;
      job->granule = granule_;
      job->where = where;
      if (post_plan_job(job)) {
        job_ = std::move(job);
        return;
      }
    } catch (const std::bad_alloc&) {
    }
  }
  auto layout = std::make_unique<PlanLayout>();
  uint64_t ns = 0;
  if (!lay_out_step(step, granule_, where, layout.get(), &events->failure, &ns)) return;
  take_layout(std::move(layout), std::move(step.items), ns, events);
}

bool StepPlans::zone_live() const {
  PlanRun* zr = zone_run_.load(std::memory_order_relaxed);
  return zr != nullptr && zr->any_live();
}

void StepPlans::release_zone(ZoneOps& zones) {
  PlanRun* const zr = zone_run_.load(std::memory_order_relaxed);
  if (zr == nullptr) return;
  zones.release_zone(zone_, [&](const RegionNow&) {
    // Every instance is dead (the caller checked; none can come to life: the run is not
    // engaged). The run answers for its old pointers from now on (history).
    zone_run_.store(nullptr, std::memory_order_release);
    retired_.store(zr, std::memory_order_release);
    zone_ = Zone{};
    zone_persistent_ = false;
    zone_bytes_.store(0, std::memory_order_relaxed);
  });
  zone_items_.clear();
  zone_window_ = PlanLayout::kAnywhere;
  reuse_zone_run_ = false;
}

void StepPlans::relay_out(ZoneOps& zones, PlanEvents* events) {
  PlanWindow where;
  if (!zones.zone_window(zone_, &where)) return;
  split_leftovers(leftovers_, &where);
  LearnedStep step;
  uint64_t ns = 0;
  std::unique_ptr<PlanLayout> layout;
  try {
    layout = std::make_unique<PlanLayout>();
    step.items = pending_items_;
    std::string failure;
    if (!lay_out_step(step, granule_, where, layout.get(), &failure, &ns)) return;
  } catch (const std::bad_alloc&) {
    return;
  }
  take_layout(std::move(layout), std::move(step.items), ns, events);
}

std::unique_ptr<PlanRun> StepPlans::make_run(PlanEvents* events) {
  std::unique_ptr<PlanRun> run;
  try {
    run = std::make_unique<PlanRun>(*pending_, 0);
  } catch (const std::bad_alloc&) {
    events->failure = "out of host memory for the plan's state";
    return nullptr;
  }
  std::lock_guard<SpinLock> g(stats_mu_);
  if (run_bytes_ + run->host_bytes() > run_budget_) {
    events->budget = true;
    events->failure = "budget";
    events->host_bytes = run_bytes_;
    events->host_budget = run_budget_;
    return nullptr;
  }
  try {
    runs_.reserve(runs_.size() + 1);
  } catch (const std::bad_alloc&) {
    events->failure = "out of host memory for the plan's state";
    return nullptr;
  }
  return run;
}

void StepPlans::publish_locked(PlanRun* r, Zone z, const RegionNow& now) {
  test_points::hit(test_points::Point::kPlanEngaging);
  r->set_zone(z.base);
  zone_ = std::move(z);
  zone_persistent_ = false;
  zone_bytes_.store(zone_.bytes(), std::memory_order_relaxed);
  {
    std::lock_guard<SpinLock> g(stats_mu_);
    run_bytes_ += r->host_bytes();
    runs_.emplace_back(r);  // reserved by make_run: cannot throw
  }
  r->set_epoch(now.epoch);
  r->engage();
  zone_run_.store(r, std::memory_order_release);
  engaged_.store(r, std::memory_order_release);
}

void StepPlans::try_engage(ZoneOps& zones, PlanEvents* events) {
  PlanRun* zr = zone_run_.load(std::memory_order_relaxed);
  if (zr != nullptr && zr->any_live()) return;  // the plan waits for the zone to clear
  if (reuse_zone_run_) {
    reuse_zone_run_ = false;
    zones.under_lock([&](const RegionNow& now) {
      zr->set_epoch(now.epoch);
      zr->engage();
      engaged_.store(zr, std::memory_order_release);
    });
    events->engaged = true;
    stop_learning();
    return;
  }
  if (!pending_ || zone_frozen_) return;  // [graphs] no new zone while frozen
  std::unique_ptr<PlanRun> run = make_run(events);
  if (!run) {
    pending_.reset();
    if (events->budget) {
      budget_spent_ = true;
      stop_learning();
    } else {
      start_learning();
    }
    return;
  }
  uint64_t need = std::max<uint64_t>(pending_->peak_bytes, granule_);
  // A new layout gets a new zone: its offsets avoid the obstacles of its own window.
  if (zr != nullptr) release_zone(zones);
  Zone zone;
  PlanRun* const r = run.get();
  auto publish = [&](const RegionNow& now) {
    if (zone.pieces.size() != 1 || zone.pieces[0].offset != 0 || zone.pieces[0].size < need) {
      r->set_pieces(zone.pieces);
    }
    publish_locked(r, zone, now);
  };
  bool claimed = pending_->window != PlanLayout::kAnywhere &&
                 zones.claim_zone(claim_window(*pending_), need, &zone, publish);
  if (!claimed && pending_->window != PlanLayout::kAnywhere &&
      pending_items_.size() <= kInlineItems) {
    // The window changed since the layout (it was made at an earlier boundary): lay the
    // step out again around the blocks live now, once.
    relay_out(zones, events);
    need = std::max<uint64_t>(pending_->peak_bytes, granule_);
    if (pending_->window != PlanLayout::kAnywhere) {
      run = make_run(events);  // the layout changed: a run of its own
      if (!run) {
        pending_.reset();
        start_learning();
        return;
      }
      PlanRun* const again = run.get();
      auto publish_again = [&](const RegionNow& now) {
        if (zone.pieces.size() != 1 || zone.pieces[0].offset != 0 || zone.pieces[0].size < need) {
          again->set_pieces(zone.pieces);
        }
        publish_locked(again, zone, now);
      };
      claimed = zones.claim_zone(claim_window(*pending_), need, &zone, publish_again);
    }
  }
  zone_window_ = claimed ? pending_->window : PlanLayout::kAnywhere;
  // Else one free block: the offsets are as good in any space free throughout (no
  // leftover lies there).
  if (!claimed) {
    PlanRun* const any = run.get();
    any->drop_leftovers();
    claimed = zones.reserve_zone(need, &zone,
                                 [&](const RegionNow& now) { publish_locked(any, zone, now); });
  }
  if (!claimed) {
    events->no_room = true;
    pending_.reset();
    start_learning();
    return;
  }
  (void)run.release();  // runs_ holds it now (publish_locked)
  pending_.reset();
  zone_items_ = std::move(pending_items_);
  events->engaged = true;
  events->zone_claimed = true;
  stop_learning();
}

void StepPlans::on_boundary(ZoneOps& zones, PlanEvents* events) {
  if (!enabled_) return;
  std::lock_guard<SpinLock> g(boundary_mu_);
  boundary_seen_.store(true, std::memory_order_relaxed);
  if (step_too_long_.exchange(false)) {
    // The step that ended was too long to learn: learning starts over with the next one
    // (unless a plan serves or the learning pauses meanwhile).
    if (engaged_.load(std::memory_order_relaxed) == nullptr && pause_steps_ == 0 &&
        !budget_spent_) {
      start_learning();
    }
    return;
  }
  if (PlanRun* run = engaged_.load(std::memory_order_relaxed)) {
    bool was_step = true;
    if (run->end_step(&was_step)) {
      if (!was_step) return;  // zarena_step_begin right after a reset: one step, not two
      std::lock_guard<SpinLock> s(stats_mu_);
      ++steps_;
      return;
    }
    // The step left its plan: say where, then learn again from the next step.
    engaged_.store(nullptr, std::memory_order_release);
    events->abandoned = true;
    events->miss_reason = run->miss_reason();
    events->miss_index = run->miss_index();
    if (events->miss_index < run->n()) {
      events->expected_size = run->view()->item_size[events->miss_index];
      events->expected_tag = run->view()->item_tag[events->miss_index];
    }
    {
      std::lock_guard<SpinLock> s(stats_mu_);
      ++misses_;
      if (first_miss_ == 0) first_miss_ = events->miss_reason;
    }
    start_learning();
    return;
  }
  if (learning() && learner_.current_count() == 0) {
    // No allocation since the last boundary: not a step (a loop may mark both ends).
  } else if (learning()) {
    LearnedStep step;
    bool same = false;
    try {
      same = learner_.end_step(&step);
    } catch (const std::bad_alloc&) {
      learner_.clear();
    }
    if (!same) {
      if (job_) {
        job_->cancelled.store(true, std::memory_order_release);
        job_.reset();
      }
      if (++misses_in_a_row_ >= kMissesBeforePause) {
        pause_steps_ = pause_length_;
        pause_length_ = std::min<uint32_t>(kMaxPause, 2 * pause_length_);
        misses_in_a_row_ = kMissesBeforePause / 2;
        stop_learning();
        // A zone nothing uses is not kept through the pause.
        if (zone_run_.load(std::memory_order_relaxed) != nullptr && !zone_live() &&
            !zone_frozen_) {  // [graphs]
          release_zone(zones);
        }
      }
    } else {
      misses_in_a_row_ = 0;
      pause_length_ = kMissesBeforePause;
      set_threads(step);
      if (pending_ && !same_items(step.items, pending_items_)) pending_.reset();
      if (zone_run_.load(std::memory_order_relaxed) != nullptr &&
          same_items(step.items, zone_items_)) {
        reuse_zone_run_ = true;  // the same step again: its run, its zone
        pending_.reset();
      } else if (!pending_ && !zone_frozen_) {  // [graphs] no new layout while frozen
        reuse_zone_run_ = false;
        plan_learned(step, zones, events);
      }
    }
  } else if (pause_steps_ > 0 && --pause_steps_ == 0 && !budget_spent_) {
    start_learning();
  }
  if (pending_ || reuse_zone_run_) try_engage(zones, events);
}

void StepPlans::split_zone_for_floor(ZoneOps& zones, uintptr_t p) noexcept {
  std::lock_guard<SpinLock> g(boundary_mu_);  // zone_ holds still
  PlanRun* const zr = zone_run_.load(std::memory_order_relaxed);
  if (zr == nullptr) return;
  size_t i = 0;
  while (i < zone_.pieces.size() &&
         zone_.base + zone_.pieces[i].offset + zone_.pieces[i].size <= p) {
    ++i;
  }
  if (i == zone_.pieces.size() || zone_.base + zone_.pieces[i].offset >= p) return;
  try {
    zone_.pieces.reserve(zone_.pieces.size() + 1);
  } catch (...) {  // host memory: the region refuses the floor
    return;
  }
  zones.under_lock([&](const RegionNow&) {
    if (zr->inside_live(p)) return;  // the floor would cut a planned block
    if (!zones.split_zone_block_w(p)) return;
    const plan::ByteRange piece = zone_.pieces[i];
    const uint64_t cut = p - zone_.base;
    zone_.pieces[i].size = cut - piece.offset;
    zone_.pieces.insert(zone_.pieces.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                        plan::ByteRange{cut, piece.offset + piece.size - cut});
  });
}

void StepPlans::on_floor_changed(ZoneOps& zones) {
  std::lock_guard<SpinLock> g(boundary_mu_);
  PlanRun* zr = zone_run_.load(std::memory_order_relaxed);
  if (zr == nullptr) return;
  bool over = false;
  zones.under_lock([&](const RegionNow& now) {
    const uintptr_t lowest = zone_.base + (zone_.pieces.empty() ? 0 : zone_.pieces[0].offset);
    const bool was_over = zone_persistent_;
    if (now.floor > lowest && !zone_persistent_) {
      zr->disengage(ZARENA_PLAN_MISS_FLOOR, 0);
      zone_persistent_ = true;
      over = true;
      if (engaged_.load(std::memory_order_relaxed) != nullptr) {
        engaged_.store(nullptr, std::memory_order_release);
        std::lock_guard<SpinLock> s(stats_mu_);
        ++misses_;
        if (first_miss_ == 0) first_miss_ = ZARENA_PLAN_MISS_FLOOR;
      }
    } else if (now.floor <= lowest && zone_persistent_) {
      zone_persistent_ = false;
    }
    // A floor over any of the zone (now or before) keeps each instance or gives it back by
    // where it lies, as a region block: only those wholly under the floor survive resets
    // (PlanRun::apply_floor; after the disengage, so no instance comes after the pass).
    if (zone_persistent_ || was_over) zr->apply_floor(now.floor, now.epoch);
  });
  if (!over) return;
  reuse_zone_run_ = false;
  zone_items_.clear();  // never taken up again: the zone's blocks outlived steps
  if (enabled_ && !budget_spent_) start_learning();
}

void StepPlans::stats(PlanStats* out) const {
  {
    std::lock_guard<SpinLock> g(stats_mu_);
    out->steps = steps_;
    out->misses = misses_;
    out->first_miss = first_miss_;
    out->learned = learned_;
    out->peak_bytes = peak_;
    out->lower_bound_bytes = lower_bound_;
    // The zone's run (the only one that can serve, hence count) under its lock with its
    // live blocks: every allocation it served is in both or in neither. The others are
    // done counting.
    PlanRun* zr = zone_run_.load(std::memory_order_acquire);
    out->hits = out->live_bytes = out->live_count = out->deferred = 0;
    out->pinned_bytes = out->pinned_count = 0;
    for (const auto& r : runs_) {
      if (r.get() != zr) out->hits += r->hits();
      out->pinned_bytes += r->pinned_bytes();
      out->pinned_count += r->pinned_count();
    }
    if (zr != nullptr) {
      PlanRun::Totals t;
      zr->totals(&t);
      out->hits += t.hits;
      out->live_bytes = t.live_bytes;
      out->live_count = t.live_count;
      out->deferred = t.deferred;
    }
    out->host_bytes = run_bytes_;
    out->host_budget = run_budget_;
  }
  out->zone_bytes = zone_bytes_.load(std::memory_order_relaxed);
}

uint64_t StepPlans::hits() const {
  std::lock_guard<SpinLock> g(stats_mu_);
  uint64_t hits = 0;
  for (const auto& r : runs_) hits += r->hits();
  return hits;
}

void StepPlans::live_instances(std::vector<PlanRun::LiveInstance>* out) const {
  if (PlanRun* zr = zone_run_.load(std::memory_order_acquire)) zr->live_instances(out);
}

void StepPlans::set_zone_frozen(bool frozen) {  // [graphs]
  std::lock_guard<SpinLock> g(boundary_mu_);
  zone_frozen_ = frozen;
}

bool StepPlans::retire(ZoneOps& zones) {  // [lanes]
  std::lock_guard<SpinLock> g(boundary_mu_);
  stop_learning();
  // Nothing starts learning again at a later boundary (a pause's end, a step too long).
  pause_steps_ = 0;
  step_too_long_.store(false, std::memory_order_relaxed);
  if (job_) {
    job_->cancelled.store(true, std::memory_order_release);
    job_.reset();
  }
  pending_.reset();
  reuse_zone_run_ = false;
  if (PlanRun* e = engaged_.load(std::memory_order_relaxed)) {
    e->disengage(ZARENA_PLAN_MISS_SHORT, e->n());
    engaged_.store(nullptr, std::memory_order_release);
  }
  if (zone_run_.load(std::memory_order_relaxed) != nullptr && !zone_live() && !zone_frozen_) {
    release_zone(zones);
  }
  return zone_run_.load(std::memory_order_relaxed) == nullptr;
}

void StepPlans::revive() {  // [lanes]
  std::lock_guard<SpinLock> g(boundary_mu_);
  misses_in_a_row_ = 0;
  pause_steps_ = 0;
  pause_length_ = kMissesBeforePause;
  step_too_long_.store(false, std::memory_order_relaxed);
  boundary_seen_.store(false, std::memory_order_relaxed);
  if (enabled_ && !budget_spent_) start_learning();
}

const zarena_plan_view* StepPlans::view() const {
  PlanRun* r = engaged_.load(std::memory_order_acquire);
  if (r == nullptr) r = zone_run_.load(std::memory_order_acquire);
  // While leftovers are pending the library serves alone: the bindings' protocol
  // (zarena_plan.h) has no claim, so a binding never gets such a run's view.
  return r != nullptr && !r->view_withheld() ? r->view() : nullptr;
}

}  // namespace zarena_core
