// The CUDA backend through the Backend interface on a real device: an expandable region
// grown by the driver's virtual memory management from one chunk to 3 GiB (data written
// before each growth intact, device memory taken and given back exactly as committed), a
// commit larger than the device failing cleanly, fill32, overflow blocks aligned on both
// routes, the stream rules (cudaStreamPerThread and other devices' streams refused), the
// context guard on a fresh thread, capture_status and the managed fallback.
// Every test skips with a clear line without a device. Sizes stay in MiB / a few GiB: the
// GPU may be shared, so cudaMemGetInfo is compared with a tolerance and the backend's own
// call counters exactly.
#include <gtest/gtest.h>

#if __has_include(<cuda_runtime_api.h>) && __has_include(<cuda.h>)
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda_driver.h"
#include "support.h"
#include "zarena/zarena.h"

namespace {

using zarena_core::Backend;
using zarena_core::BackendOptions;
using zarena_core::CudaCallCounters;
using zarena_core::OverflowBlock;
using zarena_core::OverflowRoute;
using zarena_core::RegionInfo;
using zarena_core::RegionRequest;
using zarena_core::Result;
using zarena_core::Status;
using zarena_test::kMiB;

constexpr uint64_t kGiB = 1024 * kMiB;
// How far cudaMemGetInfo may move for reasons other than our commits (other processes on
// a shared GPU, the driver's own page tables).
constexpr int64_t kTolerance = 256 * kMiB;

std::string cuda_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    *why = "cudaGetDeviceCount failed (" + cuda_text(e) + ")";
    return 0;
  }
  if (n == 0) *why = "cudaGetDeviceCount reports 0 devices";
  return n;
}

#define REQUIRE_DEVICE()                                                                \
  do {                                                                                  \
    std::string why_;                                                                   \
    if (device_count(&why_) == 0) GTEST_SKIP() << "no CUDA device, skipping: " << why_; \
  } while (0)

#define CUDA_OK(expr)                                               \
  do {                                                              \
    const cudaError_t e_ = (expr);                                  \
    ASSERT_EQ(e_, cudaSuccess) << #expr << " -> " << cuda_text(e_); \
  } while (0)

std::unique_ptr<Backend> cuda_backend(const BackendOptions& opts) {
  std::unique_ptr<Backend> b;
  const Result r = zarena_core::make_cuda_backend(opts, &b);
  EXPECT_TRUE(r.is_ok()) << r.message;
  return b;
}

BackendOptions on_device(int device, void* stream = nullptr) {
  BackendOptions o;
  o.device = device;
  o.stream = stream;
  return o;
}

RegionRequest request(uint64_t bytes, uint64_t alignment, bool expandable) {
  RegionRequest req;
  req.bytes = bytes;
  req.alignment = alignment;
  req.expandable = expandable;
  return req;
}

int64_t free_bytes() {
  size_t free_b = 0, total_b = 0;
  EXPECT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  return static_cast<int64_t>(free_b);
}

const zarena_core::DriverApi& driver() {
  std::string why;
  const zarena_core::DriverApi* d = zarena_core::driver_api(&why);
  EXPECT_NE(d, nullptr) << why;
  return *d;
}

