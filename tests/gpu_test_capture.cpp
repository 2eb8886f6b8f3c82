// Issue 17 on a real device, through the C API: each finding of the review has a test here
// (or, for #2 and the backend half of #3 and #6, in gpu_test_backend.cpp):
//   #1 an overflow block freed (or reclaimed) during a capture, SYNC and ASYNC, allocated
//      before it: OK, the capture survives and instantiates, the free is deferred
//      (overflow_deferred_gives), the block goes back after the capture, nothing leaks at
//      destroy (the backend's call counters balance); the engine's capture flag covers a
//      capture the arena's queries cannot see;
//   #3 cudaStreamPerThread refused by zarena_set_stream (create: gpu_test_backend.cpp);
//   #4 poison makes no stream call during a capture: arena on the NULL stream while a
//      blocking stream captures (the capture survives), arena on the captured stream (the
//      graph holds only the user's memset node, and replays never write over the block
//      the arena hands out again);
//   #5 overflow blocks are poisoned before they go back (read back from the pool);
//   #6 a fresh thread that calls every arena function is left with no context;
// and zarena_set_stream orders the new stream after the old one's queued work.
// Every test skips with a clear line without a device.
#include <gtest/gtest.h>

#if __has_include(<cuda_runtime_api.h>) && __has_include(<cuda.h>)
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "../capi/handle.h"
#include "backend/backend_cuda_testing.h"
#include "gpu_util.h"
#include "support.h"

namespace {

using namespace zarena_gpu;
using zarena_core::cuda_call_counters;
using zarena_core::CudaCallCounters;

std::vector<uint32_t> words_of(const void* p, uint64_t bytes) {
  std::vector<uint32_t> w(bytes / 4);
  EXPECT_EQ(cudaMemcpy(w.data(), p, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  return w;
}

::testing::AssertionResult all_words(const void* p, uint64_t bytes, uint32_t want) {
  const std::vector<uint32_t> w = words_of(p, bytes);
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] != want) {
      return ::testing::AssertionFailure()
             << "word " << i << " of " << p << " is 0x" << std::hex << w[i] << ", not 0x" << want;
    }
  }
  return ::testing::AssertionSuccess();
}

// --- #1: overflow frees during a capture ---------------------------------------------------

TEST(GpuCapture, OverflowFreeDuringCaptureIsDeferredAndTheCaptureSurvives) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture quiet;
  for (int32_t policy : {ZARENA_OVERFLOW_SYNC, ZARENA_OVERFLOW_ASYNC}) {
    for (bool destroy_while_pending : {false, true}) {
      SCOPED_TRACE(std::string(policy == ZARENA_OVERFLOW_SYNC ? "SYNC" : "ASYNC") +
                   (destroy_while_pending ? ", destroyed with the gives pending" : ""));
      Stream s;  // a blocking stream, as engines create them
      DeviceBuffer scratch(kMiB);
      const CudaCallCounters c0 = cuda_call_counters();
      zarena_config c = cuda_config(kMiB, policy, s);
      zarena* a = nullptr;
      ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
      void *fill = nullptr, *o1 = nullptr, *o2 = nullptr;
      ASSERT_EQ(zarena_alloc(a, kMiB, &fill), ZARENA_OK);
      ASSERT_EQ(zarena_alloc(a, 4 * kMiB, &o1), ZARENA_OK) << zarena_last_error();
      ASSERT_EQ(zarena_alloc(a, 4 * kMiB, &o2), ZARENA_OK) << zarena_last_error();
      ASSERT_EQ(stats_of(a).overflow_allocs, 2u);
      CUDA_OK(cudaMemsetAsync(o1, 0x11, 4 * kMiB, s));
      CUDA_OK(cudaMemsetAsync(o2, 0x22, 4 * kMiB, s));
      CUDA_OK(cudaStreamSynchronize(s));

      const CudaCallCounters c1 = cuda_call_counters();
      CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
      CUDA_OK(cudaMemsetAsync(scratch.p, 1, kMiB, s));
      EXPECT_EQ(zarena_free(a, o1), ZARENA_OK) << zarena_last_error();
      EXPECT_EQ(zarena_free(a, o1), ZARENA_E_DOUBLE_FREE) << "the free is recorded";
      EXPECT_EQ(zarena_reset(a), ZARENA_OK);  // reclaims o2 (and the region block)
      zarena_stats st = stats_of(a);
      EXPECT_EQ(st.overflow_deferred_gives, 2u);
      EXPECT_EQ(st.overflow_live_bytes, 0u);
      const CudaCallCounters c2 = cuda_call_counters();
      EXPECT_EQ(c2.frees, c1.frees) << "no cudaFree during the capture";
      EXPECT_EQ(c2.pool_frees, c1.pool_frees) << "no cudaFreeAsync recorded into the graph";
      cudaGraph_t graph = nullptr;
      const cudaError_t end = cudaStreamEndCapture(s, &graph);
      ASSERT_EQ(end, cudaSuccess) << "the capture was broken: " << cuda_text(end);
      const std::vector<cudaGraphNodeType> types = node_types(graph);
      ASSERT_EQ(types.size(), 1u) << "only the user's memset is in the graph";
      EXPECT_EQ(types[0], cudaGraphNodeTypeMemset);
      run_once_and_destroy(graph, s);

      if (!destroy_while_pending) {
        ASSERT_EQ(zarena_reset(a), ZARENA_OK);  // a safe point: the deferred blocks go back
        st = stats_of(a);
        EXPECT_EQ(st.overflow_deferred_gives, 0u);
        const CudaCallCounters c3 = cuda_call_counters();
        if (policy == ZARENA_OVERFLOW_SYNC) {
          EXPECT_EQ(c3.frees - c2.frees, 2u);
        } else {
          EXPECT_EQ(c3.pool_frees - c2.pool_frees, 2u);
        }
      }
      ASSERT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
      expect_balanced(c0, cuda_call_counters());
    }
  }
}

