// The footprint of a real PyTorch training run, measured on the host: train_compare's
// allocation sequence (bench/data/train_compare_h100_8steps.txt, recorded on an H100)
// replayed through an arena set up as zarena.torch sets one up (expandable, 2 MiB commits,
// no resets), its two threads (the main thread, the autograd thread) on two threads here,
// each call made in the traced order. So the slots, the drains and the central side see
// what they saw on the GPU: the replay of the run recorded at 22:40 on 2026-12-07 gave the
// GPU's own top (493.21 MiB) exactly, as long as the capacity was the run's.
//
// Args: plans (0: ZARENA_FLAG_NO_PLAN, 1: the default), capacity in GiB (2: what
// train_compare used to set; 80: zarena.torch's default on that device, its memory).
// Counters: top_MiB (the region's highest top; the committed peak is it rounded up to
// 2 MiB), committed_end_MiB (what stays committed after the run: a plan's trim shows here),
// live_peak_MiB (the most bytes live at once, from the sequence: PyTorch's
// max_memory_allocated in that run), top_over_live (this run's top over it; PyTorch's
// max_memory_reserved was 1.172x that, 510 MiB), plan_hits.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.h"
#include "zarena/zarena.h"

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

struct Call {
  char kind;     // 's' step_begin, 'a' alloc, 'f' free
  int thread;    // 0 or 1
  uint64_t arg;  // a: the size; f: the allocation's index
};

struct Sequence {
  std::vector<Call> calls;
  uint64_t allocs = 0;
  uint64_t live_peak = 0;
};

const Sequence& sequence() {
  static const Sequence seq = [] {
    Sequence s;
    const std::string path = std::string(ZARENA_BENCH_DATA) + "/train_compare_h100_8steps.txt";
    std::ifstream in(path);
    if (!in) {
      std::fprintf(stderr, "bench_torch_trace: cannot read %s\n", path.c_str());
      std::abort();
    }
    std::vector<uint64_t> sizes;
    uint64_t live = 0;
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream fields(line);
      Call c{};
      fields >> c.kind;
      if (c.kind == 'a' || c.kind == 'f') fields >> c.arg >> c.thread;
      if (!fields || (c.kind != 's' && c.kind != 'a' && c.kind != 'f') || c.thread < 0 ||
          c.thread > 1 || (c.kind == 'f' && c.arg >= sizes.size())) {
        std::fprintf(stderr, "bench_torch_trace: bad line in %s: %s\n", path.c_str(), line.c_str());
        std::abort();
      }
      if (c.kind == 'a') {
        sizes.push_back(c.arg);
        live += c.arg;
        s.live_peak = std::max(s.live_peak, live);
      } else if (c.kind == 'f') {
        live -= sizes[c.arg];
      }
      s.calls.push_back(c);
    }
    s.allocs = sizes.size();
    return s;
  }();
  return seq;
}

// One replay: the main thread makes thread 0's calls, a second thread thread 1's, each
// waiting for its turn.
void replay(zarena* a, const Sequence& seq) {
  std::vector<void*> blocks(seq.allocs, nullptr);
  std::atomic<size_t> next{0};
  uint64_t allocated = 0;  // the allocation index (advanced by whichever thread's turn it is)
  auto run = [&](int me) {
    for (;;) {
      const size_t i = next.load(std::memory_order_acquire);
      if (i >= seq.calls.size()) return;
      const Call& c = seq.calls[i];
      if (c.thread != me && c.kind != 's') {
        std::this_thread::yield();
        continue;
      }
      if (c.kind == 's') {
        if (me != 0) {
          std::this_thread::yield();
          continue;
        }
        zarena_step_begin(a);
      } else if (c.kind == 'a') {
        if (zarena_alloc(a, c.arg, &blocks[allocated]) != ZARENA_OK) {
          std::fprintf(stderr, "bench_torch_trace: allocation %llu failed: %s\n",
                       static_cast<unsigned long long>(allocated), zarena_last_error());
          std::abort();
        }
        ++allocated;
      } else if (zarena_free(a, blocks[c.arg]) != ZARENA_OK) {
        std::fprintf(stderr, "bench_torch_trace: free of allocation %llu failed: %s\n",
                     static_cast<unsigned long long>(c.arg), zarena_last_error());
        std::abort();
      }
      next.store(i + 1, std::memory_order_release);
    }
  };
  std::thread autograd(run, 1);
  run(0);
  autograd.join();
}

void BM_TorchTraceFootprint(benchmark::State& state) {
  const Sequence& seq = sequence();
  const uint32_t flags = ZARENA_FLAG_EXPANDABLE | ZARENA_FLAG_NO_RESETS |
                         (state.range(0) != 0 ? 0u : static_cast<uint32_t>(ZARENA_FLAG_NO_PLAN));
  const uint64_t capacity = static_cast<uint64_t>(state.range(1)) << 30;
  zarena_stats st{};
  for (auto _ : state) {
    zarena* a = zarena_bench::make_quiet_host_arena(capacity, flags, 2 << 20);
    replay(a, seq);
    st = zarena_bench::stats_of(a);
    zarena_destroy(a);
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
