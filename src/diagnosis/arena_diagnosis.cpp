#include "diagnosis/arena_diagnosis.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <utility>

#include "log/log.h"
#include "zarena/zarena.h"

namespace zarena_core {

namespace {

constexpr uint64_t kDetailedEpochs = ZARENA_OVERFLOW_RECORDS;
constexpr uint64_t kSummaryIntervalNs = 60'000'000'000ull;
constexpr uint64_t kNoWatch = ~0ull;
// Explicit steps warn when the live bytes and blocks at a step's begin rose at this many
// begins in a row (the guess's kGrowingRestartsToWarn): state created once in the first
// step (an optimizer's, a loss carried into the next step) is one rise and never warns.
constexpr uint64_t kExplicitRisesToWarn = 2;

uint64_t steady_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}
std::atomic<uint64_t (*)()> g_clock{steady_ns};

uint64_t ceil_div(uint64_t a, uint64_t b) { return b == 0 ? 0 : a / b + (a % b != 0); }

using Lock = std::lock_guard<SpinLock>;

}  // namespace

void diag_set_clock_for_testing(uint64_t (*now_ns)()) noexcept {
  g_clock.store(now_ns != nullptr ? now_ns : steady_ns);
}

ArenaDiagnosis::ArenaDiagnosis(uint64_t capacity, LogSource arena, bool no_resets)
    : capacity_(capacity), source_(std::move(arena)), no_resets_(no_resets), cadence_(capacity) {
  if (no_resets_) {  // a general-purpose pool: nothing to guess about steps never reset
    detector_on_.store(false, std::memory_order_relaxed);
    watch_end_.store(kNoWatch, std::memory_order_relaxed);
  }
}

// --- feeding ----------------------------------------------------------------------------

// The guessing detector reads the arena's whole stream, in the order the calls reach it:
// every request and free feeds it (under the diagnosis lock, only while it runs). Not one
// thread's slot: a program's one thread of calls can run on several OS threads (Go moves
// a goroutine between them), and following a slot would make the verdict depend on the
// scheduler. So the live bytes it sees are the arena's, and one program order gives one
// verdict. Threads running at once interleave their calls in no fixed order: when the
// stream changes thread more than kInterleaveMax times in kInterleaveWindow calls, the
// guess stops (one thread moved between OS threads changes far less often, so its
// verdict does not depend on where it ran). It also stops, with its cost, after
// CadenceDetector::kGuessLimit requests without a step.
bool ArenaDiagnosis::interleaved(uint32_t slot) {
  if (slot != last_slot_) {
    if (last_slot_ != kNoSlot) ++switches_;
    last_slot_ = slot;
  }
  if (switches_ > kInterleaveMax) {
    interleaved_ = true;  // what it guessed from the mixed stream is not used either
    stop_guessing();
    return true;
  }
  if (++window_calls_ == kInterleaveWindow) window_calls_ = switches_ = 0;
  return false;
}

void ArenaDiagnosis::stop_guessing() {
  detector_on_.store(false, std::memory_order_relaxed);
  watch_end_.store(kNoWatch, std::memory_order_relaxed);
}

bool ArenaDiagnosis::feed_alloc(uint64_t aligned, uint32_t slot) {
  if (interleaved(slot)) return false;
  if (!cadence_.on_alloc(aligned, cadence_top_) || warned_ ||
      explicit_steps_.load(std::memory_order_relaxed)) {
    if (cadence_.gave_up()) stop_guessing();
    return false;
  }
  warned_ = true;
  CadenceFacts& w = warning_;
  w.verdict = verdict_name(cadence_.resumed() ? VerdictId::kResetStopped : VerdictId::kNeverReset);
  w.steps = cadence_.steps();
  w.step_allocs = cadence_.step_allocs();
  w.grown_bytes = cadence_.grown_bytes();
  w.step_bytes = cadence_.step_kept_bytes();
  w.offset_bytes = cadence_top_;
  w.capacity_bytes = capacity_;
  w.steps_to_full = cadence_.steps_to_full(cadence_top_);
  if (cadence_.restarts() == 0 && cadence_.uniform_run() != 0) {  // one block kept per step
    const uint64_t size = cadence_.uniform_size();
    w.steps = cadence_.uniform_run();
    w.step_allocs = 1;
    w.step_bytes = size;
    w.grown_bytes = w.steps * size;
    w.steps_to_full = cadence_top_ < capacity_ ? (capacity_ - cadence_top_) / size : 0;
  }
  w.prior_epochs = history_.epochs_seen();
  warning_prior_allocs_ = history_.max_allocs();
  return true;
}

