// The arena's diagnosis: feeds the cadence detector, turns zarena_step_begin into facts,
// compares each epoch with the ones before (reset stopped), and reports exhaustion. The
// first overflow of an epoch is counted; the first kDetailedEpochs such epochs are logged
// one by one ("arena.first_overflow"), later ones in a summary at most every
// kSummaryIntervalNs ("arena.overflow_summary"). A call that succeeds leaves the record to
// the reporter thread; a call that fails emits it itself and carries the verdict in its
// message. Locks: the diagnosis lock (diag_mu_) is never taken with a region lock held,
// and no record is built or emitted under it.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/arena.h"
#include "log/reporter.h"
#include "engine/tags.h"

namespace zarena_core {

namespace {

constexpr uint64_t kDetailedEpochs = ZARENA_OVERFLOW_RECORDS;
constexpr uint64_t kSummaryIntervalNs = 60'000'000'000ull;
constexpr uint64_t kNoWatch = ~0ull;
constexpr size_t kTopTags = 3;

uint64_t steady_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}
std::atomic<uint64_t (*)()> g_clock{steady_ns};

uint64_t ceil_div(uint64_t a, uint64_t b) { return b == 0 ? 0 : a / b + (a % b != 0); }

}  // namespace

void diag_set_clock_for_testing(uint64_t (*now_ns)()) noexcept {
  g_clock.store(now_ns != nullptr ? now_ns : steady_ns);
}

// What a successful call hands the reporter: plain data, copied into its queue.
struct Arena::ReportJob {
  Report kind;
  ExhaustionFacts facts;
  uint64_t overflow_epochs;
  uint64_t unreported;
  bool slow;
  uint64_t latency_ns, aligned;
  const char* path;
};

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
bool Arena::diag_interleaved_d(uint32_t slot) {
  if (slot != diag_last_slot_) {
    if (diag_last_slot_ != kNoSlot) ++diag_switches_;
    diag_last_slot_ = slot;
  }
  if (diag_switches_ > kInterleaveMax) {
    diag_interleaved_ = true;  // what it guessed from the mixed stream is not used either
    detector_on_.store(false, std::memory_order_relaxed);
    watch_end_.store(kNoWatch, std::memory_order_relaxed);
    return true;
  }
  if (++diag_window_calls_ == kInterleaveWindow) diag_window_calls_ = diag_switches_ = 0;
  return false;
}