// The first and last 4 KiB of a chunk hold its byte; reading them back checks that a
// later commit moved or cleared nothing.
void expect_chunk_holds(const char* p, uint64_t bytes, unsigned char byte, const char* when) {
  std::vector<unsigned char> back(4096);
  for (const char* at : {p, p + bytes - back.size()}) {
    ASSERT_EQ(cudaMemcpy(back.data(), at, back.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < back.size(); ++i) {
      ASSERT_EQ(back[i], byte) << when << ": byte " << i << " at " << static_cast<const void*>(at);
    }
  }
}

// --- expandable regions ----------------------------------------------------------------------

TEST(CudaBackendVmm, GrowsFromOneChunkToGiBWithDataIntactAndMemoryAccounted) {
  REQUIRE_DEVICE();
  auto b = cuda_backend(on_device(0));
  ASSERT_TRUE(b);
  RegionInfo info;
  const Result rr = b->reserve_region(request(4 * kGiB, kGiB, true), &info);
  ASSERT_TRUE(rr.is_ok()) << rr.message;
  const uint64_t g = info.commit_granularity;
  ASSERT_GT(g, 0u);
  ASSERT_EQ(g & (g - 1), 0u) << "granularity " << g;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(info.base) % kGiB, 0u);
  EXPECT_FALSE(info.managed);
  std::printf("[ info ] allocation granularity %llu bytes\n", static_cast<unsigned long long>(g));
  char* base = static_cast<char*>(info.base);

  const CudaCallCounters c0 = zarena_core::cuda_call_counters();
  const int64_t free0 = free_bytes();
  // One granule first, then growing chunks up to 3 GiB in all.
  const std::vector<uint64_t> chunks = {g,          64 * kMiB - g, 64 * kMiB, 128 * kMiB,
                                        256 * kMiB, 512 * kMiB,    kGiB,      kGiB};
  std::vector<uint64_t> offsets;
  uint64_t top = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const Result r = b->commit(top, chunks[i]);
    ASSERT_TRUE(r.is_ok()) << "chunk " << i << ": " << r.message;
    CUDA_OK(cudaMemset(base + top, static_cast<int>(i + 1), chunks[i]));
    offsets.push_back(top);
    top += chunks[i];
    for (size_t j = 0; j <= i; ++j) {
      expect_chunk_holds(base + offsets[j], chunks[j], static_cast<unsigned char>(j + 1),
                         "after growth");
    }
  }
  ASSERT_EQ(top, 3 * kGiB);
  const CudaCallCounters c1 = zarena_core::cuda_call_counters();
  EXPECT_EQ(c1.vmm_creates - c0.vmm_creates, chunks.size());
  EXPECT_EQ(c1.vmm_releases - c0.vmm_releases, 0u);
  const int64_t free1 = free_bytes();
  EXPECT_NEAR(static_cast<double>(free0 - free1), static_cast<double>(top),
              static_cast<double>(kTolerance))
      << "device memory must drop by what was committed";

  // Give back the two 1 GiB chunks in one decommit; the rest stays intact.
  const uint64_t trim_at = offsets[6];
  ASSERT_TRUE(b->decommit(trim_at, 2 * kGiB).is_ok());
  const CudaCallCounters c2 = zarena_core::cuda_call_counters();
  EXPECT_EQ(c2.vmm_releases - c1.vmm_releases, 2u);
  EXPECT_NEAR(static_cast<double>(free_bytes() - free1), static_cast<double>(2 * kGiB),
              static_cast<double>(kTolerance))
      << "decommit must give the memory back";
  for (size_t j = 0; j < 6; ++j) {
    expect_chunk_holds(base + offsets[j], chunks[j], static_cast<unsigned char>(j + 1),
                       "after decommit");
  }
  // Splitting a mapping is refused (CUDA cannot unmap part of one).
  EXPECT_EQ(b->decommit(offsets[5], 256 * kMiB).status, Status::kInvalidArgument);
  // Recommit and use it again.
  ASSERT_TRUE(b->commit(trim_at, kGiB).is_ok());
  CUDA_OK(cudaMemset(base + trim_at, 0x77, kGiB));
  expect_chunk_holds(base + trim_at, kGiB, 0x77, "after recommit");

  ASSERT_TRUE(b->release_region().is_ok());
  ASSERT_TRUE(b->release_region().is_ok()) << "idempotent";
  const CudaCallCounters c3 = zarena_core::cuda_call_counters();
  EXPECT_EQ(c3.vmm_creates - c0.vmm_creates, c3.vmm_releases - c0.vmm_releases)
      << "every cuMemCreate released";
  EXPECT_NEAR(static_cast<double>(free_bytes()), static_cast<double>(free0),
              static_cast<double>(kTolerance));
}

