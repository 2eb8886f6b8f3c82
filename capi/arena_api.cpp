// extern "C" shims of zarena.h section 2, "Configuration and lifetime": the config's
// defaults and text, create, destroy and the backend an arena runs on.
#include <fmt/format.h>

#include <atomic>
#include <cstddef>
#include <cstring>

#include "config/config.h"
#include "engine/deferred_release.h"
#include "handle.h"

using zarena_core::Arena;
using zarena_core::guarded;
using zarena_core::report;
using zarena_core::Status;

namespace {
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

int32_t zarena_backend(const zarena* a) {
  if (a == nullptr || a->magic != ::zarena::kMagic || !a->arena) return -1;
  return a->arena->backend_kind();
}

}  // extern "C"
