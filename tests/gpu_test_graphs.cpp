// Graph-stable steps on a real device (zarena/zarena_graph.h; issue 33): a step of several
// kernels that write and read planned blocks, captured with real CUDA stream capture under
// the step plan and replayed 100 times, against the same steps run eagerly on a second
// arena: every step's output and the state the steps accumulate must be bitwise the same.
//   - a deviation during a real capture is refused (the CUDA capture itself stays valid and
//     is ended by the test), and the steps after it, eager then replayed, are still right;
//   - resets between replays keep the results right; floors over the zone are refused;
//   - a planned block freed after its use on a side stream (zarena_graph_free_after) and
//     handed out again on the arena's stream inside the capture: the graph has an edge from
//     the side stream's kernel to the kernel that reuses the block (and a plain free, the
//     control, has none);
//   - the replayed step's time beside the eager step's is printed (no assertion: a figure).
// The kernels (tests/gpu_graph_kernels.cu) are PTX embedded at build time; every test skips
// with a clear line without a device (or, in a build without nvcc, without kernels).
#include <gtest/gtest.h>

#if __has_include(<cuda_runtime_api.h>) && __has_include(<cuda.h>)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "gpu_util.h"
#include "zarena/zarena_graph.h"
#if defined(ZTEST_GRAPH_KERNELS)
#include "gpu_graph_kernels.h"
#endif

namespace {

using namespace zarena_gpu;

constexpr uint32_t kN = 1u << 16;  // elements of each block: 256 KiB
constexpr uint64_t kBytes = uint64_t{kN} * 4;

struct Kernels {
  cudaLibrary_t lib = nullptr;
  cudaKernel_t init = nullptr, mix = nullptr, accum = nullptr;
  std::string why;  // why there are none ("" when loaded)
  Kernels() {
#if defined(ZTEST_GRAPH_KERNELS)
    cudaError_t e =
        cudaLibraryLoadData(&lib, kEmbeddedText, nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (e == cudaSuccess) e = cudaLibraryGetKernel(&init, lib, "zt_init");
    if (e == cudaSuccess) e = cudaLibraryGetKernel(&mix, lib, "zt_mix");
    if (e == cudaSuccess) e = cudaLibraryGetKernel(&accum, lib, "zt_accum");
    if (e != cudaSuccess) {
      why = "loading the test's PTX failed (" + cuda_text(e) + ")";
      (void)cudaGetLastError();
    }
#else
    why = "this build had no nvcc: the suite has no kernels (tests/gpu_graphs.cmake)";
#endif
  }
  ~Kernels() {
    if (lib != nullptr) (void)cudaLibraryUnload(lib);
  }
};

#define REQUIRE_KERNELS(k)                                         \
  do {                                                             \
    REQUIRE_DEVICE();                                              \
    if (!(k).why.empty()) GTEST_SKIP() << "skipping: " << (k).why; \
  } while (0)

cudaError_t launch(cudaKernel_t k, cudaStream_t s, uint32_t threads, std::vector<void*> args) {
  return cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3((kN + threads - 1) / threads),
                          dim3(threads), args.data(), 0, s);
}

uint64_t hash_of(const std::vector<uint32_t>& v) {
  uint64_t h = 1469598103934665603ull;
  for (uint32_t x : v) h = (h ^ x) * 1099511628211ull;
  return h;
}

// A training-like step over one arena: the step's input from a static seed, activations
// that die within the step (a's space is taken by c), the state it accumulates (weights,
// below the floor), and an output g that lives into the next step (the next step frees it
// first, as a zero_grad would). Every block of the step is a planned one once the plan is
// engaged.
class Trainer {
 public:
  Trainer(const Kernels& k, cudaStream_t s, uint32_t flags) : k_(k), s_(s) {
    zarena_config cfg = cuda_config(64 * kMiB, ZARENA_OVERFLOW_REFUSE, s);
    cfg.flags = flags;
    cfg.name = flags & ZARENA_FLAG_PLAN ? "graphs" : "eager";
    EXPECT_EQ(zarena_create(&cfg, &a_), ZARENA_OK) << zarena_last_error();
    if (a_ == nullptr) return;
    EXPECT_EQ(zarena_alloc(a_, 256, reinterpret_cast<void**>(&seed_)), ZARENA_OK);
    EXPECT_EQ(zarena_alloc(a_, kBytes, reinterpret_cast<void**>(&state_)), ZARENA_OK);
    EXPECT_EQ(cudaMemsetAsync(state_, 0, kBytes, s_), cudaSuccess);
    EXPECT_EQ(zarena_mark_step_boundary(a_), ZARENA_OK);  // seed and state stay
    EXPECT_EQ(cudaMallocHost(reinterpret_cast<void**>(&host_seeds_), 4 * 4096), cudaSuccess);
  }
  ~Trainer() {
    EXPECT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
    if (a_ != nullptr) {
      EXPECT_EQ(zarena_destroy(a_), ZARENA_OK) << zarena_last_error();
    }
    if (host_seeds_ != nullptr) {
      EXPECT_EQ(cudaFreeHost(host_seeds_), cudaSuccess);
    }
  }
  zarena* arena() const { return a_; }

