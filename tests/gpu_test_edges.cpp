// Issue 25's GPU items on a real device, through the C API:
//   #8  ASYNC overflow with the arena on the legacy (NULL) stream while a blocking stream
//       captures: refused before any CUDA call, the user's capture stays whole;
//   #9  zarena_destroy during a capture (of the arena's stream, from the capturing thread
//       or another one, as a Go finalizer would; or the legacy stream's implicit capture)
//       makes no CUDA call: the release waits for a safe point and then balances; a capture
//       the arena cannot see (another thread's, of another stream) is left whole by a
//       destroy that releases at once;
//   #10 a host function on the arena's stream that allocates from the arena, while another
//       thread resets an expandable arena that trims: no deadlock (a watchdog ends the
//       process with a failure instead of hanging; the trim waits on the GPU outside
//       the slot locks, ExpandableCommits);
//   #11 a graph that allocates an ASYNC overflow block and frees it in the same capture
//       launches 100 times.
// Issue 35's teardown edges:
//   1. a destroy during a capture of the arena's own stream: while the capture lasts
//      zarena's release thread looks and frees nothing (the capture stays whole); once
//      cudaStreamEndCapture returns, the region (1 GiB) and the overflow block go back with
//      no further zarena call (cudaMemGetInfo sees the GiB again);
//   2. after cudaDeviceReset (in a child process: a reset would take every other test's
//      memory and streams with it): the driver may hand the arena's old addresses to the
//      program's new buffers, and zarena_destroy, zarena_reset, zarena_free and overflow
//      allocations then free and touch nothing (the buffers keep their contents, CUDA
//      reports no error), with "arena.device_reset" saying what happened. Fixed, ASYNC
//      (its pool), SYNC and expandable arenas.
// Every test skips with a clear line without a device.
#include <gtest/gtest.h>

#if __has_include(<cuda_runtime_api.h>) && __has_include(<cuda.h>)
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/deferred_release.h"
#include "gpu_util.h"
#include "support.h"

namespace {

using namespace zarena_gpu;
using zarena_core::cuda_call_counters;
using zarena_core::CudaCallCounters;
using zarena_test::eventually;

size_t count_of(const std::vector<cudaGraphNodeType>& types, cudaGraphNodeType t) {
  size_t n = 0;
  for (cudaGraphNodeType x : types) n += x == t;
  return n;
}

// Ends the capture of s: it must have stayed whole, and its graph (only the user's
// memset) instantiates and runs.
void end_whole_capture(cudaStream_t s) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  CUDA_OK(cudaStreamIsCapturing(s, &st));
  EXPECT_EQ(st, cudaStreamCaptureStatusActive) << "the capture was invalidated";
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  ASSERT_EQ(end, cudaSuccess) << "the capture was broken: " << cuda_text(end);
  const std::vector<cudaGraphNodeType> types = node_types(graph);
  EXPECT_EQ(types.size(), 1u) << "only the user's memset is in the graph";
  run_once_and_destroy(graph, s);
}

// --- #8 ------------------------------------------------------------------------------------

TEST(GpuEdges, AsyncOverflowOnTheNullStreamLeavesABlockingStreamsCaptureWhole) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture quiet(ZARENA_LOG_OFF);
  const CudaCallCounters c0 = cuda_call_counters();
  zarena_config c = cuda_config(kMiB, ZARENA_OVERFLOW_ASYNC, nullptr);  // the legacy stream
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  void* fill = nullptr;
  ASSERT_EQ(zarena_alloc(a, kMiB, &fill), ZARENA_OK);
  Stream s;  // blocking: legacy-stream work joins its capture
  DeviceBuffer scratch(kMiB);
  const CudaCallCounters c1 = cuda_call_counters();
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CUDA_OK(cudaMemsetAsync(scratch.p, 1, kMiB, s));
  void* o = nullptr;
  EXPECT_EQ(zarena_alloc(a, 4 * kMiB, &o), ZARENA_E_CAPTURE_UNSAFE);
  EXPECT_NE(std::string(zarena_last_error()).find("legacy"), std::string::npos)
      << zarena_last_error();
  EXPECT_EQ(cuda_call_counters().pool_allocs, c1.pool_allocs) << "no call was made";
  end_whole_capture(s);
  // Outside the capture the same request overflows as usual.
  ASSERT_EQ(zarena_alloc(a, 4 * kMiB, &o), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(zarena_free(a, o), ZARENA_OK);
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
  expect_balanced(c0, cuda_call_counters());
}