// A capture the arena cannot see (global mode, another thread's... here: another
// non-blocking stream): the engine's flag keeps the free out of CUDA until it is lifted.
TEST(GpuCapture, EngineFlagDefersFreesForACaptureTheArenaCannotSee) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture quiet;
  Stream mine(cudaStreamNonBlocking), theirs(cudaStreamNonBlocking);
  DeviceBuffer scratch(kMiB);
  const CudaCallCounters c0 = cuda_call_counters();
  zarena_config c = cuda_config(kMiB, ZARENA_OVERFLOW_SYNC, mine);
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  void *fill = nullptr, *o1 = nullptr;
  ASSERT_EQ(zarena_alloc(a, kMiB, &fill), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(a, 2 * kMiB, &o1), ZARENA_OK) << zarena_last_error();

  CUDA_OK(cudaStreamBeginCapture(theirs, cudaStreamCaptureModeGlobal));
  CUDA_OK(cudaMemsetAsync(scratch.p, 1, kMiB, theirs));
  ASSERT_EQ(zarena_set_capture_active(a, 1), ZARENA_OK);
  const CudaCallCounters c1 = cuda_call_counters();
  EXPECT_EQ(zarena_free(a, o1), ZARENA_OK);
  void* o2 = nullptr;
  EXPECT_EQ(zarena_alloc(a, 2 * kMiB, &o2), ZARENA_E_CAPTURE_UNSAFE) << "SYNC refused";
  EXPECT_EQ(cuda_call_counters().frees, c1.frees);
  EXPECT_EQ(cuda_call_counters().mallocs, c1.mallocs);
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(theirs, &graph);
  ASSERT_EQ(end, cudaSuccess) << cuda_text(end);
  CUDA_OK(cudaGraphDestroy(graph));
  ASSERT_EQ(zarena_set_capture_active(a, 0), ZARENA_OK);
  EXPECT_EQ(cuda_call_counters().frees - c1.frees, 1u) << "given back when the flag is lifted";
  EXPECT_EQ(stats_of(a).overflow_deferred_gives, 0u);
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
  expect_balanced(c0, cuda_call_counters());
}