  // The step's input: copied into the static seed before the step runs (eager or launched).
  void set_seed(uint32_t step) {
    host_seeds_[step % 4096] = step * 7 + 1;
    EXPECT_EQ(cudaMemcpyAsync(seed_, &host_seeds_[step % 4096], 4, cudaMemcpyHostToDevice, s_),
              cudaSuccess);
  }

  // One step's allocations and kernels (eager, or recorded into a capture). grow: bytes
  // added to c's request (a deviation). Stops at the first refused allocation (status).
  zarena_status step(uint64_t grow = 0) {
    if (g_ != nullptr) {
      EXPECT_EQ(zarena_free(a_, g_), ZARENA_OK) << zarena_last_error();
    }
    g_ = nullptr;
    uint32_t *a = nullptr, *b = nullptr, *c = nullptr, *d = nullptr, *g = nullptr;
    uint32_t n = kN;
    zarena_status st = alloc(&a, kBytes);
    if (st != ZARENA_OK) return st;
    EXPECT_EQ(launch(k_.init, s_, 256, {&a, &seed_, &n}), cudaSuccess);
    st = alloc(&b, kBytes);
    if (st != ZARENA_OK) return drop(st, {a});
    EXPECT_EQ(launch(k_.mix, s_, 256, {&b, &a, &a, &n}), cudaSuccess);
    EXPECT_EQ(zarena_free(a_, a), ZARENA_OK);
    st = alloc(&c, kBytes + grow);
    if (st != ZARENA_OK) return drop(st, {b});
    EXPECT_EQ(launch(k_.mix, s_, 256, {&c, &b, &state_, &n}), cudaSuccess);
    EXPECT_EQ(zarena_free(a_, b), ZARENA_OK);
    st = alloc(&d, kBytes);
    if (st != ZARENA_OK) return drop(st, {c});
    EXPECT_EQ(launch(k_.mix, s_, 256, {&d, &c, &c, &n}), cudaSuccess);
    EXPECT_EQ(launch(k_.accum, s_, 256, {&state_, &d, &n}), cudaSuccess);
    EXPECT_EQ(zarena_free(a_, c), ZARENA_OK);
    st = alloc(&g, kBytes);
    if (st != ZARENA_OK) return drop(st, {d});
    EXPECT_EQ(launch(k_.mix, s_, 256, {&g, &d, &d, &n}), cudaSuccess);
    EXPECT_EQ(zarena_free(a_, d), ZARENA_OK);
    g_ = g;
    return ZARENA_OK;
  }
  // After a reset: the output was reclaimed with its epoch.
  void forget_output() { g_ = nullptr; }
  void* output() const { return g_; }