void Arena::diag_on_alloc(uint64_t aligned, uint64_t end, uint64_t nth_in_slot, uint32_t slot) {
  const bool opening = nth_in_slot <= static_cast<uint64_t>(EpochHistory::kOpeningLen);
  CadenceFacts warn;
  bool do_warn = false;
  uint64_t prior_allocs = 0;
  {
    std::lock_guard<SpinLock> lock(diag_mu_);
    if (opening && opening_.opening_len < EpochHistory::kOpeningLen) {
      opening_.opening[opening_.opening_len++] = aligned;
    }
    if (end > cadence_top_) cadence_top_ = end;
    if (detector_on_.load(std::memory_order_relaxed) && !diag_interleaved_d(slot)) {
      if (cadence_.on_alloc(aligned, cadence_top_) && !warned_ &&
          !explicit_steps_.load(std::memory_order_relaxed)) {
        warned_ = true;
        do_warn = true;
        const uint64_t restarts = cadence_.restarts();
        warn.verdict = cadence_.resumed() ? "reset_stopped" : "never_reset";
        warn.steps = cadence_.steps();
        warn.step_allocs = cadence_.step_allocs();
        warn.grown_bytes = cadence_.grown_bytes();
        warn.step_bytes = restarts > 1 ? warn.grown_bytes / (restarts - 1) : warn.grown_bytes;
        warn.offset_bytes = cadence_top_;
        warn.capacity_bytes = capacity_;
        warn.steps_to_full = cadence_.steps_to_full(cadence_top_);
        if (restarts == 0 && cadence_.uniform_run() != 0) {  // one block kept per step
          const uint64_t size = cadence_.uniform_size();
          warn.steps = cadence_.uniform_run();
          warn.step_allocs = 1;
          warn.step_bytes = size;
          warn.grown_bytes = warn.steps * size;
          warn.steps_to_full = cadence_top_ < capacity_ ? (capacity_ - cadence_top_) / size : 0;
        }
        warn.prior_epochs = history_.epochs_seen();
        prior_allocs = history_.max_allocs();
      } else if (cadence_.gave_up()) {
        detector_on_.store(false, std::memory_order_relaxed);
        watch_end_.store(kNoWatch, std::memory_order_relaxed);
      }
    } else if (end > watch_end_.load(std::memory_order_relaxed)) {
      // This epoch went well past the peaks of the ones before it: a loop that stopped
      // resetting repeats their step. Watch for their opening from here.
      const uint64_t* opening = history_.shared_opening();
      if (opening != nullptr && !warned_ && !explicit_steps_.load(std::memory_order_relaxed)) {
        cadence_.resume(opening, cadence_top_);
        detector_on_.store(true, std::memory_order_relaxed);
        watch_end_.store(0, std::memory_order_relaxed);
      } else {
        watch_end_.store(kNoWatch, std::memory_order_relaxed);
      }
    }
  }
  if (do_warn) {
    zarena_stats s;
    stats(&s);
    warn.epoch_allocs = s.epoch_allocs;
    warn.resets = s.resets;
    if (warn.steps == 0) warn.steps = ceil_div(s.epoch_allocs, prior_allocs);
    if (warn.step_allocs == 0) warn.step_allocs = prior_allocs;
    warn.step_repeats = warn.steps > 0 ? warn.steps - 1 : 0;
    warn_cadence(warn);
  }
}

void Arena::diag_on_free(uint64_t size, uint32_t slot) {
  std::lock_guard<SpinLock> lock(diag_mu_);
  if (detector_on_.load(std::memory_order_relaxed) && !diag_interleaved_d(slot)) {
    cadence_.on_free(size);
  }
}

void Arena::diag_on_boundary() {
  std::lock_guard<SpinLock> lock(diag_mu_);
  if (detector_on_.load(std::memory_order_relaxed)) cadence_.on_step_boundary(cadence_top_);
  // Explicit steps: a boundary before the second step ends the set-up (weights uploaded
  // after the first zarena_step_begin are not what a step kept).
  if (epoch_steps_.load(std::memory_order_relaxed) <= 1) step_epoch_ = ~0ull;
}

void Arena::diag_on_reset(const EpochEnd& e) {
  std::lock_guard<SpinLock> lock(diag_mu_);
  if (e.epoch != 0) {
    EpochHistory::Epoch h = opening_;
    h.allocs = e.allocs;
    h.peak_bytes = e.high_water > e.floor ? e.high_water - e.floor : 0;
    history_.add(h);
  }
  opening_ = EpochHistory::Epoch{};
  needed_bytes_ = std::max(needed_bytes_, e.high_water + e.overflow_peak);
  cadence_.on_reset(e.floor);
  cadence_top_ = e.floor;
  diag_interleaved_ = false;
  diag_last_slot_ = kNoSlot;
  diag_switches_ = diag_window_calls_ = 0;
  detector_on_.store(false, std::memory_order_relaxed);
  step_epoch_ = ~0ull;
  // Watch for an epoch that grows well past the ones before, when they share an opening
  // to look for (explicit steps need no guess).
  if (!explicit_steps_.load(std::memory_order_relaxed) && !warned_ && !no_resets() &&
      history_.shared_opening() != nullptr) {
    watch_peak_ = history_.max_peak();
    watch_end_.store(e.floor + watch_peak_ + std::max(watch_peak_ / 2, capacity_ / 64),
                     std::memory_order_relaxed);
  } else {
    watch_end_.store(kNoWatch, std::memory_order_relaxed);
  }
}

