// Host-side cost of the arena's hot path, with the baselines it is judged against
// measured in the same run:
//   - malloc/free of the same sizes (the system allocator),
//   - a first-fit arena that scans its free list (how ztensor's Go arena worked: ~16 us
//     per alloc+free with 10k free blocks), on the same 10k-free-block layout.
// bench/report.py turns the JSON output into ratios.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

#include "bench_support.h"
#include "zarena/zarena.h"
#include "zarena/zarena_plan.h"

namespace {

constexpr uint64_t kCapacity = 1ull << 30;

zarena* make_arena() { return zarena_bench::make_quiet_host_arena(kCapacity); }

using zarena_bench::stats_of;
double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// The counters both step-footprint benchmarks report (each adds its own peak): what the
// arena holds after the run, the region's top at its highest, and the planned blocks.
void footprint_counters(benchmark::State& state, const zarena_stats& st) {
  state.counters["committed_MiB"] = mib(st.committed_bytes);
  state.counters["high_water_MiB"] = mib(st.high_water_bytes);
  state.counters["plan_hits"] = static_cast<double>(st.plan_hits);
}

// Sizes of a transformer-ish step: a few shapes repeated.
const uint64_t kSizes[] = {4096, 16384, 1 << 20, 256, 65536, 12288, 3 << 20, 2048};
constexpr int kNumSizes = sizeof(kSizes) / sizeof(kSizes[0]);

// Leaves `free_blocks` free blocks of assorted sizes in the arena (every other block of
// a long run freed), so the free index is populated while the loop runs.
std::vector<void*> fragment(zarena* a, int free_blocks) {
  std::vector<void*> keep;
  for (int i = 0; i < 2 * free_blocks; ++i) {
    void* p = nullptr;
    if (zarena_alloc(a, 256 * (1 + i % 13), &p) != ZARENA_OK) std::abort();
    if (i % 2 == 0) {
      zarena_free(a, p);
    } else {
      keep.push_back(p);
    }
  }
  return keep;
}

void BM_ArenaAllocFree(benchmark::State& state) {
  zarena* a = make_arena();
  fragment(a, static_cast<int>(state.range(0)));
  void* top_guard = nullptr;
  zarena_alloc(a, 256, &top_guard);
  int i = 0;
  for (auto _ : state) {
    void* p = nullptr;
    zarena_alloc(a, kSizes[i++ & 7], &p);
    benchmark::DoNotOptimize(p);
    zarena_free(a, p);
  }
  state.SetItemsProcessed(state.iterations());
  zarena_destroy(a);
}
BENCHMARK(BM_ArenaAllocFree)->Arg(0)->Arg(10000);

void BM_MallocFree(benchmark::State& state) {
  int i = 0;
  for (auto _ : state) {
    void* p = std::malloc(kSizes[i++ & 7]);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MallocFree);

// A step: 64 allocations of the repeating sizes, then one reset (per allocation cost).
void BM_ArenaStepWithReset(benchmark::State& state) {
  zarena* a = make_arena();
  for (auto _ : state) {
    for (int k = 0; k < 64; ++k) {
      void* p = nullptr;
      zarena_alloc(a, kSizes[k % kNumSizes], &p);
      benchmark::DoNotOptimize(p);
    }
    zarena_reset(a);
  }
  state.SetItemsProcessed(state.iterations() * 64);
  zarena_destroy(a);
}
BENCHMARK(BM_ArenaStepWithReset);

// A repeating step (zarena_step_begin, then 64 allocations of the repeating sizes, each
// freed after the next one is made), per alloc+free pair: Arg(0) the dynamic engine,
// Arg(1) under a step plan (the default: learned in the first two steps, then every
// request is served from the plan; Arg(0) sets ZARENA_FLAG_NO_PLAN). The ratio of the two
// is the plan's saving.
void BM_StepPairs(benchmark::State& state) {
  zarena* a =
      zarena_bench::make_quiet_host_arena(kCapacity, state.range(0) ? 0 : ZARENA_FLAG_NO_PLAN);
  for (auto _ : state) {
    zarena_step_begin(a);
    void* prev = nullptr;
    for (int k = 0; k < 64; ++k) {
      void* p = nullptr;
      zarena_alloc(a, kSizes[k % kNumSizes], &p);
      benchmark::DoNotOptimize(p);
      if (prev != nullptr) zarena_free(a, prev);
      prev = p;
    }
    zarena_free(a, prev);
  }
  const zarena_stats st = stats_of(a);
  state.counters["planned"] = static_cast<double>(st.plan_hits) /
                              static_cast<double>(std::max<int64_t>(1, state.iterations() * 64));
  state.SetItemsProcessed(state.iterations() * 64);
  zarena_destroy(a);
}
BENCHMARK(BM_StepPairs)->Arg(0)->Arg(1);

// The fixed cost of a planned step's boundary: a step of range(1) planned alloc+free pairs
// (the sizes of BM_StepPairs) ended by zarena_step_begin (range(0) == 0) or zarena_reset
// (range(0) == 1), per step. The plan is learned (and engaged) before the timer starts.
// range(1) == 0 is a loop of boundaries alone on the engaged plan (a boundary with no
// allocation since the last one is no step: the plan stays engaged and its cursor at 0),
// which is the boundary's whole cost; the difference between range(1) == 4 and the pairs'
// own cost (BM_StepPairs/1) says the same for a boundary that ends a step.
void BM_PlannedBoundary(benchmark::State& state) {
  zarena* a = zarena_bench::make_quiet_host_arena(kCapacity);
  const bool reset = state.range(0) != 0;
  const int pairs = static_cast<int>(state.range(1));
  auto step = [&](int n) {
    if (reset) {
      zarena_reset(a);
    } else {
      zarena_step_begin(a);
    }
    for (int k = 0; k < n; ++k) {
      void* p = nullptr;
      zarena_alloc(a, kSizes[k % kNumSizes], &p);
      benchmark::DoNotOptimize(p);
      zarena_free(a, p);
    }
  };
  for (int i = 0; i < 8; ++i) step(4);  // learned and engaged
  const uint64_t hits = stats_of(a).plan_hits;
  for (auto _ : state) step(pairs);
  const zarena_stats st = stats_of(a);
  state.counters["planned"] = static_cast<double>(st.plan_hits - hits) /
                              static_cast<double>(std::max<int64_t>(1, state.iterations() * pairs));
  const zarena_plan_view* v = zarena_plan_view_get(a);
  state.counters["engaged"] =
      v != nullptr && (__atomic_load_n(v->state, __ATOMIC_ACQUIRE) & ZARENA_PLAN_ENGAGED) ? 1 : 0;
  zarena_destroy(a);
}
BENCHMARK(BM_PlannedBoundary)->ArgsProduct({{0, 1}, {0, 4}});

// A loop whose steps never repeat (the shapes change every step: a sequence length per
// batch), per step of 256 allocations, half freed, then a reset: Arg(0) plans off
// (ZARENA_FLAG_NO_PLAN), Arg(1) the default. What the learning costs such a loop (the
// target: at most 2 %), and its peak (high_water_MiB: no higher with plans on).
void BM_NeverRepeatingSteps(benchmark::State& state) {
  zarena* a =
      zarena_bench::make_quiet_host_arena(kCapacity, state.range(0) ? 0 : ZARENA_FLAG_NO_PLAN);
  zarena_bench::Rng rng{0x9E3779B97F4A7C15ull};
  std::vector<void*> blocks(256);
  uint64_t step = 0;
  for (auto _ : state) {
    zarena_step_begin(a);
    const uint64_t len = 1 + (++step % 61);  // this step's "sequence length"
    for (size_t k = 0; k < blocks.size(); ++k) {
      zarena_alloc(a, 256 * (1 + (rng.next() % 64) * len % 512), &blocks[k]);
      benchmark::DoNotOptimize(blocks[k]);
      if (k % 2 == 1) zarena_free(a, blocks[k - 1]);
    }
    zarena_reset(a);
  }
  const zarena_stats st = stats_of(a);
  state.counters["high_water_MiB"] = mib(st.high_water_bytes);
  state.counters["plans_learned"] = static_cast<double>(st.plans_learned);
  state.counters["plan_hits"] = static_cast<double>(st.plan_hits);
  state.SetItemsProcessed(state.iterations() * 256);
  zarena_destroy(a);
}
BENCHMARK(BM_NeverRepeatingSteps)->Arg(0)->Arg(1);

// The footprint of a training loop that never resets (zarena.torch's): an expandable host
// arena committing 2 MiB at a time, 8 MiB of parameters, then a training-like step marked
// with zarena_step_begin and freeing its own blocks: per layer an activation saved for the
// backward pass and a temporary, the backward pass freeing them in reverse and making a
// parameter gradient that lives until the next step's start (zero_grad), and a loss that
// lives until the next step's loss is made. The first step also takes a 96 MiB workspace
// for its forward pass (an autotuner trying kernels) and makes optimizer state that lives
// on (a lazily built Adam state), as a first training step does. Arg(0) plans
// off, Arg(1) the default. Counters: committed_MiB (what the arena holds after the run),
// high_water_MiB (the region's top at its highest), used_peak_MiB (the most bytes live
// at once), plan_zone_MiB. The ratio of committed_MiB is what plans save of the footprint.
void BM_RepeatedStepFootprint(benchmark::State& state) {
  zarena* a = zarena_bench::make_quiet_host_arena(
      kCapacity, ZARENA_FLAG_EXPANDABLE | (state.range(0) ? 0 : ZARENA_FLAG_NO_PLAN), 2 << 20);
  constexpr int kLayers = 12;
  const uint64_t act[kLayers] = {6 << 20, 4 << 20, 8 << 20, 3 << 20, 6 << 20, 4 << 20,
                                 8 << 20, 3 << 20, 6 << 20, 4 << 20, 8 << 20, 2 << 20};
  void* params = nullptr;
  if (zarena_alloc(a, 8 << 20, &params) != ZARENA_OK) std::abort();
  std::vector<void*> grads(kLayers, nullptr), saved(kLayers, nullptr), state_blocks;
  void* loss = nullptr;
  bool first = true;
  auto alloc = [&](uint64_t n) {
    void* p = nullptr;
    if (zarena_alloc(a, n, &p) != ZARENA_OK) std::abort();
    benchmark::DoNotOptimize(p);
    return p;
  };
  for (auto _ : state) {
    zarena_step_begin(a);
    for (void*& g : grads) {  // zero_grad(set_to_none=True)
      if (g != nullptr) zarena_free(a, g);
      g = nullptr;
    }
    void* workspace = first ? alloc(96 << 20) : nullptr;
    for (int l = 0; l < kLayers; ++l) {
      saved[l] = alloc(act[l]);
      void* tmp = alloc(2 * act[l]);
      zarena_free(a, tmp);
    }
    if (workspace != nullptr) zarena_free(a, workspace);
    void* new_loss = alloc(4096);
    if (loss != nullptr) zarena_free(a, loss);
    loss = new_loss;
    for (int l = kLayers - 1; l >= 0; --l) {
      void* g = alloc(act[l]);
      zarena_free(a, saved[l]);
      grads[l] = alloc(act[l] / 4);
      zarena_free(a, g);
    }
    if (first) {  // optimizer state, built at the first step and kept
      for (int l = 0; l < kLayers; ++l) state_blocks.push_back(alloc(act[l] / 2));
      first = false;
    }
  }
  const zarena_stats st = stats_of(a);
  footprint_counters(state, st);
  state.counters["used_peak_MiB"] = mib(st.used_peak_bytes);
  state.counters["plan_zone_MiB"] = mib(st.plan_zone_bytes);
  state.SetItemsProcessed(state.iterations());
  zarena_destroy(a);
}
BENCHMARK(BM_RepeatedStepFootprint)->Arg(0)->Arg(1);

// PyTorch's threads on the same training-like step (a host model of train_compare's
// shape): the main thread runs the forward and the optimizer, one long-lived second thread
// the backward (it frees the forward's saved activations and allocates the gradients,
// which the main thread frees at the next step's zero_grad). Expandable, 2 MiB commits,
// an 8 GiB capacity (address space, as a device's memory is for zarena.torch): each
// thread's slot keeps what it frees, up to a budget derived from the capacity, so this is
// where the dynamic engine's growth under two threads shows. Arg(0) plans off, Arg(1)
// on; 200 steps; live_peak_MiB is the most bytes live at once (kept by the bench).
void BM_TwoThreadStepFootprint(benchmark::State& state) {
  zarena* a = zarena_bench::make_quiet_host_arena(
      8ull << 30, ZARENA_FLAG_EXPANDABLE | (state.range(0) ? 0 : ZARENA_FLAG_NO_PLAN), 2 << 20);
  constexpr int kLayers = 12;
  constexpr uint64_t kMiB = 1 << 20;
  const uint64_t act[kLayers] = {6, 4, 8, 3, 6, 4, 8, 3, 6, 4, 8, 2};
  uint64_t live = 0, live_peak = 0;
  auto alloc = [&](uint64_t n) {
    void* p = nullptr;
    if (zarena_alloc(a, n, &p) != ZARENA_OK) std::abort();
    live += n;
    live_peak = std::max(live_peak, live);
    return p;
  };
  auto release = [&](void* p, uint64_t n) {
    if (zarena_free(a, p) != ZARENA_OK) std::abort();
    live -= n;
  };
  alloc(8 * kMiB);  // parameters
  std::vector<void*> grads(kLayers, nullptr), saved(kLayers, nullptr), opt_state;
  void* loss = nullptr;
  std::mutex mu;
  std::condition_variable cv;
  bool backward_due = false, quit = false;
  std::thread autograd([&] {
    std::unique_lock<std::mutex> l(mu);
    for (;;) {
      cv.wait(l, [&] { return quit || backward_due; });
      if (quit) return;
      for (int i = kLayers - 1; i >= 0; --i) {
        void* g = alloc(act[i] * kMiB);
        release(saved[i], act[i] * kMiB);
        grads[i] = alloc(act[i] * kMiB / 4);
        release(g, act[i] * kMiB);
      }
      backward_due = false;
      cv.notify_all();
    }
  });
  for (auto _ : state) {
    zarena_step_begin(a);
    for (int i = 0; i < kLayers; ++i) {
      saved[i] = alloc(act[i] * kMiB);
      release(alloc(2 * act[i] * kMiB), 2 * act[i] * kMiB);
    }
    void* new_loss = alloc(4096);
    if (loss != nullptr) release(loss, 4096);
    loss = new_loss;
    for (int i = 0; i < kLayers; ++i) {  // zero_grad(set_to_none=True)
      if (grads[i] != nullptr) release(grads[i], act[i] * kMiB / 4);
      grads[i] = nullptr;
    }
    {
      std::unique_lock<std::mutex> l(mu);  // the backward, on the other thread
      backward_due = true;
      cv.notify_all();
      cv.wait(l, [&] { return !backward_due; });
    }
    for (int i = 0; i < kLayers; ++i) {  // the optimizer: its state once, temporaries
      if (opt_state.size() < kLayers) opt_state.push_back(alloc(act[i] * kMiB / 2));
      release(alloc(act[i] * kMiB / 4), act[i] * kMiB / 4);
    }
  }
  {
    std::lock_guard<std::mutex> l(mu);
    quit = true;
  }
  cv.notify_all();
  autograd.join();
  footprint_counters(state, stats_of(a));
  state.counters["live_peak_MiB"] = mib(live_peak);
  state.SetItemsProcessed(state.iterations());
  zarena_destroy(a);
}
BENCHMARK(BM_TwoThreadStepFootprint)->Arg(0)->Arg(1)->Iterations(200);

// The baseline design: first-fit over a linked free list (no index), same layout.
class ScanningArena {
 public:
  explicit ScanningArena(uint64_t cap) : cap_(cap) {}
  // First fit; a hole is taken whole (no split), so the list length stays constant.
  uint64_t alloc(uint64_t n) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->size >= n) {
        const uint64_t off = it->off;
        free_.erase(it);
        return off;
      }
    }
    const uint64_t off = top_;
    top_ += n;
    return off < cap_ ? off : ~0ull;
  }
  void free(uint64_t off, uint64_t n) { free_.push_back({off, n}); }

 private:
  struct Hole {
    uint64_t off, size;
  };
  std::list<Hole> free_;
  uint64_t top_ = 0, cap_;
};

void BM_ScanningArenaAllocFree(benchmark::State& state) {
  ScanningArena s(kCapacity);
  std::vector<std::pair<uint64_t, uint64_t>> blocks;
  for (int i = 0; i < 2 * state.range(0); ++i) {
    const uint64_t n = 256 * (1 + i % 13);
    blocks.emplace_back(s.alloc(n), n);
  }
  for (size_t i = 0; i < blocks.size(); i += 2) s.free(blocks[i].first, blocks[i].second);
  int i = 0;
  for (auto _ : state) {
    // Requests larger than every hole: the scan walks the whole list, as ztensor's did
    // for its large activations.
    const uint64_t n = kSizes[i++ & 7] + 4096;
    const uint64_t off = s.alloc(n);
    benchmark::DoNotOptimize(off);
    s.free(off, n);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ScanningArenaAllocFree)->Arg(0)->Arg(10000);

}  // namespace

BENCHMARK_MAIN();
