// The arena: a Region over memory reserved from a Backend, an OverflowPool behind it, the
// expandable commits, poison, capture state, tracing, and the diagnosis it feeds. Each
// part owns its data; the arena holds what belongs to none of them and calls them in
// order. The region's slots make allocation and free concurrent (region.h,
// docs/CONCURRENCY.md); whole-arena operations take every lock at once
// (Region::WriterLock). Log records are built and emitted with no lock held.
// docs/ARCHITECTURE.md has the routes of an allocation, a failed one and a reset.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_faults.h"
#include "base/checks.h"
#include "base/spin_lock.h"
#include "base/status.h"
#include "config/config.h"
#include "diagnosis/arena_diagnosis.h"
#include "diagnosis/diagnostics.h"
#include "engine/expandable.h"
#include "engine/lanes.h"
#include "engine/poison.h"
#include "engine/queued_warnings.h"
#include "engine/snapshot.h"
#include "log/log.h"
#include "overflow/overflow.h"
#include "plan/graph_steps.h"
#include "plan/step_plans.h"
#include "region/region.h"
#include "trace/trace.h"
#include "zarena/zarena.h"
#include "zarena/zarena_lane.h"

namespace zarena_core {

// zarena_kept_report's counts (zarena/zarena_kept.h).
struct KeptCounts {
  uint64_t allocs = 0, max_request = 0, invalid_frees = 0, stale_frees = 0;
};

// Names: a method whose name ends in _w ("writer") runs with the region's writer lock held
// (Region::WriterLock: every slot lock plus the central lock), as Region's _w methods do.
class Arena final : private RegionHooks, private ZoneOps {
 public:
  // Resolves the backend (AUTO), reserves the region, logs "arena.config".
  static Result create(const ResolvedConfig& rc, std::unique_ptr<Arena>* out);
  ~Arena() override;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // size 0: OK, out->ptr NULL. out is written on success only.
  // Hot paths: the status; on failure the detail is in last_error_text() (last_error.h).
  Status alloc(uint64_t size, uint32_t tag, zarena_block* out) noexcept;
  // alloc without asking the plan: a binding's planned path already looked at this request
  // (zarena_plan_alloc_unplanned).
  Status alloc_unplanned(uint64_t size, uint32_t tag, zarena_block* out) noexcept;
  // want_epoch: kAnyEpoch, or the epoch the block must have been handed out in.
  Status free(void* ptr, uint64_t want_epoch) noexcept;
  Result pin(void* ptr);
  Result unpin(void* ptr);
  // kOk, or kBackend after a device reset (device_lost): the arena was rewound all the
  // same, and nothing of its memory was touched.
  Result reset();
  // [graphs] refused (kCaptureUnsafe) while a graph holds the plan's zone (graph_steps.h).
  Result mark_step_boundary();
  Result set_floor(uint64_t offset);
  uint64_t epoch() const { return region_.epoch(); }
  // Fills the full current stats layout from one consistent snapshot.
  void stats(zarena_stats* out);
  // Restarts the epoch-independent peaks (high water, used and overflow peaks) from now.
  void reset_peak_stats();
  // zarena_trim: an expandable arena gives back what is committed above max(keep, top).
  Result trim(uint64_t keep);
  void region_info(zarena_region* out);
  bool contains(const void* p) const {
    return static_cast<const char*>(p) >= base_ && static_cast<const char*>(p) < base_ + capacity_;
  }
  void set_capture_active(bool active);
  // The engine marks the start of a step: from the second one on, "no reset came between
  // two steps" is a fact the diagnosis uses.
  void step_begin();
  // The diagnosis now (zarena_diagnose).
  void diagnose_now(CurrentDiagnosis* out);
  Result set_stream(void* stream);
  void set_poison(bool enabled, uint32_t word);
  // The overflow route at run time (arena_overflow.cpp; zarena.h "The overflow route at run
  // time"): policy is any ZARENA_OVERFLOW_* (DEFAULT resolved now); alloc null removes the
  // program's allocator.
  Result set_overflow_policy(int32_t policy);
  int32_t overflow_policy() const { return overflow_.policy(); }
  Result set_overflow_allocator(const CustomAllocator* alloc);
  // Live blocks (region and overflow) from one snapshot, in address order for the region;
  // *epoch (may be null): the epoch at that instant.
  void live_blocks(std::vector<LiveBlock>* out, uint64_t* epoch = nullptr);
  // A binding's report of the blocks it keeps (zarena/zarena_kept.h, arena_kept.cpp):
  // kUnsupported with a trace; an empty report (the question) also while step plans follow
  // every request (learning, or a plan engaged).
  Status report_kept(const KeptCounts& k) noexcept;
  // The step plan bindings read (zarena/zarena_plan.h), or null.
  // None while traced: the library serves the planned requests itself, so that the trace
  // records them (a binding serving from the view would bypass it).
  const zarena_plan_view* plan_view() const { return trace_ != nullptr ? nullptr : plans_.view(); }

