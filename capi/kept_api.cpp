// The experimental report of blocks a binding keeps (zarena/zarena_kept.h).
#include <cstddef>

#include "handle.h"
#include "region/region.h"
#include "zarena/zarena_kept.h"

// The header's figure is the region's: blocks that large are shared, never cached per slot.
static_assert(ZARENA_KEPT_MAX_BLOCK_BYTES == zarena_core::kSharedFreeBytes,
              "ZARENA_KEPT_MAX_BLOCK_BYTES (zarena_kept.h) must be the region's kSharedFreeBytes");

extern "C" {

zarena_status zarena_kept_report_add(zarena* a, const zarena_kept_report* r) {
  if (r == nullptr)
    return zarena_core::fail(zarena_core::Status::kInvalidArgument,
                             "zarena_kept_report_add: r is NULL");
  if (r->struct_size < offsetof(zarena_kept_report, stale_frees) + sizeof r->stale_frees)
    return zarena_core::fail(zarena_core::Status::kInvalidArgument,
                             "zarena_kept_report_add: struct_size is smaller than the first "
                             "zarena_kept_report");
  zarena_core::Arena* arena = zarena_core::checked(a, "zarena_kept_report_add");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return static_cast<zarena_status>(arena->report_kept(
      zarena_core::KeptCounts{r->allocs, r->max_request, r->invalid_frees, r->stale_frees}));
}

}  // extern "C"
