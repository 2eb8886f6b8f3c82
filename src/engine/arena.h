// The arena: a Region over memory reserved from a Backend, an OverflowPool behind it,
// counters, poison, capture state, and the diagnostics hooks. The region's slots make
// allocation and free concurrent (region.h, docs/CONCURRENCY.md); whole-arena operations
// take every lock at once. Log records are built and emitted with no lock held.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/arena_notes.h"
#include "backend/backend.h"
#include "backend/backend_faults.h"
#include "diagnosis/cadence.h"
#include "config/config.h"
#include "diagnosis/diagnostics.h"
#include "diagnosis/epoch_history.h"
#include "log/log.h"
#include "overflow/overflow.h"
#include "region/region.h"
#include "base/spin_lock.h"
#include "base/status.h"
#include "trace/trace.h"
#include "zarena/zarena.h"

namespace zarena_core {

// One live block as the walks report it (region and overflow).
struct LiveBlock {
  void* ptr;
  uint64_t size, epoch;
  uint32_t pins, tag;
  bool persistent, overflow, deferred;
};

class Arena final : private RegionHooks {
 public:
  // Resolves the backend (AUTO), reserves the region, logs "arena.config".
  static Result create(const ResolvedConfig& rc, std::unique_ptr<Arena>* out);
  ~Arena() override;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // size 0: OK, out->ptr NULL. out is written on success only.
  // Hot paths: the status; on failure the detail is in last_error_text() (last_error.h).
  Status alloc(uint64_t size, uint32_t tag, zarena_block* out) noexcept;
  // want_epoch: kAnyEpoch, or the epoch the block must have been handed out in.
  Status free(void* ptr, uint64_t want_epoch) noexcept;
  Result pin(void* ptr);
  Result unpin(void* ptr);
  void reset();
  void mark_step_boundary();
  Result set_floor(uint64_t offset);
  uint64_t epoch() const { return region_.epoch(); }
  // Fills the full current stats layout from one consistent snapshot.
  void stats(zarena_stats* out);
  // Restarts the epoch-independent peaks (high water, used and overflow peaks) from now.
  void reset_peak_stats();
  void region_info(zarena_region* out);
  bool contains(const void* p) const {
    return static_cast<const char*>(p) >= base_ && static_cast<const char*>(p) < base_ + capacity_;
  }
  void set_capture_active(bool active);
  // The engine marks the start of a step: from the second one on, "no reset came between
  // two steps" is a fact the diagnosis uses (arena_diagnosis.cpp).
  void step_begin();
  // The diagnosis now (zarena_diagnose): the epoch's overflow verdict when it overflowed,
  // else the early warning's when one applies, else "ok".
  struct Diagnosis {
    const char* verdict = "ok";
    std::string cause, advice;
    bool overflowed = false;
    bool warned = false;
    ExhaustionFacts facts;
    uint64_t live_bytes = 0;
    uint64_t steps_to_full = 0;
    uint64_t overflow_epochs = 0;
    uint64_t needed_bytes = 0;
  };
  void diagnose_now(Diagnosis* out);
  Result set_stream(void* stream);
  void set_poison(bool enabled, uint32_t word);
  // Live blocks (region and overflow) from one snapshot, in address order for the region;
  // *epoch (may be null): the epoch at that instant.
  void live_blocks(std::vector<LiveBlock>* out, uint64_t* epoch = nullptr);
  // Releases region and overflow blocks and logs "arena.destroy".
  Result destroy();

  int32_t backend_kind() const { return backend_->kind(); }
  Backend& backend() { return *backend_; }
  // The fault injector wrapping a host backend (nullptr for CUDA).
  FaultInjectingBackend* fault_injector();
  const std::string& name() const { return name_; }
  const void* region_base() const { return base_; }
  // For tests: the region's layout invariants ("" when sound).
  std::string check_invariants();