  // The step's output and the state, read back (waits for the stream).
  uint64_t output_hash() {
    std::vector<uint32_t> h(kN);
    EXPECT_EQ(cudaMemcpyAsync(h.data(), g_, kBytes, cudaMemcpyDeviceToHost, s_), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
    return hash_of(h);
  }
  uint64_t state_hash() {
    std::vector<uint32_t> h(kN);
    EXPECT_EQ(cudaMemcpyAsync(h.data(), state_, kBytes, cudaMemcpyDeviceToHost, s_), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
    return hash_of(h);
  }

 private:
  zarena_status alloc(uint32_t** p, uint64_t bytes) {
    return zarena_alloc(a_, bytes, reinterpret_cast<void**>(p));
  }
  zarena_status drop(zarena_status st, std::initializer_list<uint32_t*> held) {
    for (uint32_t* p : held) EXPECT_EQ(zarena_free(a_, p), ZARENA_OK);
    return st;
  }

  const Kernels& k_;
  cudaStream_t s_;
  zarena* a_ = nullptr;
  uint32_t* seed_ = nullptr;
  uint32_t* state_ = nullptr;
  uint32_t* host_seeds_ = nullptr;
  uint32_t* g_ = nullptr;
};

zarena_graph_info info_of(zarena* a) {
  zarena_graph_info g{};
  g.struct_size = sizeof g;
  EXPECT_EQ(zarena_graph_get_info(a, &g), ZARENA_OK) << zarena_last_error();
  return g;
}

// The eager reference: `steps` steps on an arena with plans, each step's output hash.
std::vector<uint64_t> eager_outputs(const Kernels& k, uint32_t steps, uint64_t* state,
                                    uint32_t reset_every = 0) {
  Stream s(cudaStreamNonBlocking);
  Trainer t(k, s, ZARENA_FLAG_PLAN);
  std::vector<uint64_t> out;
  for (uint32_t i = 0; i < steps; ++i) {
    if (reset_every != 0 && i != 0 && i % reset_every == 0) {
      EXPECT_EQ(zarena_reset(t.arena()), ZARENA_OK);
      t.forget_output();
    }
    EXPECT_EQ(zarena_step_begin(t.arena()), ZARENA_OK);
    t.set_seed(i);
    EXPECT_EQ(t.step(), ZARENA_OK) << zarena_last_error();
    out.push_back(t.output_hash());
  }
  *state = t.state_hash();
  return out;
}

// Captures the step starting now into a CUDA graph (real stream capture, global mode) under
// zarena's capture. Returns zarena's graph id (0: none kept) and the instantiated graph.
uint32_t capture_step(Trainer& t, cudaStream_t s, cudaGraphExec_t* exec, uint64_t grow = 0,
                      zarena_status* step_status = nullptr, cudaGraph_t* keep_graph = nullptr) {
  zarena* a = t.arena();
  EXPECT_EQ(zarena_step_begin(a), ZARENA_OK);
  EXPECT_EQ(zarena_graph_capture_begin(a), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  const zarena_status st = t.step(grow);
  if (step_status != nullptr) *step_status = st;
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess) << "zarena broke the CUDA capture";
  uint32_t id = 0;
  const zarena_status end = zarena_graph_capture_end(a, 1, &id);
  if (st == ZARENA_OK) {
    EXPECT_EQ(end, ZARENA_OK) << zarena_last_error();
  } else {
    EXPECT_EQ(end, ZARENA_E_CAPTURE_UNSAFE);
    EXPECT_NE(std::string(zarena_last_error()).find("verdict=graph_capture"), std::string::npos)
        << zarena_last_error();
  }
  *exec = nullptr;
  if (id != 0 && graph != nullptr) {
    EXPECT_EQ(cudaGraphInstantiate(exec, graph, 0), cudaSuccess);
  }
  if (keep_graph != nullptr) {
    *keep_graph = graph;
  } else if (graph != nullptr) {
    EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  }
  return id;
}

TEST(GpuGraphs, ReplaysMatchEagerStepsBitForBit) {
  const Kernels k;
  REQUIRE_KERNELS(k);
  constexpr uint32_t kReplays = 100;
  Stream s(cudaStreamNonBlocking);
  Trainer t(k, s, ZARENA_FLAG_PLAN);
  zarena* a = t.arena();
  ASSERT_NE(a, nullptr);
  std::vector<uint64_t> outs;
  uint32_t step = 0;
  // Eager steps until a capture may begin.
  while (true) {
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    if (info_of(a).ready) break;
    ASSERT_LT(step, 12u) << "the plan never became ready";
    t.set_seed(step++);
    ASSERT_EQ(t.step(), ZARENA_OK) << zarena_last_error();
    outs.push_back(t.output_hash());
  }
  const auto eager0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) {  // timed eager steps (planned)
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    t.set_seed(step++);
    ASSERT_EQ(t.step(), ZARENA_OK) << zarena_last_error();
    outs.push_back(t.output_hash());
  }
  const double eager_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - eager0).count() /
      20;
  // The capture (its input set first), then its first launch: that is the captured step.
  t.set_seed(step++);
  cudaGraphExec_t exec = nullptr;
  const uint32_t g = capture_step(t, s, &exec);
  ASSERT_NE(g, 0u) << zarena_last_error();
  const zarena_stats before = zarena_gpu::stats_of(a);
  ASSERT_EQ(zarena_graph_replay(a, g), ZARENA_OK) << zarena_last_error();  // the first launch
  CUDA_OK(cudaGraphLaunch(exec, s));
  outs.push_back(t.output_hash());
  const auto replay0 = std::chrono::steady_clock::now();
  for (uint32_t i = 0; i < kReplays; ++i) {
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    ASSERT_EQ(zarena_graph_replay(a, g), ZARENA_OK) << zarena_last_error();
    t.set_seed(step++);
    CUDA_OK(cudaGraphLaunch(exec, s));
    outs.push_back(t.output_hash());
  }
  const double replay_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - replay0)
          .count() /
      kReplays;
  const zarena_stats after = zarena_gpu::stats_of(a);
  EXPECT_GE(after.plan_steps, before.plan_steps + kReplays);  // replays are planned steps
  EXPECT_EQ(info_of(a).replays, kReplays);                    // the first launch is not one
  EXPECT_EQ(after.plan_hits, before.plan_hits);               // a replay allocates nothing
  EXPECT_EQ(after.hits, before.hits);
  uint64_t state = 0;
  const std::vector<uint64_t> ref = eager_outputs(k, step, &state);
  ASSERT_EQ(ref.size(), outs.size());
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(outs[i], ref[i]) << "step " << i;
  EXPECT_EQ(t.state_hash(), state);
  std::printf(
      "step (5 kernels, 5 planned blocks of 256 KiB, with a read-back): eager %.1f us, "
      "replayed %.1f us (%.2fx)\n",
      eager_us, replay_us, replay_us / eager_us);
  // An eager step after the replays is still planned, at the graph's addresses.
  ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
  t.set_seed(step++);
  const uint64_t hits = zarena_gpu::stats_of(a).plan_hits;
  ASSERT_EQ(t.step(), ZARENA_OK);
  EXPECT_EQ(zarena_gpu::stats_of(a).plan_hits, hits + 5);
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaGraphExecDestroy(exec));
  EXPECT_EQ(zarena_graph_release(a, g), ZARENA_OK);
}

