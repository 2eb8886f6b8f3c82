// The picture: the arena over the replay, as SVG. Top and live bytes against the event
// index, the capacity line, resets and step boundaries, overflow points, pins, live
// bytes by tag (stacked, coloured) when the trace has tags, and the verdict in the title.
#pragma once

#include <string>

#include "replay.h"

namespace zarena_replay {

struct PictureInput {
  const zarena_trace::Trace* trace = nullptr;
  const ReplayResult* result = nullptr;  // a replay with a timeline
  uint64_t capacity_bytes = 0;
  bool capacity_known = true;
  std::string verdict;  // "fits" or the first-overflow verdict
  std::string advice;
};

std::string render_svg(const PictureInput& in);

}  // namespace zarena_replay
