// extern "C" shim of zarena.h section 10, "Trace".
#include "handle.h"

using zarena_core::Arena;
using zarena_core::guarded;

extern "C" {

zarena_status zarena_trace_status(const zarena* a) {
  Arena* arena = zarena_core::checked(a, "zarena_trace_status");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_trace_status", [&] { return zarena_core::report(arena->trace_status()); });
}

}  // extern "C"