// --- #9 ------------------------------------------------------------------------------------

// The arena (ASYNC, on s) with a region block and a live overflow block written to.
zarena* arena_with_an_overflow_block(cudaStream_t s, int32_t policy = ZARENA_OVERFLOW_ASYNC) {
  zarena_config c = cuda_config(kMiB, policy, s);
  zarena* a = nullptr;
  EXPECT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  void *fill = nullptr, *o = nullptr;
  EXPECT_EQ(zarena_alloc(a, kMiB, &fill), ZARENA_OK);
  EXPECT_EQ(zarena_alloc(a, 4 * kMiB, &o), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(cudaMemsetAsync(o, 0x11, 4 * kMiB, s), cudaSuccess);
  return a;
}

// What a deferred release must not have done during the capture.
void expect_no_release_since(const CudaCallCounters& before) {
  const CudaCallCounters now = cuda_call_counters();
  EXPECT_EQ(now.frees, before.frees) << "cudaFree during the capture";
  EXPECT_EQ(now.pool_frees, before.pool_frees) << "cudaFreeAsync recorded into the graph";
  EXPECT_EQ(now.pools_destroyed, before.pools_destroyed) << "the pool went during the capture";
}

// A safe point (a zarena_create of another arena) gives the deferred memory back.
void safe_point_releases(const CudaCallCounters& start) {
  zarena_config c = cuda_config(kMiB, ZARENA_OVERFLOW_REFUSE, nullptr);
  zarena* b = nullptr;
  ASSERT_EQ(zarena_create(&c, &b), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(zarena_core::deferred_releases(), 0u);
  ASSERT_EQ(zarena_destroy(b), ZARENA_OK);
  expect_balanced(start, cuda_call_counters());
}

TEST(GpuEdges, DestroyDuringACaptureOfItsStreamMakesNoCudaCall) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture log(ZARENA_LOG_WARN);
  for (bool from_another_thread : {false, true}) {
    SCOPED_TRACE(from_another_thread ? "destroyed by another thread (a Go finalizer)"
                                     : "destroyed by the capturing thread");
    const CudaCallCounters c0 = cuda_call_counters();
    Stream s(cudaStreamNonBlocking);
    DeviceBuffer scratch(kMiB);
    zarena* a = arena_with_an_overflow_block(s);
    CUDA_OK(cudaStreamSynchronize(s));
    const CudaCallCounters c1 = cuda_call_counters();
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CUDA_OK(cudaMemsetAsync(scratch.p, 1, kMiB, s));
    if (from_another_thread) {
      std::thread([a] { EXPECT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error(); }).join();
    } else {
      EXPECT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
    }
    expect_no_release_since(c1);
    EXPECT_EQ(zarena_core::deferred_releases(), 1u);
    end_whole_capture(s);
    safe_point_releases(c0);
  }
  EXPECT_EQ(log.count("arena.destroy_deferred"), 2u);
}

TEST(GpuEdges, DestroyOnTheNullStreamWhileABlockingStreamCapturesMakesNoCudaCall) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture quiet(ZARENA_LOG_OFF);
  const CudaCallCounters c0 = cuda_call_counters();
  zarena* a = arena_with_an_overflow_block(nullptr, ZARENA_OVERFLOW_SYNC);
  CUDA_OK(cudaDeviceSynchronize());
  Stream s;  // blocking: the legacy stream's capture rules reach the arena
  DeviceBuffer scratch(kMiB);
  const CudaCallCounters c1 = cuda_call_counters();
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CUDA_OK(cudaMemsetAsync(scratch.p, 1, kMiB, s));
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
  expect_no_release_since(c1);
  end_whole_capture(s);
  safe_point_releases(c0);
}