bool ArenaDiagnosis::on_alloc(uint64_t aligned, uint64_t end, uint64_t nth_in_slot, uint32_t slot) {
  const bool opening = nth_in_slot <= static_cast<uint64_t>(EpochHistory::kOpeningLen);
  Lock lock(mu_);
  if (opening && opening_.opening_len < EpochHistory::kOpeningLen) {
    opening_.opening[opening_.opening_len++] = aligned;
  }
  if (end > cadence_top_) cadence_top_ = end;
  if (detector_on_.load(std::memory_order_relaxed)) return feed_alloc(aligned, slot);
  if (end > watch_end_.load(std::memory_order_relaxed)) {
    // This epoch went well past the peaks of the ones before it: a loop that stopped
    // resetting repeats their step. Watch for their opening from here.
    const uint64_t* shared = history_.shared_opening();
    if (shared != nullptr && !warned_ && !explicit_steps_.load(std::memory_order_relaxed)) {
      cadence_.resume(shared, cadence_top_);
      detector_on_.store(true, std::memory_order_relaxed);
      watch_end_.store(0, std::memory_order_relaxed);
    } else {
      watch_end_.store(kNoWatch, std::memory_order_relaxed);
    }
  }
  return false;
}

bool ArenaDiagnosis::on_overflow_alloc(uint64_t aligned, uint32_t slot) {
  if (!detector_on_.load(std::memory_order_relaxed)) return false;
  Lock lock(mu_);
  return detector_on_.load(std::memory_order_relaxed) && feed_alloc(aligned, slot);
}

void ArenaDiagnosis::warn_cadence(const StepCounters& c) {
  CadenceFacts f;
  uint64_t prior_allocs = 0, epoch_allocs = 0;
  {
    Lock lock(mu_);
    f = warning_;
    prior_allocs = warning_prior_allocs_;
    epoch_allocs = epoch_requests(c.epoch_allocs, c.plan_hits);  // planned ones too
  }
  f.epoch_allocs = epoch_allocs;
  f.resets = c.resets;
  if (f.steps == 0) f.steps = ceil_div(epoch_allocs, prior_allocs);
  if (f.step_allocs == 0) f.step_allocs = prior_allocs;
  f.step_repeats = f.steps > 0 ? f.steps - 1 : 0;
  if (log_enabled(ZARENA_LOG_WARN)) log_emit(reset_cadence_record(f, source_));
}

void ArenaDiagnosis::on_free(uint64_t size, uint32_t slot) {
  Lock lock(mu_);
  if (detector_on_.load(std::memory_order_relaxed) && !interleaved(slot)) cadence_.on_free(size);
}

// --- steps, boundaries, resets ------------------------------------------------------------

void ArenaDiagnosis::on_boundary() {
  Lock lock(mu_);
  if (detector_on_.load(std::memory_order_relaxed)) cadence_.on_step_boundary(cadence_top_);
  // Explicit steps: a boundary before the second step ends the set-up (weights uploaded
  // after the first zarena_step_begin are not what a step kept).
  if (epoch_steps_.load(std::memory_order_relaxed) <= 1) step_epoch_ = ~0ull;
}

