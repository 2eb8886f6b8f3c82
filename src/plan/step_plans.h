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

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "base/function_ref.h"
#include "base/outcomes.h"
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
  // The dead blocks' starts the zone covers and what a free of each meant before its claim
  // (the region's history there, which the zone's blocks hide now), sorted by address: a
  // pointer to a block reclaimed there is STALE, not foreign. Empty: nothing known.
  struct Buried {
    uintptr_t p = 0;
    uint64_t claimed = 0;  // the epoch of the claim that covered it
    FreeOutcome what = FreeOutcome::kNotOwned;
  };
  std::vector<Buried> buried;
  // buried's answer for p (kNotOwned: none). A block freed before the claim stays a double
  // free in the claim's epoch only: a reset since reclaimed what the zone holds there.
  FreeOutcome buried_at(uintptr_t p, uint64_t epoch) const {
    const auto it = std::lower_bound(buried.begin(), buried.end(), p,
                                     [](const Buried& b, uintptr_t v) { return b.p < v; });
    if (it == buried.end() || it->p != p) return FreeOutcome::kNotOwned;
    if (it->what == FreeOutcome::kDoubleFree && epoch != it->claimed) return FreeOutcome::kStale;
    return it->what;
  }
  // Adds the history of a later claim (a leftover's bytes, one range: `more` is sorted and
  // lies between two of the zone's pieces so far, so it goes in whole at one place). Host
  // memory short: that history is dropped (a free there then answers NOT_OWNED rather than
  // STALE), never the claim.
  void bury(const std::vector<Buried>& more) noexcept {
    if (more.empty()) return;
    try {
      const auto at = std::lower_bound(buried.begin(), buried.end(), more.front().p,
                                       [](const Buried& x, uintptr_t v) { return x.p < v; });
      buried.insert(at, more.begin(), more.end());
    } catch (...) {
    }
  }
  uint64_t bytes() const {
    uint64_t b = 0;
    for (const plan::ByteRange& r : pieces) b += r.size;
    return b;
  }
};

// The region as a zone change sees it: inside the region's writer lock, where no reset,
// floor change, pin or unpin runs meanwhile.
struct RegionNow {
  uint64_t epoch = 0;
  uintptr_t floor = 0;  // the floor's address (blocks below it survive resets)
};
using UnderLock = FunctionRef<void(const RegionNow&)>;

// How the arena gives a plan its zone. Called from the boundary hook with no plan lock
// held; each takes the region's locks itself. The zone's pieces are region blocks the
// region refuses to the user (its owner byte says "zone": every user free, pin or unpin of
// one comes back to the arena, which asks the plan), so a piece claimed and not yet
// published, or unpublished and not yet given back, is never taken for a user's block.
// Publishing (the run the arena routes zone pointers to, its epoch) happens under the
// writer lock, in the section that claimed the zone: a reset sees the run or does not, and
// a run engages with the epoch the region has.
class ZoneOps {
 public:
  virtual ~ZoneOps() = default;
  // Where a plan laid out now should go: a window of the region and the live blocks in it
  // (the pieces of `own`, the current zone, left out: it is given back before a new one is
  // claimed). false: lay it out with no obstacles.
  virtual bool zone_window(const Zone& own, PlanWindow* where) noexcept = 0;
  // The zone of a plan laid out in `where`: the window's first `bytes` less the
  // obstacles; publish runs in the writer-lock section that claimed it. false: that space
  // is not all free now (or cannot be committed); publish did not run.
  virtual bool claim_zone(const PlanWindow& where, uint64_t bytes, Zone* out,
                          UnderLock publish) noexcept = 0;
  // One free block of `bytes` for a zone, as low in the region as it fits; publish runs
  // under the writer lock once it is the zone's. false: no room (publish did not run).
  virtual bool reserve_zone(uint64_t bytes, Zone* out, UnderLock publish) noexcept = 0;
  // Under the writer lock runs unpublish, then gives the pieces back.
  virtual void release_zone(const Zone& zone, UnderLock unpublish) noexcept = 0;
  // Runs fn under the writer lock.
  virtual void under_lock(UnderLock fn) noexcept = 0;
  // Under the writer lock (in under_lock's fn): splits the zone's region block that holds
  // p strictly inside it at p. false: none does, or no host memory (nothing changed).
  virtual bool split_zone_block_w(uintptr_t p) noexcept = 0;
};

