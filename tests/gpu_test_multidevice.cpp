// Issue 18 on two GPUs, through the C API (skips cleanly with fewer than two):
//   1. an arena on device 1, used from a thread that never touched CUDA (alloc, free,
//      overflow on both routes, pins, reset, destroy), creates no context on device 0 and
//      leaves the thread without a current context. Checked in a fresh child process (this
//      binary, re-run with a filter), because any earlier test may have made device 0's
//      primary context in this one: cuDevicePrimaryCtxGetState(device 0) must say inactive;
//   2. two arenas per device (SYNC and ASYNC), used concurrently from several threads:
//      every pointer is on its arena's device, each ASYNC arena has its own pool on its own
//      device, and destroy gives each device's memory back;
//   3. a stream of device 0 is refused for an arena on device 1, at create and at
//      zarena_set_stream.
#include <gtest/gtest.h>

#if __has_include(<cuda_runtime_api.h>) && __has_include(<cuda.h>)
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
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

constexpr const char* kChildMode = "multidevice_child";

// Device 0's primary context: active or not (the driver's answer).
int primary_active(int device) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  EXPECT_EQ(cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fn, 12000,
                                             cudaEnableDefault, &q),
            cudaSuccess);
  EXPECT_NE(fn, nullptr);
  if (fn == nullptr) return -1;
  const zarena_core::DriverApi& d = driver();
  CUdevice dev = 0;
  EXPECT_EQ(d.cuDeviceGet(&dev, device), CUDA_SUCCESS);
  unsigned flags = 0;
  int active = -1;
  const auto get = reinterpret_cast<PFN_cuDevicePrimaryCtxGetState_v7000>(fn);
  EXPECT_EQ(get(dev, &flags, &active), CUDA_SUCCESS);
  return active;
}

// --- 1. (child) -------------------------------------------------------------------------------

TEST(MultiDeviceChild, ArenaOnDevice1FromAFreshThreadMakesNoContextOnDevice0) {
  if (!in_child(kChildMode))
    GTEST_SKIP() << "runs in the child process MultiDevice.NoContextOnDevice0 starts";
  REQUIRE_DEVICES(2);
  ASSERT_EQ(primary_active(0), 0) << "device 0's context existed before the test";
  const zarena_core::DriverApi& d = driver();
  CUcontext before = reinterpret_cast<CUcontext>(1), after = reinterpret_cast<CUcontext>(1);
  std::vector<std::string> failures;
  std::thread t([&] {
    (void)d.cuCtxGetCurrent(&before);
    auto check = [&](zarena_status st, const char* what) {
      if (st != ZARENA_OK) failures.push_back(std::string(what) + ": " + zarena_last_error());
    };
    for (int32_t policy : {ZARENA_OVERFLOW_SYNC, ZARENA_OVERFLOW_ASYNC}) {
      zarena_config c = cuda_config(4 * kMiB, policy, nullptr, 1);
      c.flags |= ZARENA_FLAG_POISON;
      zarena* a = nullptr;
      check(zarena_create(&c, &a), "create");
      if (a == nullptr) return;
      void *p = nullptr, *o = nullptr, *o2 = nullptr;
      check(zarena_alloc(a, kMiB, &p), "alloc");
      check(zarena_free(a, p), "free");
      check(zarena_alloc(a, 8 * kMiB, &o), "overflow alloc");
      check(zarena_alloc(a, 8 * kMiB, &o2), "overflow alloc");
      check(zarena_pin(a, o2), "pin");
      check(zarena_free(a, o), "overflow free");
      check(zarena_reset(a), "reset");
      check(zarena_unpin(a, o2), "unpin");
      check(zarena_reset(a), "reset");
      zarena_stats s;
      s.struct_size = sizeof s;
      check(zarena_get_stats(a, &s), "stats");
      check(zarena_destroy(a), "destroy");
    }
    (void)d.cuCtxGetCurrent(&after);
  });
  t.join();
  for (const auto& f : failures) ADD_FAILURE() << f;
  EXPECT_EQ(before, nullptr);
  EXPECT_EQ(after, nullptr) << "the thread was left with a current context";
  EXPECT_EQ(primary_active(0), 0) << "an arena on device 1 created device 0's primary context";
}

TEST(MultiDevice, NoContextOnDevice0) {
  REQUIRE_DEVICES(2);
  if (in_child(kChildMode)) GTEST_SKIP() << "the parent's half";
  (void)run_child_tests(kChildMode, "MultiDeviceChild.*");
}

// --- 2. two devices at once
// -----------------------------------------------------------------------