TEST(CudaBackendVmm, CommitLargerThanTheDeviceFailsCleanly) {
  REQUIRE_DEVICE();
  auto b = cuda_backend(on_device(0));
  ASSERT_TRUE(b);
  size_t free_b = 0, total_b = 0;
  CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
  const uint64_t too_much = (static_cast<uint64_t>(total_b) + 4 * kGiB) & ~(kGiB - 1);
  RegionInfo info;
  ASSERT_TRUE(b->reserve_region(request(too_much + kGiB, 256, true), &info).is_ok());
  const CudaCallCounters c0 = zarena_core::cuda_call_counters();
  const int64_t free0 = free_bytes();
  const Result r = b->commit(0, too_much);
  EXPECT_EQ(r.status, Status::kOutOfMemory) << r.message;
  EXPECT_NE(r.message.find("cuMemCreate"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << r.message;
  const CudaCallCounters c1 = zarena_core::cuda_call_counters();
  EXPECT_EQ(c1.vmm_creates, c0.vmm_creates) << "nothing committed";
  EXPECT_NEAR(static_cast<double>(free_bytes()), static_cast<double>(free0),
              static_cast<double>(kTolerance));
  // The range is still free to commit in a size that fits.
  ASSERT_TRUE(b->commit(0, 64 * kMiB).is_ok());
  CUDA_OK(cudaMemset(info.base, 1, 64 * kMiB));
  ASSERT_TRUE(b->release_region().is_ok());
  EXPECT_EQ(zarena_core::cuda_call_counters().vmm_releases - c0.vmm_releases, 1u);
}

TEST(CudaBackendVmm, PlainRegionRefusesCommitAndManagedExpandableNeedsTheFallback) {
  REQUIRE_DEVICE();
  {
    auto b = cuda_backend(on_device(0));
    ASSERT_TRUE(b);
    RegionInfo info;
    ASSERT_TRUE(b->reserve_region(request(8 * kMiB, 64 * kMiB, false), &info).is_ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(info.base) % (64 * kMiB), 0u);
    EXPECT_EQ(info.commit_granularity, 0u);
    EXPECT_EQ(b->commit(0, 2 * kMiB).status, Status::kUnsupported);
  }
  BackendOptions o = on_device(0);
  o.managed = true;
  {
    auto b = cuda_backend(o);
    ASSERT_TRUE(b);
    RegionInfo info;
    const Result r = b->reserve_region(request(64 * kMiB, 256, true), &info);
    EXPECT_EQ(r.status, Status::kUnsupported) << r.message;
  }
  o.managed_fallback = true;
  {
    auto b = cuda_backend(o);
    ASSERT_TRUE(b);
    RegionInfo info;
    const Result r = b->reserve_region(request(64 * kMiB, 256, true), &info);
    ASSERT_TRUE(r.is_ok()) << r.message;
    EXPECT_FALSE(info.managed);
    EXPECT_NE(info.managed_fallback.find("virtual memory management"), std::string::npos)
        << info.managed_fallback;
  }
  int managed = 0;
  CUDA_OK(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, 0));
  {
    auto b = cuda_backend(o);
    ASSERT_TRUE(b);
    RegionInfo info;
    ASSERT_TRUE(b->reserve_region(request(8 * kMiB, 256, false), &info).is_ok());
    EXPECT_EQ(info.managed, managed != 0) << "managed where the device supports it";
    EXPECT_EQ(info.managed_fallback.empty(), managed != 0) << info.managed_fallback;
  }
}

// --- overflow blocks and fill ------------------------------------------------------------------

TEST(CudaBackendOverflow, BlocksAreAlignedOnBothRoutes) {
  REQUIRE_DEVICE();
  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  {
    BackendOptions o = on_device(0, s);
    o.need_async_pool = true;
    auto b = cuda_backend(o);
    ASSERT_TRUE(b);
    for (OverflowRoute route : {OverflowRoute::kSync, OverflowRoute::kAsync}) {
      for (uint64_t align : {uint64_t{4096}, 64 * kMiB}) {
        const CudaCallCounters c0 = zarena_core::cuda_call_counters();
        const int n = align >= 64 * kMiB ? 4 : 16;
        std::vector<OverflowBlock> blocks;
        for (int i = 0; i < n; ++i) {
          OverflowBlock blk;
          const uint64_t size = kMiB + 512 * static_cast<uint64_t>(i);
          const Result r = b->overflow_alloc(size, align, route, &blk);
          ASSERT_TRUE(r.is_ok()) << r.message;
          EXPECT_EQ(reinterpret_cast<uintptr_t>(blk.ptr) % align, 0u)
              << "block " << i << " at " << blk.ptr << ", alignment " << align;
          EXPECT_GE(static_cast<char*>(blk.base) + blk.reserved_bytes,
                    static_cast<char*>(blk.ptr) + size)
              << "the aligned block must lie inside what was allocated";
          CUDA_OK(cudaMemsetAsync(blk.ptr, 0x5A, size, s));
          blocks.push_back(blk);
        }
        CUDA_OK(cudaStreamSynchronize(s));
        for (const auto& blk : blocks) ASSERT_TRUE(b->overflow_free(blk).is_ok());
        CUDA_OK(cudaStreamSynchronize(s));
        const CudaCallCounters c1 = zarena_core::cuda_call_counters();
        if (route == OverflowRoute::kAsync) {
          EXPECT_EQ(c1.pool_allocs - c0.pool_allocs, static_cast<uint64_t>(n));
          EXPECT_EQ(c1.pool_frees - c0.pool_frees, static_cast<uint64_t>(n));
        } else {
          EXPECT_EQ(c1.mallocs - c0.mallocs, static_cast<uint64_t>(n));
          EXPECT_EQ(c1.frees - c0.frees, static_cast<uint64_t>(n));
        }
      }
    }
    OverflowBlock blk;
    EXPECT_EQ(b->overflow_alloc(~0ull - 100, 4096, OverflowRoute::kSync, &blk).status,
              Status::kOutOfMemory);
    EXPECT_EQ(b->overflow_alloc(~0ull - 100, 4096, OverflowRoute::kAsync, &blk).status,
              Status::kOutOfMemory);
  }
  CUDA_OK(cudaStreamDestroy(s));
}

TEST(CudaBackendOverflow, ArenaOverflowBlocksHaveTheArenasAlignment) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture quiet;
  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  for (int32_t policy : {ZARENA_OVERFLOW_SYNC, ZARENA_OVERFLOW_ASYNC}) {
    for (uint64_t align : {uint64_t{4096}, 64 * kMiB}) {
      zarena_config c;
      zarena_config_init(&c);
      c.backend = ZARENA_BACKEND_CUDA;
      c.capacity_bytes = align;
      c.alignment = align;
      c.overflow_policy = policy;
      c.overflow_retain_bytes = 0;
      // The blocks below add up to several times the capacity (the default overflow cap).
      c.overflow_limit_bytes = ZARENA_OVERFLOW_UNLIMITED;
      c.stream = s;
      c.name = "gpu-aligned-overflow";
      zarena* a = nullptr;
      ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
      std::vector<void*> blocks;
      for (int i = 0; i < (align >= 64 * kMiB ? 4 : 16); ++i) {
        void* p = nullptr;
        ASSERT_EQ(zarena_alloc(a, align + 512 * i + 1, &p), ZARENA_OK) << zarena_last_error();
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << "alignment " << align;
        blocks.push_back(p);
      }
      for (void* p : blocks) EXPECT_EQ(zarena_free(a, p), ZARENA_OK);
      ASSERT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
    }
  }
  CUDA_OK(cudaStreamDestroy(s));
}

