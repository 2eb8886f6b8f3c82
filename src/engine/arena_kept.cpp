// What a binding reports of the blocks it keeps for its caller (zarena/zarena_kept.h): its
// requests and refused frees, counted in the calling thread's slot as if made here; and,
// asked with an empty report, whether it may keep blocks now.
#include "base/last_error.h"
#include "engine/arena.h"

namespace zarena_core {

Status Arena::report_kept(const KeptCounts& k) noexcept {
  if (trace_ != nullptr) {
    return fail_with(Status::kUnsupported,
                     "zarena_kept_report_add: a trace is being written: the arena must see every "
                     "request");
  }
  if ((k.allocs | k.invalid_frees | k.stale_frees) == 0) {
    // The question. Step plans follow every request while they learn a step or serve one;
    // either changes only at a step boundary, a reset or a floor change, or when the
    // learner gives up a step too long to learn (step_plans.h).
    bool follow = false;  // the arena's plans or a lane's
    for_each_plans([&](StepPlans& p) { follow = follow || p.learning() || p.engaged(); });
    if (follow) {
      return fail_with(Status::kUnsupported,
                       "zarena_kept_report_add: step plans follow every request now (a step is "
                       "being learned or served by a plan): keep nothing now; ask again after "
                       "the next step boundary");
    }
    return Status::kOk;
  }
  // Counts are what happened (blocks kept while keeping was allowed, frees the binding
  // refused): always taken.
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
