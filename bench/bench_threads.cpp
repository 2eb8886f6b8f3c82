// The thread and pair figures, each against a baseline measured in the same run
// (bench/report.py prints the ratios):
//   - thread scaling: 1..16 threads on ONE arena, each replacing blocks of 256 B..64 KiB
//     in a window of 64 live blocks (free the oldest, allocate a new one), against glibc
//     malloc doing the same on the same threads;
//   - the single-thread alloc+free pair of a hot size, against malloc/free;
//   - a reset after 1 and after 1,000,000 allocations.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "bench_support.h"
#include "zarena/zarena.h"

namespace {

using zarena_bench::make_quiet_host_arena;
using zarena_bench::Rng;

constexpr uint64_t kCapacity = 4ull << 30;
constexpr int kWindow = 64;

using Shared = zarena_bench::SharedArena<kCapacity>;

void BM_ThreadsZarena(benchmark::State& state) {
  zarena* a = Shared::arena;
  Rng rng{0x9E3779B97F4A7C15ull * (state.thread_index() + 1)};
  void* window[kWindow];
  for (void*& p : window) {
    if (zarena_alloc(a, rng.size(), &p) != ZARENA_OK) std::abort();
  }
  int i = 0;
  for (auto _ : state) {
    zarena_free(a, window[i]);
    if (zarena_alloc(a, rng.size(), &window[i]) != ZARENA_OK) std::abort();
    i = (i + 1) & (kWindow - 1);
  }
  for (void* p : window) zarena_free(a, p);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ThreadsZarena)
    ->Setup(Shared::Setup)
    ->Teardown(Shared::Teardown)
    ->ThreadRange(1, 16)
    ->UseRealTime();

void BM_ThreadsMalloc(benchmark::State& state) {
  Rng rng{0x9E3779B97F4A7C15ull * (state.thread_index() + 1)};
  void* window[kWindow];
  for (void*& p : window) p = std::malloc(rng.size());
  int i = 0;
  for (auto _ : state) {
    std::free(window[i]);
    window[i] = std::malloc(rng.size());
    benchmark::DoNotOptimize(window[i]);
    i = (i + 1) & (kWindow - 1);
  }
  for (void* p : window) std::free(p);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ThreadsMalloc)->ThreadRange(1, 16)->UseRealTime();

// The hot pair: the same size allocated and freed again (a tensor's life in a step), in
// an arena reset once before (as a training loop's is).
void pair_loop(benchmark::State& state, bool reset_first) {
  zarena* a = make_quiet_host_arena(1ull << 30);
  if (reset_first) zarena_reset(a);
  void* guard = nullptr;
  zarena_alloc(a, 256, &guard);
  for (auto _ : state) {
    void* p = nullptr;
    zarena_alloc(a, 4096, &p);
    benchmark::DoNotOptimize(p);
    zarena_free(a, p);
  }
  state.SetItemsProcessed(state.iterations());
  zarena_destroy(a);
}
void BM_PairZarena(benchmark::State& state) { pair_loop(state, true); }
BENCHMARK(BM_PairZarena);
// The same in an arena never reset: the reset-cadence detector reads every request of the
// thread it follows (its cost in programs that never reset).
void BM_PairZarenaNeverReset(benchmark::State& state) { pair_loop(state, false); }
BENCHMARK(BM_PairZarenaNeverReset);

void BM_PairMalloc(benchmark::State& state) {
  for (auto _ : state) {
    void* p = std::malloc(4096);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PairMalloc);

// zarena_reset after N allocations (only the reset is timed).
void BM_ResetAfter(benchmark::State& state) {
  const int64_t n = state.range(0);
  zarena* a = make_quiet_host_arena(kCapacity);
  for (auto _ : state) {
    for (int64_t k = 0; k < n; ++k) {
      void* p = nullptr;
      if (zarena_alloc(a, 256 * (1 + k % 16), &p) != ZARENA_OK) std::abort();
    }
    const auto t0 = std::chrono::steady_clock::now();
    zarena_reset(a);
    const auto t1 = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
  }
  zarena_destroy(a);
}
BENCHMARK(BM_ResetAfter)->Arg(1)->Arg(1000000)->UseManualTime()->Iterations(20);

// The control for the above: a reset after one allocation, with the caches as cold as a
// million allocations leave them (512 MiB streamed through first). If this matches the
// reset after 1M, what that costs is cache misses on the few lines a reset touches, not
// work that grows with the allocations.
void BM_ResetAfterOneColdCache(benchmark::State& state) {
  zarena* a = make_quiet_host_arena(kCapacity);
  std::vector<uint64_t> junk((512ull << 20) / sizeof(uint64_t), 1);
  uint64_t sum = 0;
  for (auto _ : state) {
    void* p = nullptr;
    if (zarena_alloc(a, 256, &p) != ZARENA_OK) std::abort();
    for (size_t k = 0; k < junk.size(); k += 8) sum += junk[k]++;
    const auto t0 = std::chrono::steady_clock::now();
    zarena_reset(a);
    const auto t1 = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
  }
  benchmark::DoNotOptimize(sum);
  zarena_destroy(a);
}
BENCHMARK(BM_ResetAfterOneColdCache)->UseManualTime()->Iterations(20);

}  // namespace

BENCHMARK_MAIN();
