// What a binding reports of the blocks it keeps for its caller (zarena/zarena_kept.h): its
// requests and refused frees, counted in the calling thread's slot as if made here.
#include "base/last_error.h"
#include "engine/arena.h"

namespace zarena_core {

Status Arena::report_kept(const KeptCounts& k) noexcept {
  if (plans_.enabled() || trace_ != nullptr) {
    return fail_with(Status::kUnsupported,
                     plans_.enabled()
                         ? "zarena_kept_report_add: step plans are on: the arena must see every "
                           "request"
                         : "zarena_kept_report_add: a trace is being written: the arena must "
                           "see every request");
  }
  Slot& s = region_.enter();
  s.c.epoch_allocs += k.allocs;
  s.c.hits += k.allocs;
  s.c.reuses += k.allocs;
  if (k.max_request > s.c.epoch_max_alloc) s.c.epoch_max_alloc = k.max_request;
  if (k.max_request > s.c.step_max_alloc) s.c.step_max_alloc = k.max_request;
  s.c.invalid_frees += k.invalid_frees;
  s.c.stale_frees += k.stale_frees;
  region_.leave(s);
  return Status::kOk;
}

}  // namespace zarena_core
