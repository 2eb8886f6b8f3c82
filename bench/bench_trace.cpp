// Cost of trace capture on the hot path, against the untraced alloc+free pair measured
// in the same run: the engine will make two tracer calls per pair (on_alloc, on_free),
// so BM_AllocFreeTraced adds exactly those to BM_AllocFree. BM_TraceEvent is one event
// alone; its Threads(2) run shows the shared sequence counter under contention.
// Arg 0: the default ticker clock; arg 1: a steady_clock read per event.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "trace/trace.h"
#include "zarena/zarena.h"

namespace {

using zarena_trace::AllocOutcome;
using zarena_trace::TraceAddr;
using zarena_trace::Tracer;

const uint64_t kSizes[] = {4096, 16384, 1 << 20, 256, 65536, 12288, 3 << 20, 2048};

zarena* make_arena() {
  zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_OFF);
  zarena_config c;
  zarena_config_init(&c);
  c.backend = ZARENA_BACKEND_HOST;
  c.capacity_bytes = 1ull << 30;
  c.overflow_policy = ZARENA_OVERFLOW_REFUSE;
  zarena* a = nullptr;
  if (zarena_create(&c, &a) != ZARENA_OK) std::abort();
  return a;
}

// /dev/null by default: the figures are the hot path's cost, not the disk's (a
// benchmark makes events far faster than any program, so a real file would make it
// measure the writer's bandwidth). ZTEST_BENCH_TRACE_FILE=path writes a real file.
std::string trace_path() {
  const char* p = std::getenv("ZTEST_BENCH_TRACE_FILE");
  return p != nullptr ? p : "/dev/null";
}

std::unique_ptr<Tracer> open_tracer(bool precise, size_t buffer_bytes = 256 * 1024) {
  zarena_trace::TraceHeader h;
  h.arena_name = "bench";
  h.capacity_bytes = 1ull << 30;
  h.alignment = 256;
  zarena_trace::TraceOptions o;
  o.precise_clock = precise;
  o.slots = 4;
  o.buffer_bytes = buffer_bytes;
  zarena_core::Result err;
  auto t = Tracer::open(trace_path(), h, &err, o);
  if (!t) std::abort();
  return t;
}

void close_tracer(std::unique_ptr<Tracer> t) {
  if (!t->close().is_ok()) std::abort();
}

void BM_AllocFree(benchmark::State& state) {
  zarena* a = make_arena();
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
BENCHMARK(BM_AllocFree);

void BM_AllocFreeTraced(benchmark::State& state) {
  zarena* a = make_arena();
  auto t = open_tracer(state.range(0) != 0);
  int i = 0;
  for (auto _ : state) {
    void* p = nullptr;
    const uint64_t size = kSizes[i++ & 7];
    const zarena_status s = zarena_alloc(a, size, &p);
    t->on_alloc(size, (size + 255) & ~uint64_t{255}, TraceAddr::pointer(p),
                AllocOutcome::kRegionBump, s, 0, 0);
    benchmark::DoNotOptimize(p);
    const zarena_status f = zarena_free(a, p);
    t->on_free(TraceAddr::pointer(p), f, size, false, 0);
  }
  state.SetItemsProcessed(state.iterations());
  zarena_destroy(a);
  close_tracer(std::move(t));
}
BENCHMARK(BM_AllocFreeTraced)->Arg(0)->Arg(1);

std::unique_ptr<Tracer> g_shared;

void BM_TraceEvent(benchmark::State& state) {
  if (state.thread_index() == 0) g_shared = open_tracer(state.range(0) != 0);
  uint64_t i = 0;
  for (auto _ : state) {
    g_shared->on_alloc(4096, 4096, TraceAddr::region(i), AllocOutcome::kRegionBump, 0, 0, 0);
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) close_tracer(std::move(g_shared));
}
BENCHMARK(BM_TraceEvent)->Arg(0)->Arg(1);
BENCHMARK(BM_TraceEvent)->Arg(0)->Threads(2);

// The engine's hot pair as it traces it: an allocation and the free of that block in the
// slot's lane (the free only reads the order counter). Arg: thread buffer KiB.
void BM_SlotLanePair(benchmark::State& state) {
  auto t = open_tracer(false, static_cast<size_t>(state.range(0)) * 1024);
  uint64_t i = 0;
  for (auto _ : state) {
    const uint64_t off = (i++ & 63) * 4096;
    t->slot_alloc(1, 4000, off, false, 0);
    const uint64_t key = t->slot_free_key(1, off);
    t->slot_free(1, key, off, 0, 4096, false, 0);
  }
  state.SetItemsProcessed(state.iterations());
  close_tracer(std::move(t));
}
BENCHMARK(BM_SlotLanePair)->Arg(16)->Arg(64)->Arg(256);

}  // namespace

BENCHMARK_MAIN();
