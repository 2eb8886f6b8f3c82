// Diagnosis and the records that carry it: from the arena's counters at the moment it is
// first exhausted in an epoch, name the likely cause (a verdict) and the fix (advice), and
// build the "arena.first_overflow" record with the fields that diagnosed the original
// failure; likewise the "arena.reset_cadence" early warning, "arena.step" and
// "arena.destroy". Pure functions of their inputs: the arena gathers the facts under its
// lock and emits the records after releasing it.
#pragma once

#include <cstdint>
#include <string>

#include "base/human_bytes.h"
#include "diagnosis/verdicts.h"
#include "log/log.h"
#include "zarena/zarena.h"

namespace zarena_core {

struct ExhaustionFacts {
  const char* path = "";  // overflow route taken: async|sync|capture_refused|refused|limit
  uint64_t requested_bytes = 0;
  uint64_t aligned_bytes = 0;
  uint64_t capacity_bytes = 0;
  uint64_t offset_bytes = 0;  // the top when the region gave up
  uint64_t floor_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t overflow_live_bytes = 0;
  uint64_t live_count = 0;  // live blocks, region and overflow
  uint64_t epoch = 0;
  // Requests of this epoch: the region's, and (once the diagnosis completed the facts) the
  // ones a step plan served.
  uint64_t epoch_allocs = 0;
  uint64_t epoch_max_alloc_bytes = 0;
  uint64_t step_max_alloc_bytes = 0;  // largest request since the last reset or boundary
  // Allocations step plans served since the arena was created (the diagnosis adds this
  // epoch's to epoch_allocs; hits and misses are the region's alone).
  uint64_t plan_hits = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t reuses = 0;
  uint64_t resets = 0;
  uint64_t free_list_len = 0;
  uint64_t free_list_bytes = 0;
  uint64_t largest_free_block_bytes = 0;
  // Steps of this epoch, as the loop counts them (0: none seen): zarena_step_begin calls
  // when steps_explicit, else the steps the cadence detector recognised (after resets:
  // this epoch's requests over those of one earlier epoch).
  uint64_t steps = 0;
  bool steps_explicit = false;
  // Live bytes the steps kept: the growth from the first step to the current one (the
  // detector's troughs, or the live bytes at each zarena_step_begin), and what one step
  // kept (0: not known; then kept_bytes over the steps).
  uint64_t kept_bytes = 0;
  uint64_t kept_per_step_bytes = 0;
  // The epochs before this one (EpochHistory: up to 8, epoch 0 not counted).
  uint64_t prior_epochs = 0;
  uint64_t prior_peak_bytes = 0;      // the highest of their peaks above the floor
  uint64_t prior_allocs = 0;          // the most requests one of them made
  bool prior_consistent = false;      // their request counts agree (one step each)
  bool prior_shared_opening = false;  // they opened with the same requests
  uint64_t epoch_peak_bytes = 0;      // this epoch's highest top above the floor
  // Expandable arenas: memory committed when the region gave up, and whether it gave up
  // because committing more failed (the device, not the arena, is full).
  uint64_t committed_bytes = 0;
  bool commit_failed = false;
  // ZARENA_FLAG_NO_RESETS: the program frees what it allocates and never resets.
  bool no_resets = false;
  // Since the epoch's step boundary, or the arena's creation with no reset since (no
  // steps recognised): blocks of one size, none freed (CadenceDetector::uniform_run), that
  // size, and whether a boundary began the run.
  uint64_t uniform_blocks = 0;
  uint64_t uniform_size = 0;
  bool uniform_after_boundary = false;
  // The backend's reason when commit_failed (a fixed buffer: the facts are copied into
  // the reporter's queue, which takes trivially copyable payloads).
  char commit_error[160] = {};
};

struct Verdict {
  Verdict(VerdictId v, std::string cause_text, std::string advice_text, std::string fix_text)
      : id(v),
        name(verdict_name(v)),
        cause(std::move(cause_text)),
        advice(std::move(advice_text)),
        fix(std::move(fix_text)) {}
  const VerdictId id;
  const char* const name;  // id's name in the verdict table (verdicts.h)
  std::string cause;       // what the counters show
  std::string advice;      // one sentence naming the fix (no ';': see verdict_suffix)
  std::string fix;         // the advice in a few words, for the human stderr line
};

// Rules, first match wins:
//   capture_refused   the overflow route was refused because the stream was being captured;
//   commit_failed     an expandable arena could not commit memory for the request: the
//                     device is out of physical memory, the arena is not full;
//   runaway_buffer    the request can never fit above the floor, even right after a reset;
//   never_reset       no reset ever happened, steps repeated (>= 2 seen) and kept live
//                     bytes (when zarena_step_begin counts them: the latest step began with
//                     more live bytes and blocks than the one before, beyond what any step
//                     gave back; else at least 1/64 of the capacity: the detector's
//                     troughs); or, after a step
//                     boundary or since the arena was created, only blocks of one size were
//                     allocated (at least 8), none freed, and no reset came;
//   reset_stopped     the same with resets before: the loop reset and then stopped; or,
//                     when the steps open differently each time (no repeat can be seen),
//                     an epoch with 3x the requests and 2x the peak of at least three
//                     consistent epochs before it;
//   runaway_buffer    the request, or the step's largest, is >= half the space above the
//                     floor (weights below the floor do not count: they are big on purpose);
//   fragmentation     the free index holds >= the request and >= 1/8 of that space, but
//                     no block fits;
//   (with no_resets, never_reset and reset_stopped are skipped: the program never resets
//   by design, and working_set_full's advice never mentions a reset)
//   working_set_full  otherwise: one step needs more than the arena. When steps repeated
//                     without keeping anything, or (no steps seen, never reset) at least 7
//                     of every 8 blocks the epoch allocated were freed again, the advice
//                     says why a reset would not help; it never advises raising the
//                     capacity alone for an arena whose repeated steps were never reset.
Verdict diagnose(const ExhaustionFacts& f);
// Steps as reported: explicit or recognised, else (reset_stopped from counts) estimated.
uint64_t reported_steps(const ExhaustionFacts& f);
// A request larger than any arena can describe (refused before the region is asked).
Verdict oversized_request_verdict(uint64_t size);
// An allocation refused during a graph-captured step (zarena_graph.h): the plan did not
// serve it. `why`: what the plan says of it.
Verdict graph_capture_verdict(const std::string& why);
// Why the region refused a request, as the record and the error name it: "arena full",
// or, for a request the arena could not hold even empty, "request larger than the arena's
// capacity" / "request larger than the space above the floor" (the arena is not full).
std::string refusal_phrase(uint64_t aligned, uint64_t capacity, uint64_t floor);
// What a failing call's zarena_last_error() message ends with: "verdict=<name>; fix:
// <advice>" (the advice runs to the end of the message). Every such message is written
// by this function.
std::string verdict_suffix(const Verdict& v);
// top_tags: "name size, ..." (the top tags by live bytes this epoch; "" for none).
LogRecord first_overflow_record(const ExhaustionFacts& f, const LogSource& arena,
                                const std::string& top_tags = "");

// After the first few epochs that overflowed (reported one by one), the ones that follow
// are summarised at a bounded rate.
struct OverflowSummaryFacts {
  ExhaustionFacts last;          // the latest overflow epoch's facts
  uint64_t overflow_epochs = 0;  // epochs that overflowed since create
  uint64_t epochs = 0;           // epochs since create (the current one included)
  uint64_t unreported = 0;       // overflow epochs since the last record of this arena
};
LogRecord overflow_summary_record(const OverflowSummaryFacts& f, const LogSource& arena);

struct CadenceFacts {
  const char* verdict = verdict_name(VerdictId::kNeverReset);  // or reset_stopped
  uint64_t steps = 0;           // steps begun so far, as the loop counts them
  bool steps_explicit = false;  // counted by zarena_step_begin
  uint64_t step_repeats = 0;    // steps - 1
  uint64_t step_allocs = 0;     // requests per step (0: not known)
  uint64_t step_bytes = 0;      // live bytes kept per step
  uint64_t grown_bytes = 0;     // live bytes kept since the first step
  uint64_t offset_bytes = 0;    // the top now
  uint64_t capacity_bytes = 0;
  uint64_t steps_to_full = 0;  // at the rate the top grows per step (0: not known)
  uint64_t epoch_allocs = 0;
  uint64_t resets = 0;
  uint64_t prior_epochs = 0;  // reset_stopped: the epochs that did reset
};
LogRecord reset_cadence_record(const CadenceFacts& f, const LogSource& arena);

// "arena.step" (ZARENA_FLAG_STEP_RECORDS): one epoch, at the reset that ends it.
struct StepRecordFacts {
  uint64_t epoch = 0;
  uint64_t steps = 0;  // zarena_step_begin calls in it
  uint64_t allocs = 0;
  uint64_t reuses = 0;
  uint64_t peak_bytes = 0;  // its highest top above the floor
  uint64_t floor_bytes = 0;
  uint64_t capacity_bytes = 0;
  uint64_t overflow_allocs = 0;
  uint64_t overflow_peak_bytes = 0;
  uint64_t needed_bytes = 0;  // top + overflow at their highest in it
};
LogRecord step_record(const StepRecordFacts& f, const LogSource& arena);

// An overflow backend call slower than the watchdog threshold (rate-limited).
LogRecord overflow_slow_record(uint64_t duration_ns, uint64_t threshold_ns, uint64_t bytes,
                               const char* path, const LogSource& arena);

struct LifetimeFacts {
  uint64_t total_allocs = 0;
  uint64_t overflow_epochs = 0;  // epochs in which the region was exhausted
  uint64_t needed_bytes = 0;     // the capacity the workload needed (stats.needed_bytes)
};
LogRecord destroy_record(const zarena_stats& s, const LifetimeFacts& f, const LogSource& arena);

// For tests: replaces the clock that paces overflow summaries (nullptr = steady_clock).
void diag_set_clock_for_testing(uint64_t (*now_ns)()) noexcept;

}  // namespace zarena_core
