#include "diagnostics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

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

Verdict diagnose(const ExhaustionFacts& f) {
  if (std::strcmp(f.path, "capture_refused") == 0) {
    return {"capture_refused",
            "the region was full while the arena's stream was being captured into a CUDA "
            "graph, where a synchronous overflow allocation would break the capture",
            "use the ASYNC overflow policy with the captured stream, or give the arena room "
            "for the whole captured step"};
  }
  if (f.commit_failed) {
    return {"commit_failed",
            fmt::format("the expandable arena could not commit more memory ({} committed of its "
                        "{} maximum): {}",
                        human_bytes(f.committed_bytes), human_bytes(f.capacity_bytes),
                        f.commit_error.empty() ? "the backend refused" : f.commit_error),
            "free device memory held elsewhere (other arenas, caches, other processes on the "
            "GPU), or lower the arena's maximum to what the device can hold; trim_keep_bytes "
            "makes idle expandable arenas give memory back at reset"};
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
            "split), or raise the capacity if it is meant to be that big"};
  }
  if (f.resets == 0 && f.step_repeats >= 1) {
    return {"never_reset",
            fmt::format("the arena was never reset while the same step ran {} times in this "
                        "epoch ({} allocations)",
                        f.step_repeats + 1, f.epoch_allocs),
            "call zarena_reset after every step (after every sample when accumulating "
            "gradients), and zarena_mark_step_boundary once after loading the weights"};
  }
  if (biggest >= usable / 2) {
    return {"runaway_buffer",
            fmt::format("one request of {} is {:.0f}% of the {} a step can use",
                        human_bytes(biggest), percent(biggest, usable), human_bytes(usable)),
            "check the tensor shape behind that request (a wrong dimension or a missing batch "
            "split)"};
  }
  if (f.free_list_bytes >= f.aligned_bytes && f.free_list_bytes >= usable / 8 &&
      f.largest_free_block_bytes < f.aligned_bytes) {
    return {"fragmentation",
            fmt::format("{} are free in {} blocks but the largest holds only {} of the {} "
                        "requested",
                        human_bytes(f.free_list_bytes), f.free_list_len,
                        human_bytes(f.largest_free_block_bytes), human_bytes(f.aligned_bytes)),
            "allocate long-lived buffers before zarena_mark_step_boundary and short-lived "
            "ones after them (free in reverse order where you can), or raise the capacity"};
  }
  if (f.resets == 0) {
    return {"working_set_full",
            fmt::format("the first step alone needs more than the {} arena ({} allocations "
                        "so far, no reset yet)",
                        human_bytes(f.capacity_bytes), f.epoch_allocs),
            "raise the capacity (ZARENA_CAPACITY_BYTES or ZERFOO_ARENA_SIZE_GB) or reduce the "
            "batch size; and if this is not the first step, call zarena_reset after every "
            "step"};
  }
  return {"working_set_full",
          fmt::format("one step needs more than the {} arena ({} allocations this epoch)",
                      human_bytes(f.capacity_bytes), f.epoch_allocs),
          "raise the capacity (ZARENA_CAPACITY_BYTES or ZERFOO_ARENA_SIZE_GB) or reduce the "
          "batch size"};
}

