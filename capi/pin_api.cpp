// extern "C" shims of zarena.h section 5, "Pins".
#include "handle.h"

using zarena_core::Arena;
using zarena_core::guarded;
using zarena_core::report;

extern "C" {

zarena_status zarena_pin(zarena* a, void* ptr) {
  Arena* arena = zarena_core::checked(a, "zarena_pin");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_pin", [&] { return report(arena->pin(ptr)); });
}

zarena_status zarena_unpin(zarena* a, void* ptr) {
  Arena* arena = zarena_core::checked(a, "zarena_unpin");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_unpin", [&] { return report(arena->unpin(ptr)); });
}

}  // extern "C"
