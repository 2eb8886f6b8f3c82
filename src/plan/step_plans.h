// An arena's step plans: the learner, the planner's output, the run being served and the
// zone it lives in (docs/PLANS.md). The arena calls the hot hooks on its allocation and
// free paths (each behind one predictable branch), and the boundary hook at every
// zarena_step_begin and reset.
//
// Life of a plan. Learning records steps while no plan is engaged. When a step repeats
// the one before (learner.h defines "the same"), the planner lays it out; the plan engages
// at a step boundary at which no instance of the zone is live: its zone is claimed then
// (the free pieces of the window it was laid out in, around the live blocks there; else
// one free block), after the old zone, if any, was given back. A deviation ends the plan
// for the rest of its step; the next steps are learned again, and an equal plan (the same
// step) is taken up again in the same zone without planning anew.
//
// Threads. A plan follows the threads that made the learned steps' allocations (at most
// LearnedStep::kMaxThreads; more and it follows every thread); other threads' allocations
// go to the dynamic engine and are no part of a step. Frees and pins of planned blocks may
// come from any thread. The boundary hook runs on the thread that calls step_begin or
// reset; it serialises with the planned path through the run's lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/spin_lock.h"
#include "base/status.h"
#include "plan/learner.h"
#include "plan/plan.h"
#include "plan/plan_run.h"
#include "plan/plan_worker.h"

namespace zarena_core {

// A plan's zone: the pieces of [base, base + the plan's peak) it holds (offsets from
// base, sorted). One piece [0, bytes) when it is one free block.
struct Zone {
  uintptr_t base = 0;
  std::vector<plan::ByteRange> pieces;
  uint64_t bytes() const {
    uint64_t b = 0;
    for (const plan::ByteRange& r : pieces) b += r.size;
    return b;
  }
};

// How the arena gives a plan its zone. Called from the boundary hook with no plan lock
// held; each takes the region's locks itself.
class ZoneOps {
 public:
  virtual ~ZoneOps() = default;
  // Where a plan laid out now should go: a window of the region and the live blocks in it
  // (the current zone's own blocks left out: it is given back before a new one is
  // claimed). false: lay it out with no obstacles.
  virtual bool zone_window(PlanWindow* where) noexcept = 0;
  // The zone of a plan laid out in `where`: the window's first `bytes` less the
  // obstacles. false: that space is not all free now (or cannot be committed).
  virtual bool claim_zone(const PlanWindow& where, uint64_t bytes, Zone* out) noexcept = 0;
  // One free block of `bytes` for a zone, as low in the region as it fits. false: no room.
  virtual bool reserve_zone(uint64_t bytes, Zone* out) noexcept = 0;
  virtual void release_zone(const Zone& zone) noexcept = 0;
};

// What the boundary hook did, for the arena's log records (built with no lock held).
struct PlanEvents {
  bool learned = false;    // a plan was laid out now
  bool engaged = false;    // a plan serves the next step
  bool abandoned = false;  // the step that just ended left its plan
  bool no_room = false;    // a learned plan found no room for its zone
  std::string failure;     // the planner refused (too large), or ran out of memory
  // learned: the plan's facts
  uint32_t items = 0, planned = 0, period = 0;
  uint64_t peak_bytes = 0, lower_bound_bytes = 0, plan_ns = 0;
  // abandoned: where and why
  uint64_t miss_reason = 0, miss_index = 0;
  uint64_t expected_size = 0, expected_tag = 0;
};

struct PlanStats {
  uint64_t steps = 0;                       // steps served whole under a plan
  uint64_t hits = 0;                        // allocations served from a plan
  uint64_t misses = 0;                      // steps a deviation ended
  uint64_t first_miss = 0;                  // ZARENA_PLAN_MISS_* of the first deviation (0: none)
  uint64_t peak_bytes = 0;                  // the engaged (or latest) plan's own bytes: its
                                            // peak less the live blocks it was laid around
  uint64_t lower_bound_bytes = 0;           // ... and its lower bound
  uint64_t learned = 0;                     // plans laid out
  uint64_t zone_bytes = 0;                  // the zone held now (0: none)
  uint64_t live_bytes = 0, live_count = 0;  // planned blocks live now
  uint64_t pinned_bytes = 0, pinned_count = 0;  // planned blocks the user pinned, now
};

class StepPlans {
 public:
  // Steps of up to this many allocations are laid out at the boundary itself.
  static constexpr uint32_t kInlineItems = 4096;

  StepPlans(bool enabled, uint64_t granule);
  ~StepPlans();
  StepPlans(const StepPlans&) = delete;
  StepPlans& operator=(const StepPlans&) = delete;

  bool enabled() const { return enabled_; }
  // Whether the learning hooks want events (the arena mirrors it in its hot-path word).
  bool learning() const { return learning_.load(std::memory_order_relaxed); }
  // Whether a plan is engaged (may serve the next allocations).
  bool engaged() const { return engaged_.load(std::memory_order_relaxed) != nullptr; }
  // Whether a zone exists (frees and pins must ask zone_run() first).
  bool has_zone() const { return zone_run_.load(std::memory_order_relaxed) != nullptr; }

