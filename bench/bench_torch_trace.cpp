// The footprint of a real PyTorch training run, measured on the host: train_compare's
// allocation sequence (tests/data/train_compare_h100_8steps.txt, recorded on an H100)
// replayed (tests/torch_sequence.h) through an arena set up as zarena.torch sets one up
// (expandable, 2 MiB commits, no resets), its two threads (the main thread, the autograd
// thread) on two threads here, each call made in the traced order. So the slots, the drains and the
// central side see what they saw on the GPU: the replay of the run recorded at 22:40 on 2026-12-07
// gave the GPU's own top (493.21 MiB) exactly, as long as the capacity was the run's.
//
// Args: plans (0: ZARENA_FLAG_NO_PLAN, 1: the default), capacity in GiB (2: what
// train_compare used to set; 80: zarena.torch's default on that device, its memory).
// Counters: top_MiB (the region's highest top; the committed peak is it rounded up to
// 2 MiB), committed_end_MiB (what stays committed after the run: a plan's trim shows here),
// live_peak_MiB (the most bytes live at once, from the sequence: PyTorch's
// max_memory_allocated in that run), top_over_live (this run's top over it; PyTorch's
// max_memory_reserved was 1.172x that, 510 MiB), plan_hits.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench_support.h"
#include "torch_sequence.h"
#include "zarena/zarena.h"

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

const zarena_test::TorchSequence& sequence() {
  static const zarena_test::TorchSequence seq = [] {
    zarena_test::TorchSequence s;
    std::string error;
    if (!zarena_test::load_torch_sequence(zarena_test::torch_sequence_path(), &s, &error)) {
      std::fprintf(stderr, "bench_torch_trace: %s\n", error.c_str());
      std::abort();
    }
    return s;
  }();
  return seq;
}

void BM_TorchTraceFootprint(benchmark::State& state) {
  const zarena_test::TorchSequence& seq = sequence();
  const uint32_t flags = ZARENA_FLAG_EXPANDABLE | ZARENA_FLAG_NO_RESETS |
                         (state.range(0) != 0 ? 0u : static_cast<uint32_t>(ZARENA_FLAG_NO_PLAN));
  const uint64_t capacity = static_cast<uint64_t>(state.range(1)) << 30;
  zarena_stats st{};
  std::string error;
  for (auto _ : state) {
    zarena* a = zarena_bench::make_quiet_host_arena(capacity, flags, 2 << 20);
    const bool replayed = zarena_test::replay_torch_sequence(a, seq, &error);
    st = zarena_bench::stats_of(a);
    zarena_destroy(a);
    if (!replayed) break;
  }
  if (!error.empty()) {
    state.SkipWithError(error.c_str());
    return;
  }
  state.counters["top_MiB"] = st.high_water_bytes / kMiB;
  state.counters["committed_end_MiB"] = st.committed_bytes / kMiB;
  state.counters["live_peak_MiB"] = seq.live_peak / kMiB;
  state.counters["top_over_live"] =
      static_cast<double>(st.high_water_bytes) / static_cast<double>(seq.live_peak);
  state.counters["plan_hits"] = static_cast<double>(st.plan_hits);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(seq.allocs));
}
BENCHMARK(BM_TorchTraceFootprint)
    ->ArgNames({"plans", "capacity_GiB"})
    ->Args({1, 80})
    ->Args({0, 80})
    ->Args({1, 2})
    ->Args({0, 2})
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
