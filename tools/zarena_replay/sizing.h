// The smallest capacity at which a trace needs no overflow, found by bisection over
// replays: with unlimited capacity the region never refuses, and its top's high water H
// always fits (same placements). Below H, placement may differ (a request that cannot
// bump can take a hole below the floor), so smaller capacities are tried: bisection on
// the alignment granule between the largest request and H, each probe a replay that
// stops at the first request the region cannot serve. It assumes "fits" is monotone in
// the capacity between the probes; the answer itself is verified by its own replay.
#pragma once

#include <cstdint>

#include "replay.h"

namespace zarena_replay {

struct SizingResult {
  bool found = false;
  uint64_t capacity_bytes = 0;  // smallest probe that fitted
  uint64_t unlimited_top = 0;   // H: the top with unlimited capacity (always fits)
  uint64_t replays = 0;         // replays run
};

// base supplies alignment, what-if resets and boundaries; its capacity and policy are
// replaced. Returns false with *error when a replay arena cannot be created.
bool smallest_capacity(const zarena_trace::Trace& t, const ReplayConfig& base, SizingResult* out,
                       std::string* error);

}  // namespace zarena_replay