void Arena::warn_cadence(CadenceFacts f) {
  if (log_enabled(ZARENA_LOG_WARN)) log_emit(reset_cadence_record(f, name_));
}

// --- explicit steps ---------------------------------------------------------------------

void Arena::step_begin() {
  steps_.fetch_add(1, std::memory_order_relaxed);
  const uint64_t n = epoch_steps_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (trace_ != nullptr) trace_->on_step_begin();
  if (!explicit_steps_.exchange(true, std::memory_order_relaxed)) {
    // Facts from now on: the guesses stop (and stop costing anything).
    std::lock_guard<SpinLock> lock(diag_mu_);
    detector_on_.store(false, std::memory_order_relaxed);
    watch_end_.store(kNoWatch, std::memory_order_relaxed);
  }
  zarena_stats s;
  stats(&s);
  const uint64_t live = s.used_bytes + s.overflow_live_bytes;
  const uint64_t top = s.epoch_high_water_bytes;
  CadenceFacts f;
  bool warn = false;
  {
    std::lock_guard<SpinLock> lock(diag_mu_);
    if (step_epoch_ != s.epoch || n <= step1_n_ || n == 1) {
      step_epoch_ = s.epoch;
      step1_live_ = step_live_ = live;
      step_top_ = top;
      step1_n_ = n;
    } else {
      // A step began and no reset came since the one before: a fact. Warn when the steps
      // keep what they allocated (the arena then fills up step by step).
      const bool grew = live > step_live_;
      step_live_ = live;
      step_top_ = top;
      if (grew && !warned_ && !no_resets()) {
        warned_ = true;
        warn = true;
        const uint64_t done = n - step1_n_;  // steps completed since the first one seen
        f.verdict = s.resets > 0 ? "reset_stopped" : "never_reset";
        f.steps = n;
        f.steps_explicit = true;
        f.step_repeats = n - 1;
        f.grown_bytes = live - step1_live_;
        f.step_bytes = f.grown_bytes / done;
        f.offset_bytes = top;
        f.capacity_bytes = capacity_;
        // Each step adds what it keeps on top of the highest point so far (which holds one
        // step's temporaries already).
        f.steps_to_full =
            f.step_bytes == 0 || top >= capacity_ ? 0 : (capacity_ - top) / f.step_bytes;
        f.epoch_allocs = s.epoch_allocs;
        f.step_allocs = s.epoch_allocs / n;
        f.resets = s.resets;
        f.prior_epochs = history_.epochs_seen();
      }
    }
  }
  if (warn) warn_cadence(f);
}

// --- facts ------------------------------------------------------------------------------

void Arena::add_step_facts_d(ExhaustionFacts* f) const {
  if (explicit_steps_.load(std::memory_order_relaxed)) {
    f->steps_explicit = true;
    if (step_epoch_ == f->epoch) {
      f->steps = epoch_steps_.load(std::memory_order_relaxed);
      f->kept_bytes = step_live_ > step1_live_ ? step_live_ - step1_live_ : 0;
    }
  } else if (cadence_.restarts() != 0 && !diag_interleaved_) {
    f->kept_bytes = cadence_.kept_bytes();
    f->steps =
        cadence_.resumed() ? ceil_div(f->epoch_allocs, history_.max_allocs()) : cadence_.steps();
  } else if (cadence_.uniform_run() != 0 && !diag_interleaved_) {
    f->uniform_blocks = cadence_.uniform_run();
    f->uniform_size = cadence_.uniform_size();
  }
  f->prior_epochs = history_.size();
  f->prior_peak_bytes = history_.max_peak();
  f->prior_allocs = history_.max_allocs();
  f->prior_consistent = history_.consistent();
  f->prior_shared_opening = history_.shared_opening() != nullptr;
}

