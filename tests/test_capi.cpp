// C API tests on the host backend: argument validation, status codes and messages,
// alignment, size 0, free classification without state change, stats exactness,
// reset/floor semantics through the ABI, and the 1 PiB request.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "support.h"
#include "zarena/zarena.h"

using zarena_test::ArenaHolder;
using zarena_test::stats_of;

namespace {

zarena_config host_config(uint64_t capacity, uint64_t alignment = 256) {
  zarena_config c;
  zarena_config_init(&c);
  c.backend = ZARENA_BACKEND_HOST;
  c.capacity_bytes = capacity;
  c.alignment = alignment;
  c.overflow_policy = ZARENA_OVERFLOW_REFUSE;
  c.name = "capi-test";
  return c;
}

bool same_stats(zarena_stats x, zarena_stats y) { return std::memcmp(&x, &y, sizeof x) == 0; }

// A refused free may move exactly one failure counter, by `by`; everything else is equal.
void expect_only_counter_moved(const zarena_stats& before, zarena_stats after,
                               uint64_t zarena_stats::*counter, uint64_t by) {
  EXPECT_EQ(after.*counter, before.*counter + by);
  after.*counter = before.*counter;
  EXPECT_TRUE(same_stats(before, after)) << "a refused free changed the arena";
}

class QuietLogs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_OFF); }
  static void TearDownTestSuite() { zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_INFO); }
};

using CApi = QuietLogs;

TEST_F(CApi, VersionAndStatusStrings) {
  EXPECT_EQ(zarena_version_number(), static_cast<uint32_t>(ZARENA_VERSION_NUMBER));
  EXPECT_STREQ(zarena_version_string(), "1.2.0");
  for (zarena_status s = 0; s <= ZARENA_E_CLOSED; ++s) {
    ASSERT_NE(zarena_status_string(s), nullptr);
    EXPECT_STRNE(zarena_status_string(s), "unknown status") << s;
  }
  EXPECT_STREQ(zarena_status_string(999), "unknown status");
  EXPECT_STREQ(zarena_status_string(-1), "unknown status");
  EXPECT_NE(zarena_last_error(), nullptr);
}

TEST_F(CApi, ConfigInitDefaults) {
  zarena_config c;
  std::memset(&c, 0xFF, sizeof c);
  zarena_config_init(&c);
  EXPECT_EQ(c.struct_size, sizeof(zarena_config));
  EXPECT_EQ(c.alignment, 256u);
  EXPECT_GT(c.capacity_bytes, 0u);
  EXPECT_EQ(c.stream, nullptr);
  (zarena_config_init)(nullptr);  // ignored, no crash
  zarena_config_init_sized(nullptr, sizeof c);
}