LogRecord first_overflow_record(const ExhaustionFacts& f, const std::string& arena_name) {
  const Verdict v = diagnose(f);
  LogRecord rec(ZARENA_LOG_WARN, "arena.first_overflow", arena_name);
  rec.message(
      fmt::format("arena full, verdict {}: {}. Fix: {}. (request {}, {} of {} in use, overflow {})",
                  v.name, v.cause, v.advice, human_bytes(f.requested_bytes),
                  human_bytes(f.offset_bytes), human_bytes(f.capacity_bytes), f.path));
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
      .add_string("advice", v.advice);
  // The human line leads with the verdict and its fix; the facts are in the fields.
  rec.human(fmt::format("arena full, verdict {}. Fix: {}", v.name, v.advice))
      .headline({"requested_bytes", "verdict"});
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
  const uint64_t left = f.capacity_bytes > f.offset_bytes ? f.capacity_bytes - f.offset_bytes : 0;
  const uint64_t steps_left = f.step_bytes == 0 ? 0 : left / f.step_bytes;
  const double fill = percent(f.offset_bytes, f.capacity_bytes);
  LogRecord rec(ZARENA_LOG_WARN, "arena.reset_cadence", arena_name);
  rec.message(
      fmt::format("no reset yet and the same step has started {} times, each adding about {} "
                  "(arena {:.0f}% full, about {} more steps until it overflows; likely verdict "
                  "never_reset). Fix: call zarena_reset after every step (after every sample when "
                  "accumulating gradients)",
                  f.step_repeats + 1, human_bytes(f.step_bytes), fill, steps_left));
  rec.add_uint("step_repeats", f.step_repeats)
      .add_uint("step_allocs", f.step_allocs)
      .add_uint("step_bytes", f.step_bytes)
      .add_uint("grown_bytes", f.grown_bytes)
      .add_uint("offset_bytes", f.offset_bytes)
      .add_uint("capacity_bytes", f.capacity_bytes)
      .add_double("fill_percent", fill)
      .add_uint("steps_to_full", steps_left)
      .add_uint("epoch_allocs", f.epoch_allocs)
      .add_uint("resets", f.resets)
      .add_string("verdict", "never_reset")
      .add_string("advice",
                  "call zarena_reset after every step (after every sample when "
                  "accumulating gradients)")
      .human(fmt::format("no reset after {} runs of the same step ({:.0f}% full). Fix: call "
                         "zarena_reset after every step",
                         f.step_repeats + 1, fill))
      .headline({"steps_to_full"});
  // An arena warns at most once in its life (resets stay 0), but a program that creates
  // arena after arena would repeat it.
  rec.rate_limited();
  return rec;
}

LogRecord config_record(const ResolvedConfig& rc, const std::string& backend_desc,
                        int32_t backend_kind, int32_t policy, const std::string& fallback,
                        uint64_t memory_free, uint64_t memory_total) {
  const zarena_config& c = rc.cfg;
  LogRecord rec(ZARENA_LOG_INFO, "arena.config", rc.name);
  std::string from, from_short;
  for (const auto& s : rc.sources) {
    if (s.origin == "default") continue;
    from += fmt::format("{}{}={} ({})", from.empty() ? "" : ", ", s.field, s.value, s.origin);
    from_short += fmt::format("{}{} ({})", from_short.empty() ? "" : ", ", s.field, s.origin);
  }
  const std::string limit = c.overflow_limit_bytes == ZARENA_OVERFLOW_UNLIMITED
                                ? std::string("unlimited")
                                : human_bytes(c.overflow_limit_bytes);
  const std::string head =
      fmt::format("created on {}: capacity {}, overflow {} (limit {})", backend_desc,
                  human_bytes(c.capacity_bytes), policy_name(policy), limit);
  std::string msg = fmt::format("{}, alignment {}; {}{}", head, c.alignment,
                                from.empty() ? "all defaults" : "set: ", from);
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
    rec.human(fmt::format("unknown variable {}, ignored; did you mean {}?", p.variable, p.closest));
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
      "frees; {} live blocks left",
      f.total_allocs, s.epoch + 1, human_bytes(s.high_water_bytes), human_bytes(s.capacity_bytes),
      percent(s.high_water_bytes, s.capacity_bytes), f.overflow_epochs, s.overflow_allocs,
      human_bytes(s.overflow_peak_bytes), s.stale_frees, s.invalid_frees, s.live_allocs));
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
      .headline({"overflow_allocs", "resets"});
  // Drops the limiter never got to report with a later record of their kind.
  if (const uint64_t dropped = log_pending_suppressed(); dropped != 0) {
    rec.add_uint("log_suppressed", dropped);
  }
  return rec;
}

}  // namespace zarena_core
