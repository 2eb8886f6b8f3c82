// What tracing costs a program: zarena_alloc + zarena_free through libzarena.so (the
// library programs link), on an arena without a trace and on one with cfg.trace_file set
// (written to /dev/null, so the figures are the hot path's, not the disk's;
// ZTEST_BENCH_TRACE_FILE=path for a real file).
//
// BM_TraceOverhead is the figure docs/PERFORMANCE.md reports: both arenas in one
// benchmark, alternating batches of pairs so that both see the same machine load; its
// counters are the untraced and traced nanoseconds per pair and the overhead in percent
// (target: below 20). BM_Pair/0 and /1 are the same pair as plain benchmarks (0 untraced,
// 1 traced), also with two threads on one arena.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "zarena/zarena.h"

namespace {

const uint64_t kSizes[] = {4096, 16384, 1 << 20, 256, 65536, 12288, 3 << 20, 2048};

std::string trace_path() {
  const char* p = std::getenv("ZTEST_BENCH_TRACE_FILE");
  return p != nullptr ? p : "/dev/null";
}

zarena* make_arena(bool traced) {
  zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_OFF);
  zarena_config c;
  zarena_config_init(&c);
  c.backend = ZARENA_BACKEND_HOST;
  c.capacity_bytes = 1ull << 30;
  c.overflow_policy = ZARENA_OVERFLOW_REFUSE;
  static std::string path;  // outlives zarena_create, which copies it
  path = trace_path();
  c.trace_file = traced ? path.c_str() : "";
  zarena* a = nullptr;
  if (zarena_create(&c, &a) != ZARENA_OK) std::abort();
  // A training loop resets every step: after the first reset the reset-cadence watch
  // (which looks at every allocation of a program that never resets) is off.
  zarena_reset(a);
  return a;
}

inline void pair(zarena* a, unsigned i) {
  void* p = nullptr;
  zarena_alloc(a, kSizes[i & 7], &p);
  benchmark::DoNotOptimize(p);
  zarena_free(a, p);
}

double batch_ns(zarena* a, unsigned n, unsigned* i) {
  const auto t0 = std::chrono::steady_clock::now();
  for (unsigned k = 0; k < n; ++k) pair(a, (*i)++);
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count();
}

void BM_TraceOverhead(benchmark::State& state) {
  zarena* plain = make_arena(false);
  zarena* traced = make_arena(true);
  constexpr unsigned kBatch = 2048;
  unsigned i = 0;
  batch_ns(plain, kBatch, &i);  // warm both
  batch_ns(traced, kBatch, &i);
  // Per round the fastest of three batches each, interleaved: a batch that a preemption
  // or another process hit says nothing about either arena.
  double plain_ns = 0, traced_ns = 0;
  uint64_t rounds = 0;
  for (auto _ : state) {
    double p = 1e300, t = 1e300;
    for (int k = 0; k < 3; ++k) {
      p = std::min(p, batch_ns(plain, kBatch, &i));
      t = std::min(t, batch_ns(traced, kBatch, &i));
    }
    plain_ns += p;
    traced_ns += t;
    ++rounds;
  }
  const double pairs = static_cast<double>(rounds) * kBatch;
  state.counters["untraced_ns"] = plain_ns / pairs;
  state.counters["traced_ns"] = traced_ns / pairs;
  state.counters["overhead_pct"] = 100.0 * (traced_ns / plain_ns - 1.0);
  zarena_destroy(traced);
  zarena_destroy(plain);
}
BENCHMARK(BM_TraceOverhead)->Unit(benchmark::kMicrosecond);

zarena* g_arena = nullptr;

void BM_Pair(benchmark::State& state) {
  if (state.thread_index() == 0) g_arena = make_arena(state.range(0) != 0);
  unsigned i = static_cast<unsigned>(state.thread_index()) * 3;
  for (auto _ : state) pair(g_arena, i++);
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    zarena_destroy(g_arena);
    g_arena = nullptr;
  }
}
BENCHMARK(BM_Pair)->Arg(0)->Arg(1);
BENCHMARK(BM_Pair)->Arg(0)->Arg(1)->Threads(2);

}  // namespace

BENCHMARK_MAIN();
