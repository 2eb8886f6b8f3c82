// One arena's diagnosis: it feeds the reset-cadence detector, turns zarena_step_begin
// into facts, compares each epoch with the ones before (a loop that stopped resetting),
// counts the epochs that overflowed and decides which of them get a record: the first
// kDetailedEpochs one by one ("arena.first_overflow"), later ones in a summary at most
// every kSummaryIntervalNs ("arena.overflow_summary").
//
// The arena calls its hooks: on_alloc / on_free from the allocation and free paths (only
// when wants_alloc / wants_free say so: one load and a compare on the common path),
// on_reset, on_boundary and on_step_begin from the whole-arena operations, and
// claim_overflow / complete_facts when the region is exhausted. What the diagnosis needs
// of the arena's counters comes with the call (the arena takes one snapshot).
//
// Locks: its own spin lock, never taken while a region lock is held, and no record is
// built or emitted under it. The hooks are called with no arena lock held.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "base/spin_lock.h"
#include "diagnosis/cadence.h"
#include "diagnosis/diagnostics.h"
#include "diagnosis/epoch_history.h"

namespace zarena_core {

// What a reset read of the epoch it ended (under the arena's writer lock).
struct EpochEnd {
  uint64_t epoch = 0;
  uint64_t allocs = 0, high_water = 0, floor = 0;
  uint64_t reuses_total = 0, overflow_allocs_total = 0, overflow_peak = 0;
  uint64_t steps = 0;            // zarena_step_begin calls in it
  uint64_t plan_hits_total = 0;  // allocations step plans served since create
  // The opening of the step the plan serves (its first request sizes, aligned): a planned
  // epoch's requests never reach the diagnosis, and these were its opening.
  uint64_t plan_opening[EpochHistory::kOpeningLen] = {};
  int plan_opening_len = 0;
};

// The arena's counters a step or a warning needs (from one snapshot).
struct StepCounters {
  uint64_t epoch = 0;
  uint64_t epoch_allocs = 0;  // the region's requests (plan_hits: the plans')
  uint64_t plan_hits = 0;     // allocations step plans served since create
  uint64_t resets = 0;
  // Live blocks, region and overflow, as zarena_get_stats counts them (a plan's zone is
  // the planned blocks live in it).
  uint64_t live_bytes = 0, live_count = 0;
  uint64_t top = 0;  // the epoch's high water
};

// The diagnosis's own counters, for zarena_get_stats.
struct DiagnosisCounters {
  uint64_t overflow_epochs = 0, overflow_records = 0, overflow_summaries = 0;
  uint64_t needed_bytes = 0;  // the highest (epoch top + epoch overflow peak) of ended epochs
};

// The first overflow of the current epoch, as zarena_diagnose describes it.
struct OverflowRequest {
  bool overflowed = false;  // the current epoch overflowed
  const char* path = "";
  uint64_t size = 0, aligned = 0;
  bool commit_failed = false;
};

// zarena_diagnose's answer: the epoch's overflow verdict when it overflowed, else the
// early warning's when one applies, else "ok".
struct CurrentDiagnosis {
  const char* verdict = verdict_name(VerdictId::kOk);
  std::string cause, advice;
  bool overflowed = false;
  bool warned = false;
  ExhaustionFacts facts;
  uint64_t live_bytes = 0;
  uint64_t steps_to_full = 0;
  uint64_t overflow_epochs = 0;
  uint64_t needed_bytes = 0;
};

class ArenaDiagnosis {
 public:
  enum class Report { kNone, kRecord, kSummary };
  // What a report carries besides its facts.
  struct ReportCounts {
    uint64_t overflow_epochs = 0;  // so far
    uint64_t unreported = 0;       // a summary: the overflow epochs it covers
  };

  // no_resets: ZARENA_FLAG_NO_RESETS, a pool that never resets: nothing to guess about steps,
  // no reset warning or verdict.
  ArenaDiagnosis(uint64_t capacity, LogSource arena, bool no_resets);