// The same capture declared once for the process (zarena_capture_begin): two arenas on
// streams of their own, neither captured, both keep their frees out of CUDA until the
// scope ends; the capture survives.
TEST(GpuCapture, ProcessScopeDefersFreesOfEveryArena) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture quiet;
  Stream s1(cudaStreamNonBlocking), s2(cudaStreamNonBlocking), theirs(cudaStreamNonBlocking);
  DeviceBuffer scratch(kMiB);
  const CudaCallCounters c0 = cuda_call_counters();
  zarena* arenas[2] = {nullptr, nullptr};
  void* blocks[2] = {nullptr, nullptr};
  cudaStream_t streams[2] = {s1, s2};
  for (int i = 0; i < 2; ++i) {
    zarena_config c = cuda_config(kMiB, ZARENA_OVERFLOW_SYNC, streams[i]);
    ASSERT_EQ(zarena_create(&c, &arenas[i]), ZARENA_OK) << zarena_last_error();
    void* fill = nullptr;
    ASSERT_EQ(zarena_alloc(arenas[i], kMiB, &fill), ZARENA_OK);
    ASSERT_EQ(zarena_alloc(arenas[i], 2 * kMiB, &blocks[i]), ZARENA_OK) << zarena_last_error();
  }
  ASSERT_EQ(zarena_capture_begin(ZARENA_CAPTURE_PROCESS, nullptr), ZARENA_OK);
  CUDA_OK(cudaStreamBeginCapture(theirs, cudaStreamCaptureModeGlobal));
  CUDA_OK(cudaMemsetAsync(scratch.p, 1, kMiB, theirs));
  const CudaCallCounters c1 = cuda_call_counters();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(zarena_free(arenas[i], blocks[i]), ZARENA_OK);
    void* o = nullptr;
    EXPECT_EQ(zarena_alloc(arenas[i], 2 * kMiB, &o), ZARENA_E_CAPTURE_UNSAFE) << "SYNC refused";
  }
  EXPECT_EQ(cuda_call_counters().frees, c1.frees);
  EXPECT_EQ(cuda_call_counters().mallocs, c1.mallocs);
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(theirs, &graph);
  ASSERT_EQ(end, cudaSuccess) << cuda_text(end);
  CUDA_OK(cudaGraphDestroy(graph));
  ASSERT_EQ(zarena_capture_end(ZARENA_CAPTURE_PROCESS, nullptr), ZARENA_OK);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(zarena_reset(arenas[i]), ZARENA_OK);  // a give-back point after the scope
    EXPECT_EQ(stats_of(arenas[i]).overflow_deferred_gives, 0u);
  }
  EXPECT_EQ(cuda_call_counters().frees - c1.frees, 2u) << "both went back after the scope";
  for (zarena* a : arenas) ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
  expect_balanced(c0, cuda_call_counters());
}

// Without the flag the arena cannot see that capture: CUDA refuses the cudaFree (and
// invalidates that capture, CUDA's rule); the free still answers OK, the block is kept
// and given back at the next safe point, nothing leaks.
TEST(GpuCapture, RefusedGiveBackIsRetriedNotLeaked) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture quiet;
  Stream mine(cudaStreamNonBlocking), theirs(cudaStreamNonBlocking);
  DeviceBuffer scratch(kMiB);
  const CudaCallCounters c0 = cuda_call_counters();
  zarena_config c = cuda_config(kMiB, ZARENA_OVERFLOW_SYNC, mine);
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  void *fill = nullptr, *o1 = nullptr;
  ASSERT_EQ(zarena_alloc(a, kMiB, &fill), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(a, 2 * kMiB, &o1), ZARENA_OK) << zarena_last_error();
  CUDA_OK(cudaStreamBeginCapture(theirs, cudaStreamCaptureModeGlobal));
  CUDA_OK(cudaMemsetAsync(scratch.p, 1, kMiB, theirs));
  EXPECT_EQ(zarena_free(a, o1), ZARENA_OK);
  const uint64_t pending = stats_of(a).overflow_deferred_gives;
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(theirs, &graph);
  std::printf("[ info ] cudaFree during another stream's global capture: %s; capture end: %s\n",
              pending != 0 ? "refused, kept for a retry" : "accepted", cuda_text(end).c_str());
  if (graph != nullptr) CUDA_OK(cudaGraphDestroy(graph));
  (void)cudaGetLastError();
  ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  EXPECT_EQ(stats_of(a).overflow_deferred_gives, 0u) << "retried outside the capture";
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
  expect_balanced(c0, cuda_call_counters());
}

// --- #3: cudaStreamPerThread at zarena_set_stream ----------------------------------------------

TEST(GpuCapture, PerThreadStreamRefusedBySetStream) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture quiet;
  Stream s;
  zarena_config c = cuda_config(kMiB, ZARENA_OVERFLOW_ASYNC, s);
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(zarena_set_stream(a, cudaStreamPerThread), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(zarena_last_error()).find("cudaStreamPerThread"), std::string::npos)
      << zarena_last_error();
  EXPECT_EQ(a->arena->backend().stream(), static_cast<void*>(s)) << "nothing changed";
  c.stream = cudaStreamPerThread;
  zarena* b = nullptr;
  EXPECT_EQ(zarena_create(&c, &b), ZARENA_E_INVALID_ARGUMENT);
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
}