// Another thread captures another (non-blocking) stream in global mode: no query of the
// arena sees it, so the destroy releases at once, in relaxed capture mode, which keeps
// the synchronous frees from invalidating that capture.
TEST(GpuEdges, DestroyDuringAnotherThreadsCaptureLeavesThatCaptureWhole) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture quiet(ZARENA_LOG_OFF);
  const CudaCallCounters c0 = cuda_call_counters();
  Stream mine(cudaStreamNonBlocking);
  zarena* a = arena_with_an_overflow_block(mine, ZARENA_OVERFLOW_SYNC);
  CUDA_OK(cudaStreamSynchronize(mine));
  Stream theirs(cudaStreamNonBlocking);
  DeviceBuffer scratch(kMiB);
  std::mutex mu;
  std::condition_variable cv;
  int phase = 0;  // 1: capturing; 2: destroyed
  std::thread capturer([&] {
    EXPECT_EQ(cudaStreamBeginCapture(theirs, cudaStreamCaptureModeGlobal), cudaSuccess);
    EXPECT_EQ(cudaMemsetAsync(scratch.p, 1, kMiB, theirs), cudaSuccess);
    {
      std::unique_lock<std::mutex> lock(mu);
      phase = 1;
      cv.notify_all();
      cv.wait(lock, [&] { return phase == 2; });
    }
    end_whole_capture(theirs);
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return phase == 1; });
  }
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(zarena_core::deferred_releases(), 0u) << "nothing the arena could see: at once";
  {
    std::lock_guard<std::mutex> lock(mu);
    phase = 2;
  }
  cv.notify_all();
  capturer.join();
  expect_balanced(c0, cuda_call_counters());
}

// --- #11 -----------------------------------------------------------------------------------

TEST(GpuEdges, AGraphThatAllocatesAndFreesAnOverflowBlockLaunchesAHundredTimes) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture quiet(ZARENA_LOG_OFF);
  const CudaCallCounters c0 = cuda_call_counters();
  Stream s;
  zarena_config c = cuda_config(kMiB, ZARENA_OVERFLOW_ASYNC, s);
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  void* fill = nullptr;
  ASSERT_EQ(zarena_alloc(a, kMiB, &fill), ZARENA_OK);
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  zarena_block b;
  ASSERT_EQ(zarena_alloc_ex(a, 4 * kMiB, 0, &b), ZARENA_OK) << zarena_last_error();
  EXPECT_NE(b.flags & ZARENA_BLOCK_OVERFLOW, 0u);
  CUDA_OK(cudaMemsetAsync(b.ptr, 0x5A, 4 * kMiB, s));
  EXPECT_EQ(zarena_free(a, b.ptr), ZARENA_OK) << zarena_last_error();
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  ASSERT_EQ(end, cudaSuccess) << cuda_text(end);
  const std::vector<cudaGraphNodeType> types = node_types(graph);
  EXPECT_EQ(count_of(types, cudaGraphNodeTypeMemAlloc), 1u);
  EXPECT_EQ(count_of(types, cudaGraphNodeTypeMemFree), 1u)
      << "the free inside the capture is a node of the graph";
  EXPECT_EQ(stats_of(a).overflow_deferred_gives, 0u);
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 100; ++i) {
    const cudaError_t e = cudaGraphLaunch(exec, s);
    ASSERT_EQ(e, cudaSuccess) << "launch " << i << ": " << cuda_text(e);
  }
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
  expect_balanced(c0, cuda_call_counters());
}

// --- #10 -----------------------------------------------------------------------------------

// A host function the arena's stream runs: it allocates from the arena once the test lets
// it (a host function must not call CUDA; a region allocation makes no CUDA call).
struct HostAlloc {
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, go = false, done = false;
  zarena* a = nullptr;
  zarena_status status = -1;
};

void CUDART_CB allocate_on_the_stream(void* p) {
  auto* h = static_cast<HostAlloc*>(p);
  {
    std::unique_lock<std::mutex> lock(h->mu);
    h->entered = true;
    h->cv.notify_all();
    h->cv.wait(lock, [&] { return h->go; });
  }
  void* q = nullptr;
  const zarena_status st = zarena_alloc(h->a, 4096, &q);
  if (st == ZARENA_OK) (void)zarena_free(h->a, q);
  std::lock_guard<std::mutex> lock(h->mu);
  h->status = st;
  h->done = true;
  h->cv.notify_all();
}

// The watchdog: a deadlock cannot be unwound, so the process ends with a failure.
constexpr auto kDeadlockWatchdog = std::chrono::minutes(2);