  // --- the allocation and free paths ------------------------------------------------
  // Whether an allocation that ends at `end`, the nth_in_slot-th of its slot in this epoch,
  // goes to on_alloc: every one while the cadence detector runs, each slot's opening
  // requests, and those that carry an epoch past the earlier epochs' peaks.
  bool wants_alloc(uint64_t end, uint64_t nth_in_slot) const {
    return end > watch_end_.load(std::memory_order_relaxed) ||
           nth_in_slot <= static_cast<uint64_t>(CadenceDetector::kAnchorLen);
  }
  bool wants_free() const { return detector_on_.load(std::memory_order_relaxed); }
  // true: the reset-cadence warning is due; the arena calls warn_cadence with its
  // counters of now.
  bool on_alloc(uint64_t aligned, uint64_t end, uint64_t nth_in_slot, uint32_t slot);
  void on_free(uint64_t size, uint32_t slot);
  // An allocation the overflow pool served (the slow path; its free comes to on_free when
  // wants_free): the guess sees the program's whole stream, so that the steps served past
  // the region count too. true: the warning is due, as on_alloc.
  bool on_overflow_alloc(uint64_t aligned, uint32_t slot);
  // Completes the warning on_alloc found due with the counters of now and logs it (no
  // lock held).
  void warn_cadence(const StepCounters& c);

  // --- steps, boundaries, resets --------------------------------------------------------
  // zarena_step_begin: counts the step; from the first one on, steps are facts and the
  // guesses stop. Returns the step's number in its epoch.
  uint64_t count_step();
  // With the counters at that step (taken after count_step): steps that keep memory, with
  // no reset between, warn once (accumulating(), below).
  void on_step_begin(uint64_t n, const StepCounters& c);
  void on_boundary();
  // Returns the epoch's "arena.step" facts (log_step logs them, with no lock held).
  StepRecordFacts on_reset(const EpochEnd& e);
  void log_step(const StepRecordFacts& f) const;
  uint64_t steps() const { return steps_.load(std::memory_order_relaxed); }
  uint64_t epoch_steps() const { return epoch_steps_.load(std::memory_order_relaxed); }

  // --- exhaustion -------------------------------------------------------------------------
  // The region could not serve a request of `epoch`: the first time in that epoch, counts
  // the overflow epoch and says which report is due.
  Report claim_overflow(uint64_t epoch, const char* path, uint64_t size, uint64_t aligned,
                        bool commit_failed);
  // One acquisition of the lock: adds what only the diagnosis knows to f (steps, prior
  // epochs) and, for a report, remembers f for a later summary and fills *counts.
  // *stats (may be null): the counters zarena_get_stats shows, from the same instant.
  void complete_facts(Report kind, ExhaustionFacts* f, ReportCounts* counts,
                      DiagnosisCounters* stats);
  // Builds and emits the record of a report (no lock held). epochs: how many epochs the
  // arena had begun when it was due (a summary's "N of M epochs").
  void emit_report(Report kind, const ExhaustionFacts& f, const ReportCounts& counts,
                   uint64_t epochs, const std::string& top_tags) const;
  // destroy: the overflow epochs no record covered yet get their summary.
  void flush_summary();

  // --- questions --------------------------------------------------------------------------
  DiagnosisCounters counters() const;
  OverflowRequest current_overflow(uint64_t epoch) const;
  // zarena_diagnose from the facts of now (f: of the current overflow when there is one,
  // completed by complete_facts).
  void diagnose(const ExhaustionFacts& f, bool overflowed, CurrentDiagnosis* out) const;