  // Lanes (zarena/zarena_lane.h; engine/lanes.h, arena_lanes.cpp). lane_enter: the live lane
  // of handle h, of this arena, marked busy until lane_leave; null (last error set, nothing
  // changed) for a NULL, destroyed or foreign handle or a lane another caller is in.
  Status lane_create(zarena_lane** out) noexcept;
  Status lane_destroy(zarena_lane* h) noexcept;
  Lane* lane_enter(zarena_lane* h, const char* fn) noexcept;
  void lane_leave(Lane& l) noexcept { l.busy.store(0, std::memory_order_release); }
  Status lane_alloc(Lane& l, uint64_t size, uint32_t tag, zarena_block* out) noexcept;
  Status lane_alloc_unplanned(Lane& l, uint64_t size, uint32_t tag, zarena_block* out) noexcept;
  Status lane_free(Lane& l, void* ptr, uint64_t want_epoch) noexcept;
  // [lanes] The owner's planned pair (engine/lane_owner.h, inlined into capi/lane_api.cpp;
  // zarena_lane.h "THREADS"): a request the lane's engaged plan serves, or a free of a block
  // of the lane's zone, with no busy word and no layer between: the plan's lock (alloc) or
  // the block's word (free) decides every race, as for any thread. kNotAsked / false:
  // nothing was done, the full path takes the call (the lane busy, a fast-path flag or
  // poison on, the plan not engaged, not the lane's zone). kAsked: the plan was asked and
  // did not serve: the call goes on as lane_alloc does after its plan (the dynamic engine,
  // lane_alloc_unplanned). A free the plan refuses is answered here (*st).
  enum class OwnedAlloc : uint8_t { kServed, kNotAsked, kAsked };
  OwnedAlloc lane_alloc_owned(Lane& l, uint64_t size, uint32_t tag, zarena_block* out) noexcept;
  bool lane_free_owned(Lane& l, void* ptr, uint64_t want_epoch, Status* st) noexcept;
  void lane_step_begin(Lane& l);
  void lane_stats(Lane& l, zarena_lane_stats* out);
  const zarena_plan_view* lane_plan_view(const Lane& l) const {
    return trace_ != nullptr ? nullptr : l.plans.view();
  }

  // Graph-stable steps (zarena/zarena_graph.h; engine/arena_graphs.cpp, plan/graph_steps.h).
  struct GraphInfo {
    GraphCounts counts;
    uint32_t period = 0, phase = 0;  // the plan's (0, 0: none)
    bool ready = false;              // graph_capture_begin would be accepted now
    uint64_t zone_bytes = 0;
  };
  Result graph_capture_begin();
  Result graph_capture_end(bool keep, uint32_t* id);
  Result graph_replay(uint32_t id);
  Result graph_release(uint32_t id);
  // The arena's stream waits for `stream`'s work so far, then ptr is freed (as free()).
  Status graph_free_after(void* ptr, void* stream) noexcept;
  void graph_info(GraphInfo* out);
  // Releases region and overflow blocks and logs "arena.destroy"; during a capture, hands
  // them to deferred_release.h instead (no CUDA call).
  Result destroy();
  // OK (no trace, or nothing lost so far), or the trace's first failure.
  Result trace_status() const;

  int32_t backend_kind() const { return backend_->kind(); }
  Backend& backend() { return *backend_; }
  // The fault injector wrapping a host backend (nullptr for CUDA).
  FaultInjectingBackend* fault_injector();
  const std::string& name() const { return source_.name; }
  uint64_t id() const { return source_.id; }
  const void* region_base() const { return base_; }
  // For tests: the region's layout invariants ("" when sound).
  std::string check_invariants();