 private:
  Arena(const ResolvedConfig& rc, std::unique_ptr<Backend> backend, const RegionInfo& region,
        int32_t policy);
  // commit_failed: an expandable region could not commit memory for this request.
  Status overflow_alloc(uint64_t size, uint64_t aligned, uint32_t tag, bool commit_failed,
                        zarena_block* out);
  Status alloc_odd(uint64_t size, uint32_t tag, zarena_block* out) noexcept;
  Status free_slow(void* ptr, uint64_t want_epoch);  // overflow blocks and failures
  Status free_error(FreeOutcome o, void* ptr, bool in_region, uint64_t epoch) noexcept;
  Status free_error_text(FreeOutcome o, void* ptr, bool in_region, uint64_t epoch);
  void after_free_extras(uint32_t extras);
  static Status status_of(FreeOutcome o, uint64_t want_epoch, uint64_t epoch);
  Result pin_error(PinOutcome o, void* ptr, const char* what);
  void give_back(std::vector<OverflowBlock>& blocks);
  bool capturing();   // the engine's flag, else the backend's answer
  void after_op();    // emits records queued under locks (poison skipped, commit failed)
  void emit_notes();  // emits notes_ (no lock held)
  // Queues a backend failure met under a lock; after_op logs it.
  void note(PendingNotes::Kind kind, const std::string& why) noexcept {
    notes_.add(kind, why);
    extras_.fetch_or(kExtraNote, std::memory_order_relaxed);
  }
  void fill_snapshot(zarena_stats* s, const RegionSnapshot& r, const OverflowStats& o) const;

  // Diagnosis (arena_diagnosis.cpp). The diagnosis lock (diag_mu_) guards everything in
  // the "diagnosis" block below; it is never held with a region lock or while logging.
  enum class Report { kNone, kRecord, kSummary };
  struct ReportJob;
  // What reset() read of the epoch it ended, under the writer lock.
  struct EpochEnd {
    uint64_t epoch = 0;
    uint64_t allocs = 0, reuses = 0, high_water = 0, floor = 0;
    uint64_t reuses_total = 0, overflow_allocs_total = 0, overflow_peak = 0;
    uint64_t steps = 0;
  };
  bool no_resets() const { return (cfg_.flags & ZARENA_FLAG_NO_RESETS) != 0; }
  void diag_on_alloc(uint64_t aligned, uint64_t end, uint64_t nth_in_slot, uint32_t slot);
  void diag_on_free(uint64_t size, uint32_t slot);
  // Under diag_mu_: notes the call's thread; true (and the guess stopped) when threads
  // running at once interleave their calls.
  bool diag_interleaved_d(uint32_t slot);
  void diag_on_reset(const EpochEnd& e);
  void diag_on_boundary();
  void emit_step_record(const EpochEnd& e);
  // The facts of an exhaustion now (one snapshot, then the diagnosis lock).
  ExhaustionFacts capture_facts(const char* path, uint64_t size, uint64_t aligned,
                                bool commit_failed = false);
  // Under diag_mu_: the facts only the diagnosis lock guards.
  void add_step_facts_d(ExhaustionFacts* f) const;
  // The first overflow of an epoch: counts it and decides what is logged.
  Report claim_overflow_epoch(uint64_t epoch, const char* path, uint64_t size, uint64_t aligned,
                              bool commit_failed);
  // Builds and emits the record of a report (any thread, no lock held). epochs: how many
  // epochs the arena had begun when the report was due (a summary's "N of M epochs").
  void emit_report(Report kind, const ExhaustionFacts& f, uint64_t unreported,
                   uint64_t overflow_epochs, uint64_t epochs);
  static void run_report_job(void* self, const void* job);
  // Returns the verdict the failing call's message carries; emits its record when due.
  Verdict report_failure(const OverflowAttempt& a, uint64_t size, uint64_t aligned, uint64_t epoch,
                         bool commit_failed);
  void report_success(const OverflowAttempt& a, uint64_t size, uint64_t aligned, uint64_t epoch,
                      bool commit_failed);
  // "matmul.grad 38.0 GiB, ..." the top tags by live bytes of `epoch` ("" when untagged).
  std::string top_tags(uint64_t epoch);
  void warn_cadence(CadenceFacts f);
  void flush_summary();  // destroy: the overflow epochs not reported yet

  // RegionHooks (called with region locks held: no logging, no waiting).
  Fill fill_policy() noexcept override;
  void fill(uint64_t offset, uint64_t bytes) noexcept override;
  bool ensure_committed(uint64_t end) noexcept override;
  static Result fill_overflow(void* ctx, void* ptr, uint64_t bytes);
  void trim_w();

  const std::string name_;
  const zarena_config cfg_;
  const int32_t policy_;
  std::unique_ptr<Backend> backend_;
  char* const base_;
  const uint64_t capacity_;
  const uint64_t granule_;
  const bool managed_;
  const bool expandable_;

  Region region_;
  OverflowPool overflow_;

  // What the common path must look at besides the allocation itself: one load, one
  // predictable branch when nothing is on.
  static constexpr uint32_t kExtraTrace = 1;    // trace_ is open
  static constexpr uint32_t kExtraNote = 4;     // a warning waits for after_op
  std::atomic<uint32_t> extras_{0};

