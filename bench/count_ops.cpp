// Instruction counts of the hot paths, for callgrind (wall times on a shared machine are
// noise; instruction counts are stable). Each workload runs in its own function so that
// `valgrind --tool=callgrind --toggle-collect=<function>` counts only that loop:
//   pair_loop           the alloc+free pair of one size in an arena reset once before
//   pair_loop_no_reset  the same in an arena never reset (the cadence detector runs)
//   thread_loop         the window loop of bench_threads (free the oldest of 64 live
//                       blocks, allocate a new one), run by each of `threads` threads
// Usage: count_ops [pairs=200000] [threads=2]. The figure is the loop's instruction count
// over its operations, e.g. for the pair:
//   valgrind --tool=callgrind --toggle-collect='*pair_loop(*' bench/count_ops 100000 2
// then Ir / 100000 (thread_loop: Ir / (100000 * threads)).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "bench_support.h"
#include "zarena/zarena.h"

namespace {

using zarena_bench::make_quiet_host_arena;
using zarena_bench::Rng;

inline __attribute__((always_inline)) void pairs_of(zarena* a, long n) {
  for (long i = 0; i < n; ++i) {
    void* p = nullptr;
    if (zarena_alloc(a, 4096, &p) != ZARENA_OK) std::abort();
    if (zarena_free(a, p) != ZARENA_OK) std::abort();
  }
}

__attribute__((noipa)) void pair_loop(zarena* a, long n) { pairs_of(a, n); }
__attribute__((noipa)) void pair_loop_no_reset(zarena* a, long n) { pairs_of(a, n); }

__attribute__((noipa)) void thread_loop(zarena* a, long n, uint64_t seed, void** window) {
  Rng rng{seed};
  int i = 0;
  for (long k = 0; k < n; ++k) {
    zarena_free(a, window[i]);
    if (zarena_alloc(a, rng.size(), &window[i]) != ZARENA_OK) std::abort();
    i = (i + 1) & 63;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const long pairs = argc > 1 ? std::atol(argv[1]) : 200000;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  {
    zarena* a = make_quiet_host_arena(1ull << 30);
    zarena_reset(a);
    void* guard = nullptr;
    zarena_alloc(a, 256, &guard);
    pair_loop(a, pairs);
    zarena_destroy(a);
  }
  {
    zarena* a = make_quiet_host_arena(1ull << 30);
    void* guard = nullptr;
    zarena_alloc(a, 256, &guard);
    pair_loop_no_reset(a, pairs);
    zarena_destroy(a);
  }
  {
    zarena* a = make_quiet_host_arena(4ull << 30);
    zarena_reset(a);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([a, pairs, t] {
        Rng rng{0x9E3779B97F4A7C15ull * (t + 1)};
        void* window[64];
        for (void*& p : window) {
          if (zarena_alloc(a, rng.size(), &p) != ZARENA_OK) std::abort();
        }
        thread_loop(a, pairs, rng.s, window);
        for (void* p : window) zarena_free(a, p);
      });
    }
    for (auto& t : ts) t.join();
    zarena_destroy(a);
  }
  std::printf("%ld pairs per workload, %d threads\n", pairs, threads);
  return 0;
}
