// What the benchmarks and count_ops share: a host arena with logging off and overflow
// refused (a benchmark that overflows is measuring the wrong thing), and a cheap
// per-thread stream of request sizes, and the one arena the threads of a multi-threaded
// benchmark share.
#pragma once

#include <cstdint>
#include <cstdlib>

#include "zarena/zarena.h"

// Declared only: count_ops shares this header and needs no benchmark library.
namespace benchmark {
class State;
}

namespace zarena_bench {

// commit_chunk: with ZARENA_FLAG_EXPANDABLE, the commit granularity (0: the default).
inline zarena* make_quiet_host_arena(uint64_t capacity, uint32_t flags = 0,
                                     uint64_t commit_chunk = 0) {
  zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_OFF);
  zarena_config c;
  zarena_config_init(&c);
  c.backend = ZARENA_BACKEND_HOST;
  c.capacity_bytes = capacity;
  c.overflow_policy = ZARENA_OVERFLOW_REFUSE;
  c.flags |= flags;
  if (commit_chunk != 0) c.commit_chunk_bytes = commit_chunk;
  zarena* a = nullptr;
  if (zarena_create(&c, &a) != ZARENA_OK) std::abort();
  return a;
}

// The arena the threads of a ThreadRange benchmark share: a quiet host arena of `Capacity`
// bytes, made before the threads start (->Setup(SharedArena<C>::Setup)) and destroyed after
// they end (->Teardown(SharedArena<C>::Teardown)). One reset first, as a training loop makes
// every step: the reset-cadence detector exists for programs that never reset and stops at
// the first reset (bench_threads' BM_PairZarenaNeverReset shows what it costs until then).
template <uint64_t Capacity>
struct SharedArena {
  static inline zarena* arena = nullptr;
  static void Setup(const benchmark::State&) {
    arena = make_quiet_host_arena(Capacity);
    zarena_reset(arena);
  }
  static void Teardown(const benchmark::State&) {
    zarena_destroy(arena);
    arena = nullptr;
  }
};

// xorshift64*: cheap, one per thread.
struct Rng {
  uint64_t s;
  uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
  uint64_t size() { return 256 * (1 + next() % 256); }  // 256 B .. 64 KiB
};

// One consistent snapshot of a's counters.
inline zarena_stats stats_of(zarena* a) {
  zarena_stats st{};
  st.struct_size = sizeof st;
  zarena_get_stats(a, &st);
  return st;
}

}  // namespace zarena_bench
