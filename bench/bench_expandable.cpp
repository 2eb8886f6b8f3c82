// What a commit costs an expandable arena (issue 15): the same allocation, one that moves
// the top past the committed end (the backend commits a chunk first) against one that
// does not (the arena was grown once and is not trimmed). Host backend always; the CUDA
// rows run where a device is (they are skipped with a message otherwise), with the
// default 64 MiB chunk whose create+map+set-access the issue measured at ~42 us.
// Each iteration allocates one chunk-sized block at a chunk-aligned top, so it commits
// exactly one chunk (or none); every `per_round` allocations the arena is reset outside
// the timing (and trimmed back to one chunk in the committing rows).
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "bench_support.h"
#include "zarena/zarena.h"

namespace {

struct Setup {
  int32_t backend;
  uint64_t chunk;
  uint64_t max;
};

const Setup kHost{ZARENA_BACKEND_HOST, 2ull << 20, 1ull << 30};
const Setup kCuda{ZARENA_BACKEND_CUDA, 64ull << 20, 8ull << 30};

zarena* make(const Setup& s, bool trim) {
  zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_OFF);
  zarena_config c;
  zarena_config_init(&c);
  c.backend = s.backend;
  c.capacity_bytes = s.max;
  c.overflow_policy = ZARENA_OVERFLOW_REFUSE;
  c.flags = ZARENA_FLAG_EXPANDABLE;
  c.commit_chunk_bytes = s.chunk;
  c.trim_keep_bytes = trim ? s.chunk : 0;
  zarena* a = nullptr;
  return zarena_create(&c, &a) == ZARENA_OK ? a : nullptr;
}

void BM_ExpandableAlloc(benchmark::State& state, const Setup& setup) {
  const bool commits = state.range(0) != 0;
  zarena* a = make(setup, commits);
  if (a == nullptr) {
    state.SkipWithError(zarena_last_error());
    return;
  }
  const uint64_t per_round = setup.max / setup.chunk - 1;
  if (!commits) {  // grow once; the timed allocations then never commit
    void* p = nullptr;
    for (uint64_t i = 0; i < per_round; ++i) zarena_alloc(a, setup.chunk, &p);
    zarena_reset(a);
  }
  const zarena_stats s0 = zarena_bench::stats_of(a);
  uint64_t n = 0;
  for (auto _ : state) {
    void* p = nullptr;
    if (zarena_alloc(a, setup.chunk, &p) != ZARENA_OK) {
      state.SkipWithError(zarena_last_error());
      break;
    }
    benchmark::DoNotOptimize(p);
    if (++n % per_round == 0) {
      state.PauseTiming();
      zarena_reset(a);  // trims back to one chunk in the committing rows
      state.ResumeTiming();
    }
  }
  const zarena_stats s1 = zarena_bench::stats_of(a);
  state.counters["commits_per_alloc"] =
      n == 0 ? 0.0 : static_cast<double>(s1.commit_events - s0.commit_events) / n;
  state.SetItemsProcessed(static_cast<int64_t>(n));
  zarena_destroy(a);
}

BENCHMARK_CAPTURE(BM_ExpandableAlloc, host, kHost)->ArgName("commit")->Arg(1)->Arg(0);
BENCHMARK_CAPTURE(BM_ExpandableAlloc, cuda, kCuda)->ArgName("commit")->Arg(1)->Arg(0);

}  // namespace

BENCHMARK_MAIN();