TEST(GpuGraphs, ADeviationDuringACaptureIsRefusedAndNothingElseBreaks) {
  const Kernels k;
  REQUIRE_KERNELS(k);
  Stream s(cudaStreamNonBlocking);
  Trainer t(k, s, ZARENA_FLAG_PLAN);
  zarena* a = t.arena();
  ASSERT_NE(a, nullptr);
  std::vector<uint64_t> outs;
  uint32_t step = 0;
  while (true) {
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    if (info_of(a).ready) break;
    ASSERT_LT(step, 12u);
    t.set_seed(step++);
    ASSERT_EQ(t.step(), ZARENA_OK);
    outs.push_back(t.output_hash());
  }
  const zarena_stats s0 = zarena_gpu::stats_of(a);
  // The captured step asks for another size at its third allocation: refused, the CUDA
  // capture goes on (the test ends it), no graph is kept, and nothing was handed out
  // outside the plan.
  t.set_seed(step);
  cudaGraphExec_t exec = nullptr;
  zarena_status st = ZARENA_OK;
  const uint32_t bad = capture_step(t, s, &exec, 4096, &st);
  EXPECT_EQ(st, ZARENA_E_CAPTURE_UNSAFE);
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(exec, nullptr);
  const zarena_stats s1 = zarena_gpu::stats_of(a);
  EXPECT_EQ(s1.hits, s0.hits);
  EXPECT_EQ(s1.overflow_allocs, s0.overflow_allocs);
  const zarena_graph_info gi = info_of(a);
  EXPECT_EQ(gi.failed_captures, 1u);
  EXPECT_EQ(gi.refused_allocs, 1u);
  // The step did not run (a capture records): run it again, eagerly, then capture again.
  int eager_again = 0;
  while (true) {
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    if (eager_again > 0 && info_of(a).ready) break;
    ASSERT_LT(eager_again, 12);
    t.set_seed(step++);
    ASSERT_EQ(t.step(), ZARENA_OK) << zarena_last_error();
    outs.push_back(t.output_hash());
    ++eager_again;
  }
  t.set_seed(step++);
  const uint32_t g = capture_step(t, s, &exec);
  ASSERT_NE(g, 0u) << zarena_last_error();
  ASSERT_EQ(zarena_graph_replay(a, g), ZARENA_OK) << zarena_last_error();  // the first launch
  CUDA_OK(cudaGraphLaunch(exec, s));
  outs.push_back(t.output_hash());
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    ASSERT_EQ(zarena_graph_replay(a, g), ZARENA_OK) << zarena_last_error();
    t.set_seed(step++);
    CUDA_OK(cudaGraphLaunch(exec, s));
    outs.push_back(t.output_hash());
  }
  uint64_t state = 0;
  const std::vector<uint64_t> ref = eager_outputs(k, step, &state);
  ASSERT_EQ(ref.size(), outs.size());
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(outs[i], ref[i]) << "step " << i;
  EXPECT_EQ(t.state_hash(), state);
  CUDA_OK(cudaGraphExecDestroy(exec));
  EXPECT_EQ(zarena_graph_release(a, g), ZARENA_OK);
}

