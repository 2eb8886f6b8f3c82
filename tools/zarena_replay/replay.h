// Replays a trace, in sequence order, through the real engine on the host backend via
// the public C API, and measures what happened: per-epoch stats, overflow, what the live
// diagnostics said, and (optionally) a per-event timeline for the pictures.
//
// Blocks are matched by their trace address (offset or raw pointer): an allocation maps
// it to the pointer this replay got, a free of it frees that pointer. With the trace's
// own configuration the engine sees the same calls as the traced program, so even the
// traced program's failed frees are replayed (a pointer it never owned is passed for a
// NOT_OWNED free) and the stats come out identical. Under what-if settings placements
// differ, so frees that failed in the trace are skipped, and frees of blocks this
// replay's resets reclaimed are not passed to the engine (their pointer may denote a
// newer block by then); both are counted.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "epoch_stats.h"
#include "trace/trace_reader.h"
#include "verdict_capture.h"
#include "zarena/zarena.h"

namespace zarena_replay {

inline constexpr uint64_t kNoEvent = std::numeric_limits<uint64_t>::max();

// The traced cap; a 1.0 trace recorded none, and 1.0 engines had no default cap.
inline uint64_t limit_for(const zarena_trace::TraceInfo& info) {
  return info.overflow_limit_bytes != 0 ? info.overflow_limit_bytes : ZARENA_OVERFLOW_UNLIMITED;
}

struct ReplayConfig {
  std::string name = "replay";
  uint64_t capacity_bytes = 0;
  uint64_t alignment = 256;
  int32_t overflow_policy = ZARENA_OVERFLOW_DEFAULT;
  // Cap on live overflow bytes, as zarena_config's (0: the default cap, the capacity;
  // ZARENA_OVERFLOW_UNLIMITED: none). limit_for(trace) gives the traced one.
  uint64_t overflow_limit_bytes = ZARENA_OVERFLOW_UNLIMITED;
  // The configuration is the traced one: failed frees are replayed as well.
  bool exact = true;
  // What-if resets: a zarena_reset before each of these event indices (ascending).
  std::vector<uint64_t> reset_before;
  // What-if: a zarena_mark_step_boundary before this event index.
  uint64_t boundary_before = kNoEvent;
  // What-if: only the trace's first step boundary is replayed.
  bool drop_boundaries_after_first = false;
  // zarena_config.flags of the replay arena, besides the traced ones it keeps (traced_flags).
  uint32_t flags = 0;
  // Step plans in the replay: as traced (-1: traced_flags), or on (1: --plan) or off (0).
  int plans = -1;
  // A zarena_step_begin before each of these event indices (ascending): steps for a
  // trace that did not mark them.
  std::vector<uint64_t> step_begin_before;
  // Sizing: stop at the first request the region cannot serve.
  bool stop_at_first_miss = false;
  // Stats after every call (epochs, peaks, outcomes). Off for sizing replays, which only
  // need to know whether the region served every request.
  bool collect = true;
  // Keep a Sample per event (needs collect).
  bool timeline = false;
  const char* progress_label = nullptr;  // a progress bar on a terminal
};

// One event of the timeline.
struct Sample {
  uint64_t top = 0;      // region top after the event
  uint64_t live = 0;     // live bytes after the event: region + overflow
  uint32_t tag = 0;      // an allocation's tag, or the freed block's
  uint8_t marks = 0;     // kMark*
  uint64_t planned = 0;  // live bytes in planned blocks (ZARENA_FLAG_PLAN: plan_live_bytes)
};
inline constexpr uint8_t kMarkOverflow = 0x1;  // an allocation the overflow pool served
inline constexpr uint8_t kMarkRefused = 0x2;   // an allocation that failed
inline constexpr uint8_t kMarkReset = 0x4;     // a reset (the trace's or a what-if one)
inline constexpr uint8_t kMarkBoundary = 0x8;  // a step boundary
inline constexpr uint8_t kMarkPin = 0x10;      // a pin
inline constexpr uint8_t kMarkAlloc = 0x20;
inline constexpr uint8_t kMarkFree = 0x40;

// Live bytes per tag, sampled every tag_every events (for the picture).
struct TagSeries {
  std::vector<uint32_t> ids;  // tag ids, in the order of the byte columns
  uint64_t every = 0;
  std::vector<uint64_t> events;              // event index of each sample
  std::vector<std::vector<uint64_t>> bytes;  // [sample][tag column]
};

struct ReplayResult {
  bool stopped = false;  // stop_at_first_miss fired
  uint64_t events = 0;   // trace events handled
  uint64_t allocs = 0, frees = 0, resets = 0, boundaries = 0;
  // Allocations a step plan served in the traced run (outcome kPlanned, format 2.2); the
  // replay's own are final_stats.plan_hits.
  uint64_t traced_planned = 0;
  uint64_t inserted_resets = 0;
  uint64_t misses = 0;  // requests the region could not serve
  uint64_t first_miss_event = kNoEvent;
  uint64_t overflow_allocs = 0, overflow_bytes = 0, refused = 0;
  uint64_t peak_top = 0, peak_live = 0;
  std::vector<EpochStats> epochs;
  zarena_stats final_stats{};

  std::vector<Diagnosis> first_overflows;
  bool cadence_warned = false;
  uint64_t cadence_event = 0;
  std::string cadence_message;

  // Events this build cannot replay (the 1.1 calls without ZARENA_HAVE_1_1_API), by kind.
  std::map<std::string, uint64_t> not_replayed;
  uint64_t free_at_as_free = 0;       // epoch-checked frees replayed as plain frees
  uint64_t unmatched_frees = 0;       // frees of addresses the trace never allocated
  uint64_t frees_of_refused = 0;      // frees of blocks this replay could not allocate
  uint64_t skipped_failed_frees = 0;  // frees that failed in the trace (what-if runs)
  uint64_t status_mismatches = 0;     // the engine answered otherwise than in the trace
  uint64_t frees_after_reclaim = 0;   // frees of blocks a reset had reclaimed (what-if)
  // Blocks a what-if reset reclaimed while the trace still used them.
  uint64_t reclaimed_live_blocks = 0, reclaimed_live_bytes = 0, max_reclaimed_live_bytes = 0;

  std::vector<Sample> timeline;
  TagSeries tags;
};

// Whether the traced run was planned: its arena had plans on (the default since 1.3; no
// ZARENA_FLAG_NO_PLAN) and the trace recorded what they served (format 2.2 on).
bool traced_run_planned(const zarena_trace::TraceInfo& info);
// The traced arena's flags a replay keeps: ZARENA_FLAG_NO_RESETS (the diagnosis reads it),
// and ZARENA_FLAG_NO_PLAN unless the traced run was planned (traced_run_planned): the replay
// serves the same steps from the same plans, or replays the dynamic engine as it ran.
uint32_t traced_flags(const zarena_trace::TraceInfo& info);

// Replays t under c. Returns false with *error when the arena cannot be created.
bool replay(const zarena_trace::Trace& t, const ReplayConfig& c, ReplayResult* out,
            std::string* error);

// The request rounded up to the alignment, as the engine does.
inline uint64_t align_up(uint64_t size, uint64_t alignment) {
  return (size + alignment - 1) & ~(alignment - 1);
}

}  // namespace zarena_replay