 private:
  Arena(const ResolvedConfig& rc, std::unique_ptr<Backend> backend, const RegionInfo& region,
        int32_t policy);
  // A request the region served: counters, trace, the caller's block, the diagnosis's
  // filter; leaves the slot. Inlined into alloc (the common path) and alloc_missed.
  // lane: the lane that asked (its plans learn the request), null for the calling thread.
  Status served(Slot& s, const Placement& p, uint64_t size, uint64_t aligned, uint32_t tag,
                zarena_block* out, Lane* lane) noexcept;
  // The dynamic engine's allocation (the region, then alloc_missed). Inlined into alloc.
  Status alloc_dynamic(uint64_t size, uint64_t aligned, uint32_t tag, zarena_block* out,
                       Lane* lane) noexcept;
  // The region did not serve it: commit and try again (expandable), else overflow.
  Status alloc_missed(Slot& s, Placement p, uint64_t size, uint64_t aligned, uint32_t tag,
                      zarena_block* out, Lane* lane) noexcept;
  // commit_failure: why an expandable region could not commit memory for this request
  // ("" when it did not try or did not fail).
  Status overflow_alloc(uint64_t size, uint64_t aligned, uint32_t tag,
                        const std::string& commit_failure, zarena_block* out, Lane* lane);
  // size 0 (nothing to allocate) and sizes no arena can describe (over 2^62).
  Status alloc_zero_or_oversized(uint64_t size, uint32_t tag, zarena_block* out) noexcept;
  Status free_slow(void* ptr, uint64_t want_epoch);  // overflow blocks and failures
  // A region or planned free the store refused: counted in the caller's slot s (entered;
  // left here), answered with its status and message.
  Status free_refused(Slot& s, FreeOutcome o, void* ptr, uint64_t want_epoch) noexcept;
  Status free_error(FreeOutcome o, void* ptr, bool in_region, uint64_t epoch) noexcept;
  Status free_error_text(FreeOutcome o, void* ptr, bool in_region, uint64_t epoch);

