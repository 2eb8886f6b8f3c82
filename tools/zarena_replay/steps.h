// Where the steps of a traced program begin, for the "what if it reset every step"
// replay: from the engine's step-begin events when the program marked them, else from
// step boundaries when it marked one per step, else from its request sizes (a step
// repeats the sequence of sizes of the step before).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/trace_reader.h"

namespace zarena_replay {

struct StepPlan {
  // "step_begin", "boundaries", "repeats", or "none" (no steps found).
  std::string method;
  std::vector<uint64_t> starts;  // event index of each step's first event, ascending
  // The program marked a boundary per step: the what-if keeps only the first (weights).
  bool drop_boundaries_after_first = false;
  // A boundary is to be placed before the first step (nothing in the trace keeps what
  // was allocated before it, e.g. weights, alive across resets).
  bool boundary_before_first = false;
};

StepPlan find_steps(const zarena_trace::Trace& t);

// Where to mark steps for a replay under step plans (--plan): the program's own
// step-begin events when it has them (method "step_begin", nothing to insert), else its
// boundaries, else the period of its request sizes ("period": the smallest p with
// size[i] == size[i+p] over the whole second half of the requests, extended back as far
// as it holds, at the phase where the fewest bytes are live, so steps begin where the
// program has let go of the previous one). "none": no period.
StepPlan find_plan_steps(const zarena_trace::Trace& t, uint64_t* period);

}  // namespace zarena_replay
