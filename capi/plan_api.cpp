// The experimental step-plan view (zarena/zarena_plan.h): what bindings read to serve
// planned requests themselves.
#include "handle.h"
#include "zarena/zarena_plan.h"

extern "C" {

const zarena_plan_view* zarena_plan_view_get(zarena* a) {
  zarena_core::Arena* arena = zarena_core::checked(a, "zarena_plan_view_get");
  if (arena == nullptr) return nullptr;
  return arena->plan_view();
}

zarena_status zarena_plan_alloc_unplanned(zarena* a, uint64_t size, uint32_t tag,
                                          zarena_block* out) {
  if (out == nullptr)
    return zarena_core::fail(zarena_core::Status::kInvalidArgument,
                             "zarena_plan_alloc_unplanned: out is NULL");
  zarena_core::Arena* arena = zarena_core::checked(a, "zarena_plan_alloc_unplanned");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  zarena_block b;
  const zarena_core::Status st = arena->alloc_unplanned(size, tag, &b);  // noexcept
  if (st == zarena_core::Status::kOk) *out = b;
  return static_cast<zarena_status>(st);
}

}  // extern "C"
