#include "diagnosis/diagnostics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "diagnosis/cadence.h"

namespace zarena_core {

std::string human_bytes(uint64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

namespace {

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
    return {"capture_refused",
            "the region was full while the arena's stream was being captured into a CUDA "
            "graph, where a synchronous overflow allocation would break the capture",
            "use the ASYNC overflow policy with the captured stream, or give the arena room "
            "for the whole captured step",
            "use the ASYNC policy on the captured stream"};
  }
  if (f.commit_failed) {
    return {"commit_failed",
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
    return {"runaway_buffer",
            fmt::format("one request of {} can never fit: only {} of the {} arena lies above "
                        "its floor",
                        human_bytes(f.aligned_bytes), human_bytes(usable),
                        human_bytes(f.capacity_bytes)),
            "check the tensor shape behind that request (a wrong dimension or a missing batch "
            "split), or raise the capacity if it is meant to be that big",
            "check the tensor shape behind that request"};
  }
  const uint64_t steps = reported_steps(f);
  if (steps_kept_bytes(f) && f.resets == 0 && !f.no_resets) {
    return {"never_reset",
            fmt::format("the arena was never reset while {} ran in this epoch and kept {} ({} "
                        "per step, {} allocations)",
                        steps_phrase(f, steps), human_bytes(f.kept_bytes),
                        human_bytes(f.kept_bytes / (steps - 1)), f.epoch_allocs),
            kResetAdvice, "call zarena_reset after every step"};
  }
  if (f.uniform_blocks >= CadenceDetector::kUniformRunMin && f.resets == 0 && !f.no_resets) {
    return {"never_reset",
            fmt::format("the arena was never reset, though a step boundary was marked: since "
                        "then {} blocks of {} were allocated and none was freed ({} kept, {} "
                        "allocations in the epoch)",
                        f.uniform_blocks, human_bytes(f.uniform_size),
                        human_bytes(f.uniform_blocks * f.uniform_size), f.epoch_allocs),
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
    return {"reset_stopped",
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
    return {"runaway_buffer",
            fmt::format("one request of {} is {:.0f}% of the {} a step can use",
                        human_bytes(biggest), percent(biggest, usable), human_bytes(usable)),
            "check the tensor shape behind that request (a wrong dimension or a missing batch "
            "split)",
            "check the tensor shape behind that request"};
  }
  if (f.free_list_bytes >= f.aligned_bytes && f.free_list_bytes >= usable / 8 &&
      f.largest_free_block_bytes < f.aligned_bytes) {
    return {"fragmentation",
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
    return {"working_set_full",
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
    return {"working_set_full",
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
    return {"working_set_full",
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
    return {"working_set_full",
            fmt::format("the first step alone needs more than the {} arena ({} allocations "
                        "so far, no reset yet)",
                        human_bytes(f.capacity_bytes), f.epoch_allocs),
            fmt::format("raise the capacity (ZARENA_CAPACITY_BYTES or ZERFOO_ARENA_SIZE_GB) "
                        "beyond {} or reduce the batch size, and if this is not the first "
                        "step, call zarena_reset after every step",
                        needed),
            fmt::format("raise the capacity beyond {} or reduce the batch size", needed)};
  }
  return {"working_set_full",
          fmt::format("one step needs more than the {} arena ({} allocations this epoch)",
                      human_bytes(f.capacity_bytes), f.epoch_allocs),
          fmt::format("raise the capacity (ZARENA_CAPACITY_BYTES or ZERFOO_ARENA_SIZE_GB) "
                      "beyond {} or reduce the batch size",
                      needed),
          fmt::format("raise the capacity beyond {} or reduce the batch size", needed)};
}

std::string verdict_suffix(const Verdict& v) {
  return fmt::format("verdict={}; fix: {}", v.name, v.advice);
}

LogRecord first_overflow_record(const ExhaustionFacts& f, const std::string& arena_name,
                                const std::string& top_tags) {
  const Verdict v = diagnose(f);
  LogRecord rec(ZARENA_LOG_WARN, "arena.first_overflow", arena_name);
  rec.message(fmt::format(
      "arena full, verdict {}: {}. Fix: {}. (request {}, {} of {} in use, overflow {}{}{})", v.name,
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
  rec.human(fmt::format("arena full, verdict {}. Fix: {}", v.name, v.fix))
      .headline({"top_tags", "requested_bytes", "verdict"});
  return rec;
}

LogRecord overflow_summary_record(const OverflowSummaryFacts& f, const std::string& arena_name) {
  const Verdict v = diagnose(f.last);
  LogRecord rec(ZARENA_LOG_WARN, "arena.overflow_summary", arena_name);
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
                               const char* path, const std::string& arena_name) {
  LogRecord rec(ZARENA_LOG_WARN, "overflow.slow", arena_name);
  rec.message(fmt::format("overflow allocation of {} bytes via {} took {:.3f} ms", bytes, path,
                          static_cast<double>(duration_ns) / 1e6));
  rec.add_uint("duration_ns", duration_ns)
      .add_uint("threshold_ns", threshold_ns)
      .add_uint("bytes", bytes)
      .add_string("path", path)
      .headline({"threshold_ns"});
  rec.rate_limited();  // a wedged backend would otherwise log on every overflow call
  return rec;
}

LogRecord reset_cadence_record(const CadenceFacts& f, const std::string& arena_name) {
  const double fill = percent(f.offset_bytes, f.capacity_bytes);
  const bool stopped = std::strcmp(f.verdict, "reset_stopped") == 0;
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
  LogRecord rec(ZARENA_LOG_WARN, "arena.reset_cadence", arena_name);
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
  // An arena warns at most once in its life, but a program that creates arena after arena
  // would repeat it.
  rec.rate_limited();
  return rec;
}

LogRecord step_record(const StepRecordFacts& f, const std::string& arena_name) {
  const uint64_t usable = f.capacity_bytes > f.floor_bytes ? f.capacity_bytes - f.floor_bytes : 0;
  LogRecord rec(ZARENA_LOG_INFO, "arena.step", arena_name);
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

LogRecord config_record(const ResolvedConfig& rc, const std::string& backend_desc,
                        int32_t backend_kind, int32_t policy, const std::string& fallback,
                        uint64_t memory_free, uint64_t memory_total) {
  const zarena_config& c = rc.cfg;
  LogRecord rec(ZARENA_LOG_INFO, "arena.config", rc.name);
  std::string from, ignored;
  std::vector<std::string> short_items;  // for the human line: overridden variables first
  for (const auto& s : rc.sources) {
    if (!s.env_ignored.empty()) ignored += (ignored.empty() ? "" : ", ") + s.env_ignored;
    if (s.origin == "default") continue;
    const std::string why =
        s.env_ignored.empty() ? s.origin : fmt::format("{}; {} ignored", s.origin, s.env_ignored);
    from += fmt::format("{}{}={} ({})", from.empty() ? "" : ", ", s.field, s.value, why);
    const std::string item = fmt::format("{} ({})", s.field, why);
    short_items.insert(s.env_ignored.empty() ? short_items.end() : short_items.begin(), item);
  }
  const std::string limit = c.overflow_limit_bytes == ZARENA_OVERFLOW_UNLIMITED
                                ? std::string("unlimited")
                                : human_bytes(c.overflow_limit_bytes);
  const std::string shown_desc =
      backend_desc.size() <= 32 ? backend_desc : backend_desc.substr(0, 29) + "...";
  const std::string head =
      fmt::format("created on {}: capacity {}, overflow {} (limit {})", shown_desc,
                  human_bytes(c.capacity_bytes), policy_name(policy), limit);
  // The human line names what is not a default, as many as fit the line after its head.
  const size_t line_head = std::strlen("arena.config [") +
                           std::min(rc.name.size(), kHumanArenaNameMax) + std::strlen("]: ");
  const size_t used = kHumanPrefixMax + line_head + head.size() + std::strlen("; set: ");
  const size_t set_room = kHumanLineMax > used + 24 ? kHumanLineMax - used : 24;
  std::string from_short;
  for (size_t i = 0; i < short_items.size(); ++i) {
    const std::string more = fmt::format(", +{} more", short_items.size() - i);
    if (from_short.size() + 2 + short_items[i].size() + more.size() > set_room) {
      from_short = i == 0 ? fmt::format("{} values", short_items.size()) : from_short + more;
      break;
    }
    from_short += (i == 0 ? "" : ", ") + short_items[i];
  }
  std::string msg =
      fmt::format("created on {}: capacity {}, overflow {} (limit {}), alignment {}; {}{}",
                  backend_desc, human_bytes(c.capacity_bytes), policy_name(policy), limit,
                  c.alignment, from.empty() ? "all defaults" : "set: ", from);
  for (const auto& w : rc.warnings) msg += "; " + w;
  if (!fallback.empty()) msg += "; AUTO fell back to host: " + fallback;
  if (memory_total != 0) {
    msg += fmt::format("; {} memory: {} free of {}",
                       backend_kind == ZARENA_BACKEND_CUDA ? "device" : "host",
                       human_bytes(memory_free), human_bytes(memory_total));
  }
  rec.message(std::move(msg));
  // The human line names what is not a default and where it came from; the values are in
  // the fields, and each environment problem has its own warning line.
  rec.human(
      fmt::format("{}; {}{}", head, from_short.empty() ? "all defaults" : "set: ", from_short));
  rec.add_string("backend_resolved", backend_name(backend_kind));
  rec.add_string("overflow_policy_resolved", policy_name(policy));
  for (size_t i = 0; i < kConfigFieldCount && i < rc.sources.size(); ++i) {
    const FieldSpec& f = kConfigFields[i];
    const ResolvedConfig::Source& s = rc.sources[i];
    const uint64_t v = field_number(c, f);
    switch (f.kind) {
      case ValueKind::kCount:
        rec.add_int(s.field, static_cast<int64_t>(v));
        break;
      case ValueKind::kBytes:
      case ValueKind::kDuration:
      case ValueKind::kWord:
        rec.add_uint(s.field, v);
        break;
      case ValueKind::kSwitch:
        rec.add_bool(s.field, v != 0);
        break;
      default:  // enum names, text (the arena's copies), the stream
        rec.add_string(s.field, s.value);
    }
    rec.add_string(s.field + "_source", s.origin);
  }
  if (!ignored.empty()) rec.add_string("env_ignored", ignored);
  if (!fallback.empty()) rec.add_string("backend_fallback", fallback);
  if (memory_total != 0) {
    rec.add_uint("memory_free_bytes", memory_free);
    rec.add_uint("memory_total_bytes", memory_total);
  }
  for (size_t i = 0; i < rc.warnings.size(); ++i) {
    rec.add_string(fmt::format("warning{}", i), rc.warnings[i]);
  }
  return rec;
}

LogRecord config_problem_record(const ConfigProblem& p, const std::string& arena_name) {
  const std::string value = p.value.size() <= 24 ? p.value : p.value.substr(0, 21) + "...";
  LogRecord rec(ZARENA_LOG_WARN,
                p.unknown_variable ? "config.unknown_variable" : "config.invalid_value",
                arena_name);
  rec.message(p.describe());
  rec.add_string("variable", p.variable).add_string("value", p.value);
  if (p.unknown_variable) {
    const std::string name =
        p.variable.size() <= 32 ? p.variable : p.variable.substr(0, 29) + "...";
    rec.human(p.closest.empty()
                  ? fmt::format("unknown variable {}, ignored", name)
                  : fmt::format("unknown variable {}, ignored; did you mean {}?", name, p.closest));
    rec.add_string("closest", p.closest);
  } else {
    rec.human(fmt::format("ignored {}='{}': {}", p.variable, value, p.why));
    rec.add_string("reason", p.why).add_string("example", p.example).headline({"example"});
  }
  return rec;
}

LogRecord destroy_record(const zarena_stats& s, const LifetimeFacts& f,
                         const std::string& arena_name) {
  LogRecord rec(ZARENA_LOG_INFO, "arena.destroy", arena_name);
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
