// extern "C" shims for readable stats, peak resets and live-block dumps.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "format/live_blocks_format.h"
#include "format/stats_format.h"
#include "handle.h"
#include "text_out.h"

using zarena_core::Arena;
using zarena_core::guarded;
using zarena_core::Status;

namespace {

bool known_format(int32_t format) {
  return format == ZARENA_FORMAT_TEXT || format == ZARENA_FORMAT_JSON;
}

zarena_status bad_format(const char* fn, int32_t format) {
  return zarena_core::fail(
      Status::kInvalidArgument,
      fmt::format("{}: unknown format {} (ZARENA_FORMAT_TEXT 0 or ZARENA_FORMAT_JSON 1)", fn,
                  format));
}

}  // namespace

extern "C" {

zarena_status zarena_format_stats(const zarena* a, int32_t format, char* buf, size_t cap,
                                  size_t* needed) {
  constexpr const char* fn = "zarena_format_stats";
  Arena* arena = zarena_core::checked(a, fn);
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  if (!known_format(format)) return bad_format(fn, format);
  const zarena_status st = zarena_core::check_text_buffer(fn, buf, cap, needed);
  if (st != ZARENA_OK) return st;
  return guarded(fn, [&] {
    zarena_stats s;
    arena->stats(&s);
    const std::string text = format == ZARENA_FORMAT_JSON
                                 ? zarena_core::stats_json(s)
                                 : zarena_core::stats_text(s, arena->name());
    return zarena_core::put_text(fn, text, buf, cap, needed);
  });
}

zarena_status zarena_reset_peak_stats(zarena* a) {
  Arena* arena = zarena_core::checked(a, "zarena_reset_peak_stats");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_reset_peak_stats", [&] {
    arena->reset_peak_stats();
    return ZARENA_OK;
  });
}

zarena_status zarena_format_live_blocks(zarena* a, int32_t format, char* buf, size_t cap,
                                        size_t* needed) {
  constexpr const char* fn = "zarena_format_live_blocks";
  Arena* arena = zarena_core::checked(a, fn);
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  if (!known_format(format)) return bad_format(fn, format);
  const zarena_status st = zarena_core::check_text_buffer(fn, buf, cap, needed);
  if (st != ZARENA_OK) return st;
  return guarded(fn, [&] {
    std::vector<zarena_core::LiveBlock> blocks;
    zarena_core::LiveBlocksHeader h;
    arena->live_blocks(&blocks, &h.epoch);
    h.arena_name = arena->name();
    h.region_base = arena->region_base();
    const std::string text = format == ZARENA_FORMAT_JSON
                                 ? zarena_core::live_blocks_json(h, blocks)
                                 : zarena_core::live_blocks_text(h, blocks);
    return zarena_core::put_text(fn, text, buf, cap, needed);
  });
}

zarena_status zarena_trace_status(const zarena* a) {
  Arena* arena = zarena_core::checked(a, "zarena_trace_status");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_trace_status", [&] { return zarena_core::report(arena->trace_status()); });
}

}  // extern "C"