// What the boundary hook did, for the arena's log records (built with no lock held).
struct PlanEvents {
  bool learned = false;                      // a plan was laid out now
  bool engaged = false;                      // a plan serves the next step
  bool zone_claimed = false;                 // ... from a zone claimed now (a new layout)
  bool abandoned = false;                    // the step that just ended left its plan
  bool no_room = false;                      // a learned plan found no room for its zone
  bool budget = false;                       // the plans kept hold their budget: learning stopped
  uint64_t host_bytes = 0, host_budget = 0;  // budget: what they hold, and the budget
  std::string failure;  // the planner refused (too large), or ran out of memory
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
  uint64_t deferred = 0;     // planned blocks freed while pinned, live until their last unpin
  uint64_t host_bytes = 0;   // host memory the plans kept hold
  uint64_t host_budget = 0;  // ... at most
};

class StepPlans {
 public:
  // Steps of up to this many allocations are laid out at the boundary itself.
  static constexpr uint32_t kInlineItems = 4096;
  // Host memory the plans an arena made may hold (zarena_plan.h: a plan's memory stays
  // valid until destroy, for bindings that read it without a call; a thread of the
  // library's own may still be inside a replaced run). Once a new plan would go beyond
  // it, learning stops (arena.plan_failed, reason "budget"); the plans made keep serving.
  static constexpr uint64_t kRunBudgetBytes = uint64_t{64} << 20;
  // The most allocations one step may have to be learned: a longer step is not recorded
  // past it (the learner's memory stays bounded in a program that marks no steps; the
  // planner's largest steps are of this order). Until an arena's first boundary, a step
  // is given up much sooner: a program that marks no steps pays for learning only once.
  static constexpr uint64_t kMaxStepItems = uint64_t{1} << 20;
  static constexpr uint64_t kMaxFirstStepItems = uint64_t{1} << 16;

  // run_budget_bytes: kRunBudgetBytes but in tests.
  StepPlans(bool enabled, uint64_t granule, uint64_t run_budget_bytes = kRunBudgetBytes);
  ~StepPlans();
  StepPlans(const StepPlans&) = delete;
  StepPlans& operator=(const StepPlans&) = delete;

  bool enabled() const { return enabled_; }
  // Whether the learning hooks want events.
  bool learning() const { return learning_.load(std::memory_order_relaxed); }
  // Whether a plan is engaged (may serve the next allocations).
  bool engaged() const { return engaged_.load(std::memory_order_relaxed) != nullptr; }
  // Whether a zone exists (frees and pins must ask zone_run() first).
  bool has_zone() const { return zone_run_.load(std::memory_order_relaxed) != nullptr; }

  // --- hot hooks -------------------------------------------------------------------------
  PlanRun::Alloc alloc(uint64_t aligned, uint32_t tag, uint32_t thread,
                       PlanRun::Block* out) noexcept {
    PlanRun* r = engaged_.load(std::memory_order_acquire);
    if (r == nullptr) return PlanRun::Alloc::kLibrary;
    // While the view is withheld (leftovers: view()) the library serves the bindings'
    // requests too, and a Go goroutine may move to a thread the plan does not follow: a
    // request that is the plan's next one (size and tag) is the plan's then, whatever
    // thread makes it.
    if (!follows(thread) && !(r->view_withheld() && r->expects(aligned, tag))) {
      return PlanRun::Alloc::kLibrary;
    }
    return r->alloc(aligned, tag, out);
  }
  // The run whose zone holds p, or null.
  PlanRun* zone_of(uintptr_t p) const noexcept {
    PlanRun* r = zone_run_.load(std::memory_order_acquire);
    return r != nullptr && r->in_zone(p) ? r : nullptr;
  }
  // The run whose zone held p when it was given back last (every instance dead then), or
  // null: what a free of such a pointer means (history) once the region holds its space.
  PlanRun* retired() const noexcept { return retired_.load(std::memory_order_acquire); }
  void learn_alloc(uintptr_t ptr, uint64_t aligned, uint32_t tag, uint32_t thread,
                   uint64_t epoch) noexcept;
  void learn_free(uintptr_t ptr) noexcept;
  // The engaged run's instance at [p, p + size) overlaps leftovers its zone has not claimed
  // (PlanRun::Alloc::kClaim): claims each for the zone (through zones.claim_zone, which
  // refuses bytes that are live: the leftover not freed yet, or the dynamic engine took
  // them), or ends the plan for the step (ZARENA_PLAN_MISS_LATE) when one cannot be.
  // Called on the allocation path with no lock held; the caller asks the plan again.
  void claim_leftovers(ZoneOps& zones, uintptr_t p, uint64_t size) noexcept;
  void learn_pin(uintptr_t ptr) noexcept;
  // A reset reclaimed every learned block of its epoch that it did not keep: those are
  // freed at the reset (learner.h). Call while learning(), outside the reset's lock.
  void learn_reset(const StepLearner::ResetSurvivors& kept) noexcept;