TEST(GpuEdges, AHostFunctionThatAllocatesDoesNotDeadlockATrimmingReset) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture quiet(ZARENA_LOG_OFF);
  Stream s;
  zarena_config c = cuda_config(1 * kGiB, ZARENA_OVERFLOW_REFUSE, s);
  c.flags |= ZARENA_FLAG_EXPANDABLE;
  c.commit_chunk_bytes = 0;      // 64 MiB
  c.trim_keep_bytes = 2 * kMiB;  // a reset decommits all but the first chunk
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  // Four commits (one per 64 MiB chunk), all free again: a reset trims three.
  std::vector<void*> blocks(4);
  for (void*& p : blocks)
    ASSERT_EQ(zarena_alloc(a, 60 * kMiB, &p), ZARENA_OK) << zarena_last_error();
  for (void* p : blocks) ASSERT_EQ(zarena_free(a, p), ZARENA_OK);
  ASSERT_GE(stats_of(a).commit_events, 4u);
  const uint64_t trims = stats_of(a).trim_events;

  std::atomic<bool> finished{false};
  std::thread watchdog([&] {
    const auto deadline = std::chrono::steady_clock::now() + kDeadlockWatchdog;
    while (!finished.load()) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr,
                     "GpuEdges.AHostFunctionThatAllocatesDoesNotDeadlockATrimmingReset: "
                     "deadlock: the reset's trim waits for the stream under the slot locks, "
                     "and the host function on the stream waits for a slot lock\n");
        std::_Exit(1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  HostAlloc h;
  h.a = a;
  CUDA_OK(cudaLaunchHostFunc(s, allocate_on_the_stream, &h));
  {
    std::unique_lock<std::mutex> lock(h.mu);
    h.cv.wait(lock, [&] { return h.entered; });  // the stream is held by the host function
  }
  std::thread resetter([&] { EXPECT_EQ(zarena_reset(a), ZARENA_OK); });
  // Not relied upon: the pause only lets the reset reach its trim (and, before the fix,
  // wait for the stream under the slot locks) before the host function allocates.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  {
    std::lock_guard<std::mutex> lock(h.mu);
    h.go = true;
  }
  h.cv.notify_all();
  resetter.join();
  CUDA_OK(cudaStreamSynchronize(s));
  finished.store(true);
  watchdog.join();
  EXPECT_EQ(h.status, ZARENA_OK) << "the host function's allocation";
  EXPECT_GT(stats_of(a).trim_events, trims) << "the reset trimmed";
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
}

// --- issue 35, 1: released when the capture ends, with no further call ----------------------

TEST(GpuEdges, DestroyDuringACaptureOfItsStreamIsReleasedWhenTheCaptureEnds) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture log(ZARENA_LOG_INFO);
  const CudaCallCounters c0 = cuda_call_counters();
  Stream s(cudaStreamNonBlocking);
  DeviceBuffer scratch(kMiB);
  zarena_config c = cuda_config(kGiB, ZARENA_OVERFLOW_ASYNC, s);
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  void *fill = nullptr, *o = nullptr;
  ASSERT_EQ(zarena_alloc(a, kGiB, &fill), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(a, 4 * kMiB, &o), ZARENA_OK) << zarena_last_error();
  CUDA_OK(cudaMemsetAsync(o, 0x11, 4 * kMiB, s));
  CUDA_OK(cudaStreamSynchronize(s));
  const int64_t free_while_held = free_bytes();
  const size_t waiting0 = zarena_core::deferred_releases();
  const CudaCallCounters c1 = cuda_call_counters();
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CUDA_OK(cudaMemsetAsync(scratch.p, 1, kMiB, s));
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(zarena_core::deferred_releases(), waiting0 + 1);
  // The release thread looks while the capture runs (its queries leave the capture whole,
  // end_whole_capture checks) and frees nothing.
  const uint64_t passes = zarena_core::release_thread_passes();
  EXPECT_TRUE(eventually([&] { return zarena_core::release_thread_passes() >= passes + 2; }))
      << "no release thread looked at the waiting arena";
  expect_no_release_since(c1);
  EXPECT_EQ(zarena_core::deferred_releases(), waiting0 + 1);
  end_whole_capture(s);
  // From here on the program makes no zarena call: the memory goes back by itself.
  EXPECT_TRUE(eventually([&] { return log.arrived("arena.released").size() == 1; }))
      << "the region and the overflow block were not given back after the capture ended";
  EXPECT_EQ(zarena_core::deferred_releases(), waiting0);
  expect_balanced(c0, cuda_call_counters());
  EXPECT_GE(free_bytes() - free_while_held, static_cast<int64_t>(kGiB) - kTolerance)
      << "cudaMemGetInfo does not see the region's GiB back";
  EXPECT_TRUE(eventually([] { return !zarena_core::release_thread_running(); }))
      << "the release thread goes on with nothing to release";
}