TEST(CudaBackendFill, Fill32WritesTheWordOnTheStream) {
  REQUIRE_DEVICE();
  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  {
    auto b = cuda_backend(on_device(0, s));
    ASSERT_TRUE(b);
    RegionInfo info;
    ASSERT_TRUE(b->reserve_region(request(64 * kMiB, 256, true), &info).is_ok());
    ASSERT_TRUE(b->commit(0, info.commit_granularity).is_ok());
    OverflowBlock blk;
    ASSERT_TRUE(b->overflow_alloc(kMiB, 256, OverflowRoute::kSync, &blk).is_ok());
    for (char* p : {static_cast<char*>(info.base), static_cast<char*>(blk.ptr)}) {
      constexpr uint64_t kWords = 64 * 1024;
      CUDA_OK(cudaMemset(p, 0, (kWords + 2) * 4));
      ASSERT_TRUE(b->fill32(p + 4, kWords * 4, 0xA5A5F00Du).is_ok());
      CUDA_OK(cudaStreamSynchronize(s));
      std::vector<uint32_t> back(kWords + 2);
      CUDA_OK(cudaMemcpy(back.data(), p, back.size() * 4, cudaMemcpyDeviceToHost));
      EXPECT_EQ(back.front(), 0u);
      EXPECT_EQ(back.back(), 0u);
      for (uint64_t i = 1; i <= kWords; ++i) ASSERT_EQ(back[i], 0xA5A5F00Du) << i;
    }
    EXPECT_EQ(b->fill32(static_cast<char*>(blk.ptr) + 2, 8, 0).status, Status::kInvalidArgument);
    ASSERT_TRUE(b->overflow_free(blk).is_ok());
  }
  CUDA_OK(cudaStreamDestroy(s));
}

