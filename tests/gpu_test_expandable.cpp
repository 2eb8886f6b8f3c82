// The expandable arena (issue 15) on a real device, through the C API: it grows from one
// chunk to several GiB with the data written before each growth intact after it and the
// base never moving, device memory drops only by what was committed, a trim at reset gives
// memory back while keeping pinned blocks and the floor committed, and a commit beyond the
// device's memory fails cleanly with the verdict commit_failed. The backend's own VMM
// tests are in gpu_test_backend.cpp. Skips with a clear line without a device.
#include <gtest/gtest.h>

#if __has_include(<cuda_runtime_api.h>) && __has_include(<cuda.h>)
#include <cstdio>
#include <vector>

#include "gpu_util.h"
#include "support.h"

namespace {

using namespace zarena_gpu;
using zarena_core::cuda_call_counters;
using zarena_core::CudaCallCounters;

constexpr uint64_t kChunk = 64 * kMiB;  // the default commit chunk

zarena_config expandable(uint64_t max, uint64_t trim_keep = 0,
                         int32_t policy = ZARENA_OVERFLOW_REFUSE) {
  zarena_config c = cuda_config(max, policy, nullptr);
  c.flags |= ZARENA_FLAG_EXPANDABLE;
  c.commit_chunk_bytes = 0;  // the default, 64 MiB
  c.trim_keep_bytes = trim_keep;
  c.name = "gpu-expandable";
  return c;
}

using zarena_test::region_of;

// The first and last 4 KiB of a block hold its byte.
::testing::AssertionResult block_holds(const void* p, uint64_t bytes, unsigned char v) {
  std::vector<unsigned char> back(4096);
  for (const char* at : {static_cast<const char*>(p), static_cast<const char*>(p) + bytes - 4096}) {
    if (cudaMemcpy(back.data(), at, back.size(), cudaMemcpyDeviceToHost) != cudaSuccess) {
      return ::testing::AssertionFailure() << "cudaMemcpy from " << static_cast<const void*>(at);
    }
    for (size_t i = 0; i < back.size(); ++i) {
      if (back[i] != v) {
        return ::testing::AssertionFailure()
               << "byte " << i << " at " << static_cast<const void*>(at) << " is " << int(back[i])
               << ", not " << int(v);
      }
    }
  }
  return ::testing::AssertionSuccess();
}

struct Block {
  void* p;
  uint64_t bytes;
  unsigned char v;
};

TEST(GpuExpandable, GrowsFromOneChunkToSeveralGiBWithDataIntactAndMemoryAccounted) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture quiet;
  const CudaCallCounters c0 = cuda_call_counters();
  const int64_t free0 = free_bytes();
  zarena* a = nullptr;
  const zarena_config c = expandable(8 * kGiB);
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  zarena_region r = region_of(a);
  void* const base = r.base;
  EXPECT_EQ(r.expandable, 1u);
  EXPECT_EQ(r.committed_bytes, 0u);
  EXPECT_NEAR(static_cast<double>(free_bytes()), static_cast<double>(free0),
              static_cast<double>(kTolerance))
      << "reserving address space takes no memory";