ExhaustionFacts Arena::capture_facts(const char* path, uint64_t size, uint64_t aligned,
                                     bool commit_failed) {
  ExhaustionFacts f;
  f.path = path;
  f.requested_bytes = size;
  f.aligned_bytes = aligned;
  {
    Region::WriterLock w(region_);
    RegionSnapshot r;
    region_.snapshot_w(&r);
    const OverflowStats o = overflow_.stats();
    f.capacity_bytes = capacity_;
    f.offset_bytes = r.top;
    f.floor_bytes = r.floor;
    f.used_bytes = r.live_bytes;
    f.overflow_live_bytes = o.live_bytes;
    f.live_count = r.live_count + o.live_count;
    f.epoch = r.epoch;
    f.epoch_allocs = r.sum.epoch_allocs;
    f.epoch_max_alloc_bytes = r.sum.epoch_max_alloc;
    f.step_max_alloc_bytes = r.sum.step_max_alloc;
    f.hits = r.sum.hits;
    f.misses = r.sum.misses;
    f.reuses = r.sum.reuses;
    f.free_list_len = r.free_count;
    f.free_list_bytes = r.free_bytes;
    f.largest_free_block_bytes = r.largest_free;
    f.epoch_peak_bytes = r.sum.epoch_high_water > r.floor ? r.sum.epoch_high_water - r.floor : 0;
    f.committed_bytes = committed_bytes_.load(std::memory_order_relaxed);
    if (commit_failed) {
      // commit_failure_ is written under this lock (ensure_committed).
      f.commit_failed = true;
      const size_t n = std::min(commit_failure_.size(), sizeof f.commit_error - 1);
      std::memcpy(f.commit_error, commit_failure_.data(), n);
      f.commit_error[n] = 0;
    }
  }
  f.resets = resets_.load(std::memory_order_relaxed);
  f.no_resets = no_resets();
  std::lock_guard<SpinLock> lock(diag_mu_);
  add_step_facts_d(&f);
  return f;
}

// --- reports ----------------------------------------------------------------------------