  // --- hot hooks -------------------------------------------------------------------------
  PlanRun::Alloc alloc(uint64_t aligned, uint32_t tag, uint32_t thread,
                       PlanRun::Block* out) noexcept {
    PlanRun* r = engaged_.load(std::memory_order_acquire);
    if (r == nullptr || !follows(thread)) return PlanRun::Alloc::kLibrary;
    return r->alloc(aligned, tag, out);
  }
  // The run whose zone holds p, or null.
  PlanRun* zone_of(uintptr_t p) const noexcept {
    PlanRun* r = zone_run_.load(std::memory_order_acquire);
    return r != nullptr && r->in_zone(p) ? r : nullptr;
  }
  void learn_alloc(uintptr_t ptr, uint64_t aligned, uint32_t tag, uint32_t thread) noexcept;
  void learn_free(uintptr_t ptr) noexcept;
  void learn_pin(uintptr_t ptr) noexcept;
  // A reset reclaimed every learned block not in `survivors` (sorted block starts still
  // live after it): those are freed at the reset (learner.h). Call while learning().
  void learn_reset(const std::vector<uintptr_t>& survivors) noexcept;

  // --- whole-arena hooks -----------------------------------------------------------------
  // A reset began `epoch`: called under the arena's whole-arena lock, so that no planned
  // block is handed out in the new epoch with the old one's stamp.
  void on_reset_locked(uint64_t epoch);
  // A step ended (zarena_step_begin, or a reset). May reserve or release the zone through
  // `zones`. One thread at a time (the hook serialises callers).
  void on_boundary(ZoneOps& zones, PlanEvents* events);
  // The floor was raised over the zone: its live blocks survive resets from now on, and
  // the plan ends (ZARENA_PLAN_MISS_FLOOR).
  void on_floor_over_zone();
  void stats(PlanStats* out) const;
  void live_instances(std::vector<PlanRun::LiveInstance>* out) const;
  // The view bindings read (null: none).
  const zarena_plan_view* view() const;
  // [graphs] While a captured graph may replay in the zone (graph_steps.h), the zone is
  // never given back and no other layout is engaged: only the zone's own run is taken up
  // again (the same step learned again after a deviation).
  void set_zone_frozen(bool frozen);

 private:
  bool follows(uint32_t thread) const noexcept {
    if (any_thread_.load(std::memory_order_relaxed)) return true;
    const uint32_t n = thread_count_.load(std::memory_order_relaxed);
    for (uint32_t t = 0; t < n; ++t) {
      if (threads_[t].load(std::memory_order_relaxed) == thread) return true;
    }
    return false;
  }
  void set_threads(const LearnedStep& s);
  void start_learning();
  void stop_learning();
  // A learned step repeated: lay it out (inline when small, else on the plan thread; a
  // job in flight is picked up at a later boundary if the step still repeats).
  void plan_learned(LearnedStep& step, ZoneOps& zones, PlanEvents* events);
  void take_layout(std::unique_ptr<PlanLayout> layout, std::vector<LearnedItem> items,
                   uint64_t plan_ns, PlanEvents* events);
  // Engages the pending plan once no planned block of the zone is live; may reserve a
  // zone, or reuse the one there is.
  void try_engage(ZoneOps& zones, PlanEvents* events);
  // The pending layout again, around the window's live blocks now (kept as it was when
  // that fails).
  void relay_out(ZoneOps& zones, PlanEvents* events);
  void add_run(std::unique_ptr<PlanRun> run);
  void release_zone(ZoneOps& zones);

  const bool enabled_;
  const uint64_t granule_;
  StepLearner learner_;
  std::atomic<bool> learning_{false};
  // Backoff: steps that did not repeat in a row; learning pauses for a while after many.
  uint32_t misses_in_a_row_ = 0;
  uint32_t pause_steps_ = 0;

  SpinLock boundary_mu_;  // one boundary at a time; guards the fields up to the stats
  std::atomic<PlanRun*> engaged_{nullptr};   // the run serving this step, if any
  std::atomic<PlanRun*> zone_run_{nullptr};  // the run whose instances live in the zone
  std::vector<LearnedItem> zone_items_;      // what zone_run_ was laid out from
  // Learned and waiting for the zone to be clear: a layout, or (reuse_zone_run_) the
  // zone's own run again (the same step was learned again after a deviation).
  std::unique_ptr<PlanLayout> pending_;
  std::vector<LearnedItem> pending_items_;
  std::shared_ptr<PlanJob> job_;  // a large step being laid out on the plan thread
  bool reuse_zone_run_ = false;
  bool zone_frozen_ = false;             // [graphs] set_zone_frozen
  Zone zone_;                            // the zone held (no pieces: none)
  std::atomic<uint64_t> zone_bytes_{0};  // its bytes
  uint64_t epoch_ = 0;

  std::atomic<uint32_t> threads_[LearnedStep::kMaxThreads] = {};
  std::atomic<uint32_t> thread_count_{0};
  std::atomic<bool> any_thread_{false};

  mutable SpinLock stats_mu_;                   // runs_ and the counters below
  std::vector<std::unique_ptr<PlanRun>> runs_;  // every run made: views outlive their use
  uint64_t steps_ = 0, misses_ = 0, first_miss_ = 0, learned_ = 0;
  uint64_t peak_ = 0, lower_bound_ = 0;
};

}  // namespace zarena_core
