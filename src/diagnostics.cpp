#include "diagnostics.h"

#include <algorithm>

#include <fmt/format.h>

namespace zarena_core {

namespace {
std::string human(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}
}  // namespace

Verdict diagnose(const ExhaustionFacts& f) {
  if (std::string(f.path) == "capture_refused") {
    return {"capture_refused",
            "the arena overflowed while its stream was being captured into a CUDA graph; use "
            "the ASYNC overflow policy with a stream, or size the arena so the captured step "
            "fits"};
  }
  const uint64_t big = f.capacity_bytes / 2;
  if (f.aligned_bytes >= big || f.epoch_max_alloc_bytes >= big) {
    return {"runaway_buffer",
            fmt::format("one request of {} is {:.0f}% of the {} arena; check the tensor shape "
                        "that produced it (a wrong dimension or a missing batch split)",
                        human(std::max(f.aligned_bytes, f.epoch_max_alloc_bytes)),
                        100.0 * static_cast<double>(std::max(f.aligned_bytes,
                                                             f.epoch_max_alloc_bytes)) /
                            static_cast<double>(f.capacity_bytes),
                        human(f.capacity_bytes))};
  }
  if (f.resets == 0 && f.step_repeats >= 1) {
    return {"never_reset",
            fmt::format("the arena was never reset while the same step ran {} more times in "
                        "this epoch; call zarena_reset after every step (and "
                        "zarena_mark_step_boundary after loading weights)",
                        f.step_repeats)};
  }
  if (f.free_list_bytes >= f.aligned_bytes && f.largest_free_block_bytes < f.aligned_bytes) {
    return {"fragmentation",
            fmt::format("{} are free in {} blocks but none holds {}; free long-lived buffers "
                        "before per-step ones, or allocate them before the step boundary",
                        human(f.free_list_bytes), f.free_list_len, human(f.aligned_bytes))};
  }
  return {"working_set_full",
          fmt::format("one step needs more than the {} arena ({} allocations this epoch); "
                      "raise capacity (ZERFOO_ARENA_SIZE_GB) or reduce the batch",
                      human(f.capacity_bytes), f.epoch_allocs)};
}

LogRecord first_overflow_record(const ExhaustionFacts& f, const std::string& arena_name) {
  const Verdict v = diagnose(f);
  LogRecord rec(ZARENA_LOG_WARN, "arena.first_overflow", arena_name);
  rec.message(fmt::format("arena exhausted ({} of {} used, request {}): {} — {}",
                          human(f.offset_bytes), human(f.capacity_bytes),
                          human(f.requested_bytes), v.name, v.advice));
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
  return rec;
}

}  // namespace zarena_core