// --- #4: poison during a capture --------------------------------------------------------------

TEST(GpuCapture, PoisonOnTheNullStreamWhileABlockingStreamCapturesMakesNoStreamCall) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture log;
  zarena_config c = cuda_config(4 * kMiB, ZARENA_OVERFLOW_SYNC, nullptr);
  c.flags |= ZARENA_FLAG_POISON;
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  void *b1 = nullptr, *b2 = nullptr;
  ASSERT_EQ(zarena_alloc(a, kMiB, &b1), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(a, kMiB, &b2), ZARENA_OK);
  CUDA_OK(cudaMemset(b1, 0, kMiB));
  CUDA_OK(cudaMemset(b2, 0, kMiB));
  Stream s;  // blocking: the legacy stream would join its capture
  DeviceBuffer scratch(kMiB);
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CUDA_OK(cudaMemsetAsync(scratch.p, 1, kMiB, s));
  EXPECT_EQ(zarena_free(a, b1), ZARENA_OK);
  zarena_stats st = stats_of(a);
  EXPECT_EQ(st.poison_skipped, 1u);
  EXPECT_EQ(st.poison_fills, 0u);
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  ASSERT_EQ(end, cudaSuccess) << "the fill broke the capture: " << cuda_text(end);
  EXPECT_EQ(node_types(graph).size(), 1u);
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  EXPECT_EQ(log.of("poison.skipped").size(), 1u);
  // After the capture fills resume, on the arena's stream.
  EXPECT_EQ(zarena_free(a, b2), ZARENA_OK);
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_TRUE(all_words(b2, kMiB, 0x7FF80000u));
  EXPECT_EQ(stats_of(a).poison_fills, 1u);
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
}

TEST(GpuCapture, PoisonOnTheCapturedStreamIsNotRecordedAndNeverReplayedOverALiveBlock) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture quiet;
  Stream s(cudaStreamNonBlocking);
  zarena_config c = cuda_config(4 * kMiB, ZARENA_OVERFLOW_SYNC, s);
  c.flags |= ZARENA_FLAG_POISON;
  c.poison_word = 0xA5A5A5A5u;
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  void* b = nullptr;
  ASSERT_EQ(zarena_alloc(a, kMiB, &b), ZARENA_OK);
  DeviceBuffer scratch(kMiB);
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CUDA_OK(cudaMemsetAsync(scratch.p, 1, kMiB, s));
  EXPECT_EQ(zarena_free(a, b), ZARENA_OK);
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamEndCapture(s, &graph));
  const std::vector<cudaGraphNodeType> types = node_types(graph);
  ASSERT_EQ(types.size(), 1u) << "a poison fill was recorded into the user's graph";
  EXPECT_EQ(types[0], cudaGraphNodeTypeMemset);
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  // The arena hands the block out again; the graph's replays must not touch it.
  void* again = nullptr;
  ASSERT_EQ(zarena_alloc(a, kMiB, &again), ZARENA_OK);
  ASSERT_EQ(again, b) << "the test needs the block handed out again";
  CUDA_OK(cudaMemsetAsync(again, 0x22, kMiB, s));
  for (int i = 0; i < 3; ++i) CUDA_OK(cudaGraphLaunch(exec, s));
  CUDA_OK(cudaStreamSynchronize(s));
  EXPECT_TRUE(all_words(again, kMiB, 0x22222222u)) << "a replay wrote over a live block";
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
}

// --- #5: overflow blocks poisoned before they go back ----------------------------------------

