// extern "C" shim of zarena/zarena_testing.h: the test hooks outside the stable contract.
#include "handle.h"
#include "zarena/zarena_testing.h"

using zarena_core::Arena;
using zarena_core::guarded;
using zarena_core::report;
using zarena_core::Status;

extern "C" {

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