TEST_F(CApi, InvalidArgumentsAreRejectedWithMessages) {
  zarena* a = nullptr;
  EXPECT_EQ(zarena_create(nullptr, &a), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(zarena_last_error()).find("NULL"), std::string::npos);
  zarena_config c = host_config(1 << 20);
  EXPECT_EQ(zarena_create(&c, nullptr), ZARENA_E_INVALID_ARGUMENT);

  struct Case {
    const char* what;
    void (*mutate)(zarena_config*);
  } cases[] = {
      {"capacity 0", [](zarena_config* x) { x->capacity_bytes = 0; }},
      {"alignment 0", [](zarena_config* x) { x->alignment = 0; }},
      {"alignment 3000", [](zarena_config* x) { x->alignment = 3000; }},
      {"alignment 4", [](zarena_config* x) { x->alignment = 4; }},
      {"backend 7", [](zarena_config* x) { x->backend = 7; }},
      {"policy -1", [](zarena_config* x) { x->overflow_policy = -1; }},
      {"unknown flag", [](zarena_config* x) { x->flags = 0x80000000u; }},
      {"struct_size 4", [](zarena_config* x) { x->struct_size = 4; }},
      {"device -1", [](zarena_config* x) { x->device = -1; }},
  };
  for (const auto& k : cases) {
    zarena_config bad = host_config(1 << 20);
    k.mutate(&bad);
    a = reinterpret_cast<zarena*>(0x1);
    EXPECT_EQ(zarena_create(&bad, &a), ZARENA_E_INVALID_ARGUMENT) << k.what;
    EXPECT_EQ(a, reinterpret_cast<zarena*>(0x1)) << "out written on failure: " << k.what;
    EXPECT_GT(std::strlen(zarena_last_error()), 10u) << k.what;
  }

  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(zarena_alloc(nullptr, 16, &p), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(zarena_free(nullptr, p), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(zarena_reset(nullptr), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(zarena_mark_step_boundary(nullptr), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(zarena_epoch(nullptr), 0u);
  EXPECT_EQ(zarena_destroy(nullptr), ZARENA_OK);
  zarena_stats s;
  s.struct_size = sizeof s;
  EXPECT_EQ(zarena_get_stats(nullptr, &s), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(zarena_set_log_callback(nullptr, nullptr, 17), ZARENA_E_INVALID_ARGUMENT);

  ArenaHolder g(host_config(1 << 20));
  EXPECT_EQ(zarena_alloc(g.a, 16, nullptr), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(zarena_get_stats(g.a, nullptr), ZARENA_E_INVALID_ARGUMENT);
  s.struct_size = 8;
  EXPECT_EQ(zarena_get_stats(g.a, &s), ZARENA_E_INVALID_ARGUMENT);
}

TEST_F(CApi, AutoBackendWithoutDeviceFallsBackToHost) {
  zarena_config c = host_config(1 << 20);
  c.backend = ZARENA_BACKEND_AUTO;
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  const int32_t kind = zarena_backend(a);
  EXPECT_TRUE(kind == ZARENA_BACKEND_HOST || kind == ZARENA_BACKEND_CUDA);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

TEST_F(CApi, EveryPointerIsAligned) {
  for (uint64_t align : {8ull, 64ull, 256ull, 4096ull, 1ull << 16}) {
    ArenaHolder g(host_config(16 << 20, align));
    std::vector<void*> ptrs;
    for (uint64_t i = 1; i < 300; ++i) {
      void* p = nullptr;
      ASSERT_EQ(zarena_alloc(g.a, i * 37 % 5000 + 1, &p), ZARENA_OK) << zarena_last_error();
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << "align " << align;
      ptrs.push_back(p);
      if (i % 3 == 0) {
        ASSERT_EQ(zarena_free(g.a, ptrs[i / 2]), ZARENA_OK);
        ptrs[i / 2] = nullptr;
      }
    }
  }
}

TEST_F(CApi, SizeZeroAllocatesNothingAndFreeNullIsNoOp) {
  ArenaHolder g(host_config(1 << 20));
  const zarena_stats before = stats_of(g.a);
  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(zarena_alloc(g.a, 0, &p), ZARENA_OK);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(zarena_free(g.a, nullptr), ZARENA_OK);
  EXPECT_TRUE(same_stats(before, stats_of(g.a)));
}

TEST_F(CApi, FreeErrorsReturnTheirStatusAndChangeNoState) {
  ArenaHolder g(host_config(1 << 20));
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(zarena_alloc(g.a, 1000, &a), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(g.a, 1000, &b), ZARENA_OK);

  zarena_stats before = stats_of(g.a);
  EXPECT_EQ(zarena_free(g.a, static_cast<char*>(a) + 256), ZARENA_E_NOT_OWNED);
  EXPECT_NE(std::string(zarena_last_error()).find("not the start of a block"), std::string::npos);
  int local = 0;
  EXPECT_EQ(zarena_free(g.a, &local), ZARENA_E_NOT_OWNED);
  expect_only_counter_moved(before, stats_of(g.a), &zarena_stats::invalid_frees, 2);

  ASSERT_EQ(zarena_free(g.a, a), ZARENA_OK);
  before = stats_of(g.a);
  EXPECT_EQ(zarena_free(g.a, a), ZARENA_E_DOUBLE_FREE);
  EXPECT_NE(std::string(zarena_last_error()).find("already freed"), std::string::npos);
  expect_only_counter_moved(before, stats_of(g.a), &zarena_stats::invalid_frees, 1);

  ASSERT_EQ(zarena_reset(g.a), ZARENA_OK);
  before = stats_of(g.a);
  EXPECT_EQ(zarena_free(g.a, b), ZARENA_E_STALE);
  EXPECT_NE(std::string(zarena_last_error()).find("reclaimed by a reset"), std::string::npos);
  expect_only_counter_moved(before, stats_of(g.a), &zarena_stats::stale_frees, 1);
}

TEST_F(CApi, NothingIsHandedOutTwice) {
  ArenaHolder g(host_config(1 << 20));
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(zarena_alloc(g.a, 512, &a), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(g.a, 512, &b), ZARENA_OK);
  // A rejected double free must not put the block back a second time.
  ASSERT_EQ(zarena_free(g.a, a), ZARENA_OK);
  ASSERT_EQ(zarena_free(g.a, a), ZARENA_E_DOUBLE_FREE);
  void *x = nullptr, *y = nullptr;
  ASSERT_EQ(zarena_alloc(g.a, 512, &x), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(g.a, 512, &y), ZARENA_OK);
  EXPECT_NE(x, y);
  EXPECT_NE(y, b);
  EXPECT_NE(x, b);
}

TEST_F(CApi, OnePebibyteRequestIsOutOfMemory) {
  ArenaHolder g(host_config(1 << 20));
  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(zarena_alloc(g.a, 1ull << 50, &p), ZARENA_E_OUT_OF_MEMORY);
  EXPECT_EQ(p, nullptr);
  const std::string msg = zarena_last_error();
  EXPECT_NE(msg.find("1125899906842624"), std::string::npos) << msg;  // requested size
  EXPECT_NE(msg.find("1048576"), std::string::npos) << msg;           // capacity
  EXPECT_EQ(zarena_alloc(g.a, ~0ull, &p), ZARENA_E_OUT_OF_MEMORY);
  // The arena still works afterwards.
  EXPECT_EQ(zarena_alloc(g.a, 1024, &p), ZARENA_OK);
}

TEST_F(CApi, FullArenaReportsSizesAndRecovers) {
  ArenaHolder g(host_config(64 << 10));
  std::vector<void*> ptrs;
  void* p = nullptr;
  zarena_status st;
  while ((st = zarena_alloc(g.a, 4096, &p)) == ZARENA_OK) ptrs.push_back(p);
  EXPECT_EQ(st, ZARENA_E_OUT_OF_MEMORY);
  EXPECT_EQ(ptrs.size(), 16u);
  const std::string msg = zarena_last_error();
  EXPECT_NE(msg.find("requested 4096"), std::string::npos) << msg;
  EXPECT_NE(msg.find("65536"), std::string::npos) << msg;
  EXPECT_NE(msg.find("refused"), std::string::npos) << msg;
  ASSERT_EQ(zarena_reset(g.a), ZARENA_OK);
  EXPECT_EQ(zarena_alloc(g.a, 4096, &p), ZARENA_OK);
  EXPECT_EQ(p, ptrs[0]);
}

TEST_F(CApi, ResetAndFloorSemantics) {
  // The dynamic engine's layout (where a reset rewinds the top to): plans off, since a plan
  // serves the repeated steps from a zone of its own.
  zarena_config c = host_config(1 << 20);
  c.flags |= ZARENA_FLAG_NO_PLAN;
  ArenaHolder g(c);
  void* w = nullptr;
  ASSERT_EQ(zarena_alloc(g.a, 4096, &w), ZARENA_OK);
  ASSERT_EQ(zarena_mark_step_boundary(g.a), ZARENA_OK);
  EXPECT_EQ(zarena_epoch(g.a), 0u);
  for (int step = 0; step < 5; ++step) {
    void* first = nullptr;
    ASSERT_EQ(zarena_alloc(g.a, 1000, &first), ZARENA_OK);
    EXPECT_EQ(static_cast<char*>(first), static_cast<char*>(w) + 4096) << "step " << step;
    for (int i = 0; i < 50; ++i) {
      void* p = nullptr;
      ASSERT_EQ(zarena_alloc(g.a, 2048, &p), ZARENA_OK);
    }
    ASSERT_EQ(zarena_reset(g.a), ZARENA_OK);
    EXPECT_EQ(zarena_epoch(g.a), static_cast<uint64_t>(step + 1));
    const zarena_stats s = stats_of(g.a);
    EXPECT_EQ(s.used_bytes, 4096u);
    EXPECT_EQ(s.floor_bytes, 4096u);
    EXPECT_EQ(s.live_allocs, 1u);
    EXPECT_EQ(s.epoch_allocs, 0u);
  }
  EXPECT_EQ(zarena_free(g.a, w), ZARENA_OK);  // weights are freed individually
}

TEST_F(CApi, StatsAreExact) {
  ArenaHolder g(host_config(1 << 20));
  zarena_stats s = stats_of(g.a);
  EXPECT_EQ(s.struct_size, sizeof(zarena_stats));
  EXPECT_EQ(s.capacity_bytes, 1u << 20);
  EXPECT_EQ(s.used_bytes, 0u);
  EXPECT_EQ(s.epoch, 0u);

  void *w = nullptr, *a = nullptr, *b = nullptr, *c = nullptr, *d = nullptr;
  ASSERT_EQ(zarena_alloc(g.a, 3000, &w), ZARENA_OK);  // 3072 aligned
  ASSERT_EQ(zarena_mark_step_boundary(g.a), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(g.a, 1000, &a), ZARENA_OK);  // 1024
  ASSERT_EQ(zarena_alloc(g.a, 5000, &b), ZARENA_OK);  // 5120
  ASSERT_EQ(zarena_alloc(g.a, 100, &c), ZARENA_OK);   // 256
  ASSERT_EQ(zarena_free(g.a, a), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(g.a, 512, &d), ZARENA_OK);  // reuses a's block
  EXPECT_EQ(d, a);
  s = stats_of(g.a);
  EXPECT_EQ(s.used_bytes, 3072u + 5120 + 256 + 512);
  EXPECT_EQ(s.floor_bytes, 3072u);
  EXPECT_EQ(s.high_water_bytes, 3072u + 1024 + 5120 + 256);
  EXPECT_EQ(s.epoch, 0u);
  EXPECT_EQ(s.epoch_allocs, 5u);
  EXPECT_EQ(s.epoch_max_alloc_bytes, 5000u);
  EXPECT_EQ(s.epoch_high_water_bytes, 3072u + 1024 + 5120 + 256);
  EXPECT_EQ(s.hits, 5u);
  EXPECT_EQ(s.misses, 0u);
  EXPECT_EQ(s.reuses, 1u);
  EXPECT_EQ(s.resets, 0u);
  EXPECT_EQ(s.free_list_len, 1u);
  EXPECT_EQ(s.free_list_bytes, 512u);
  EXPECT_EQ(s.largest_free_block_bytes, 512u);
  EXPECT_EQ(s.live_allocs, 4u);
  EXPECT_EQ(s.stale_frees, 0u);
  EXPECT_EQ(s.invalid_frees, 0u);
  EXPECT_EQ(s.overflow_allocs, 0u);
  EXPECT_EQ(s.overflow_live_bytes, 0u);

  void* big = nullptr;
  EXPECT_EQ(zarena_alloc(g.a, 2 << 20, &big), ZARENA_E_OUT_OF_MEMORY);
  s = stats_of(g.a);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.epoch_allocs, 6u);
  // A failed request moves only the failure counters (issue 13, defect 4: it used to
  // raise epoch_max_alloc_bytes to the refused size).
  EXPECT_EQ(s.epoch_max_alloc_bytes, 5000u);
  EXPECT_EQ(s.overflow_failures, 1u);

  ASSERT_EQ(zarena_reset(g.a), ZARENA_OK);
  s = stats_of(g.a);
  EXPECT_EQ(s.used_bytes, 3072u);
  EXPECT_EQ(s.epoch, 1u);
  EXPECT_EQ(s.resets, 1u);
  EXPECT_EQ(s.epoch_allocs, 0u);
  EXPECT_EQ(s.epoch_max_alloc_bytes, 0u);
  EXPECT_EQ(s.epoch_high_water_bytes, 3072u);
  EXPECT_EQ(s.high_water_bytes, 3072u + 1024 + 5120 + 256);
  EXPECT_EQ(s.free_list_len, 0u);
  EXPECT_EQ(s.live_allocs, 1u);
  EXPECT_EQ(s.hits, 5u);
}

TEST_F(CApi, PoisonFillsFreedAndReclaimedBlocks) {
  zarena_config c = host_config(1 << 20);
  c.flags |= ZARENA_FLAG_POISON;
  ArenaHolder g(c);
  unsigned char *a = nullptr, *b = nullptr;
  ASSERT_EQ(zarena_alloc(g.a, 256, reinterpret_cast<void**>(&a)), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(g.a, 256, reinterpret_cast<void**>(&b)), ZARENA_OK);
  std::memset(a, 0, 256);
  std::memset(b, 0, 256);
  ASSERT_EQ(zarena_free(g.a, a), ZARENA_OK);
  // The default word is a quiet NaN both as float32 and as float64.
  uint32_t w0, w63;
  std::memcpy(&w0, a, 4);
  std::memcpy(&w63, a + 252, 4);
  EXPECT_EQ(w0, 0x7FF80000u);
  EXPECT_EQ(w63, 0x7FF80000u);
  float f;
  double d;
  std::memcpy(&f, a, sizeof f);
  std::memcpy(&d, a, sizeof d);
  EXPECT_TRUE(std::isnan(f));
  EXPECT_TRUE(std::isnan(d));
  EXPECT_EQ(b[0], 0);
  ASSERT_EQ(zarena_reset(g.a), ZARENA_OK);
  uint32_t wb;
  std::memcpy(&wb, b, 4);
  EXPECT_EQ(wb, 0x7FF80000u);
}

TEST_F(CApi, ManyFreeBlocksKeepAllocationCheap) {
  // 10k free blocks of varied size: alloc/free must not scan them (checked by stats
  // staying coherent here; the cost is measured in bench/bench_arena).
  ArenaHolder g(host_config(256 << 20));
  std::vector<void*> ptrs;
  for (int i = 0; i < 20000; ++i) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(g.a, 256 * (1 + i % 13), &p), ZARENA_OK);
    ptrs.push_back(p);
  }
  for (size_t i = 0; i < ptrs.size(); i += 2) ASSERT_EQ(zarena_free(g.a, ptrs[i]), ZARENA_OK);
  zarena_stats s = stats_of(g.a);
  EXPECT_EQ(s.free_list_len, 10000u);
  for (int i = 0; i < 10000; ++i) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(g.a, 256 * (1 + i % 13), &p), ZARENA_OK);
    ASSERT_EQ(zarena_free(g.a, p), ZARENA_OK);
  }
  s = stats_of(g.a);
  EXPECT_EQ(s.live_allocs, 10000u);
}

}  // namespace