TEST(GpuCapture, OverflowBlocksArePoisonedBeforeTheyGoBack) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture quiet;
  Stream s(cudaStreamNonBlocking);
  for (int32_t policy : {ZARENA_OVERFLOW_ASYNC, ZARENA_OVERFLOW_SYNC}) {
    SCOPED_TRACE(policy == ZARENA_OVERFLOW_SYNC ? "SYNC" : "ASYNC");
    zarena_config c = cuda_config(kMiB, policy, s);
    c.flags |= ZARENA_FLAG_POISON;
    c.poison_word = 0xC0FFEE11u;
    c.overflow_retain_bytes = 64 * kMiB;  // the pool keeps the block for the next request
    zarena* a = nullptr;
    ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
    void *fill = nullptr, *o = nullptr;
    ASSERT_EQ(zarena_alloc(a, kMiB, &fill), ZARENA_OK);
    ASSERT_EQ(zarena_alloc(a, 2 * kMiB, &o), ZARENA_OK) << zarena_last_error();
    CUDA_OK(cudaMemsetAsync(o, 0, 2 * kMiB, s));
    const uint64_t fills0 = stats_of(a).poison_fills;
    ASSERT_EQ(zarena_free(a, o), ZARENA_OK);
    EXPECT_EQ(stats_of(a).poison_fills, fills0 + 1) << "filled on its way back";
    if (policy == ZARENA_OVERFLOW_ASYNC) {
      // The pool hands the same memory out again on the same stream: it holds the word.
      void* again = nullptr;
      ASSERT_EQ(zarena_alloc(a, 2 * kMiB, &again), ZARENA_OK);
      CUDA_OK(cudaStreamSynchronize(s));
      ASSERT_EQ(again, o) << "the pool did not reuse the block; cannot read it back";
      EXPECT_TRUE(all_words(again, 2 * kMiB, 0xC0FFEE11u));
    }
    ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
  }
}

// --- #6: the device guard on a fresh thread, through every arena call ---------------------

TEST(GpuCapture, FreshThreadIsLeftWithoutAContextByEveryArenaCall) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture quiet;
  std::string why;
  const int device = device_count(&why) - 1;
  const zarena_core::DriverApi& d = driver();
  for (int32_t policy : {ZARENA_OVERFLOW_SYNC, ZARENA_OVERFLOW_ASYNC}) {
    CUcontext before = reinterpret_cast<CUcontext>(1), after = reinterpret_cast<CUcontext>(1);
    std::vector<std::string> failures;
    std::thread t([&] {
      (void)d.cuCtxGetCurrent(&before);
      auto check = [&](zarena_status st, const char* what) {
        if (st != ZARENA_OK) failures.push_back(std::string(what) + ": " + zarena_last_error());
      };
      zarena_config c = cuda_config(kMiB, policy, nullptr, device);
      c.flags |= ZARENA_FLAG_POISON;
      zarena* a = nullptr;
      check(zarena_create(&c, &a), "create");
      if (a == nullptr) return;
      void *p = nullptr, *o = nullptr, *o2 = nullptr;
      check(zarena_alloc(a, 256 * 1024, &p), "alloc");
      check(zarena_free(a, p), "free");
      check(zarena_alloc(a, 2 * kMiB, &o), "overflow alloc");
      check(zarena_alloc(a, 2 * kMiB, &o2), "overflow alloc");
      check(zarena_pin(a, o2), "pin");
      check(zarena_free(a, o), "overflow free");
      check(zarena_reset(a), "reset");
      check(zarena_unpin(a, o2), "unpin");
      check(zarena_set_stream(a, nullptr), "set_stream");
      zarena_stats s;
      s.struct_size = sizeof s;
      check(zarena_get_stats(a, &s), "stats");
      check(zarena_destroy(a), "destroy");
      (void)d.cuCtxGetCurrent(&after);
    });
    t.join();
    for (const auto& f : failures) ADD_FAILURE() << f;
    EXPECT_EQ(before, nullptr) << "a fresh thread starts without a context";
    EXPECT_EQ(after, nullptr) << "an arena call left a context current on a fresh thread";
  }
}

// --- zarena_set_stream orders the new stream after the old one ------------------------------