TEST(GpuGraphs, ResetsBetweenReplaysKeepResultsAndFloorsOverTheZoneAreRefused) {
  const Kernels k;
  REQUIRE_KERNELS(k);
  constexpr uint32_t kResetEvery = 10;
  Stream s(cudaStreamNonBlocking);
  Trainer t(k, s, ZARENA_FLAG_PLAN);
  zarena* a = t.arena();
  ASSERT_NE(a, nullptr);
  std::vector<uint64_t> outs;
  uint32_t step = 0;
  // An eager step's output goes with the reset's epoch; a replayed graph writes its output
  // where the capture put it, every replay (the zone's address), so a replay keeps it.
  auto maybe_reset = [&](bool eager) {
    if (step != 0 && step % kResetEvery == 0) {
      ASSERT_EQ(zarena_reset(a), ZARENA_OK);
      if (eager) t.forget_output();
    }
  };
  while (true) {
    maybe_reset(true);
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    if (info_of(a).ready) break;
    ASSERT_LT(step, 12u);
    t.set_seed(step++);
    ASSERT_EQ(t.step(), ZARENA_OK);
    outs.push_back(t.output_hash());
  }
  t.set_seed(step++);
  cudaGraphExec_t exec = nullptr;
  const uint32_t g = capture_step(t, s, &exec);
  ASSERT_NE(g, 0u) << zarena_last_error();
  ASSERT_EQ(zarena_graph_replay(a, g), ZARENA_OK) << zarena_last_error();  // the first launch
  CUDA_OK(cudaGraphLaunch(exec, s));
  outs.push_back(t.output_hash());
  // The floor may not move over the zone while the graph exists; nothing changes.
  zarena_region r{};
  r.struct_size = sizeof r;
  ASSERT_EQ(zarena_region_info(a, &r), ZARENA_OK);
  EXPECT_EQ(zarena_mark_step_boundary(a), ZARENA_E_CAPTURE_UNSAFE);
  EXPECT_EQ(zarena_set_floor(a, r.top_bytes), ZARENA_E_CAPTURE_UNSAFE);
  EXPECT_EQ(zarena_set_floor(a, r.floor_bytes), ZARENA_OK) << zarena_last_error();
  for (int i = 0; i < 40; ++i) {
    maybe_reset(false);
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    ASSERT_EQ(zarena_graph_replay(a, g), ZARENA_OK) << zarena_last_error();
    t.set_seed(step++);
    CUDA_OK(cudaGraphLaunch(exec, s));
    outs.push_back(t.output_hash());
  }
  uint64_t state = 0;
  const std::vector<uint64_t> ref = eager_outputs(k, step, &state, kResetEvery);
  ASSERT_EQ(ref.size(), outs.size());
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(outs[i], ref[i]) << "step " << i;
  EXPECT_EQ(t.state_hash(), state);
  CUDA_OK(cudaGraphExecDestroy(exec));
  EXPECT_EQ(zarena_graph_release(a, g), ZARENA_OK);
  EXPECT_EQ(zarena_mark_step_boundary(a), ZARENA_OK) << zarena_last_error();
}