  std::vector<Block> blocks;
  // One chunk's worth first, then 256 MiB blocks up to 4 GiB.
  std::vector<uint64_t> sizes = {32 * kMiB};
  for (int i = 0; i < 15; ++i) sizes.push_back(256 * kMiB);
  uint64_t committed = 0, growths = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(a, sizes[i], &p), ZARENA_OK) << i << ": " << zarena_last_error();
    ASSERT_TRUE(zarena_contains(a, p));
    const auto v = static_cast<unsigned char>(i + 1);
    CUDA_OK(cudaMemset(p, v, sizes[i]));
    blocks.push_back({p, sizes[i], v});
    const zarena_stats s = stats_of(a);
    ASSERT_GE(s.committed_bytes, s.top_bytes);
    if (s.committed_bytes != committed) {
      ++growths;
      committed = s.committed_bytes;
      for (const Block& b : blocks) ASSERT_TRUE(block_holds(b.p, b.bytes, b.v)) << "growth " << i;
    }
  }
  r = region_of(a);
  EXPECT_EQ(r.base, base) << "the base never moves";
  const zarena_stats s = stats_of(a);
  std::printf("[ info ] committed %.2f GiB in %llu commits\n",
              static_cast<double>(s.committed_bytes) / kGiB,
              static_cast<unsigned long long>(s.commit_events));
  EXPECT_GE(s.committed_bytes, 32 * kMiB + 15 * 256 * kMiB);
  EXPECT_LE(s.committed_bytes, 32 * kMiB + 15 * 256 * kMiB + kChunk);
  EXPECT_EQ(s.commit_events, growths);
  EXPECT_GE(growths, 15u);
  EXPECT_EQ(s.commit_failures, 0u);
  EXPECT_EQ(s.overflow_allocs, 0u);
  const CudaCallCounters c1 = cuda_call_counters();
  // A growth commits one backend range per chunk, so that a trim can give any of them back.
  EXPECT_EQ(s.committed_bytes % kChunk, 0u);
  EXPECT_EQ(c1.vmm_creates - c0.vmm_creates, s.committed_bytes / kChunk)
      << "one cuMemCreate per chunk committed";
  EXPECT_NEAR(static_cast<double>(free0 - free_bytes()), static_cast<double>(s.committed_bytes),
              static_cast<double>(kTolerance))
      << "device memory dropped by what was committed, no more";
  for (const Block& b : blocks) ASSERT_TRUE(block_holds(b.p, b.bytes, b.v));
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
  expect_balanced(c0, cuda_call_counters());
  EXPECT_NEAR(static_cast<double>(free_bytes()), static_cast<double>(free0),
              static_cast<double>(kTolerance))
      << "destroy gives everything back";
}

TEST(GpuExpandable, TrimGivesMemoryBackAndKeepsPinsAndTheFloor) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture quiet;
  const CudaCallCounters c0 = cuda_call_counters();
  const int64_t free0 = free_bytes();
  zarena* a = nullptr;
  const zarena_config c = expandable(8 * kGiB, 256 * kMiB);
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  char* base = static_cast<char*>(region_of(a).base);

  void* weights = nullptr;
  ASSERT_EQ(zarena_alloc(a, 128 * kMiB, &weights), ZARENA_OK);
  CUDA_OK(cudaMemset(weights, 0x11, 128 * kMiB));
  ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
  std::vector<void*> step;
  for (int i = 0; i < 30; ++i) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(a, 64 * kMiB, &p), ZARENA_OK) << zarena_last_error();
    CUDA_OK(cudaMemset(p, 0x22, 64 * kMiB));
    step.push_back(p);
  }
  void* pinned = step[20];
  CUDA_OK(cudaMemset(pinned, 0x33, 64 * kMiB));
  ASSERT_EQ(zarena_pin(a, pinned), ZARENA_OK);
  const uint64_t pinned_end = static_cast<uint64_t>(static_cast<char*>(pinned) - base) + 64 * kMiB;
  const uint64_t grown = stats_of(a).committed_bytes;
  ASSERT_GE(grown, 128 * kMiB + 30 * 64 * kMiB);
  const int64_t free_grown = free_bytes();

  ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  zarena_stats s = stats_of(a);
  EXPECT_EQ(s.trim_events, 1u);
  EXPECT_GE(s.committed_bytes, pinned_end) << "the pinned block stays committed";
  EXPECT_LE(s.committed_bytes, pinned_end + kChunk);
  EXPECT_NEAR(static_cast<double>(free_bytes() - free_grown),
              static_cast<double>(grown - s.committed_bytes), static_cast<double>(kTolerance))
      << "the trim gave the memory back";
  EXPECT_TRUE(block_holds(pinned, 64 * kMiB, 0x33));
  EXPECT_TRUE(block_holds(weights, 128 * kMiB, 0x11));

  ASSERT_EQ(zarena_unpin(a, pinned), ZARENA_OK);
  ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  s = stats_of(a);
  EXPECT_EQ(s.trim_events, 2u);
  EXPECT_GE(s.committed_bytes, 256 * kMiB) << "trim_keep_bytes stays committed";
  EXPECT_LE(s.committed_bytes, 256 * kMiB + kChunk);
  EXPECT_NEAR(static_cast<double>(free0 - free_bytes()), static_cast<double>(s.committed_bytes),
              static_cast<double>(kTolerance));
  EXPECT_TRUE(block_holds(weights, 128 * kMiB, 0x11));

  // Raise the floor to ~1.1 GiB: nothing under it is decommitted.
  std::vector<void*> kept;
  for (int i = 0; i < 16; ++i) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(a, 64 * kMiB, &p), ZARENA_OK) << zarena_last_error();
    CUDA_OK(cudaMemset(p, 0x40 + i, 64 * kMiB));
    kept.push_back(p);
  }
  ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
  const uint64_t floor = stats_of(a).floor_bytes;
  EXPECT_EQ(floor, 128 * kMiB + 16 * 64 * kMiB);
  for (int i = 0; i < 16; ++i) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(a, 64 * kMiB, &p), ZARENA_OK) << zarena_last_error();
  }
  ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  s = stats_of(a);
  EXPECT_GE(s.committed_bytes, floor);
  EXPECT_LE(s.committed_bytes, floor + kChunk);
  for (int i = 0; i < 16; ++i) {
    EXPECT_TRUE(block_holds(kept[i], 64 * kMiB, static_cast<unsigned char>(0x40 + i)));
  }
  EXPECT_TRUE(block_holds(weights, 128 * kMiB, 0x11));
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
  expect_balanced(c0, cuda_call_counters());
  EXPECT_NEAR(static_cast<double>(free_bytes()), static_cast<double>(free0),
              static_cast<double>(kTolerance));
}