  // Lanes' part in the paths (arena_lanes.cpp). Every StepPlans of the arena: its own, then
  // each lane's made so far (lanes are kept until destroy, so no lock is needed to visit).
  template <typename Fn>
  void for_each_plans(Fn&& fn) {
    fn(plans_);
    const uint32_t n = lanes_made_.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < n; ++i) fn(lanes_[i]->plans);
  }
  // The run whose zone holds p (the arena's plan, or a lane's), or null.
  PlanRun* zone_run_of(uintptr_t p) const noexcept {
    if (PlanRun* r = plans_.zone_of(p)) return r;
    if (ZARENA_LIKELY(lanes_made_.load(std::memory_order_acquire) == 0)) return nullptr;
    return lane_zone_run_of(p);
  }
  PlanRun* lane_zone_run_of(uintptr_t p) const noexcept;
  // The plans whose zone holds p (the arena's when none).
  const StepPlans& plans_of_zone(uintptr_t p) const noexcept;
  // Whether a free of a region pointer must look for a zone first.
  bool any_zone() const noexcept {
    return plans_.has_zone() || lanes_made_.load(std::memory_order_relaxed) != 0;
  }
  // Whether some plans learn (the free and pin hooks), and the hooks for all of them.
  bool any_learning() const noexcept {
    return plans_.learning() || lanes_made_.load(std::memory_order_relaxed) != 0;
  }
  void learn_free_all(uintptr_t p) noexcept;
  void learn_pin_all(uintptr_t p) noexcept;
  // A reset's boundary for every lane (and a destroyed lane's zone given back once clear).
  void lanes_boundary();
  // Under the writer lock: every lane's plan stats and zone added to a snapshot's.
  void add_lane_plans_w(ArenaSnapshot* out);
  // Step plans (docs/PLANS.md; plan/step_plans.h). A request the engaged plan serves
  // (true), else the dynamic engine takes it.
  bool alloc_planned(uint64_t aligned, uint32_t tag, zarena_block* out) noexcept;
  // alloc with a plan engaged: the plan, else alloc_unplanned (out of line, arena_plans.cpp).
  Status alloc_under_plan(uint64_t size, uint64_t aligned, uint32_t tag,
                          zarena_block* out) noexcept;
  // free of a region pointer: the region's path (inlined into free and free_with_zone).
  Status free_region(void* ptr, uint64_t want_epoch, Lane* lane) noexcept;
  // free of a region pointer while a plan zone exists (out of line): the plan's blocks to
  // the plan, the others to the region.
  Status free_with_zone(void* ptr, uint64_t want_epoch, Lane* lane) noexcept;
  Status free_planned(PlanRun& run, void* ptr, uint64_t want_epoch) noexcept;
  // A planned free the run refused (o): counted and reported as the region's refusals are.
  Status free_planned_refused(void* ptr, FreeOutcome o, uint64_t key, uint64_t want_epoch) noexcept;
  // The trace of the planned paths (plan_trace.cpp): a key of its own when tracing (0 when
  // not), taken before a planned free or unpin, and the records.
  uint64_t trace_key() noexcept {
    return ZARENA_UNLIKELY(fast_path_flags_.load(std::memory_order_relaxed) & kTracing)
               ? trace_->take_key()
               : 0;
  }
  void trace_planned_alloc(uint64_t size, uint64_t aligned, uint32_t tag,
                           const zarena_block& b) noexcept;
  void trace_planned_free(uint64_t key, void* ptr, Status st, uint64_t freed,
                          uint64_t want_epoch) noexcept;
  void trace_planned_pin(bool pin, uint64_t key, void* ptr, const Result& r) noexcept;
  void poison_planned(PlanRun& run, void* ptr, bool last_unpin, uint64_t want_epoch) noexcept;
  // The one seam of "who answers for this pointer" on the error paths. A store refused a
  // free of ptr with o (from: the one the pointer was routed to); what the others know of
  // the address decides the answer (arena_plans.cpp): a pointer inside a live block (region
  // or planned) is an interior pointer (NOT_OWNED); an address the plan's zone covers may
  // name a region block reclaimed before the zone was claimed, and one the region holds
  // again may name a planned block of a zone given back (STALE, or DOUBLE_FREE for one
  // freed in this epoch). The caller holds slot s.
  enum class From : uint8_t { kRegion, kPlan };
  FreeOutcome refine_refusal(Slot& s, From from, const void* ptr, FreeOutcome o,
                             uint64_t want_epoch) noexcept;
  // A pin or unpin of a region address (pin: true), under slot s (held): the region's
  // block, or the plan's zone (F1: a planned pin never races a reset's re-stamp).
  // *planned: the plan answered (its block, or its history).
  PinOutcome pin_region(Slot& s, void* ptr, bool pin, uint64_t* start_offset, uint64_t* freed,
                        bool* planned) noexcept;
  // [graphs] An allocation the plan did not serve during a graph capture: refused.
  Status graph_refuse(uint64_t size, uint32_t tag) noexcept;
  // [graphs] Under the writer lock: a floor moved to new_floor would cover the zone a
  // graph holds (refused, kCaptureUnsafe), else ok.
  Result graph_floor_check_w(uint64_t new_floor);
  // A step ended (zarena_step_begin, a reset): the plans' boundary and the records of what
  // happened (no lock held).
  void plan_boundary();
  // Expandable: a plan engaged at this boundary in a zone claimed now, so the next steps
  // need the zone and the live blocks, not the learning steps' high water: what is
  // committed above max(trim_keep_bytes, the top) goes back, as a reset's trim (no region
  // lock held, never during a capture or after a device reset; trim_keep_bytes 0
  // included). Not when a deviation's plan is taken up again in its zone: a program that
  // deviates now and then would commit and decommit at each deviation.
  void trim_after_engage();
  // Under the writer lock, during a reset while the plans learn: what the reset kept, in
  // O(pins + borrowed blocks), for the learner (learn_reset, after the lock).
  void reset_survivors_w(StepLearner::ResetSurvivors* out);
  // Under the writer lock, during a reset with poison on: the planned blocks it reclaimed.
  void poison_reclaimed_planned_w(const StepPlans& plans, uint64_t ended_epoch) noexcept;
  void log_plan_events(const PlanEvents& e);
  // ZoneOps: the zone's pieces are region blocks the region refuses to the user (no lock
  // held by the caller).
  bool zone_window(const Zone& own, PlanWindow* where) noexcept override;
  bool claim_zone(const PlanWindow& where, uint64_t bytes, Zone* out,
                  UnderLock publish) noexcept override;
  bool reserve_zone(uint64_t bytes, Zone* out, UnderLock publish) noexcept override;
  // Claims for a zone the ranges `place` names under the writer lock (false: none), with
  // the region's history they cover; commits memory for them with no lock held and asks
  // `place` again as often as needed. out->base and out->pieces are place's to set.
  bool claim_ranges(FunctionRef<bool(std::vector<OffsetRange>*)> place, Zone* out,
                    UnderLock publish) noexcept;
  void release_zone(const Zone& zone, UnderLock unpublish) noexcept override;
  void under_lock(UnderLock fn) noexcept override;
  bool split_zone_block_w(uintptr_t p) noexcept override;
  RegionNow region_now_w() const;
  // Poison fills skipped because a capture runs: n counted (stats.poison_skipped; 0: the
  // region counted them) and told once per capture (emit_queued_warnings).
  void note_poison_skipped(uint64_t n) noexcept;
  // Expandable: commits [0, to) ([0, least) at the least) for the region's `round`-th miss
  // above its ceiling; false when it may not (too many rounds) or could not (*failure says
  // why, warned once). No region lock held.
  bool commit_round(int round, uint64_t to, uint64_t least, std::string* failure);
  static Status status_of(FreeOutcome o, uint64_t want_epoch, uint64_t epoch);
  template <typename Inside>
  static FreeOutcome not_owned_if_interior(FreeOutcome o, uint64_t want_epoch, uint64_t epoch,
                                           Inside&& inside);
  Result pin_error(PinOutcome o, void* ptr, const char* what);
  zarena_trace::TraceAddr pin_trace_addr(bool in_region, uint64_t start_offset, void* start) const;
  // false: the device was reset (device_lost): the blocks and those waiting were
  // forgotten, not given back.
  bool give_back(std::vector<OverflowBlock>& blocks);
  Result destroy_later(const zarena_stats& s, const Result& trace_result);
  // The device's context the arena allocated in is gone (Backend::context_lost): its
  // memory went with it. The first call that finds it logs "arena.device_reset" (`call`
  // names it), and forgets the overflow blocks waiting to go back.
  bool device_lost(const char* call);
  // The message of a call refused because of it.
  std::string device_lost_text(const char* call) const;
  // The engine said a capture runs: this arena's flag, or a capture scope covering it.
  bool capture_declared() const noexcept;
  bool capturing();  // capture_declared(), else the backend's answer
  // Emits the warnings queued under locks (QueuedWarnings, a poison fill skipped during a
  // capture); called with no lock held after any call that may have queued one.
  void emit_queued_warnings();
  void emit_backend_warnings();  // what warnings_ holds (no lock held)
  // Queues a backend failure met under a lock; emit_queued_warnings logs it.
  void queue_warning(QueuedWarnings::Kind kind, const std::string& why) noexcept {
    warnings_.add(kind, why);
    fast_path_flags_.fetch_or(kWarningsQueued, std::memory_order_relaxed);
  }
  // The arena at this instant (one acquisition of the writer lock; snapshot_w: the caller
  // holds it). tags_epoch: also the live bytes per tag of that epoch (O(blocks)).
  static constexpr uint64_t kNoTags = ~0ull, kCurrentEpochTags = ~0ull - 1;
  void snapshot(ArenaSnapshot* out, uint64_t tags_epoch = kNoTags);
  void snapshot_w(ArenaSnapshot* out, uint64_t tags_epoch);
  // What step_counters reads of a snapshot, and only that (a step boundary's, which comes
  // once a step: the full snapshot's scans of every slot and the free indexes are most of
  // a planned step's boundary).
  StepCounters step_counters_now();
  // What epoch_end reads of a snapshot (a reset's), and only that (no scan of the plans'
  // words, the free indexes or the pinned blocks).
  void epoch_snapshot_w(ArenaSnapshot* out);