// --- streams, context, capture -------------------------------------------------------------------

TEST(CudaBackendStreams, PerThreadStreamRefusedAtCreateAndSetStream) {
  REQUIRE_DEVICE();
  std::unique_ptr<Backend> b;
  Result r = zarena_core::make_cuda_backend(on_device(0, cudaStreamPerThread), &b);
  EXPECT_EQ(r.status, Status::kInvalidArgument);
  EXPECT_NE(r.message.find("cudaStreamPerThread"), std::string::npos) << r.message;
  EXPECT_FALSE(b);
  {
    zarena_test::LogCapture quiet;
    zarena_config c;
    zarena_config_init(&c);
    c.backend = ZARENA_BACKEND_CUDA;
    c.capacity_bytes = kMiB;
    c.stream = cudaStreamPerThread;
    zarena* a = nullptr;
    EXPECT_EQ(zarena_create(&c, &a), ZARENA_E_INVALID_ARGUMENT);
    EXPECT_NE(std::string(zarena_last_error()).find("cudaStreamPerThread"), std::string::npos)
        << zarena_last_error();
  }
  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  b = cuda_backend(on_device(0, s));
  ASSERT_TRUE(b);
  r = b->set_stream(cudaStreamPerThread);
  EXPECT_EQ(r.status, Status::kInvalidArgument) << r.message;
  EXPECT_EQ(b->stream(), s) << "a refused stream changes nothing";
  ASSERT_TRUE(b->set_stream(cudaStreamLegacy).is_ok()) << "the legacy stream is one per device";
  EXPECT_EQ(b->stream(), cudaStreamLegacy);
  ASSERT_TRUE(b->set_stream(nullptr).is_ok());
  ASSERT_TRUE(b->set_stream(s).is_ok());
  b.reset();
  CUDA_OK(cudaStreamDestroy(s));
}

TEST(CudaBackendStreams, StreamOfAnotherDeviceRefused) {
  REQUIRE_DEVICE();
  std::string why;
  if (device_count(&why) < 2) GTEST_SKIP() << "needs two devices";
  CUDA_OK(cudaSetDevice(1));
  cudaStream_t s1;
  CUDA_OK(cudaStreamCreate(&s1));
  CUDA_OK(cudaSetDevice(0));
  std::unique_ptr<Backend> b;
  Result r = zarena_core::make_cuda_backend(on_device(0, s1), &b);
  EXPECT_EQ(r.status, Status::kInvalidArgument);
  EXPECT_NE(r.message.find("device 1"), std::string::npos) << r.message;
  b = cuda_backend(on_device(0));
  ASSERT_TRUE(b);
  r = b->set_stream(s1);
  EXPECT_EQ(r.status, Status::kInvalidArgument) << r.message;
  EXPECT_EQ(b->stream(), nullptr);
  b.reset();
  CUDA_OK(cudaStreamDestroy(s1));
}