// A host function that blocks its stream until the test opens the gate.
void CUDART_CB wait_for_gate(void* gate) {
  auto* open = static_cast<std::atomic<int>*>(gate);
  while (open->load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(GpuSetStream, NewStreamWaitsForTheOldStreamsQueuedWork) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture quiet;
  Stream s1(cudaStreamNonBlocking), s2(cudaStreamNonBlocking);
  // Poison fill after the change (region block) and pool reuse (ASYNC overflow block).
  zarena_config c = cuda_config(kMiB, ZARENA_OVERFLOW_ASYNC, s1);
  c.flags |= ZARENA_FLAG_POISON;
  c.poison_word = 0x5EEDF00Du;
  c.overflow_retain_bytes = 64 * kMiB;
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  void *b = nullptr, *o = nullptr;
  ASSERT_EQ(zarena_alloc(a, kMiB, &b), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(a, 2 * kMiB, &o), ZARENA_OK);
  CUDA_OK(cudaStreamSynchronize(s1));
  ASSERT_EQ(zarena_set_poison(a, 0, 0), ZARENA_OK);  // the overflow block: no fill, reuse only

  std::atomic<int> gate{0};
  // Whatever happens below, the gate opens and the host function returns before `gate`
  // goes out of scope.
  struct Opener {
    std::atomic<int>& gate;
    cudaStream_t s;
    ~Opener() {
      gate.store(1);
      (void)cudaStreamSynchronize(s);
    }
  } opener{gate, s1};
  CUDA_OK(cudaLaunchHostFunc(s1, wait_for_gate, &gate));
  // Kernels of the old stream still writing both blocks when the stream changes.
  CUDA_OK(cudaMemsetAsync(b, 0x11, kMiB, s1));
  CUDA_OK(cudaMemsetAsync(o, 0x11, 2 * kMiB, s1));
  ASSERT_EQ(zarena_set_stream(a, s2), ZARENA_OK) << zarena_last_error();
  // The overflow block goes back on s2 and the pool hands it out again on s2.
  ASSERT_EQ(zarena_free(a, o), ZARENA_OK);
  void* o2 = nullptr;
  ASSERT_EQ(zarena_alloc(a, 2 * kMiB, &o2), ZARENA_OK);
  CUDA_OK(cudaMemsetAsync(o2, 0x22, 2 * kMiB, s2));
  // The region block is poisoned on s2.
  ASSERT_EQ(zarena_set_poison(a, 1, 0x5EEDF00Du), ZARENA_OK);
  ASSERT_EQ(zarena_free(a, b), ZARENA_OK);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const cudaError_t q = cudaStreamQuery(s2);
  (void)cudaGetLastError();
  EXPECT_EQ(q, cudaErrorNotReady) << "the new stream ran ahead of the old one's queued work";
  gate.store(1);
  CUDA_OK(cudaStreamSynchronize(s1));
  CUDA_OK(cudaStreamSynchronize(s2));
  EXPECT_TRUE(all_words(b, kMiB, 0x5EEDF00Du)) << "the fill ran before the old stream's write";
  if (o2 == o) {
    EXPECT_TRUE(all_words(o2, 2 * kMiB, 0x22222222u))
        << "the block was reused while the old stream still wrote it";
  } else {
    std::printf("[ info ] the pool did not hand the same block out again (%p, %p)\n", o, o2);
  }
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
}

TEST(GpuSetStream, RefusedWhileEitherStreamIsCaptured) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture quiet;
  Stream s1(cudaStreamNonBlocking), s2(cudaStreamNonBlocking);
  DeviceBuffer scratch(kMiB);
  zarena_config c = cuda_config(kMiB, ZARENA_OVERFLOW_ASYNC, s1);
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  for (cudaStream_t captured : {static_cast<cudaStream_t>(s1), static_cast<cudaStream_t>(s2)}) {
    CUDA_OK(cudaStreamBeginCapture(captured, cudaStreamCaptureModeGlobal));
    CUDA_OK(cudaMemsetAsync(scratch.p, 1, kMiB, captured));
    EXPECT_EQ(zarena_set_stream(a, s2), ZARENA_E_CAPTURE_UNSAFE);
    EXPECT_EQ(a->arena->backend().stream(), static_cast<void*>(s1)) << "nothing changed";
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(captured, &graph);
    EXPECT_EQ(end, cudaSuccess) << "the refusal touched the capture: " << cuda_text(end);
    ASSERT_EQ(node_types(graph).size(), 1u) << "nothing joined the capture";
    CUDA_OK(cudaGraphDestroy(graph));
  }
  ASSERT_EQ(zarena_set_stream(a, s2), ZARENA_OK) << zarena_last_error();
  ASSERT_EQ(zarena_set_stream(a, nullptr), ZARENA_OK) << zarena_last_error();
  ASSERT_EQ(zarena_set_stream(a, s1), ZARENA_OK) << zarena_last_error();
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
}

}  // namespace

#else  // built without the CUDA Toolkit

TEST(GpuCapture, NotBuilt) { GTEST_SKIP() << "built without the CUDA Toolkit: no gpu tests"; }

#endif
