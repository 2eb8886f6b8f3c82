// extern "C" shims of zarena.h's section 11, expandable arenas: zarena_trim (experimental).
#include "handle.h"

using zarena_core::Arena;
using zarena_core::guarded;
using zarena_core::report;

extern "C" {

zarena_status zarena_trim(zarena* a, uint64_t keep_bytes) {
  Arena* arena = zarena_core::checked(a, "zarena_trim");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_trim", [&] { return report(arena->trim(keep_bytes)); });
}

}  // extern "C"