// Issue 17 #6: a thread that never touched CUDA must not be left with a context (the
// old guard "restored" device 0 and created its primary context), and a thread bound to
// another device gets exactly that context back.
TEST(CudaBackendContext, FreshThreadIsLeftWithoutAContext) {
  REQUIRE_DEVICE();
  std::string why;
  const int n = device_count(&why);
  const int arena_device = n - 1;
  auto b = cuda_backend(on_device(arena_device));
  ASSERT_TRUE(b);
  RegionInfo info;
  ASSERT_TRUE(b->reserve_region(request(64 * kMiB, 256, true), &info).is_ok());
  const zarena_core::DriverApi& d = driver();
  CUcontext before = reinterpret_cast<CUcontext>(1), after = reinterpret_cast<CUcontext>(1);
  std::vector<Result> results;
  std::thread t([&] {
    (void)d.cuCtxGetCurrent(&before);
    results.push_back(b->commit(0, info.commit_granularity));
    OverflowBlock blk;
    results.push_back(b->overflow_alloc(kMiB, 256, OverflowRoute::kSync, &blk));
    if (results.back().is_ok()) {
      results.push_back(b->fill32(blk.ptr, kMiB, 1));
      results.push_back(b->overflow_free(blk));
    }
    bool capturing = true;
    results.push_back(b->capture_status(&capturing));
    (void)b->memory_info();
    results.push_back(b->decommit(0, info.commit_granularity));
    (void)d.cuCtxGetCurrent(&after);
  });
  t.join();
  for (const Result& r : results) EXPECT_TRUE(r.is_ok()) << r.message;
  EXPECT_EQ(before, nullptr) << "a fresh thread starts without a context";
  EXPECT_EQ(after, nullptr) << "the backend must leave a fresh thread without a context";

  if (n >= 2) {
    // A thread bound to device 0 calls an arena on the last device: its context comes back.
    CUcontext mine = nullptr, back = nullptr;
    std::thread t2([&] {
      (void)cudaSetDevice(0);
      (void)cudaFree(nullptr);  // makes device 0's primary context current
      (void)d.cuCtxGetCurrent(&mine);
      bool capturing = true;
      (void)b->capture_status(&capturing);
      (void)d.cuCtxGetCurrent(&back);
    });
    t2.join();
    EXPECT_NE(mine, nullptr);
    EXPECT_EQ(back, mine);
  }
}

TEST(CudaBackendCapture, CaptureStatusFollowsTheArenasStream) {
  REQUIRE_DEVICE();
  cudaStream_t s, other;
  CUDA_OK(cudaStreamCreate(&s));
  CUDA_OK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  void* scratch = nullptr;
  CUDA_OK(cudaMalloc(&scratch, kMiB));
  {
    auto on_s = cuda_backend(on_device(0, s));
    auto on_legacy = cuda_backend(on_device(0, nullptr));
    ASSERT_TRUE(on_s && on_legacy);
    bool capturing = true;
    ASSERT_TRUE(on_s->capture_status(&capturing).is_ok());
    EXPECT_FALSE(capturing);

    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CUDA_OK(cudaMemsetAsync(scratch, 1, kMiB, s));
    capturing = false;
    ASSERT_TRUE(on_s->capture_status(&capturing).is_ok());
    EXPECT_TRUE(capturing) << "the arena's stream captures";
    capturing = false;
    ASSERT_TRUE(on_legacy->capture_status(&capturing).is_ok());
    EXPECT_TRUE(capturing) << "a blocking stream captures: the legacy stream would join it";
    cudaGraph_t graph = nullptr;
    CUDA_OK(cudaStreamEndCapture(s, &graph));
    CUDA_OK(cudaGraphDestroy(graph));

    // A non-blocking stream capturing in relaxed mode is none of the arena's business.
    CUDA_OK(cudaStreamBeginCapture(other, cudaStreamCaptureModeRelaxed));
    CUDA_OK(cudaMemsetAsync(scratch, 2, kMiB, other));
    capturing = true;
    ASSERT_TRUE(on_s->capture_status(&capturing).is_ok());
    EXPECT_FALSE(capturing);
    CUDA_OK(cudaStreamEndCapture(other, &graph));
    CUDA_OK(cudaGraphDestroy(graph));

    capturing = true;
    ASSERT_TRUE(on_s->capture_status(&capturing).is_ok());
    EXPECT_FALSE(capturing) << "after the capture ended";
  }
  CUDA_OK(cudaFree(scratch));
  CUDA_OK(cudaStreamDestroy(other));
  CUDA_OK(cudaStreamDestroy(s));
}

}  // namespace

#else  // built without the CUDA Toolkit

TEST(CudaBackendVmm, NotBuilt) { GTEST_SKIP() << "built without the CUDA Toolkit: no gpu tests"; }

#endif