StepRecordFacts ArenaDiagnosis::on_reset(const EpochEnd& e) {
  epoch_steps_.store(0, std::memory_order_relaxed);
  StepRecordFacts step;
  uint64_t allocs = 0;
  {
    Lock lock(mu_);
    allocs = epoch_requests(e.allocs, e.plan_hits_total);
    const uint64_t planned = allocs - e.allocs;
    plan_hits_at_reset_ = e.plan_hits_total;
    if (e.epoch != 0) {
      EpochHistory::Epoch h = opening_;
      // A plan served the epoch from its start: its opening was the plan's (the guess that
      // the loop stopped resetting compares openings).
      if (h.opening_len == 0 && e.plan_opening_len > 0 &&
          planned >= static_cast<uint64_t>(e.plan_opening_len)) {
        h.opening_len = e.plan_opening_len;
        for (int i = 0; i < h.opening_len; ++i) h.opening[i] = e.plan_opening[i];
      }
      h.allocs = allocs;
      h.peak_bytes = e.high_water > e.floor ? e.high_water - e.floor : 0;
      history_.add(h);
    }
    opening_ = EpochHistory::Epoch{};
    needed_bytes_ = std::max(needed_bytes_, e.high_water + e.overflow_peak);
    cadence_.on_reset(e.floor);
    cadence_top_ = e.floor;
    interleaved_ = false;
    last_slot_ = kNoSlot;
    switches_ = window_calls_ = 0;
    detector_on_.store(false, std::memory_order_relaxed);
    step_epoch_ = ~0ull;
    // Watch for an epoch that grows well past the ones before, when they share an opening
    // to look for (explicit steps need no guess).
    if (!explicit_steps_.load(std::memory_order_relaxed) && !warned_ && !no_resets_ &&
        history_.shared_opening() != nullptr) {
      watch_peak_ = history_.max_peak();
      watch_end_.store(e.floor + watch_peak_ + std::max(watch_peak_ / 2, capacity_ / 64),
                       std::memory_order_relaxed);
    } else {
      watch_end_.store(kNoWatch, std::memory_order_relaxed);
    }
    step.reuses = e.reuses_total - reuses_at_reset_;
    step.overflow_allocs = e.overflow_allocs_total - overflow_allocs_at_reset_;
    reuses_at_reset_ = e.reuses_total;
    overflow_allocs_at_reset_ = e.overflow_allocs_total;
  }
  step.epoch = e.epoch;
  step.steps = e.steps;
  step.allocs = allocs;
  step.peak_bytes = e.high_water > e.floor ? e.high_water - e.floor : 0;
  step.floor_bytes = e.floor;
  step.capacity_bytes = capacity_;
  step.overflow_peak_bytes = e.overflow_peak;
  step.needed_bytes = e.high_water + e.overflow_peak;
  return step;
}

void ArenaDiagnosis::log_step(const StepRecordFacts& f) const {
  if (log_enabled(ZARENA_LOG_INFO)) log_emit(step_record(f, source_));
}

uint64_t ArenaDiagnosis::count_step() {
  steps_.fetch_add(1, std::memory_order_relaxed);
  const uint64_t n = epoch_steps_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (!explicit_steps_.exchange(true, std::memory_order_relaxed)) {
    // Facts from now on: the guesses stop (and stop costing anything).
    Lock lock(mu_);
    detector_on_.store(false, std::memory_order_relaxed);
    watch_end_.store(kNoWatch, std::memory_order_relaxed);
  }
  return n;
}

void ArenaDiagnosis::on_step_begin(uint64_t n, const StepCounters& c) {
  CadenceFacts f;
  {
    Lock lock(mu_);
    if (step_epoch_ != c.epoch || n <= step1_n_ || n == 1) {
      step_epoch_ = c.epoch;
      step_live_ = step_low_ = c.live_bytes;
      step_low_n_ = n;
      step_count_ = c.live_count;
      step_rises_ = step_max_fall_ = 0;
      step_top_ = c.top;
      step1_n_ = n;
      return;
    }
    // A step began and no reset came since the one before: a fact. Warn when the steps
    // keep what they allocated (the arena then fills up step by step), not when they
    // give it back with shapes that vary (a block carried into the next step, of another
    // size each time).
    const bool rose = c.live_bytes > step_live_ && c.live_count > step_count_;
    if (c.live_bytes < step_live_) {
      step_max_fall_ = std::max(step_max_fall_, step_live_ - c.live_bytes);
    }
    step_rises_ = rose ? step_rises_ + 1 : 0;
    step_live_ = c.live_bytes;
    step_count_ = c.live_count;
    if (c.live_bytes < step_low_) {
      step_low_ = c.live_bytes;
      step_low_n_ = n;
    }
    step_top_ = c.top;
    if (!accumulating(true) || warned_ || no_resets_) return;
    warned_ = true;
    const uint64_t done = n - step_low_n_;  // steps that kept it (accumulating: > 0)
    f.verdict = verdict_name(c.resets > 0 ? VerdictId::kResetStopped : VerdictId::kNeverReset);
    f.steps = n;
    f.steps_explicit = true;
    f.step_repeats = n - 1;
    f.grown_bytes = step_live_ - step_low_;
    f.step_bytes = f.grown_bytes / done;
    f.offset_bytes = c.top;
    f.capacity_bytes = capacity_;
    // Each step adds what it keeps on top of the highest point so far (which holds one
    // step's temporaries already).
    f.steps_to_full =
        f.step_bytes == 0 || c.top >= capacity_ ? 0 : (capacity_ - c.top) / f.step_bytes;
    f.epoch_allocs = epoch_requests(c.epoch_allocs, c.plan_hits);
    f.step_allocs = f.epoch_allocs / n;
    f.resets = c.resets;
    f.prior_epochs = history_.epochs_seen();
  }
  if (log_enabled(ZARENA_LOG_WARN)) log_emit(reset_cadence_record(f, source_));
}