// Whether `to` depends on `from` in the graph (a path of edges).
bool depends(cudaGraphNode_t from, cudaGraphNode_t to) {
  std::vector<cudaGraphNode_t> todo{from}, seen;
  while (!todo.empty()) {
    cudaGraphNode_t n = todo.back();
    todo.pop_back();
    if (n == to) return true;
    if (std::find(seen.begin(), seen.end(), n) != seen.end()) continue;
    seen.push_back(n);
    size_t count = 0;
    if (cudaGraphNodeGetDependentNodes(n, nullptr, nullptr, &count) != cudaSuccess) return false;
    std::vector<cudaGraphNode_t> next(count);
    if (count != 0 &&
        cudaGraphNodeGetDependentNodes(n, next.data(), nullptr, &count) != cudaSuccess) {
      return false;
    }
    todo.insert(todo.end(), next.begin(), next.end());
  }
  return false;
}

// The graph's kernel nodes, in the order of the graph's node list (the capture's order).
// By type only: a kernel launched through a cudaKernel_t (a library's kernel) has no
// runtime function to read back with cudaGraphKernelNodeGetParams.
std::vector<cudaGraphNode_t> kernel_nodes(cudaGraph_t g) {
  size_t n = 0;
  EXPECT_EQ(cudaGraphGetNodes(g, nullptr, &n), cudaSuccess);
  std::vector<cudaGraphNode_t> nodes(n), kernels;
  EXPECT_EQ(cudaGraphGetNodes(g, nodes.data(), &n), cudaSuccess);
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    EXPECT_EQ(cudaGraphNodeGetType(node, &type), cudaSuccess);
    if (type == cudaGraphNodeTypeKernel) kernels.push_back(node);
  }
  return kernels;
}