// --- issue 35, 2: after a device reset (child process) ---------------------------------------

constexpr const char* kResetChild = "edges_reset_child";
constexpr const char* kInChildOnly = "runs in the child process GpuEdges.AfterADeviceReset starts";

// A buffer of the program's made after the device reset (the driver may give it an address
// the arena had), filled with a pattern. whole(): every byte still the pattern and CUDA
// reports no error; the destructor frees it, which fails if zarena freed it first.
struct ProgramBuffer {
  void* p = nullptr;
  uint64_t n;
  explicit ProgramBuffer(uint64_t bytes) : n(bytes) {
    EXPECT_EQ(cudaMalloc(&p, n), cudaSuccess);
    EXPECT_EQ(cudaMemset(p, 0xA5, n), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ~ProgramBuffer() { EXPECT_EQ(cudaFree(p), cudaSuccess) << "the program's buffer was freed"; }
  bool overlaps(const void* q, uint64_t len) const {
    const auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(q);
    return a < b + len && b < a + n;
  }
  void expect_whole() const {
    std::vector<unsigned char> host(n);
    const cudaError_t e = cudaMemcpy(host.data(), p, n, cudaMemcpyDeviceToHost);
    ASSERT_EQ(e, cudaSuccess) << "reading the program's buffer back: " << cuda_text(e);
    size_t bad = 0;
    for (unsigned char b : host) bad += b != 0xA5;
    EXPECT_EQ(bad, 0u) << "bytes of the program's buffer changed";
    const cudaError_t last = cudaDeviceSynchronize();
    EXPECT_EQ(last, cudaSuccess) << cuda_text(last);
    const cudaError_t sticky = cudaGetLastError();
    EXPECT_EQ(sticky, cudaSuccess) << cuda_text(sticky);
  }
};

// What a call made after the reset must not have done: free, unmap or destroy anything.
void expect_nothing_freed_since(const CudaCallCounters& before) {
  const CudaCallCounters now = cuda_call_counters();
  EXPECT_EQ(now.frees, before.frees) << "cudaFree after the device reset";
  EXPECT_EQ(now.pool_frees, before.pool_frees) << "cudaFreeAsync after the device reset";
  EXPECT_EQ(now.pools_destroyed, before.pools_destroyed) << "cudaMemPoolDestroy after the reset";
  EXPECT_EQ(now.vmm_releases, before.vmm_releases) << "cuMemRelease after the device reset";
  EXPECT_EQ(now.mallocs, before.mallocs) << "an allocation of the arena's after the reset";
}

struct Kind {
  const char* name;
  int32_t policy;
  bool expandable;
};
constexpr Kind kKinds[] = {{"ASYNC", ZARENA_OVERFLOW_ASYNC, false},
                           {"SYNC", ZARENA_OVERFLOW_SYNC, false},
                           {"expandable, ASYNC", ZARENA_OVERFLOW_ASYNC, true}};
constexpr uint64_t kRegion = 64 * kMiB;
constexpr uint64_t kOverflow = 8 * kMiB;

// The arena of that kind on the legacy stream (the program's streams go with the reset),
// its region used and two overflow blocks live; *region and *blocks say where they were.
zarena* used_arena(const Kind& k, void** region, std::vector<void*>* blocks) {
  zarena_config c = cuda_config(kRegion, k.policy, nullptr);
  if (k.expandable) {
    c.flags |= ZARENA_FLAG_EXPANDABLE;
    c.trim_keep_bytes = 2 * kMiB;  // a reset would decommit
  }
  zarena* a = nullptr;
  EXPECT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  if (a == nullptr) return nullptr;
  EXPECT_EQ(zarena_alloc(a, kRegion, region), ZARENA_OK) << zarena_last_error();
  for (int i = 0; i < 2; ++i) {
    void* o = nullptr;
    EXPECT_EQ(zarena_alloc(a, kOverflow, &o), ZARENA_OK) << zarena_last_error();
    blocks->push_back(o);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return a;
}

TEST(GpuEdgesResetChild, DestroyAfterADeviceResetFreesNothingOfTheProgram) {
  if (!in_child(kResetChild)) GTEST_SKIP() << kInChildOnly;
  REQUIRE_DEVICE();
  for (const Kind& k : kKinds) {
    SCOPED_TRACE(k.name);
    zarena_test::LogCapture log(ZARENA_LOG_WARN);
    void* region = nullptr;
    std::vector<void*> blocks;
    zarena* a = used_arena(k, &region, &blocks);
    ASSERT_NE(a, nullptr);
    CUDA_OK(cudaDeviceReset());
    const CudaCallCounters c1 = cuda_call_counters();
    {
      // The program allocates again: buffers of the sizes the arena had.
      ProgramBuffer big(kRegion), small1(kOverflow), small2(kOverflow);
      std::printf("[ %s ] the program's new buffers %s the arena's old addresses\n", k.name,
                  big.overlaps(region, kRegion) || small1.overlaps(blocks[0], kOverflow) ||
                          small2.overlaps(blocks[1], kOverflow)
                      ? "reuse"
                      : "do not reuse");
      EXPECT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
      expect_nothing_freed_since(c1);
      big.expect_whole();
      small1.expect_whole();
      small2.expect_whole();
    }
    const auto recs = log.of("arena.device_reset");
    ASSERT_EQ(recs.size(), 1u);
    EXPECT_EQ(recs[0].str("call"), "zarena_destroy");
    EXPECT_EQ(recs[0].u("overflow_blocks"), 2u);
  }
}

TEST(GpuEdgesResetChild, CallsAfterADeviceResetGetAClearStatusAndTouchNothing) {
  if (!in_child(kResetChild)) GTEST_SKIP() << kInChildOnly;
  REQUIRE_DEVICE();
  for (const Kind& k : kKinds) {
    SCOPED_TRACE(k.name);
    zarena_test::LogCapture log(ZARENA_LOG_WARN);
    void* region = nullptr;
    std::vector<void*> blocks;
    zarena* a = used_arena(k, &region, &blocks);
    ASSERT_NE(a, nullptr);
    CUDA_OK(cudaDeviceReset());
    const CudaCallCounters c1 = cuda_call_counters();
    {
      ProgramBuffer big(kRegion), small1(kOverflow), small2(kOverflow);
      EXPECT_EQ(zarena_free(a, blocks[0]), ZARENA_E_BACKEND);
      EXPECT_NE(std::string(zarena_last_error()).find("device was reset"), std::string::npos)
          << zarena_last_error();
      // Rewinds, reclaims blocks[1] and (expandable) would trim: none of it reaches CUDA.
      EXPECT_EQ(zarena_reset(a), ZARENA_E_BACKEND) << zarena_last_error();
      void* o = nullptr;
      EXPECT_EQ(zarena_alloc(a, 2 * kRegion, &o), ZARENA_E_BACKEND);
      EXPECT_NE(std::string(zarena_last_error()).find("reset"), std::string::npos)
          << zarena_last_error();
      EXPECT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
      expect_nothing_freed_since(c1);
      big.expect_whole();
      small1.expect_whole();
      small2.expect_whole();
    }
    EXPECT_EQ(log.count("arena.device_reset"), 1u) << "once per arena";
  }
}

TEST(GpuEdges, AfterADeviceReset) {
  REQUIRE_DEVICE();
  if (in_child(kResetChild)) GTEST_SKIP() << "the parent's half";
  (void)run_child_tests(kResetChild, "GpuEdgesResetChild.*");
}

}  // namespace

#else  // built without the CUDA Toolkit

TEST(GpuEdges, NotBuilt) { GTEST_SKIP() << "built without the CUDA Toolkit: no gpu tests"; }

#endif
