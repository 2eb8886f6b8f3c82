// Laying out a learned step: the planner's output turned into what a run needs, inline
// for small steps and on one process-wide background thread ("zarena-plan") for large
// ones, so that no step boundary waits for a large plan (docs/PERFORMANCE.md: 1k
// allocations plan in about 1 ms, 100k in about 0.3-1 s).
//
// A job is shared between the thread and its arena: an arena that goes away (or a step
// that stopped repeating) cancels its job and drops its reference; the thread never
// touches the arena. Fork: the thread does not survive in the child, whose jobs in flight
// end as failed ("forked"); its next job starts a thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "plan/learner.h"
#include "plan/plan_run.h"

namespace zarena_core {

// Where a step is laid out: from region offset `window` around the live blocks there
// (offsets from the window's start, sorted), or anywhere (PlanLayout::kAnywhere).
struct PlanWindow {
  uint64_t window = PlanLayout::kAnywhere;
  uintptr_t address = 0;  // the window's start (zone_window sets it; 0: not known)
  std::vector<plan::ByteRange> obstacles;
  std::vector<plan::Leftover> leftovers;  // live blocks freed early in the next step
};

// The learned step laid out by the planner. false: refused (too large) or out of memory;
// *failure says why.
bool lay_out_step(const LearnedStep& step, uint64_t granule, const PlanWindow& where,
                  PlanLayout* out, std::string* failure, uint64_t* plan_ns) noexcept;

struct PlanJob {
  // In.
  LearnedStep step;
  uint64_t granule = 256;
  PlanWindow where;
  // Out, once done.
  std::atomic<bool> done{false};
  std::atomic<bool> cancelled{false};
  bool ok = false;
  PlanLayout layout;
  std::string failure;
  uint64_t plan_ns = 0;
};

// Queues the job for the background thread; false when no thread can run it (the caller
// lays it out inline).
bool post_plan_job(std::shared_ptr<PlanJob> job) noexcept;

}  // namespace zarena_core
