// Graph-stable steps (docs/PLANS.md "Graph-stable steps"; zarena/zarena_graph.h): the
// bookkeeping of steps captured into CUDA graphs under a step plan. A graph bakes in the
// addresses of its step; under a plan every step of one phase has the same addresses, so
// the graph can replay in the plan's own zone while eager steps go on around it.
//
// This class works on the plan's shared memory only (zarena_plan_view: the state word,
// the cursor, the instances' words, the plan's lock), following zarena_plan.h's protocol
// as the library's own planned path does; it never frees, moves or lays out anything. What
// it decides:
//   - when a capture may begin: a plan is engaged, no allocation since the last boundary,
//     and the step before was served whole by that plan (so whatever the captured step
//     frees of the step before is a planned block in the zone);
//   - which planned instances may be live when a graph is replayed: those live when it
//     was captured (the step before's leftovers, which the step frees or writes again),
//     and, when the step before was this graph's own capture or replay, its outputs (what
//     its step left live). Any other live instance would be overwritten by the replay,
//     and so would a pinned one: the replay is refused;
//   - what a replay does to the plan: the step counts as served (the state word's step
//     count, and for a period of 2 its phase, move on as at a step's end), and the
//     instances' words become what the captured step left them: its outputs live (in the
//     current epoch), what it freed of the step before freed. The next step, eager or a
//     replay of the other phase, then starts from what an eager step would have left;
//   - whether a capture ended with its step whole (every allocation served by the plan).
// The arena (engine/arena_graphs.cpp) holds the zone still while holds_zone(), refuses
// allocations the plan does not serve while capturing(), and builds the messages.
//
// Threads: every call takes the graphs' mutex; those that read or change the plan's state
// take the plan's lock inside it (the order is always graphs, then plan). capturing() is
// one relaxed load (the allocation path asks it when the plan did not serve a request).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "zarena/zarena_plan.h"

namespace zarena_core {

struct GraphCounts {
  uint64_t captures = 0;         // captures kept as graphs
  uint64_t failed_captures = 0;  // captures that ended refused or discarded
  uint64_t refused_allocs = 0;   // allocations refused during captures
  uint64_t replays = 0;          // replays accepted
  uint64_t refused_replays = 0;
  uint64_t stream_joins = 0;  // frees that ordered the arena's stream after another stream
  uint32_t graphs = 0;        // graphs alive (captured, not released)
  bool capturing = false;
};

class GraphSteps {
 public:
  // --- at every step boundary, after the plans' own boundary -----------------------------
  // v: the plan view the arena publishes now (null: none). Keeps count of the steps in a
  // row that the engaged plan served whole.
  void after_boundary(const zarena_plan_view* v) noexcept;

  // --- captures ----------------------------------------------------------------------------
  // The step starting now is captured. Refused (kCaptureUnsafe, nothing changed) unless a
  // plan is engaged, at a boundary, after a step it served whole; or while a capture runs.
  Result begin_capture(const zarena_plan_view* v);
  bool capturing() const noexcept { return capturing_.load(std::memory_order_relaxed); }
  // A zone that a graph may replay in exists (a capture runs, or a graph is alive).
  bool holds_zone() const noexcept { return holds_zone_.load(std::memory_order_relaxed); }
  // An allocation was refused during the capture (message: why, for capture end).
  void note_refusal(const std::string& message);
  // Ends the capture, after the arena ended its step (the plans' boundary). keep: the
  // caller's capture succeeded and it wants the graph. Returns the graph's id in *id (0
  // when none is kept): kCaptureUnsafe when the step was not served whole by the plan (an
  // allocation refused, a deviation, a step cut short, more than one step), with why.
  Result end_capture(const zarena_plan_view* v, bool keep, uint32_t* id);

  // --- replays and release -----------------------------------------------------------------
  // The first call for a graph right after its capture (no step since) is its first
  // launch, the captured step itself: accepted with nothing counted or changed.
  // Any other: the step starting now is a replay of graph `id`: checked (kInvalidArgument for an
  // unknown id; kCaptureUnsafe, nothing changed, when a replay now would write over a live
  // block, the plan is elsewhere, or the step before was not served whole by the plan, so
  // that what it left live may be dynamic blocks), then counted as a step the plan served.
  Result replay(const zarena_plan_view* v, uint32_t id);
  // The graph will not be launched again. kInvalidArgument for an unknown id.
  Result release(uint32_t id);

  void count_join() noexcept { joins_.fetch_add(1, std::memory_order_relaxed); }
  GraphCounts counts() const;
  // Whether begin_capture(v) would be accepted now.
  bool may_begin(const zarena_plan_view* v) const;
  // Steps the engaged plan served whole in a row, as of the last boundary (tests).
  uint64_t whole_steps() const;

 private:
  struct Graph {
    uint32_t id = 0;
    uint32_t phase = 0;
    const zarena_plan_view* view = nullptr;
    std::vector<uint8_t> before;   // [period*n]: live when it was captured
    std::vector<uint8_t> outputs;  // [period*n]: live when its capture ended
    uint64_t replays = 0;
  };
  struct Capture {
    const zarena_plan_view* view = nullptr;
    uint32_t phase = 0;
    uint64_t start_steps = 0;  // the state word's step count at the capture's start
    std::vector<uint8_t> live;
    uint64_t refusals = 0;
    std::string first_refusal;
  };
  Graph* find_locked(uint32_t id);
  // Why a capture may not begin now ("" when it may); the caller holds mu_ and the plan's
  // lock of v (not null).
  std::string why_not_locked(const zarena_plan_view* v) const;
  void update_holds_locked() noexcept;

  mutable std::mutex mu_;
  std::atomic<bool> capturing_{false};
  std::atomic<bool> holds_zone_{false};
  Capture capture_;
  std::vector<Graph> graphs_;
  uint32_t next_id_ = 1;
  // after_boundary's count: the view, its step count at the last boundary, the steps in a
  // row it served whole.
  const zarena_plan_view* last_view_ = nullptr;
  uint64_t last_steps_ = 0;
  uint64_t whole_steps_ = 0;
  uint32_t last_graph_ = 0;  // the graph whose capture or replay was the last step (0: none)
  // The graph just captured, until its first launch (its first replay call) or another
  // step: that launch runs the captured step itself, so it is no step of its own.
  uint32_t first_launch_ = 0;
  GraphCounts counts_;
  std::atomic<uint64_t> joins_{0};
};

}  // namespace zarena_core