  // The diagnosis's side in the arena (arena_reports.cpp): snapshots in, reports out.
  using Report = ArenaDiagnosis::Report;
  struct ReportJob;
  // An allocation the diagnosis wanted to see (ArenaDiagnosis::wants_alloc).
  void diagnose_alloc(uint64_t aligned, uint64_t end, uint64_t nth_in_slot, uint32_t slot);
  // The region and the overflow route could not serve a request. The failing call's
  // report is built from one snapshot (which also gives *stats the numbers of its error
  // text) and emitted before the call returns; the verdict goes into the message. A call
  // that succeeded posts its report to the reporter thread.
  // commit_failure: the backend's reason when an expandable region could not commit
  // memory for the request ("" otherwise).
  Verdict report_failure(const OverflowAttempt& a, uint64_t size, uint64_t aligned, uint64_t epoch,
                         const std::string& commit_failure, zarena_stats* stats);
  void report_success(const OverflowAttempt& a, uint64_t size, uint64_t aligned, uint64_t epoch,
                      const std::string& commit_failure);
  static void run_report_job(void* self, const void* job);
  // Logs "arena.overflow_policy" (no lock held).
  void log_policy_change(int32_t previous, int32_t now);

  // RegionHooks (called with region locks held: no logging, no waiting).
  Fill fill_policy() noexcept override;
  void fill(uint64_t offset, uint64_t bytes) noexcept override;
  static Result fill_overflow(void* ctx, void* ptr, uint64_t bytes);
  // Logs a commit the backend refused (no lock held).
  void warn_commit_failed(const std::string& why);
  // Expandable, no capture: the slots' cached free blocks and span leftovers go to the
  // central index (the top comes down to the highest live block), then what is committed
  // above max(keep, the top) goes back, with no region lock held (a decommit waits for the
  // stream). zarena_trim's and an engaging plan's trim.
  Result drain_and_decommit(uint64_t keep);
  // Logs a trim that could not decommit (no lock held): `when` it was tried, and which
  // later call tries again.
  void warn_trim_failed(const char* when, const char* retried_by, const Result& r);
  // TraceOptions::on_failure: logs "arena.trace_failed".
  static void trace_failed(void* ctx, const std::string& path, const Result& why);