 private:
  void add_step_facts(ExhaustionFacts* f) const;  // lock held
  // Explicit steps, lock held: the latest step began with more live bytes and more live
  // blocks than the one before, beyond what any step gave back, so the steps keep memory
  // (kept_bytes), not only shapes that vary. `warn`: and so did the step before (one jump,
  // state created once in the first step, is no pile).
  bool accumulating(bool warn) const;
  // Requests of the epoch: the region's and those the plans served in it.
  uint64_t epoch_requests(uint64_t region_allocs, uint64_t plan_hits) const;
  // Lock held: notes the call's thread; true (and the guess stopped) when threads running
  // at once interleave their calls.
  bool interleaved(uint32_t slot);
  // Lock held: feeds the detector a request; true when the warning became due (its facts
  // are in warning_).
  bool feed_alloc(uint64_t aligned, uint32_t slot);
  void stop_guessing();  // lock held

  const uint64_t capacity_;
  const LogSource source_;
  const bool no_resets_;

  // Read without the lock on the hot paths. Allocations whose block ends above watch_end_
  // come to on_alloc: every one while the cadence detector runs (0: before the first
  // reset, or in resumed mode), none when nothing is watched (~0), else those that carry
  // the epoch past the earlier epochs' peaks.
  std::atomic<uint64_t> watch_end_{0};
  std::atomic<bool> detector_on_{true};      // requests and frees feed the detector
  std::atomic<bool> explicit_steps_{false};  // zarena_step_begin was called: facts, not guesses
  std::atomic<uint64_t> steps_{0}, epoch_steps_{0};
  // The latest epoch that overflowed (~0: none yet): claimed without the lock.
  std::atomic<uint64_t> overflow_epoch_{~0ull};

  // --- under mu_ --------------------------------------------------------------------------
  mutable SpinLock mu_;
  // Changes of thread in the stream the detector reads (interleaved()).
  static constexpr uint32_t kNoSlot = ~0u;
  static constexpr uint32_t kInterleaveWindow = 256, kInterleaveMax = 32;
  uint32_t last_slot_ = kNoSlot, switches_ = 0, window_calls_ = 0;
  bool interleaved_ = false;  // this epoch's guess stopped on interleaved threads
  CadenceDetector cadence_;
  uint64_t cadence_top_ = 0;  // highest block end of the epoch seen: the detector's top
  EpochHistory history_;
  EpochHistory::Epoch opening_;  // the current epoch's opening requests
  uint64_t watch_peak_ = 0;      // the earlier epochs' peak the watch compares with
  bool warned_ = false;          // the early warning was logged (once per arena)
  CadenceFacts warning_;         // what the detector knew when it became due
  uint64_t warning_prior_allocs_ = 0;
  // Explicit steps of the current epoch: live bytes and top at the latest begin.
  // A step keeps memory when it begins with more live bytes and more live blocks than the
  // one before (a block kept per step adds one); varying shapes move the bytes, not the
  // count of blocks carried from one step into the next.
  uint64_t step_live_ = 0, step_top_ = 0;
  uint64_t step_count_ = 0;          // live blocks at the latest begin
  uint64_t step_rises_ = 0;          // consecutive begins at which both rose
  uint64_t step_low_ = 0;            // the lowest live bytes at a begin since the first
  uint64_t step_low_n_ = 0;          // ... and the step that began with them
  uint64_t step_max_fall_ = 0;       // the most live bytes one step gave back (begin to begin)
  uint64_t plan_hits_at_reset_ = 0;  // StepCounters::plan_hits when the epoch began
  uint64_t step1_n_ = 0;             // the epoch's step number the comparison starts from
  uint64_t step_epoch_ = ~0ull;
  // Overflow reports.
  uint64_t overflow_epochs_ = 0, overflow_records_ = 0, overflow_summaries_ = 0;
  uint64_t unreported_ = 0;  // overflow epochs since the last record
  uint64_t last_report_ns_ = 0;
  ExhaustionFacts last_unreported_;  // the latest summarised epoch's facts
  bool have_unreported_facts_ = false;
  OverflowRequest overflow_;  // the current epoch's first overflow
  uint64_t needed_bytes_ = 0;
  // Counters at the last reset (the per-epoch figures of arena.step).
  uint64_t reuses_at_reset_ = 0, overflow_allocs_at_reset_ = 0;
};

}  // namespace zarena_core