// A planned block written on a side stream, freed, and handed out again to a kernel on the
// arena's stream, all inside one capture. With zarena_graph_free_after the reuse depends on
// the side stream's kernel; with a plain free (the control) it does not.
void cross_stream_step(const Kernels& k, bool ordered, bool* edge, uint64_t* joins) {
  Stream s(cudaStreamNonBlocking), side(cudaStreamNonBlocking);
  zarena_config cfg = cuda_config(16 * kMiB, ZARENA_OVERFLOW_REFUSE, s);
  cfg.flags = ZARENA_FLAG_PLAN;
  cfg.name = ordered ? "free_after" : "plain free";
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&cfg, &a), ZARENA_OK) << zarena_last_error();
  uint32_t* seed = nullptr;
  ASSERT_EQ(zarena_alloc(a, 256, reinterpret_cast<void**>(&seed)), ZARENA_OK);
  CUDA_OK(cudaMemsetAsync(seed, 0, 256, s));
  ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
  cudaEvent_t fork = nullptr, join = nullptr;
  CUDA_OK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CUDA_OK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  uint32_t n = kN;
  auto run = [&](bool captured) {
    uint32_t *x = nullptr, *y = nullptr;
    ASSERT_EQ(zarena_alloc(a, kBytes, reinterpret_cast<void**>(&x)), ZARENA_OK)
        << zarena_last_error();
    CUDA_OK(cudaEventRecord(fork, s));  // the side stream joins the arena's stream's work
    CUDA_OK(cudaStreamWaitEvent(side, fork, 0));
    CUDA_OK(launch(k.init, side, 64, {&x, &seed, &n}));
    if (ordered) {
      ASSERT_EQ(zarena_graph_free_after(a, x, side), ZARENA_OK) << zarena_last_error();
    } else {
      ASSERT_EQ(zarena_free(a, x), ZARENA_OK);
    }
    ASSERT_EQ(zarena_alloc(a, kBytes, reinterpret_cast<void**>(&y)), ZARENA_OK)
        << zarena_last_error();
    if (captured) {
      ASSERT_EQ(y, x) << "the plan did not hand x's space to y";
    }
    CUDA_OK(launch(k.mix, s, 128, {&y, &seed, &seed, &n}));
    ASSERT_EQ(zarena_free(a, y), ZARENA_OK);
    CUDA_OK(cudaEventRecord(join, side));  // and rejoins it (a capture must end joined)
    CUDA_OK(cudaStreamWaitEvent(s, join, 0));
  };
  for (int i = 0; i < 12; ++i) {
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    if (info_of(a).ready) break;
    run(false);
  }
  ASSERT_EQ(info_of(a).ready, 1u) << "the plan never became ready";
  CUDA_OK(cudaStreamSynchronize(s));
  ASSERT_EQ(zarena_graph_capture_begin(a), ZARENA_OK) << zarena_last_error();
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  run(true);
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamEndCapture(s, &graph));
  uint32_t id = 0;
  ASSERT_EQ(zarena_graph_capture_end(a, 1, &id), ZARENA_OK) << zarena_last_error();
  // Two kernels: the side stream's and the reuse's. Whichever the node list names first,
  // an edge between them is the order the free made (nothing else joins them inside
  // the step: the side stream joined the arena's stream's work before its kernel).
  const std::vector<cudaGraphNode_t> kernels = kernel_nodes(graph);
  ASSERT_EQ(kernels.size(), 2u);
  *edge = depends(kernels[0], kernels[1]) || depends(kernels[1], kernels[0]);
  *joins = info_of(a).stream_joins;
  run_once_and_destroy(graph, s);
  EXPECT_EQ(zarena_graph_release(a, id), ZARENA_OK);
  CUDA_OK(cudaEventDestroy(fork));
  CUDA_OK(cudaEventDestroy(join));
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

TEST(GpuGraphs, AFreeAfterASideStreamsUseBecomesAGraphEdge) {
  const Kernels k;
  REQUIRE_KERNELS(k);
  bool edge = false;
  uint64_t joins = 0;
  cross_stream_step(k, true, &edge, &joins);
  EXPECT_TRUE(edge) << "the kernel reusing the block does not wait for the side stream's";
  EXPECT_GT(joins, 0u);
  // The control: with a plain free nothing orders the reuse after the side stream's kernel.
  cross_stream_step(k, false, &edge, &joins);
  EXPECT_FALSE(edge) << "the control has the edge too: the test would prove nothing";
  EXPECT_EQ(joins, 0u);
}

}  // namespace

#else
TEST(GpuGraphs, NeedsTheCudaToolkit) { GTEST_SKIP() << "built without the CUDA Toolkit"; }
#endif
