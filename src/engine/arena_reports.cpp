// The arena's side of the diagnosis (diagnosis/arena_diagnosis.h owns the state): it
// gives the diagnosis the snapshots it needs and emits the reports it decides on. A call
// whose overflow succeeded leaves its record to the reporter thread (log/reporter.h), or
// emits it itself with ZARENA_FLAG_DIAGNOSE_SYNC; a
// call that failed builds its record, its error text and its verdict from one snapshot
// and emits the record before it returns.
#include <fmt/format.h>

#include <cstring>
#include <type_traits>

#include "engine/arena.h"
#include "engine/tags.h"
#include "log/reporter.h"

namespace zarena_core {

// What a successful call hands the reporter: plain data, copied into its queue.
struct Arena::ReportJob {
  Report kind;
  ExhaustionFacts facts;
  ArenaDiagnosis::ReportCounts counts;
  bool slow;
  uint64_t latency_ns, aligned;
  const char* path;
};

void Arena::diagnose_alloc(uint64_t aligned, uint64_t end, uint64_t nth_in_slot, uint32_t slot) {
  if (!diag_.on_alloc(aligned, end, nth_in_slot, slot)) return;
  ArenaSnapshot s;
  snapshot(&s);
  diag_.warn_cadence(step_counters(s));
}

void Arena::step_begin() {
  const uint64_t n = diag_.count_step();
  if (trace_ != nullptr) trace_->on_step_begin();
  diag_.on_step_begin(n, step_counters_now());
  plan_boundary();
}

void Arena::run_report_job(void* self, const void* payload) {
  Arena* a = static_cast<Arena*>(self);
  ReportJob job;
  std::memcpy(&job, payload, sizeof job);
  std::string tags;
  if (job.kind == Report::kRecord && tag_count() != 0) {
    ArenaSnapshot s;
    a->snapshot(&s, job.facts.epoch);
    tags = top_tags_text(s);
  }
  a->diag_.emit_report(job.kind, job.facts, job.counts, job.facts.epoch + 1, tags);
  if (job.slow && log_enabled(ZARENA_LOG_WARN)) {
    log_emit(overflow_slow_record(job.latency_ns, a->cfg_.overflow_slow_ns, job.aligned, job.path,
                                  a->source_));
  }
}

void Arena::report_success(const OverflowAttempt& a, uint64_t size, uint64_t aligned,
                           uint64_t epoch, const std::string& commit_failure) {
  const bool commit_failed = !commit_failure.empty();
  const Report kind = diag_.claim_overflow(epoch, a.path, size, aligned, commit_failed);
  if (kind == Report::kNone) {
    if (a.slow && log_enabled(ZARENA_LOG_WARN)) {
      log_emit(overflow_slow_record(a.latency_ns, cfg_.overflow_slow_ns, aligned, a.path, source_));
    }
    return;
  }
  static_assert(std::is_trivially_copyable<ReportJob>::value, "copied into the queue");
  static_assert(sizeof(ReportJob) <= Reporter::kPayloadMax, "fits the queue's payload");
  // The facts of this instant, cheaply (one snapshot, no walk); the record is built and
  // its top tags found on the reporter thread.
  ReportJob job;
  job.kind = kind;
  ArenaSnapshot s;
  snapshot(&s);
  job.facts = exhaustion_facts(s, a.path, size, aligned, commit_failed, commit_failure);
  diag_.complete_facts(kind, &job.facts, &job.counts, nullptr);
  job.slow = a.slow;
  job.latency_ns = a.latency_ns;
  job.aligned = aligned;
  job.path = a.path;
  // ZARENA_FLAG_DIAGNOSE_SYNC: out before the call returns, after this arena's records the
  // reporter still holds (their order kept); no lock is held here.
  if ((cfg_.flags & ZARENA_FLAG_DIAGNOSE_SYNC) != 0) {
    Reporter::flush(this);
    run_report_job(this, &job);
    return;
  }
  if (!Reporter::post(this, &Arena::run_report_job, &job, sizeof job)) run_report_job(this, &job);
}

Verdict Arena::report_failure(const OverflowAttempt& a, uint64_t size, uint64_t aligned,
                              uint64_t epoch, const std::string& commit_failure,
                              zarena_stats* stats) {
  const bool commit_failed = !commit_failure.empty();
  const Report kind = diag_.claim_overflow(epoch, a.path, size, aligned, commit_failed);
  ArenaSnapshot s;
  snapshot(&s, kind == Report::kRecord && tag_count() != 0 ? kCurrentEpochTags : kNoTags);
  ExhaustionFacts f = exhaustion_facts(s, a.path, size, aligned, commit_failed, commit_failure);
  ArenaDiagnosis::ReportCounts counts;
  DiagnosisCounters d;
  diag_.complete_facts(kind, &f, &counts, &d);
  fill_stats(s, d, stats);
  // Records the reporter still holds for this arena go first; this one is out before the
  // call returns.
  Reporter::flush(this);
  diag_.emit_report(kind, f, counts, f.epoch + 1, top_tags_text(s));
  return diagnose(f);
}

void Arena::diagnose_now(CurrentDiagnosis* out) {
  const uint64_t epoch = region_.epoch();
  const OverflowRequest req = diag_.current_overflow(epoch);
  ArenaSnapshot s;
  snapshot(&s);
  ExhaustionFacts f = exhaustion_facts(s, req.path, req.size, req.aligned, req.commit_failed,
                                       req.commit_failed ? commits_.last_failure() : std::string());
  diag_.complete_facts(Report::kNone, &f, nullptr, nullptr);
  diag_.diagnose(f, req.overflowed && f.epoch == epoch, out);
}

}  // namespace zarena_core