  const LogSource source_;  // name, id and handle, as log records name the arena
  const zarena_config cfg_;
  std::mutex policy_mu_;  // serialises policy and allocator changes (a pool made once)
  std::unique_ptr<Backend> backend_;
  char* const base_;
  const uint64_t capacity_;
  const uint64_t granule_;
  const bool managed_;
  const bool expandable_;

  PinTally pin_tally_;  // before region_ and overflow_, which hold it
  Region region_;
  ExpandableCommits commits_;
  OverflowPool overflow_;

  // What the allocation and free paths must look at besides the block itself: one load,
  // one predictable branch when nothing is on.
  // (Whether the plans learn, have a zone or serve is theirs to say: StepPlans' own atomics,
  // read where the paths branch.)
  static constexpr uint32_t kTracing = 1;         // trace_ is open
  static constexpr uint32_t kWarningsQueued = 4;  // a warning waits for emit_queued_warnings
  static constexpr uint32_t kGraphCapture = 32;   // [graphs] a capture: every request asks the plan
  std::atomic<uint32_t> fast_path_flags_{0};

  // Give-backs (their poison fills and frees, on the backend's stream) hold it shared;
  // set_stream exclusively, so a give-back never straddles a stream change.
  std::shared_mutex stream_mu_;
  std::atomic<bool> capture_flag_{false};
  // The arena's stream as capture scopes name it (set_stream keeps it current).
  std::atomic<void*> scope_stream_{nullptr};
  Poison poison_;                                // on, word, fills, the skip warning
  std::atomic<bool> device_lost_logged_{false};  // "arena.device_reset" is out
  QueuedWarnings warnings_;                      // backend failures met under locks

  // Counters that belong to no slot.
  std::atomic<uint64_t> resets_{0};

  // Tracing (ZARENA_TRACE_FILE / cfg.trace_file): null when off, so each hook costs one
  // predictable branch.
  std::unique_ptr<zarena_trace::Tracer> tracer_;
  zarena_trace::Tracer* trace_ = nullptr;

  ArenaDiagnosis diag_;

  // Step plans: on unless ZARENA_FLAG_NO_PLAN (and never with a trace: the trace records
  // what the dynamic engine does, for replay). They own the zone (StepPlans::zone_w).
  StepPlans plans_;

  // Lanes (engine/lanes.h): made on demand under lanes_mu_, entries [0, lanes_made_) kept
  // until destroy; handles likewise.
  std::mutex lanes_mu_;
  std::unique_ptr<Lane> lanes_[Lane::kMax];
  std::atomic<uint32_t> lanes_made_{0};
  std::vector<std::unique_ptr<zarena_lane>> lane_handles_;

  // Graph-stable steps: the captures and graphs (plan/graph_steps.h); graph_mu_ serialises
  // the calls that freeze and thaw the plans' zone.
  GraphSteps graphs_;
  std::mutex graph_mu_;
};

}  // namespace zarena_core
