// extern "C" shims of zarena.h section 6b, "The overflow route at run time": the policy
// and the program's own overflow allocator.
#include <string>

#include "handle.h"

using zarena_core::Arena;
using zarena_core::guarded;
using zarena_core::report;
using zarena_core::Status;

extern "C" {

zarena_status zarena_set_overflow_policy(zarena* a, int32_t policy) {
  Arena* arena = zarena_core::checked(a, "zarena_set_overflow_policy");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_set_overflow_policy",
                 [&] { return report(arena->set_overflow_policy(policy)); });
}

int32_t zarena_overflow_policy(const zarena* a) {
  const Arena* arena = zarena_core::checked(a, "zarena_overflow_policy");
  return arena != nullptr ? arena->overflow_policy() : -1;
}

zarena_status zarena_set_overflow_allocator(zarena* a, const zarena_overflow_allocator* alloc) {
  Arena* arena = zarena_core::checked(a, "zarena_set_overflow_allocator");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  if (alloc != nullptr) {
    const char* why = alloc->struct_size < sizeof(zarena_overflow_allocator)
                          ? "struct_size is smaller than the 1.1 layout (set it to "
                            "sizeof(zarena_overflow_allocator))"
                      : alloc->reserved != 0 ? "reserved is not 0"
                      : alloc->allocate == nullptr || alloc->deallocate == nullptr
                          ? "allocate or deallocate is NULL"
                          : nullptr;
    if (why != nullptr) {
      return zarena_core::fail(
          Status::kInvalidArgument,
          std::string("zarena_set_overflow_allocator: ") + why + "; nothing changed");
    }
  }
  return guarded("zarena_set_overflow_allocator", [&] {
    if (alloc == nullptr) return report(arena->set_overflow_allocator(nullptr));
    zarena_core::CustomAllocator c;
    c.ctx = alloc->ctx;
    c.allocate = alloc->allocate;
    c.deallocate = alloc->deallocate;
    c.name = alloc->name != nullptr && alloc->name[0] != '\0' ? alloc->name : "custom";
    return report(arena->set_overflow_allocator(&c));
  });
}

}  // extern "C"
