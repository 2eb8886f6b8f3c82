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

}  // extern "C"
