// The experimental lanes (zarena/zarena_lane.h): a lane's calls, each between
// Arena::lane_enter (the handle checked, the lane marked busy) and lane_leave; but the
// owner's planned pair (engine/lane_owner.h), which takes neither.
#include "engine/lane_owner.h"
#include "handle.h"
#include "zarena/zarena_lane.h"

using zarena_core::Arena;
using zarena_core::fail;
using zarena_core::Lane;
using zarena_core::Status;

namespace {

uint64_t epoch_arg(uint64_t epoch) {
  return epoch == ZARENA_ANY_EPOCH ? zarena_core::kAnyEpoch : epoch;
}

// Runs body(arena, lane) on lane l of arena a, or refuses (INVALID_ARGUMENT, last error set).
template <typename Body>
zarena_status on_lane(zarena* a, zarena_lane* l, const char* fn, Body&& body) noexcept {
  Arena* arena = zarena_core::checked(a, fn);
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  Lane* lane = arena->lane_enter(l, fn);
  if (lane == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  const zarena_status st = body(*arena, *lane);
  arena->lane_leave(*lane);
  return st;
}

// The live lane of handle l on arena a for the owner's planned pair, or null (the full path
// then says why): the handle checks of checked() and lane_enter, with no busy word.
inline Lane* owned_lane(zarena* a, zarena_lane* l) noexcept {
  if (ZARENA_UNLIKELY(a == nullptr || l == nullptr || a->magic != ::zarena::kMagic ||
                      l->magic != zarena_lane::kMagic || l->arena != a->arena.get() ||
                      l->arena == nullptr)) {
    return nullptr;
  }
  return l->lane.load(std::memory_order_acquire);
}

}  // namespace

extern "C" {

zarena_status zarena_lane_create(zarena* a, zarena_lane** out) {
  if (out == nullptr) return fail(Status::kInvalidArgument, "zarena_lane_create: out is NULL");
  Arena* arena = zarena_core::checked(a, "zarena_lane_create");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return static_cast<zarena_status>(arena->lane_create(out));  // noexcept
}

zarena_status zarena_lane_destroy(zarena* a, zarena_lane* l) {
  Arena* arena = zarena_core::checked(a, "zarena_lane_destroy");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return static_cast<zarena_status>(arena->lane_destroy(l));  // noexcept
}

zarena_status zarena_lane_alloc(zarena* a, zarena_lane* l, uint64_t size, uint32_t tag,
                                zarena_block* out) {
  if (ZARENA_UNLIKELY(out == nullptr))
    return fail(Status::kInvalidArgument, "zarena_lane_alloc: out is NULL");
  Arena::OwnedAlloc r = Arena::OwnedAlloc::kNotAsked;
  if (Lane* lane = owned_lane(a, l); ZARENA_LIKELY(lane != nullptr)) {
    r = l->arena->lane_alloc_owned(*lane, size, tag, out);
    if (ZARENA_LIKELY(r == Arena::OwnedAlloc::kServed)) return ZARENA_OK;
  }
  return on_lane(a, l, "zarena_lane_alloc", [&](Arena& arena, Lane& lane) {
    zarena_block b;
    // Asked already: the plan is not asked twice for one request (its cursor may have moved).
    const Status st = r == Arena::OwnedAlloc::kAsked
                          ? arena.lane_alloc_unplanned(lane, size, tag, &b)  // noexcept
                          : arena.lane_alloc(lane, size, tag, &b);           // noexcept
    if (ZARENA_LIKELY(st == Status::kOk)) *out = b;
    return static_cast<zarena_status>(st);
  });
}

zarena_status zarena_lane_alloc_unplanned(zarena* a, zarena_lane* l, uint64_t size, uint32_t tag,
                                          zarena_block* out) {
  if (out == nullptr)
    return fail(Status::kInvalidArgument, "zarena_lane_alloc_unplanned: out is NULL");
  return on_lane(a, l, "zarena_lane_alloc_unplanned", [&](Arena& arena, Lane& lane) {
    zarena_block b;
    const Status st = arena.lane_alloc_unplanned(lane, size, tag, &b);  // noexcept
    if (st == Status::kOk) *out = b;
    return static_cast<zarena_status>(st);
  });
}

zarena_status zarena_lane_free(zarena* a, zarena_lane* l, void* ptr, uint64_t epoch) {
  if (Lane* lane = owned_lane(a, l); ZARENA_LIKELY(lane != nullptr)) {
    Status st;
    if (ZARENA_LIKELY(l->arena->lane_free_owned(*lane, ptr, epoch_arg(epoch), &st))) {
      return static_cast<zarena_status>(st);
    }
  }
  return on_lane(a, l, "zarena_lane_free", [&](Arena& arena, Lane& lane) {
    return static_cast<zarena_status>(arena.lane_free(lane, ptr, epoch_arg(epoch)));
  });
}

zarena_status zarena_lane_step_begin(zarena* a, zarena_lane* l) {
  return on_lane(a, l, "zarena_lane_step_begin", [&](Arena& arena, Lane& lane) {
    return zarena_core::guarded("zarena_lane_step_begin", [&] {
      arena.lane_step_begin(lane);
      return ZARENA_OK;
    });
  });
}

zarena_status zarena_lane_get_stats(zarena* a, zarena_lane* l, zarena_lane_stats* out) {
  if (out == nullptr || out->struct_size < sizeof(uint32_t))
    return fail(Status::kInvalidArgument,
                "zarena_lane_get_stats: out is NULL or its struct_size is too small");
  // A call on the lane: its owner asks (zarena_get_stats is anyone's).
  Arena* arena = zarena_core::checked(a, "zarena_lane_get_stats");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  Lane* lane = arena->lane_enter(l, "zarena_lane_get_stats");
  if (lane == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  const uint32_t size = out->struct_size;
  const zarena_status st = zarena_core::guarded("zarena_lane_get_stats", [&] {
    zarena_lane_stats s{};
    s.struct_size = sizeof(zarena_lane_stats);
    arena->lane_stats(*lane, &s);
    zarena_core::write_versioned(out, size, &s, sizeof s);
    out->struct_size = size;
    return ZARENA_OK;
  });
  arena->lane_leave(*lane);
  return st;
}

const zarena_plan_view* zarena_lane_plan_view(zarena* a, zarena_lane* l) {
  Arena* arena = zarena_core::checked(a, "zarena_lane_plan_view");
  if (arena == nullptr) return nullptr;
  Lane* lane = arena->lane_enter(l, "zarena_lane_plan_view");
  if (lane == nullptr) return nullptr;
  const zarena_plan_view* v = arena->lane_plan_view(*lane);
  arena->lane_leave(*lane);
  return v;
}

}  // extern "C"