  std::atomic<bool> capture_flag_{false};
  std::atomic<bool> poison_on_;
  std::atomic<uint32_t> poison_word_;
  std::atomic<bool> poison_skip_note_{false};  // a fill was skipped: warn once per capture
  std::atomic<bool> poison_skip_warned_{false};  // once per capture (the flag's clearing re-arms)
  std::atomic<uint64_t> overflow_fills_{0};      // overflow blocks poisoned before going back
  PendingNotes notes_;  // backend failures met under locks, logged by after_op

  // Expandable regions (guarded by the region's central lock: ensure_committed runs there).
  const uint64_t commit_granularity_;
  const uint64_t commit_chunk_;
  uint64_t committed_ = 0;
  std::vector<std::pair<uint64_t, uint64_t>> commits_;  // the ranges commit() mapped
  std::atomic<uint64_t> commit_events_{0}, trim_events_{0}, commit_failures_{0};
  std::atomic<uint64_t> committed_bytes_{0};
  std::string commit_failure_;  // the last failure's message, logged after the op
  std::atomic<bool> commit_failure_note_{false};

  // Counters that belong to no slot.
  std::atomic<uint64_t> resets_{0};
  std::atomic<uint64_t> first_overflow_epoch_{~0ull};

  // Tracing (ZARENA_TRACE_FILE / cfg.trace_file): null when off, so each hook costs one
  // predictable branch.
  std::unique_ptr<zarena_trace::Tracer> tracer_;
  zarena_trace::Tracer* trace_ = nullptr;
  std::atomic<uint64_t> steps_{0}, epoch_steps_{0};

  // --- diagnosis (arena_diagnosis.cpp) ---------------------------------------------------
  // Allocations whose block ends above watch_end_ take the diagnosis path: every one while
  // the cadence detector runs (0: before the first reset, or in resumed mode), none when
  // nothing is watched (~0), else those that carry the epoch past the earlier epochs'
  // peaks. Each slot's first kAnchorLen requests of an epoch go there too (its opening).
  std::atomic<uint64_t> watch_end_{0};
  std::atomic<bool> detector_on_{true};      // requests and frees feed the detector
  // Changes of thread in the stream the detector reads (diag_interleaved_d).
  static constexpr uint32_t kNoSlot = ~0u;
  static constexpr uint32_t kInterleaveWindow = 256, kInterleaveMax = 32;
  uint32_t diag_last_slot_ = kNoSlot, diag_switches_ = 0, diag_window_calls_ = 0;
  bool diag_interleaved_ = false;  // this epoch's guess stopped on interleaved threads
  std::atomic<bool> explicit_steps_{false};  // zarena_step_begin was called: facts, not guesses
  SpinLock diag_mu_;
  CadenceDetector cadence_;
  uint64_t cadence_top_ = 0;  // highest block end of the epoch seen: the detector's top
  EpochHistory history_;
  EpochHistory::Epoch opening_;  // the current epoch's opening requests
  uint64_t watch_peak_ = 0;      // the earlier epochs' peak the watch compares with
  bool warned_ = false;          // the early warning was logged (once per arena)
  // Explicit steps of the current epoch: live bytes and top at the first and latest begin.
  uint64_t step1_live_ = 0, step_live_ = 0, step_top_ = 0;
  uint64_t step1_n_ = 0;  // the epoch's step number the comparison starts from
  uint64_t step_epoch_ = ~0ull;
  // Overflow reports: the first kDetailedEpochs overflow epochs get arena.first_overflow,
  // later ones a summary at most every kSummaryIntervalNs.
  uint64_t overflow_epochs_ = 0, overflow_records_ = 0, overflow_summaries_ = 0;
  uint64_t unreported_ = 0;  // overflow epochs since the last record
  uint64_t last_report_ns_ = 0;
  ExhaustionFacts last_unreported_;  // the latest summarised epoch's facts
  bool have_unreported_facts_ = false;
  // The current epoch's first overflow (zarena_diagnose).
  const char* overflow_path_ = "";
  uint64_t overflow_size_ = 0, overflow_aligned_ = 0;
  bool overflow_commit_failed_ = false;
  // The capacity the workload needed: the highest (epoch top + epoch overflow peak).
  uint64_t needed_bytes_ = 0;
  // Counters at the last reset (per-epoch figures of arena.step).
  uint64_t reuses_at_reset_ = 0, overflow_allocs_at_reset_ = 0;
};

}  // namespace zarena_core
