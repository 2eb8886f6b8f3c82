#include "diagnosis/diagnostics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "diagnosis/cadence.h"

namespace zarena_core {

namespace {

// The advice for a request no arena of this capacity can hold.
constexpr const char* kShapeAdvice =
    "check the tensor shape behind that request (a wrong dimension or a missing batch split)";
constexpr const char* kShapeFix = "check the tensor shape behind that request";

double percent(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

namespace {

constexpr const char* kResetAdvice =
    "call zarena_reset after every step (after every sample when accumulating gradients), "
    "and zarena_mark_step_boundary once after loading the weights";

uint64_t ceil_div(uint64_t a, uint64_t b) { return b == 0 ? 0 : a / b + (a % b != 0); }

// An epoch far beyond the consistent ones before it, whose steps open differently each
// time (so the detector could not see them repeat): only the counts tell.
bool reset_stopped_by_counts(const ExhaustionFacts& f) {
  return f.resets > 0 && !f.steps_explicit && f.prior_epochs >= 3 && f.prior_consistent &&
         !f.prior_shared_opening && f.prior_allocs > 0 && f.epoch_allocs >= 3 * f.prior_allocs &&
         f.epoch_peak_bytes >= 2 * f.prior_peak_bytes;
}

bool steps_kept_bytes(const ExhaustionFacts& f) {
  if (f.steps < 2) return false;
  const uint64_t least = f.steps_explicit ? 1 : std::max<uint64_t>(1, f.capacity_bytes / 64);
  return f.kept_bytes >= least;
}

std::string steps_phrase(const ExhaustionFacts& f, uint64_t steps) {
  return fmt::format("{} step{}{}", steps, steps == 1 ? "" : "s",
                     f.steps_explicit ? " (counted by zarena_step_begin)" : "");
}

}  // namespace

uint64_t reported_steps(const ExhaustionFacts& f) {
  if (f.steps != 0 || f.steps_explicit) return f.steps;
  if (reset_stopped_by_counts(f)) return ceil_div(f.epoch_allocs, f.prior_allocs);
  return 0;
}

Verdict diagnose(const ExhaustionFacts& f) {
  if (std::strcmp(f.path, "capture_refused") == 0) {
    return {VerdictId::kCaptureRefused,
            "the region was full while the arena's stream was being captured into a CUDA "
            "graph, where a synchronous overflow allocation would break the capture",
            "use the ASYNC overflow policy with the captured stream, or give the arena room "
            "for the whole captured step",
            "use the ASYNC policy on the captured stream"};
  }
  if (f.commit_failed) {
    return {VerdictId::kCommitFailed,
            fmt::format("the expandable arena could not commit more memory ({} committed of its "
                        "{} maximum): {}",
                        human_bytes(f.committed_bytes), human_bytes(f.capacity_bytes),
                        f.commit_error[0] == 0 ? "the backend refused" : f.commit_error),
            "free device memory held elsewhere (other arenas, caches, other processes on the "
            "GPU), or lower the arena's maximum to what the device can hold (trim_keep_bytes "
            "makes idle expandable arenas give memory back at reset)",
            "free device memory or lower the arena's maximum"};
  }
  const uint64_t usable = f.capacity_bytes > f.floor_bytes ? f.capacity_bytes - f.floor_bytes : 0;
  const uint64_t biggest = std::max(f.aligned_bytes, f.step_max_alloc_bytes);
  if (f.aligned_bytes > usable) {
    return {VerdictId::kRunawayBuffer,
            f.aligned_bytes > f.capacity_bytes
                ? fmt::format("one request of {} can never fit: it is larger than the whole {} "
                              "arena",
                              human_bytes(f.aligned_bytes), human_bytes(f.capacity_bytes))
                : fmt::format("one request of {} can never fit: only {} of the {} arena lies "
                              "above its floor",
                              human_bytes(f.aligned_bytes), human_bytes(usable),
                              human_bytes(f.capacity_bytes)),
            std::string(kShapeAdvice) + ", or raise the capacity if it is meant to be that big",
            kShapeFix};
  }
  const uint64_t steps = reported_steps(f);
  if (steps_kept_bytes(f) && f.resets == 0 && !f.no_resets) {
    const uint64_t per_step =
        f.kept_per_step_bytes != 0 ? f.kept_per_step_bytes : f.kept_bytes / (steps - 1);
    return {VerdictId::kNeverReset,
            fmt::format("the arena was never reset while {} ran in this epoch and kept {} ({} "
                        "per step, {} allocations)",
                        steps_phrase(f, steps), human_bytes(f.kept_bytes), human_bytes(per_step),
                        f.epoch_allocs),
            kResetAdvice, "call zarena_reset after every step"};
  }
  if (f.uniform_blocks >= CadenceDetector::kUniformRunMin && f.resets == 0 && !f.no_resets) {
    return {VerdictId::kNeverReset,
            fmt::format("the arena was never reset{}: since {} {} blocks of {} were allocated "
                        "and none was freed ({} kept, {} allocations in the epoch)",
                        f.uniform_after_boundary ? ", though a step boundary was marked" : "",
                        f.uniform_after_boundary ? "then" : "it was created", f.uniform_blocks,
                        human_bytes(f.uniform_size), human_bytes(f.uniform_blocks * f.uniform_size),
                        f.epoch_allocs),
            std::string(kResetAdvice) +
                " (if one step really allocates them all, raise the capacity instead)",
            "call zarena_reset after every step"};
  }
  if (!f.no_resets && ((steps_kept_bytes(f) && f.resets > 0) || reset_stopped_by_counts(f))) {
    const std::string before =
        f.prior_epochs == 0
            ? fmt::format("the arena was reset {} time(s) before", f.resets)
            : fmt::format(
                  "the {} epoch(s) before this one each made up to {} allocations and "
                  "peaked at {}",
                  f.prior_epochs, f.prior_allocs, human_bytes(f.prior_peak_bytes));
    return {VerdictId::kResetStopped,
            fmt::format("{}, but epoch {} has run {} without a reset ({} allocations, {} above "
                        "the floor{})",
                        before, f.epoch, steps_phrase(f, steps), f.epoch_allocs,
                        human_bytes(f.epoch_peak_bytes),
                        f.kept_bytes != 0 ? ", " + human_bytes(f.kept_bytes) + " kept" : ""),
            fmt::format("call zarena_reset after every step again: the loop reset after each "
                        "step up to epoch {} and then stopped, so check the condition or code "
                        "path around the reset",
                        f.epoch),
            "call zarena_reset after every step again"};
  }
  if (biggest >= usable / 2) {
    return {VerdictId::kRunawayBuffer,
            fmt::format("one request of {} is {:.0f}% of the {} a step can use",
                        human_bytes(biggest), percent(biggest, usable), human_bytes(usable)),
            kShapeAdvice, kShapeFix};
  }
  if (f.free_list_bytes >= f.aligned_bytes && f.free_list_bytes >= usable / 8 &&
      f.largest_free_block_bytes < f.aligned_bytes) {
    return {VerdictId::kFragmentation,
            fmt::format("{} are free in {} blocks but the largest holds only {} of the {} "
                        "requested",
                        human_bytes(f.free_list_bytes), f.free_list_len,
                        human_bytes(f.largest_free_block_bytes), human_bytes(f.aligned_bytes)),
            "allocate long-lived buffers before zarena_mark_step_boundary and short-lived "
            "ones after them (free in reverse order where you can), or raise the capacity",
            "allocate long-lived buffers before the step boundary"};
  }
  const std::string needed = human_bytes(f.used_bytes + f.overflow_live_bytes + f.aligned_bytes);
  if (f.steps >= 2) {
    // Steps repeated and gave back what they allocated: a reset would change nothing.
    return {VerdictId::kWorkingSetFull,
            fmt::format("one step needs more than the {} arena: {} ran in this epoch and "
                        "gave back what they allocated (live bytes did not grow step over "
                        "step), {} allocations",
                        human_bytes(f.capacity_bytes), steps_phrase(f, steps), f.epoch_allocs),
            fmt::format("raise the capacity (ZARENA_CAPACITY_BYTES) beyond {} or reduce the "
                        "batch size, since a reset would not help: the steps give back what "
                        "they allocate",
                        needed),
            fmt::format("raise the capacity beyond {} (a reset would not help)", needed)};
  }
  if (f.no_resets) {
    // A general-purpose pool: what is live at once is what the program holds.
    return {VerdictId::kWorkingSetFull,
            fmt::format("the blocks the program holds at once need more than the {} arena ({} "
                        "live, {} of the {} allocated so far freed again; it never resets)",
                        human_bytes(f.capacity_bytes), f.live_count,
                        f.epoch_allocs - std::min(f.epoch_allocs, f.live_count), f.epoch_allocs),
            fmt::format("raise the capacity (ZARENA_CAPACITY_BYTES) beyond {} or reduce the "
                        "batch size",
                        needed),
            fmt::format("raise the capacity beyond {} or reduce the batch size", needed)};
  }
  if (f.resets == 0 && f.live_count != 0 && f.epoch_allocs >= 8 * f.live_count) {
    // No step seen, but the epoch gives its blocks back (a general-purpose workload).
    return {VerdictId::kWorkingSetFull,
            fmt::format("the work in flight needs more than the {} arena: {} of the {} blocks "
                        "allocated in this epoch were freed again ({} live), so the memory "
                        "comes back and does not pile up",
                        human_bytes(f.capacity_bytes), f.epoch_allocs - f.live_count,
                        f.epoch_allocs, f.live_count),
            fmt::format("raise the capacity (ZARENA_CAPACITY_BYTES) beyond {} or reduce the "
                        "batch size, since a reset would not help: the blocks are given back",
                        needed),
            fmt::format("raise the capacity beyond {} (a reset would not help)", needed)};
  }
  if (f.resets == 0) {
    return {VerdictId::kWorkingSetFull,
            fmt::format("the first step alone needs more than the {} arena ({} allocations "
                        "so far, no reset yet)",
                        human_bytes(f.capacity_bytes), f.epoch_allocs),
            fmt::format("raise the capacity (ZARENA_CAPACITY_BYTES or ZERFOO_ARENA_SIZE_GB) "
                        "beyond {} or reduce the batch size, and if this is not the first "
                        "step, call zarena_reset after every step",
                        needed),
            fmt::format("raise the capacity beyond {} or reduce the batch size", needed)};
  }
  return {VerdictId::kWorkingSetFull,
          fmt::format("one step needs more than the {} arena ({} allocations this epoch)",
                      human_bytes(f.capacity_bytes), f.epoch_allocs),
          fmt::format("raise the capacity (ZARENA_CAPACITY_BYTES or ZERFOO_ARENA_SIZE_GB) "
                      "beyond {} or reduce the batch size",
                      needed),
          fmt::format("raise the capacity beyond {} or reduce the batch size", needed)};
}

Verdict oversized_request_verdict(uint64_t size) {
  return {VerdictId::kRunawayBuffer,
          fmt::format("one request of {} bytes is larger than any arena can serve", size),
          kShapeAdvice, kShapeFix};
}

Verdict graph_capture_verdict(const std::string& why) {
  return {VerdictId::kGraphCapture,
          fmt::format("during a graph-captured step {}; an address outside the plan's zone, "
                      "baked into the graph, would be handed out again under it",
                      why),
          "capture a step that makes exactly the allocations of the planned eager steps before "
          "it (the same sizes and tags in the same order, on the same threads, each freed where "
          "it was), after one such step served whole (zarena_graph_get_info: ready)",
          "capture a step the same as the planned ones"};
}

std::string refusal_phrase(uint64_t aligned, uint64_t capacity, uint64_t floor) {
  if (aligned > capacity) return "request larger than the arena's capacity";
  if (aligned > capacity - std::min(capacity, floor)) {
    return "request larger than the space above the floor";
  }
  return "arena full";
}

std::string verdict_suffix(const Verdict& v) {
  return fmt::format("verdict={}; fix: {}", v.name, v.advice);
}

LogRecord first_overflow_record(const ExhaustionFacts& f, const LogSource& arena,
                                const std::string& top_tags) {
  const Verdict v = diagnose(f);
  const std::string what = refusal_phrase(f.aligned_bytes, f.capacity_bytes, f.floor_bytes);
  LogRecord rec(log_events::kFirstOverflow, arena);
  rec.message(fmt::format(
      "{}, verdict {}: {}. Fix: {}. (request {}, {} of {} in use, overflow {}{}{})", what, v.name,
      v.cause, v.advice, human_bytes(f.requested_bytes), human_bytes(f.offset_bytes),
      human_bytes(f.capacity_bytes), f.path, top_tags.empty() ? "" : "; top tags: ", top_tags));
  rec.add_string("path", f.path)
      .add_uint("requested_bytes", f.requested_bytes)
      .add_uint("aligned_bytes", f.aligned_bytes)
      .add_uint("capacity_bytes", f.capacity_bytes)
      .add_uint("offset_bytes", f.offset_bytes)
      .add_uint("epoch_allocs", f.epoch_allocs)
      .add_uint("epoch_max_alloc_bytes", f.epoch_max_alloc_bytes)
      .add_uint("hits", f.hits)
      .add_uint("misses", f.misses)
      .add_uint("reuses", f.reuses)
      .add_uint("resets", f.resets)
      .add_uint("free_list_len", f.free_list_len)
      .add_string("verdict", v.name)
      .add_string("advice", v.advice)
      .add_uint("epoch", f.epoch)
      .add_uint("steps", reported_steps(f))
      .add_bool("steps_explicit", f.steps_explicit)
      .add_uint("kept_bytes", f.kept_bytes);
  if (!top_tags.empty()) rec.add_string("top_tags", top_tags);
  // The human line leads with the verdict and its fix, then who holds the memory; the
  // facts are in the fields.
  rec.human(fmt::format("{}, verdict {}. Fix: {}", what, v.name, v.fix))
      .headline({"top_tags", "requested_bytes", "verdict"});
  return rec;
}

LogRecord overflow_summary_record(const OverflowSummaryFacts& f, const LogSource& arena) {
  const Verdict v = diagnose(f.last);
  LogRecord rec(log_events::kOverflowSummary, arena);
  rec.message(fmt::format(
      "overflowed in {} of {} epochs ({} since the last record, not logged one by one), "
      "verdict {} (epoch {}): {}. Fix: {}",
      f.overflow_epochs, f.epochs, f.unreported, v.name, f.last.epoch, v.cause, v.advice));
  rec.add_uint("overflow_epochs", f.overflow_epochs)
      .add_uint("epochs", f.epochs)
      .add_uint("unreported_epochs", f.unreported)
      .add_uint("epoch", f.last.epoch)
      .add_string("path", f.last.path)
      .add_uint("requested_bytes", f.last.requested_bytes)
      .add_uint("capacity_bytes", f.last.capacity_bytes)
      .add_string("verdict", v.name)
      .add_string("advice", v.advice);
  rec.human(fmt::format("overflowed in {}/{} epochs, verdict {}. Fix: {}", f.overflow_epochs,
                        f.epochs, v.name, v.fix))
      .headline({"verdict"});
  return rec;
}

LogRecord overflow_slow_record(uint64_t duration_ns, uint64_t threshold_ns, uint64_t bytes,
                               const char* path, const LogSource& arena) {
  LogRecord rec(log_events::kOverflowSlow, arena);
  rec.message(fmt::format("overflow allocation of {} bytes via {} took {:.3f} ms", bytes, path,
                          static_cast<double>(duration_ns) / 1e6));
  rec.add_uint("duration_ns", duration_ns)
      .add_uint("threshold_ns", threshold_ns)
      .add_uint("bytes", bytes)
      .add_string("path", path)
      .headline({"threshold_ns"});
  return rec;
}

LogRecord reset_cadence_record(const CadenceFacts& f, const LogSource& arena) {
  const double fill = percent(f.offset_bytes, f.capacity_bytes);
  const bool stopped = std::strcmp(f.verdict, verdict_name(VerdictId::kResetStopped)) == 0;
  const std::string left =
      f.steps_to_full == 0
          ? std::string()
          : fmt::format(", about {} more steps until it overflows", f.steps_to_full);
  const std::string how = f.steps_explicit ? " (counted by zarena_step_begin)" : "";
  std::string advice, what, human;
  if (stopped) {
    advice =
        "call zarena_reset after every step again: it ran after each step of the epochs "
        "before and then stopped, so check the condition or code path around the reset";
    what = fmt::format(
        "the arena was reset {} times, but this epoch has run {} steps{} without one, keeping "
        "{} ({} per step; arena {:.0f}% full{}); likely verdict reset_stopped",
        f.resets, f.steps, how, human_bytes(f.grown_bytes), human_bytes(f.step_bytes), fill, left);
    human = fmt::format(
        "reset stopped: {} steps since the last reset ({:.0f}% full). Fix: call "
        "zarena_reset after every step again",
        f.steps, fill);
  } else {
    advice =
        "call zarena_reset after every step (after every sample when accumulating "
        "gradients)";
    what = fmt::format(
        "no reset yet and the same step has begun {} times{}, keeping {} ({} per step; arena "
        "{:.0f}% full{}); likely verdict never_reset",
        f.steps, how, human_bytes(f.grown_bytes), human_bytes(f.step_bytes), fill, left);
    human = fmt::format(
        "no reset after {} steps, each keeping {} ({:.0f}% full). Fix: call "
        "zarena_reset after every step",
        f.steps, human_bytes(f.step_bytes), fill);
  }
  LogRecord rec(log_events::kResetCadence, arena);
  rec.message(fmt::format("{}. Fix: {}", what, advice));
  rec.add_uint("step_repeats", f.step_repeats)
      .add_uint("step_allocs", f.step_allocs)
      .add_uint("step_bytes", f.step_bytes)
      .add_uint("grown_bytes", f.grown_bytes)
      .add_uint("offset_bytes", f.offset_bytes)
      .add_uint("capacity_bytes", f.capacity_bytes)
      .add_double("fill_percent", fill)
      .add_uint("steps_to_full", f.steps_to_full)
      .add_uint("epoch_allocs", f.epoch_allocs)
      .add_uint("resets", f.resets)
      .add_string("verdict", f.verdict)
      .add_string("advice", advice)
      .add_uint("steps", f.steps)
      .add_bool("steps_explicit", f.steps_explicit)
      .human(std::move(human))
      .headline({"steps_to_full"});
  return rec;
}

LogRecord step_record(const StepRecordFacts& f, const LogSource& arena) {
  const uint64_t usable = f.capacity_bytes > f.floor_bytes ? f.capacity_bytes - f.floor_bytes : 0;
  LogRecord rec(log_events::kStep, arena);
  const std::string over = f.overflow_allocs == 0
                               ? std::string("no overflow")
                               : fmt::format("{} overflow allocations (peak {})", f.overflow_allocs,
                                             human_bytes(f.overflow_peak_bytes));
  rec.message(fmt::format(
      "epoch {}: {} allocations ({:.0f}% reused), peak {} of {} above the "
      "floor ({:.0f}%), {}; needed {}",
      f.epoch, f.allocs, percent(f.reuses, f.allocs), human_bytes(f.peak_bytes),
      human_bytes(usable), percent(f.peak_bytes, usable), over, human_bytes(f.needed_bytes)));
  rec.add_uint("epoch", f.epoch)
      .add_uint("steps", f.steps)
      .add_uint("allocs", f.allocs)
      .add_uint("reuses", f.reuses)
      .add_uint("peak_bytes", f.peak_bytes)
      .add_uint("floor_bytes", f.floor_bytes)
      .add_uint("capacity_bytes", f.capacity_bytes)
      .add_uint("overflow_allocs", f.overflow_allocs)
      .add_uint("overflow_peak_bytes", f.overflow_peak_bytes)
      .add_uint("needed_bytes", f.needed_bytes)
      .headline({"allocs", "peak_bytes", "overflow_allocs"});
  rec.human(
      fmt::format("epoch {}: peak {} of {} above the floor ({:.0f}%), {} overflow "
                  "allocations; needed {}",
                  f.epoch, human_bytes(f.peak_bytes), human_bytes(usable),
                  percent(f.peak_bytes, usable), f.overflow_allocs, human_bytes(f.needed_bytes)));
  rec.stderr_message_only();
  return rec;
}

LogRecord destroy_record(const zarena_stats& s, const LifetimeFacts& f, const LogSource& arena) {
  LogRecord rec(log_events::kDestroy, arena);
  rec.message(fmt::format(
      "destroyed after {} allocations in {} epoch(s): high water {} of {} ({:.0f}%); region "
      "exhausted in {} epoch(s), {} overflow allocations (peak {}); {} stale and {} invalid "
      "frees; {} live blocks left; the workload needed {} ({:.0f}% of the capacity)",
      f.total_allocs, s.epoch + 1, human_bytes(s.high_water_bytes), human_bytes(s.capacity_bytes),
      percent(s.high_water_bytes, s.capacity_bytes), f.overflow_epochs, s.overflow_allocs,
      human_bytes(s.overflow_peak_bytes), s.stale_frees, s.invalid_frees, s.live_allocs,
      human_bytes(f.needed_bytes), percent(f.needed_bytes, s.capacity_bytes)));
  rec.add_uint("allocs", f.total_allocs)
      .add_uint("resets", s.resets)
      .add_uint("high_water_bytes", s.high_water_bytes)
      .add_uint("capacity_bytes", s.capacity_bytes)
      .add_uint("hits", s.hits)
      .add_uint("misses", s.misses)
      .add_uint("reuses", s.reuses)
      .add_uint("overflow_allocs", s.overflow_allocs)
      .add_uint("overflow_peak_bytes", s.overflow_peak_bytes)
      .add_uint("overflow_epochs", f.overflow_epochs)
      .add_uint("stale_frees", s.stale_frees)
      .add_uint("invalid_frees", s.invalid_frees)
      .add_uint("live_allocs", s.live_allocs)
      .add_uint("needed_bytes", f.needed_bytes)
      .headline({"overflow_allocs", "resets", "needed_bytes"});
  rec.human(
      fmt::format("destroyed: high water {} of {} ({:.0f}%), region exhausted in {} "
                  "epoch(s); the workload needed {}",
                  human_bytes(s.high_water_bytes), human_bytes(s.capacity_bytes),
                  percent(s.high_water_bytes, s.capacity_bytes), f.overflow_epochs,
                  human_bytes(f.needed_bytes)));
  // Drops the limiter never got to report with a later record of their kind.
  if (const uint64_t dropped = log_pending_suppressed(); dropped != 0) {
    rec.add_uint("log_suppressed", dropped);
  }
  return rec;
}

}  // namespace zarena_core