TEST(GpuExpandable, CommitBeyondTheDeviceFailsWithVerdictCommitFailed) {
  REQUIRE_DEVICE();
  zarena_test::LogCapture log;
  size_t free_b = 0, total_b = 0;
  CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
  const uint64_t max = (static_cast<uint64_t>(total_b) + 8 * kGiB) & ~(kGiB - 1);
  const CudaCallCounters c0 = cuda_call_counters();
  const int64_t free0 = free_bytes();
  zarena_config c = expandable(max);
  c.commit_chunk_bytes = 4 * kGiB;
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  zarena_status st = ZARENA_OK;
  int served = 0;
  while (served < 1000) {
    void* p = nullptr;
    st = zarena_alloc(a, 4 * kGiB, &p);
    if (st != ZARENA_OK) break;
    ++served;
  }
  const zarena_stats s = stats_of(a);
  std::printf("[ info ] %d blocks of 4 GiB served, %.1f GiB committed of a %.1f GiB device\n",
              served, static_cast<double>(s.committed_bytes) / kGiB,
              static_cast<double>(total_b) / kGiB);
  EXPECT_EQ(st, ZARENA_E_OUT_OF_MEMORY) << zarena_last_error();
  EXPECT_LT(s.committed_bytes, max) << "the arena was not full";
  EXPECT_GE(s.commit_failures, 1u);
  const auto failed = log.of("arena.commit_failed");
  ASSERT_GE(failed.size(), 1u);
  EXPECT_NE(failed[0].str("reason").find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos)
      << failed[0].str("reason");
  const auto over = log.of("arena.first_overflow");
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].str("verdict"), "commit_failed") << over[0].message;
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
  expect_balanced(c0, cuda_call_counters());
  EXPECT_NEAR(static_cast<double>(free_bytes()), static_cast<double>(free0),
              static_cast<double>(kTolerance));
}

}  // namespace

#else  // built without the CUDA Toolkit

TEST(GpuExpandable, NotBuilt) { GTEST_SKIP() << "built without the CUDA Toolkit: no gpu tests"; }

#endif
