// extern "C" shims of zarena.h section 6, "Capture, stream and poison".
#include "engine/capture_scope.h"
#include "engine/deferred_release.h"
#include "handle.h"

using zarena_core::Arena;
using zarena_core::guarded;
using zarena_core::report;

extern "C" {

zarena_status zarena_set_capture_active(zarena* a, int active) {
  Arena* arena = zarena_core::checked(a, "zarena_set_capture_active");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_set_capture_active", [&] {
    arena->set_capture_active(active != 0);
    return ZARENA_OK;
  });
}

zarena_status zarena_capture_begin(int32_t scope, void* stream) {
  return guarded("zarena_capture_begin", [&]() -> zarena_status {
    const zarena_core::Result r = zarena_core::capture_scope_begin(scope, stream);
    if (!r.is_ok()) return zarena_core::fail(r.status, "zarena_capture_begin: " + r.message);
    return ZARENA_OK;
  });
}

zarena_status zarena_capture_end(int32_t scope, void* stream) {
  return guarded("zarena_capture_end", [&]() -> zarena_status {
    const zarena_core::Result r = zarena_core::capture_scope_end(scope, stream);
    if (!r.is_ok()) return zarena_core::fail(r.status, "zarena_capture_end: " + r.message);
    zarena_core::release_deferred();  // a safe point for arenas destroyed during a capture
    return ZARENA_OK;
  });
}

zarena_status zarena_set_stream(zarena* a, void* stream) {
  Arena* arena = zarena_core::checked(a, "zarena_set_stream");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_set_stream", [&] { return report(arena->set_stream(stream)); });
}

zarena_status zarena_set_poison(zarena* a, int enabled, uint32_t word) {
  Arena* arena = zarena_core::checked(a, "zarena_set_poison");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_set_poison", [&] {
    arena->set_poison(enabled != 0, word);
    return ZARENA_OK;
  });
}

}  // extern "C"