Arena::Report Arena::claim_overflow_epoch(uint64_t epoch, const char* path, uint64_t size,
                                          uint64_t aligned, bool commit_failed) {
  uint64_t seen = first_overflow_epoch_.load(std::memory_order_relaxed);
  if (seen == epoch) return Report::kNone;
  if (!first_overflow_epoch_.compare_exchange_strong(seen, epoch)) return Report::kNone;
  const uint64_t now = g_clock.load(std::memory_order_relaxed)();
  std::lock_guard<SpinLock> lock(diag_mu_);
  overflow_path_ = path;
  overflow_size_ = size;
  overflow_aligned_ = aligned;
  overflow_commit_failed_ = commit_failed;
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

std::string Arena::top_tags(uint64_t epoch) {
  if (tag_count() == 0) return "";
  std::unordered_map<uint32_t, uint64_t> bytes;
  std::vector<OverflowBlockView> over;
  {
    Region::WriterLock w(region_);
    region_.tag_bytes_w(epoch, &bytes);
    overflow_.live_blocks(&over);
  }
  for (const OverflowBlockView& b : over) {
    if (b.tag != 0 && b.epoch == epoch) bytes[b.tag] += b.size;
  }
  std::vector<std::pair<uint32_t, uint64_t>> top(bytes.begin(), bytes.end());
  std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::string out;
  for (size_t i = 0; i < top.size() && i < kTopTags; ++i) {
    out += fmt::format("{}{} {}", i == 0 ? "" : ", ", tag_name(top[i].first),
                       human_bytes(top[i].second));
  }
  return out;
}

void Arena::emit_report(Report kind, const ExhaustionFacts& f, uint64_t unreported,
                        uint64_t overflow_epochs, uint64_t epochs) {
  if (kind == Report::kNone || !log_enabled(ZARENA_LOG_WARN)) return;
  if (kind == Report::kRecord) {
    log_emit(first_overflow_record(f, name_, top_tags(f.epoch)));
    return;
  }
  OverflowSummaryFacts sf;
  sf.last = f;
  sf.overflow_epochs = overflow_epochs;
  // Not f.epoch + 1: the facts may be of an earlier epoch (those of the epochs not
  // reported one by one are not captured); the caller counts every epoch so far.
  sf.epochs = epochs;
  sf.unreported = unreported;
  log_emit(overflow_summary_record(sf, name_));
}

void Arena::run_report_job(void* self, const void* payload) {
  Arena* a = static_cast<Arena*>(self);
  ReportJob job;
  std::memcpy(&job, payload, sizeof job);
  a->emit_report(job.kind, job.facts, job.unreported, job.overflow_epochs, job.facts.epoch + 1);
  if (job.slow && log_enabled(ZARENA_LOG_WARN)) {
    log_emit(overflow_slow_record(job.latency_ns, a->cfg_.overflow_slow_ns, job.aligned, job.path,
                                  a->name_));
  }
}

void Arena::report_success(const OverflowAttempt& a, uint64_t size, uint64_t aligned,
                           uint64_t epoch, bool commit_failed) {
  const Report kind = claim_overflow_epoch(epoch, a.path, size, aligned, commit_failed);
  if (kind == Report::kNone) {
    if (a.slow && log_enabled(ZARENA_LOG_WARN)) {
      log_emit(overflow_slow_record(a.latency_ns, cfg_.overflow_slow_ns, aligned, a.path, name_));
    }
    return;
  }
  static_assert(std::is_trivially_copyable<ReportJob>::value, "copied into the queue");
  static_assert(sizeof(ReportJob) <= Reporter::kPayloadMax, "fits the queue's payload");
  // The facts of this instant, cheaply (one snapshot); the record is built elsewhere.
  ReportJob job;
  job.kind = kind;
  job.facts = capture_facts(a.path, size, aligned, commit_failed);
  job.slow = a.slow;
  job.latency_ns = a.latency_ns;
  job.aligned = aligned;
  job.path = a.path;
  {
    std::lock_guard<SpinLock> lock(diag_mu_);
    last_unreported_ = job.facts;
    have_unreported_facts_ = true;
    job.overflow_epochs = overflow_epochs_;
    job.unreported = kind == Report::kSummary ? std::exchange(unreported_, 0) : 0;
  }
  if (!Reporter::post(this, &Arena::run_report_job, &job, sizeof job)) run_report_job(this, &job);
}

Verdict Arena::report_failure(const OverflowAttempt& a, uint64_t size, uint64_t aligned,
                              uint64_t epoch, bool commit_failed) {
  const Report kind = claim_overflow_epoch(epoch, a.path, size, aligned, commit_failed);
  const ExhaustionFacts f = capture_facts(a.path, size, aligned, commit_failed);
  uint64_t unreported = 0, overflow_epochs = 0;
  {
    std::lock_guard<SpinLock> lock(diag_mu_);
    last_unreported_ = f;
    have_unreported_facts_ = true;
    overflow_epochs = overflow_epochs_;
    if (kind == Report::kSummary) unreported = std::exchange(unreported_, 0);
  }
  // Records the reporter still holds for this arena go first; this one is out before the
  // call returns.
  Reporter::flush(this);
  emit_report(kind, f, unreported, overflow_epochs, f.epoch + 1);
  return diagnose(f);
}

void Arena::flush_summary() {
  ExhaustionFacts f;
  uint64_t unreported = 0, overflow_epochs = 0;
  {
    std::lock_guard<SpinLock> lock(diag_mu_);
    if (unreported_ == 0 || !have_unreported_facts_) return;
    unreported = std::exchange(unreported_, 0);
    f = last_unreported_;
    overflow_epochs = overflow_epochs_;
    ++overflow_summaries_;
  }
  // Counted up to the latest epoch that overflowed (first_overflow_epoch_ holds it).
  emit_report(Report::kSummary, f, unreported, overflow_epochs,
              first_overflow_epoch_.load(std::memory_order_relaxed) + 1);
}

void Arena::emit_step_record(const EpochEnd& e) {
  if (!log_enabled(ZARENA_LOG_INFO)) return;
  StepRecordFacts f;
  f.epoch = e.epoch;
  f.steps = e.steps;
  f.allocs = e.allocs;
  f.peak_bytes = e.high_water > e.floor ? e.high_water - e.floor : 0;
  f.floor_bytes = e.floor;
  f.capacity_bytes = capacity_;
  f.overflow_peak_bytes = e.overflow_peak;
  f.needed_bytes = e.high_water + e.overflow_peak;
  {
    std::lock_guard<SpinLock> lock(diag_mu_);
    f.reuses = e.reuses_total - reuses_at_reset_;
    f.overflow_allocs = e.overflow_allocs_total - overflow_allocs_at_reset_;
    reuses_at_reset_ = e.reuses_total;
    overflow_allocs_at_reset_ = e.overflow_allocs_total;
  }
  log_emit(step_record(f, name_));
}

// --- zarena_diagnose --------------------------------------------------------------------

void Arena::diagnose_now(Diagnosis* out) {
  const uint64_t epoch = region_.epoch();
  const bool overflowed = first_overflow_epoch_.load(std::memory_order_relaxed) == epoch;
  const char* path = "";
  uint64_t size = 0, aligned = 0;
  bool commit_failed = false;
  if (overflowed) {
    std::lock_guard<SpinLock> lock(diag_mu_);
    path = overflow_path_;
    size = overflow_size_;
    aligned = overflow_aligned_;
    commit_failed = overflow_commit_failed_;
  }
  ExhaustionFacts f = capture_facts(path, size, aligned, commit_failed);
  out->facts = f;
  out->overflowed = overflowed && f.epoch == epoch;
  out->live_bytes = f.used_bytes + f.overflow_live_bytes;
  {
    std::lock_guard<SpinLock> lock(diag_mu_);
    out->warned = warned_;
    out->overflow_epochs = overflow_epochs_;
    out->needed_bytes = std::max(needed_bytes_, f.offset_bytes + f.overflow_live_bytes);
    if (explicit_steps_.load(std::memory_order_relaxed)) {
      const uint64_t done = f.steps > step1_n_ ? f.steps - step1_n_ : 0;
      const uint64_t per_step = done != 0 ? f.kept_bytes / done : 0;
      out->steps_to_full =
          per_step == 0 || step_top_ >= capacity_ ? 0 : (capacity_ - step_top_) / per_step;
    } else {
      out->steps_to_full = cadence_.steps_to_full(cadence_top_);
    }
  }
  if (out->overflowed) {
    Verdict v = diagnose(f);
    out->verdict = v.name;
    out->cause = std::move(v.cause);
    out->advice = std::move(v.advice);
    return;
  }
  // No overflow in this epoch: what the steps say so far (the early warning's verdict),
  // else nothing to fix.
  const uint64_t least = f.steps_explicit ? 1 : std::max<uint64_t>(1, capacity_ / 64);
  if (f.steps >= 2 && f.kept_bytes >= least) {
    ExhaustionFacts g = f;
    g.path = "none";
    Verdict v = diagnose(g);
    if (std::strcmp(v.name, "never_reset") == 0 || std::strcmp(v.name, "reset_stopped") == 0) {
      out->verdict = v.name;
      out->cause = "not full yet, but " + v.cause;
      out->advice = std::move(v.advice);
      return;
    }
  }
  out->verdict = "ok";
  out->cause = f.steps >= 2 ? fmt::format(
                                  "no overflow in this epoch; {} steps gave back what "
                                  "they allocated",
                                  f.steps)
                            : std::string("no overflow in this epoch");
  out->advice = "";
}

}  // namespace zarena_core