  // --- whole-arena hooks -----------------------------------------------------------------
  // A reset began `epoch`: called under the arena's whole-arena lock and an EpochGate, so
  // that no planned block is handed out in the new epoch with the old one's stamp.
  void on_reset_locked(uint64_t epoch);
  // Under the writer lock, for a reset: holds the plan lock of every run that can serve
  // (engaged, zone, retired) from before the region's epoch moves until the runs follow
  // and what the reset reclaimed is poisoned. Without it a planned allocation between the
  // two moves would carry the ended epoch after zarena_epoch() answered the new one (a
  // block dead at birth), or be handed bytes the poison then fills.
  class EpochGate {
   public:
    explicit EpochGate(const StepPlans& plans) noexcept;
    ~EpochGate();
    EpochGate(const EpochGate&) = delete;
    EpochGate& operator=(const EpochGate&) = delete;

   private:
    PlanRun* held_[3] = {};
    int count_ = 0;
  };
  // The EpochGates of up to N StepPlans (a reset's: the arena's and every lane's), taken
  // in the order hold is called and let go in the reverse order. Only the gates held are
  // made: a reset makes no storage ready for the lanes an arena does not have.
  template <int N>
  class EpochGates {
   public:
    EpochGates() noexcept {}
    ~EpochGates() {
      for (int i = count_; i-- > 0;) gates_[i].~EpochGate();
    }
    EpochGates(const EpochGates&) = delete;
    EpochGates& operator=(const EpochGates&) = delete;
    void hold(const StepPlans& plans) noexcept { new (&gates_[count_++]) EpochGate(plans); }

   private:
    union {
      EpochGate gates_[N];
    };
    int count_ = 0;
  };
  // A step ended (zarena_step_begin, or a reset). May reserve or release the zone through
  // `zones`. One thread at a time (the hook serialises callers).
  void on_boundary(ZoneOps& zones, PlanEvents* events);
  // The floor moved. Raised over the zone: its live blocks survive resets from now on, and
  // the plan ends (ZARENA_PLAN_MISS_FLOOR). Lowered below it again: they belong to the
  // current epoch again (the next reset reclaims them), as region blocks do.
  void on_floor_changed(ZoneOps& zones);
  // A floor about to be set at p (zarena_set_floor): where p lies inside one of the zone's
  // pieces and no live planned block holds it strictly inside, splits that piece (and its
  // region block) at p, so that the floor lies on a block boundary, as it does at a region
  // block's start. Else (or with no host memory) nothing changes, and the region refuses a
  // floor inside a piece.
  void split_zone_for_floor(ZoneOps& zones, uintptr_t p) noexcept;
  // Under the writer lock: stats, and the zone as it is (the arena's walks and snapshots).
  void stats(PlanStats* out) const;
  // stats' hits alone: every run's count, without the zone run's scan of its words.
  uint64_t hits() const;
  const Zone& zone_w() const { return zone_; }
  // Under the writer lock, after on_reset_locked: fn(ptr, size) for every planned block the
  // reset that ended `ended` reclaimed (PlanRun::for_each_reclaimed).
  template <typename Fn>
  void for_each_reclaimed(uint64_t ended, Fn&& fn) const {
    if (PlanRun* r = zone_run_.load(std::memory_order_relaxed)) r->for_each_reclaimed(ended, fn);
  }
  void live_instances(std::vector<PlanRun::LiveInstance>* out) const;
  // The view bindings read (null: none).
  const zarena_plan_view* view() const;
  // [graphs] While a captured graph may replay in the zone (graph_steps.h), the zone is
  // never given back and no other layout is engaged: only the zone's own run is taken up
  // again (the same step learned again after a deviation).
  void set_zone_frozen(bool frozen);
  // [lanes] The lane these plans belong to was destroyed (engine/lanes.h): nothing is
  // learned, no plan serves, and the zone goes back once none of its blocks is live (the
  // arena calls it again at each reset until then). true: no zone is held now.
  bool retire(ZoneOps& zones);
  // [lanes] A new lane takes these plans up: learning starts over (the runs made stay).
  void revive();

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
  // A new run for the pending layout: built, counted against the budget. Null: no room in
  // the budget (events->budget), or no host memory (events->failure).
  std::unique_ptr<PlanRun> make_run(PlanEvents* events);
  // Under the writer lock (a zone claim's publish): r serves from zone z from now on.
  void publish_locked(PlanRun* r, Zone z, const RegionNow& now);
  void release_zone(ZoneOps& zones);
  bool zone_live() const;

