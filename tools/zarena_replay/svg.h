// The picture: the arena over the replay, as SVG. Top and live bytes against the event
// index, the capacity line, resets and step boundaries, overflow points, pins, live
// bytes by tag (stacked, coloured) when the trace has tags, live bytes in planned blocks
// (under step plans), and the verdict in the title.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "replay.h"

namespace zarena_replay {

struct PictureInput {
  const zarena_trace::Trace* trace = nullptr;
  const ReplayResult* result = nullptr;  // a replay with a timeline
  uint64_t capacity_bytes = 0;
  bool capacity_known = true;
  std::string verdict;  // "fits" or the first-overflow verdict
  std::string advice;
  // Event index where each step began (ascending; empty: steps unknown, the x axis then
  // counts events), and how they were found ("zarena_step_begin", "resets", ...).
  std::vector<uint64_t> step_starts;
  std::string steps_from;
  // A replay under step plans (--plan, or a run traced under them): the title says so and,
  // when dynamic_peak_top is not 0, gives the peak top of the replay without plans beside
  // it. Planned blocks (Sample::planned) are drawn whenever the timeline has any: a green
  // area from the bottom, in the legend.
  bool under_plan = false;
  uint64_t dynamic_peak_top = 0;
};

std::string render_svg(const PictureInput& in);

}  // namespace zarena_replay