// --- exhaustion ---------------------------------------------------------------------------

ArenaDiagnosis::Report ArenaDiagnosis::claim_overflow(uint64_t epoch, const char* path,
                                                      uint64_t size, uint64_t aligned,
                                                      bool commit_failed) {
  uint64_t seen = overflow_epoch_.load(std::memory_order_relaxed);
  if (seen == epoch) return Report::kNone;
  if (!overflow_epoch_.compare_exchange_strong(seen, epoch)) return Report::kNone;
  const uint64_t now = g_clock.load(std::memory_order_relaxed)();
  Lock lock(mu_);
  overflow_.path = path;
  overflow_.size = size;
  overflow_.aligned = aligned;
  overflow_.commit_failed = commit_failed;
  ++overflow_epochs_;
  if (overflow_epochs_ <= kDetailedEpochs) {
    ++overflow_records_;
    last_report_ns_ = now;
    return Report::kRecord;
  }
  ++unreported_;
  if (now - last_report_ns_ >= kSummaryIntervalNs) {
    ++overflow_summaries_;
    last_report_ns_ = now;
    return Report::kSummary;
  }
  return Report::kNone;
}

bool ArenaDiagnosis::accumulating(bool warn) const {
  return step_rises_ >= (warn ? kExplicitRisesToWarn : 1) &&
         step_live_ - step_low_ > step_max_fall_;
}

uint64_t ArenaDiagnosis::epoch_requests(uint64_t region_allocs, uint64_t plan_hits) const {
  return region_allocs + (plan_hits > plan_hits_at_reset_ ? plan_hits - plan_hits_at_reset_ : 0);
}

void ArenaDiagnosis::add_step_facts(ExhaustionFacts* f) const {
  f->epoch_allocs = epoch_requests(f->epoch_allocs, f->plan_hits);
  if (explicit_steps_.load(std::memory_order_relaxed)) {
    f->steps_explicit = true;
    if (step_epoch_ == f->epoch) {
      f->steps = epoch_steps_.load(std::memory_order_relaxed);
      f->kept_bytes = accumulating(false) ? step_live_ - step_low_ : 0;
      const uint64_t n = epoch_steps_.load(std::memory_order_relaxed);
      if (f->kept_bytes != 0 && n > step_low_n_) {
        f->kept_per_step_bytes = f->kept_bytes / (n - step_low_n_);
      }
    }
  } else if (cadence_.restarts() != 0 && !interleaved_) {
    f->kept_bytes = cadence_.kept_bytes();
    f->kept_per_step_bytes = cadence_.step_kept_bytes();
    f->steps =
        cadence_.resumed() ? ceil_div(f->epoch_allocs, history_.max_allocs()) : cadence_.steps();
  } else if (cadence_.uniform_run() != 0 && !interleaved_) {
    f->uniform_blocks = cadence_.uniform_run();
    f->uniform_size = cadence_.uniform_size();
    f->uniform_after_boundary = cadence_.uniform_marked();
  }
  f->no_resets = no_resets_;
  f->prior_epochs = history_.size();
  f->prior_peak_bytes = history_.max_peak();
  f->prior_allocs = history_.max_allocs();
  f->prior_consistent = history_.consistent();
  f->prior_shared_opening = history_.shared_opening() != nullptr;
}

void ArenaDiagnosis::complete_facts(Report kind, ExhaustionFacts* f, ReportCounts* counts,
                                    DiagnosisCounters* stats) {
  Lock lock(mu_);
  add_step_facts(f);
  if (counts != nullptr) {
    last_unreported_ = *f;
    have_unreported_facts_ = true;
    counts->overflow_epochs = overflow_epochs_;
    counts->unreported = kind == Report::kSummary ? std::exchange(unreported_, 0) : 0;
  }
  if (stats != nullptr) {
    stats->overflow_epochs = overflow_epochs_;
    stats->overflow_records = overflow_records_;
    stats->overflow_summaries = overflow_summaries_;
    stats->needed_bytes = needed_bytes_;
  }
}

