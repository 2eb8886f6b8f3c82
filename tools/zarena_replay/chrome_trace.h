// The replay as a Trace Event Format file (JSON) that Perfetto and chrome://tracing open:
// a counter track of top and live bytes, and instants for resets, step boundaries,
// overflows, refusals and pins.
#pragma once

#include <ostream>
#include <vector>

#include "replay.h"

namespace zarena_replay {

// Counters per event up to this many events; longer replays are bucketed (the maximum
// of each bucket), which keeps the file loadable.
inline constexpr uint64_t kMaxCounterPoints = 200000;

// Times for display, in ns: a coarse clock gives runs of equal stamps, spread here
// evenly (by sequence order) up to the next stamp or one clock resolution.
std::vector<double> display_times_ns(const zarena_trace::Trace& t);

void write_chrome_trace(std::ostream& out, const zarena_trace::Trace& t, const ReplayResult& r);

}  // namespace zarena_replay