TEST(MultiDevice, ArenasOnBothDevicesUsedConcurrentlyStayOnTheirDevices) {
  REQUIRE_DEVICES(2);
  zarena_test::LogCapture quiet;
  int64_t free_before[2];
  for (int dev = 0; dev < 2; ++dev) {
    CUDA_OK(cudaSetDevice(dev));
    free_before[dev] = free_bytes();
  }
  CUDA_OK(cudaSetDevice(0));
  const CudaCallCounters c0 = cuda_call_counters();
  struct Entry {
    zarena* a;
    int device;
  };
  std::vector<Entry> arenas;
  for (int dev = 0; dev < 2; ++dev) {
    for (int32_t policy : {ZARENA_OVERFLOW_SYNC, ZARENA_OVERFLOW_ASYNC}) {
      zarena_config c = cuda_config(16 * kMiB, policy, nullptr, dev);
      zarena* a = nullptr;
      ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
      arenas.push_back({a, dev});
    }
  }
  void* pool0 = zarena_core::cuda_backend_pool_for_testing(arenas[1].a->arena->backend());
  void* pool1 = zarena_core::cuda_backend_pool_for_testing(arenas[3].a->arena->backend());
  ASSERT_NE(pool0, nullptr);
  ASSERT_NE(pool1, nullptr);
  EXPECT_NE(pool0, pool1) << "one overflow pool per device";
  for (int dev = 0; dev < 2; ++dev) {
    cudaMemLocation loc;
    std::memset(&loc, 0, sizeof loc);
    loc.type = cudaMemLocationTypeDevice;
    loc.id = dev;
    cudaMemAccessFlags flags = cudaMemAccessFlagsProtNone;
    CUDA_OK(
        cudaMemPoolGetAccess(&flags, static_cast<cudaMemPool_t>(dev == 0 ? pool0 : pool1), &loc));
    EXPECT_EQ(flags, cudaMemAccessFlagsProtReadWrite) << "device " << dev << "'s pool is its own";
  }

  std::vector<std::string> failures[4];
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        for (const Entry& e : arenas) {
          const uint64_t size = (i + t) % 7 == 0 ? 20 * kMiB : 64 * 1024 * (1 + (i + t) % 5);
          void* p = nullptr;
          if (zarena_alloc(e.a, size, &p) != ZARENA_OK) {
            failures[t].push_back(std::string("alloc: ") + zarena_last_error());
            continue;
          }
          cudaPointerAttributes at;
          std::memset(&at, 0, sizeof at);
          if (cudaPointerGetAttributes(&at, p) != cudaSuccess || at.device != e.device ||
              at.type != cudaMemoryTypeDevice) {
            (void)cudaGetLastError();
            failures[t].push_back("pointer " + std::to_string(reinterpret_cast<uintptr_t>(p)) +
                                  " is on device " + std::to_string(at.device) + ", not " +
                                  std::to_string(e.device));
          }
          if (zarena_free(e.a, p) != ZARENA_OK) {
            failures[t].push_back(std::string("free: ") + zarena_last_error());
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& f : failures) {
    for (size_t i = 0; i < f.size() && i < 5; ++i) ADD_FAILURE() << f[i];
  }
  for (const Entry& e : arenas) {
    EXPECT_GT(stats_of(e.a).overflow_allocs, 0u) << "the test meant to overflow";
    ASSERT_EQ(zarena_destroy(e.a), ZARENA_OK) << zarena_last_error();
  }
  expect_balanced(c0, cuda_call_counters());
  for (int dev = 0; dev < 2; ++dev) {
    CUDA_OK(cudaSetDevice(dev));
    EXPECT_NEAR(static_cast<double>(free_bytes()), static_cast<double>(free_before[dev]),
                static_cast<double>(kTolerance))
        << "device " << dev << "'s memory given back";
  }
  CUDA_OK(cudaSetDevice(0));
}

// --- 3. a stream of the other device ------------------------------------------------------------

TEST(MultiDevice, StreamOfDevice0RefusedForAnArenaOnDevice1) {
  REQUIRE_DEVICES(2);
  zarena_test::LogCapture quiet;
  CUDA_OK(cudaSetDevice(0));
  cudaStream_t s0 = nullptr;
  CUDA_OK(cudaStreamCreate(&s0));
  zarena_config c = cuda_config(4 * kMiB, ZARENA_OVERFLOW_ASYNC, s0, 1);
  zarena* a = nullptr;
  EXPECT_EQ(zarena_create(&c, &a), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(zarena_last_error()).find("device 0"), std::string::npos)
      << zarena_last_error();
  EXPECT_EQ(a, nullptr);
  c.stream = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(zarena_set_stream(a, s0), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(zarena_last_error()).find("device 0"), std::string::npos)
      << zarena_last_error();
  EXPECT_EQ(a->arena->backend().stream(), nullptr) << "nothing changed";
  void* p = nullptr;
  EXPECT_EQ(zarena_alloc(a, 8 * kMiB, &p), ZARENA_OK) << "the arena still works";
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
  CUDA_OK(cudaStreamDestroy(s0));
}

}  // namespace

#else  // built without the CUDA Toolkit

TEST(MultiDevice, NotBuilt) { GTEST_SKIP() << "built without the CUDA Toolkit: no gpu tests"; }

#endif
