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

}  // namespace zarena_replay
