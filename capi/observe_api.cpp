// extern "C" shims of zarena.h section 7, "Statistics, live blocks, text formats": stats
// snapshots, peak resets, the live blocks and their text.
#include <fmt/format.h>

#include <cstddef>
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

// The 1.0 stats layout ends at overflow_max_latency_ns.
constexpr uint32_t kStatsV1Size =
    offsetof(zarena_stats, overflow_max_latency_ns) + sizeof(uint64_t);

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

zarena_status zarena_get_stats(const zarena* a, zarena_stats* out) {
  Arena* arena = zarena_core::checked(a, "zarena_get_stats");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  if (out == nullptr)
    return zarena_core::fail(Status::kInvalidArgument, "zarena_get_stats: out is NULL");
  const uint32_t given = out->struct_size;
  if (given < kStatsV1Size) {
    return zarena_core::fail(Status::kInvalidArgument,
                             fmt::format("zarena_get_stats: struct_size {} is smaller than the 1.0 "
                                         "layout ({}); set it to sizeof(zarena_stats)",
                                         given, kStatsV1Size));
  }
  return guarded("zarena_get_stats", [&] {
    zarena_stats full;
    arena->stats(&full);
    zarena_core::write_versioned(out, given, &full, sizeof full);
    out->struct_size = given;
    return ZARENA_OK;
  });
}

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

zarena_status zarena_for_each_live_block(zarena* a, zarena_live_block_fn fn, void* user_data) {
  Arena* arena = zarena_core::checked(a, "zarena_for_each_live_block");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  if (fn == nullptr)
    return zarena_core::fail(Status::kInvalidArgument, "zarena_for_each_live_block: fn is NULL");
  std::vector<zarena_core::LiveBlock> blocks;
  const zarena_status st = guarded("zarena_for_each_live_block", [&] {
    arena->live_blocks(&blocks);
    return ZARENA_OK;
  });
  if (st != ZARENA_OK) return st;
  // No lock is held here: the callback may call back into the library.
  for (const zarena_core::LiveBlock& b : blocks) {
    zarena_live_block v;
    v.ptr = b.ptr;
    v.size = b.size;
    v.epoch = b.epoch;
    v.pins = b.pins;
    v.tag = b.tag;
    v.flags = (b.overflow ? ZARENA_LIVE_OVERFLOW : 0u) |
              (b.persistent ? ZARENA_LIVE_PERSISTENT : 0u) | (b.deferred ? ZARENA_LIVE_FREED : 0u);
    v.reserved = 0;
    if (fn(user_data, &v) != 0) break;
  }
  return ZARENA_OK;
}

}  // extern "C"
