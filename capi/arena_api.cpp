// extern "C" shims for arena lifetime, allocation, epochs and stats.
#include <fmt/format.h>

#include <atomic>
#include <cstddef>
#include <cstring>

#include "config/config.h"
#include "engine/deferred_release.h"
#include "handle.h"
#include "zarena/zarena_testing.h"

using zarena_core::Arena;
using zarena_core::guarded;
using zarena_core::report;
using zarena_core::Status;

namespace {
// The 1.0 stats layout ends at overflow_max_latency_ns.
constexpr uint32_t kStatsV1Size =
    offsetof(zarena_stats, overflow_max_latency_ns) + sizeof(uint64_t);
// sizeof(zarena_config) in release 1.0.0. Never change it: see zarena_config_init.
constexpr uint32_t kConfigSize_1_0_0 = 88;
static_assert(offsetof(zarena_config, overflow_slow_ns) + sizeof(uint64_t) == kConfigSize_1_0_0,
              "the 1.0.0 config layout moved");
}  // namespace

extern "C" {

void zarena_config_init_sized(zarena_config* cfg, uint32_t struct_size) {
  if (cfg == nullptr) return;
  zarena_config full = zarena_core::default_config();
  try {
    zarena_core::apply_environment(&full);
  } catch (...) {
    full = zarena_core::default_config();
  }
  full.struct_size = struct_size;
  zarena_core::write_versioned(cfg, struct_size, &full, sizeof full);
}

// The exported, unsized entry point: callers compiled against 1.0.0 reach it directly,
// so it must keep writing the 1.0.0 layout and nothing more, in every 1.x release.
#undef zarena_config_init
void zarena_config_init(zarena_config* cfg) { zarena_config_init_sized(cfg, kConfigSize_1_0_0); }

zarena_status zarena_config_parse(const char* field, const char* text, uint64_t* out) {
  return guarded("zarena_config_parse", [&]() -> zarena_status {
    if (field == nullptr || text == nullptr || out == nullptr)
      return zarena_core::fail(Status::kInvalidArgument,
                               "zarena_config_parse: field, text and out must not be NULL");
    const zarena_core::Result r = zarena_core::parse_field_text(field, text, out);
    if (!r.is_ok()) return zarena_core::fail(r.status, "zarena_config_parse: " + r.message);
    return ZARENA_OK;
  });
}

zarena_status zarena_create(const zarena_config* cfg, zarena** out) {
  return guarded("zarena_create", [&]() -> zarena_status {
    if (out == nullptr)
      return zarena_core::fail(Status::kInvalidArgument, "zarena_create: out is NULL");
    zarena_core::release_deferred();  // a safe point for arenas destroyed during a capture
    // The handle and the id exist first: the records of the create already name them.
    std::unique_ptr<zarena> h(new zarena());
    static std::atomic<uint64_t> last_id{0};
    const uint64_t id = last_id.fetch_add(1, std::memory_order_relaxed) + 1;
    zarena_core::ResolvedConfig rc;
    zarena_core::Result r = zarena_core::resolve_config(cfg, &rc, id, h.get());
    if (!r.is_ok()) return zarena_core::fail(r.status, "zarena_create: " + r.message);
    std::unique_ptr<Arena> arena;
    r = Arena::create(rc, &arena);
    if (!r.is_ok()) return zarena_core::fail(r.status, "zarena_create: " + r.message);
    h->arena = std::move(arena);
    zarena_core::handle_created(h.get());  // may throw: the arena goes with h
    *out = h.release();
    return ZARENA_OK;
  });
}

zarena_status zarena_destroy(zarena* a) {
  if (a == nullptr) return ZARENA_OK;
  return guarded("zarena_destroy", [&]() -> zarena_status {
    Arena* arena = zarena_core::checked(a, "zarena_destroy");
    if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
    // A safe point for arenas destroyed during an earlier capture (not for this one, should
    // it wait: only a later call is one).
    zarena_core::release_deferred();
    zarena_core::handle_destroyed(a);
    zarena_core::Result r = arena->destroy();
    a->magic = 0;
    a->arena.reset();
    delete a;
    return report(r);
  });
}

zarena_status zarena_alloc(zarena* a, uint64_t size, void** out_ptr) {
  if (out_ptr == nullptr)
    return zarena_core::fail(Status::kInvalidArgument, "zarena_alloc: out_ptr is NULL");
  *out_ptr = nullptr;
  Arena* arena = zarena_core::checked(a, "zarena_alloc");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  // Arena::alloc is noexcept: it reports every failure (host memory included) as a status.
  zarena_block b;
  const Status st = arena->alloc(size, 0, &b);
  if (__builtin_expect(st == Status::kOk, 1)) *out_ptr = b.ptr;
  return static_cast<zarena_status>(st);
}

zarena_status zarena_free(zarena* a, void* ptr) {
  Arena* arena = zarena_core::checked(a, "zarena_free");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return static_cast<zarena_status>(arena->free(ptr, zarena_core::kAnyEpoch));  // noexcept
}

zarena_status zarena_reset(zarena* a) {
  Arena* arena = zarena_core::checked(a, "zarena_reset");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_reset", [&] {
    arena->reset();
    return ZARENA_OK;
  });
}

zarena_status zarena_mark_step_boundary(zarena* a) {
  Arena* arena = zarena_core::checked(a, "zarena_mark_step_boundary");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_mark_step_boundary",
                 [&] { return zarena_core::report(arena->mark_step_boundary()); });
}

uint64_t zarena_epoch(const zarena* a) {
  if (a == nullptr || a->magic != ::zarena::kMagic || !a->arena) return 0;
  try {
    return a->arena->epoch();
  } catch (...) {
    return 0;
  }
}

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

int32_t zarena_backend(const zarena* a) {
  if (a == nullptr || a->magic != ::zarena::kMagic || !a->arena) return -1;
  return a->arena->backend_kind();
}

zarena_status zarena_debug_inject_overflow_fault(zarena* a, uint64_t fail_nth, uint64_t delay_nth,
                                                 uint64_t delay_ns) {
  Arena* arena = zarena_core::checked(a, "zarena_debug_inject_overflow_fault");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_debug_inject_overflow_fault", [&] {
    zarena_core::FaultInjectingBackend* f = arena->fault_injector();
    if (f == nullptr) {
      return report(zarena_core::Result::fail(
          Status::kUnsupported, "fault injection is available on the host backend only"));
    }
    f->arm(zarena_core::FaultSite::kOverflowAlloc, fail_nth);
    f->delay_overflow_alloc(delay_nth, delay_ns);
    return report(zarena_core::Result::ok());
  });
}

}  // extern "C"