void ArenaDiagnosis::emit_report(Report kind, const ExhaustionFacts& f, const ReportCounts& counts,
                                 uint64_t epochs, const std::string& top_tags) const {
  if (kind == Report::kNone || !log_enabled(ZARENA_LOG_WARN)) return;
  if (kind == Report::kRecord) {
    log_emit(first_overflow_record(f, source_, top_tags));
    return;
  }
  OverflowSummaryFacts sf;
  sf.last = f;
  sf.overflow_epochs = counts.overflow_epochs;
  // Not f.epoch + 1: the facts may be of an earlier epoch (those of the epochs not
  // reported one by one are not captured); the caller counts every epoch so far.
  sf.epochs = epochs;
  sf.unreported = counts.unreported;
  log_emit(overflow_summary_record(sf, source_));
}

void ArenaDiagnosis::flush_summary() {
  ExhaustionFacts f;
  ReportCounts counts;
  {
    Lock lock(mu_);
    if (unreported_ == 0 || !have_unreported_facts_) return;
    counts.unreported = std::exchange(unreported_, 0);
    f = last_unreported_;
    counts.overflow_epochs = overflow_epochs_;
    ++overflow_summaries_;
  }
  // Counted up to the latest epoch that overflowed.
  emit_report(Report::kSummary, f, counts, overflow_epoch_.load(std::memory_order_relaxed) + 1, "");
}

// --- questions ----------------------------------------------------------------------------

DiagnosisCounters ArenaDiagnosis::counters() const {
  DiagnosisCounters c;
  Lock lock(mu_);
  c.overflow_epochs = overflow_epochs_;
  c.overflow_records = overflow_records_;
  c.overflow_summaries = overflow_summaries_;
  c.needed_bytes = needed_bytes_;
  return c;
}

OverflowRequest ArenaDiagnosis::current_overflow(uint64_t epoch) const {
  if (overflow_epoch_.load(std::memory_order_relaxed) != epoch) return OverflowRequest{};
  Lock lock(mu_);
  OverflowRequest r = overflow_;
  r.overflowed = true;
  return r;
}

void ArenaDiagnosis::diagnose(const ExhaustionFacts& f, bool overflowed,
                              CurrentDiagnosis* out) const {
  out->facts = f;
  out->overflowed = overflowed;
  out->live_bytes = f.used_bytes + f.overflow_live_bytes;
  bool early = true;  // the steps' evidence is enough for an early verdict
  {
    Lock lock(mu_);
    if (f.steps_explicit) early = accumulating(true);
    out->warned = warned_;
    out->overflow_epochs = overflow_epochs_;
    out->needed_bytes = std::max(needed_bytes_, f.offset_bytes + f.overflow_live_bytes);
    if (explicit_steps_.load(std::memory_order_relaxed)) {
      const uint64_t per_step = f.kept_per_step_bytes;
      out->steps_to_full =
          per_step == 0 || step_top_ >= capacity_ ? 0 : (capacity_ - step_top_) / per_step;
    } else {
      out->steps_to_full = cadence_.steps_to_full(cadence_top_);
    }
  }
  if (overflowed) {
    Verdict v = zarena_core::diagnose(f);
    out->verdict = v.name;
    out->cause = std::move(v.cause);
    out->advice = std::move(v.advice);
    return;
  }
  // No overflow in this epoch: what the steps say so far (the early warning's verdict),
  // else nothing to fix.
  const uint64_t least = f.steps_explicit ? 1 : std::max<uint64_t>(1, capacity_ / 64);
  if (early && f.steps >= 2 && f.kept_bytes >= least) {
    ExhaustionFacts g = f;
    g.path = "none";
    Verdict v = zarena_core::diagnose(g);
    if (v.id == VerdictId::kNeverReset || v.id == VerdictId::kResetStopped) {
      out->verdict = v.name;
      out->cause = "not full yet, but " + v.cause;
      out->advice = std::move(v.advice);
      return;
    }
  }
  out->verdict = verdict_name(VerdictId::kOk);
  out->cause = f.steps >= 2 ? fmt::format(
                                  "no overflow in this epoch; {} steps gave back what "
                                  "they allocated",
                                  f.steps)
                            : std::string("no overflow in this epoch");
  out->advice = "";
}

}  // namespace zarena_core
