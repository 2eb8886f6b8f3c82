// Lanes on threads (zarena/zarena_lane.h): 1..16 threads on ONE arena, each making the
// 256 B alloc+free pair in steps of 64 pairs. lanes: each thread with a lane of its own (its
// own slot and plan; zarena_lane_step_begin between steps), every pair planned. threads:
// the same on the arena itself (zarena_step_begin), whose one plan follows the threads as
// one sequence: threads running at once interleave and deviate from it. Items per second of
// wall time: 16 threads' over 1 thread's is the scaling (bench/report.py's lanes rows).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>

#include "bench_support.h"
#include "zarena/zarena.h"
#include "zarena/zarena_lane.h"

namespace {

constexpr uint64_t kCapacity = 1ull << 30;
constexpr int kStep = 64;
constexpr uint64_t kSize = 256;

using Shared = zarena_bench::SharedArena<kCapacity>;

// Pair i on lane l (NULL: the arena), a step boundary every kStep; true when planned.
bool pair(zarena* a, zarena_lane* l, int64_t i) {
  zarena_block b;
  if (i % kStep == 0 &&
      (l != nullptr ? zarena_lane_step_begin(a, l) : zarena_step_begin(a)) != ZARENA_OK) {
    std::abort();
  }
  if ((l != nullptr ? zarena_lane_alloc(a, l, kSize, 0, &b) : zarena_alloc_ex(a, kSize, 0, &b)) !=
      ZARENA_OK) {
    std::abort();
  }
  if ((l != nullptr ? zarena_lane_free(a, l, b.ptr, ZARENA_ANY_EPOCH) : zarena_free(a, b.ptr)) !=
      ZARENA_OK) {
    std::abort();
  }
  return (b.flags & ZARENA_BLOCK_PLANNED) != 0;
}

void pair_steps(benchmark::State& state, bool lanes) {
  zarena* a = Shared::arena;
  zarena_lane* l = nullptr;
  if (lanes && zarena_lane_create(a, &l) != ZARENA_OK) std::abort();
  int64_t i = 0;
  while (i < 4 * kStep) (void)pair(a, l, i++);  // learned before the loop
  uint64_t planned = 0;
  for (auto _ : state) planned += pair(a, l, i++);
  state.SetItemsProcessed(state.iterations());
  // Each thread's share of its pairs planned, averaged over the threads.
  state.counters["planned"] =
      benchmark::Counter(static_cast<double>(planned) / static_cast<double>(state.iterations()),
                         benchmark::Counter::kAvgThreads);
  if (l != nullptr) zarena_lane_destroy(a, l);
}

void BM_LanePlannedPairs(benchmark::State& state) { pair_steps(state, true); }
BENCHMARK(BM_LanePlannedPairs)
    ->Setup(Shared::Setup)
    ->Teardown(Shared::Teardown)
    ->ThreadRange(1, 16)
    ->UseRealTime();

void BM_ThreadPlannedPairs(benchmark::State& state) { pair_steps(state, false); }
BENCHMARK(BM_ThreadPlannedPairs)
    ->Setup(Shared::Setup)
    ->Teardown(Shared::Teardown)
    ->ThreadRange(1, 16)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