  const bool enabled_;
  const uint64_t granule_;
  const uint64_t run_budget_;
  StepLearner learner_;
  std::atomic<bool> learning_{false};
  bool budget_spent_ = false;  // learning stopped for good (kRunBudgetBytes)
  // The step being recorded passed the most items a step may have (kMaxStepItems): the
  // learner waits for the next boundary. boundary_seen_: a boundary came since create.
  std::atomic<bool> step_too_long_{false};
  std::atomic<bool> boundary_seen_{false};
  // Backoff: steps that did not repeat in a row; learning pauses for a while after many.
  uint32_t misses_in_a_row_ = 0;
  uint32_t pause_steps_ = 0;
  uint32_t pause_length_ = 16;  // the next pause's; doubles at each (it was 16 every time)

  SpinLock boundary_mu_;  // one boundary at a time; guards the fields up to the stats
  // The zone and the runs the arena routes to: changed only under the region's writer lock
  // (ZoneOps' publish and unpublish), read there or through the atomics.
  std::atomic<PlanRun*> engaged_{nullptr};        // the run serving this step, if any
  std::atomic<PlanRun*> zone_run_{nullptr};       // the run whose instances live in the zone
  std::atomic<PlanRun*> retired_{nullptr};        // the zone's run before its zone went back
  Zone zone_;                                     // the zone held (no pieces: none)
  bool zone_persistent_ = false;                  // the floor lies over it
  std::atomic<uint64_t> zone_bytes_{0};           // its bytes
  std::vector<LearnedItem> zone_items_;           // what zone_run_ was laid out from
  uint64_t zone_window_ = PlanLayout::kAnywhere;  // the zone's region offset when claimed there
  std::vector<LearnedLeftover> leftovers_;        // the learned step's, for a layout again
  // Learned and waiting for the zone to be clear: a layout, or (reuse_zone_run_) the
  // zone's own run again (the same step was learned again after a deviation).
  std::unique_ptr<PlanLayout> pending_;
  std::vector<LearnedItem> pending_items_;
  std::shared_ptr<PlanJob> job_;  // a large step being laid out on the plan thread
  bool reuse_zone_run_ = false;
  bool zone_frozen_ = false;  // [graphs] set_zone_frozen

  std::atomic<uint32_t> threads_[LearnedStep::kMaxThreads] = {};
  std::atomic<uint32_t> thread_count_{0};
  std::atomic<bool> any_thread_{false};

  mutable SpinLock stats_mu_;                   // runs_ and the counters below
  std::vector<std::unique_ptr<PlanRun>> runs_;  // every run published: views outlive their use
  uint64_t run_bytes_ = 0;                      // their host memory
  uint64_t steps_ = 0, misses_ = 0, first_miss_ = 0, learned_ = 0;
  uint64_t peak_ = 0, lower_bound_ = 0;
};

}  // namespace zarena_core
