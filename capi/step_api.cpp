// extern "C" shims of zarena.h section 4, "Reset, floors and steps": resets, the floor,
// step boundaries, epochs and the region's facts.
#include <fmt/format.h>

#include <cstddef>

#include "handle.h"

using zarena_core::Arena;
using zarena_core::guarded;
using zarena_core::report;
using zarena_core::Status;

extern "C" {

zarena_status zarena_reset(zarena* a) {
  Arena* arena = zarena_core::checked(a, "zarena_reset");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_reset", [&] { return report(arena->reset()); });
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

zarena_status zarena_set_floor(zarena* a, uint64_t offset) {
  Arena* arena = zarena_core::checked(a, "zarena_set_floor");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_set_floor", [&] { return report(arena->set_floor(offset)); });
}

zarena_status zarena_step_begin(zarena* a) {
  Arena* arena = zarena_core::checked(a, "zarena_step_begin");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_step_begin", [&] {
    arena->step_begin();
    return ZARENA_OK;
  });
}

zarena_status zarena_region_info(const zarena* a, zarena_region* out) {
  Arena* arena = zarena_core::checked(a, "zarena_region_info");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  if (out == nullptr)
    return zarena_core::fail(Status::kInvalidArgument, "zarena_region_info: out is NULL");
  constexpr uint32_t kMin = offsetof(zarena_region, floor_bytes) + sizeof(uint64_t);
  const uint32_t given = out->struct_size;
  if (given < kMin) {
    return zarena_core::fail(Status::kInvalidArgument,
                             fmt::format("zarena_region_info: struct_size {} is smaller than {}; "
                                         "set it to sizeof(zarena_region)",
                                         given, kMin));
  }
  return guarded("zarena_region_info", [&] {
    zarena_region full;
    arena->region_info(&full);
    zarena_core::write_versioned(out, given, &full, sizeof full);
    out->struct_size = given;
    return ZARENA_OK;
  });
}

int zarena_contains(const zarena* a, const void* ptr) {
  if (a == nullptr || a->magic != ::zarena::kMagic || !a->arena || ptr == nullptr) return 0;
  return a->arena->contains(ptr) ? 1 : 0;
}

}  // extern "C"
