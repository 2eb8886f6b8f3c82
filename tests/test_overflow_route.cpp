// The overflow route at run time over the host backend: the policy changed while blocks
// live (each goes back by the route that made it), the program's own overflow allocator
// (every block from it goes back to it, at free, reset and destroy), what is refused
// (changing nothing), changes racing allocations, and ZARENA_FLAG_DIAGNOSE_SYNC.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend_faults_testing.h"
#include "log/reporter.h"
#include "support.h"
#include "zarena/zarena.h"

using zarena_core::FaultPlan;
using zarena_core::FaultSite;
using zarena_core::FaultTally;
using zarena_test::ArenaHolder;
using zarena_test::LogCapture;
using zarena_test::stats_of;

namespace {

constexpr uint64_t kCapacity = 64 * 1024;
constexpr uint64_t kBlock = 16 * 1024;  // four fill the region
constexpr uint64_t kAlign = 256;        // host_overflow_config's

zarena_config host_config(int32_t policy, uint32_t flags = 0) {
  return zarena_test::host_overflow_config(kCapacity, "route-test", policy, flags);
}

void fill_region(zarena* a) {
  for (uint64_t i = 0; i < kCapacity / kBlock; ++i) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(a, kBlock, &p), ZARENA_OK) << zarena_last_error();
  }
}

// Watches the backend's overflow frees (the pointers given back to it).
struct BackendFrees {
  std::mutex mu;
  std::multiset<const void*> freed;
  std::shared_ptr<FaultTally> tally = std::make_shared<FaultTally>();
  static void observe(void* ctx, FaultSite site, const void* ptr, void*) {
    if (site != FaultSite::kOverflowFree) return;
    auto* self = static_cast<BackendFrees*>(ctx);
    std::lock_guard<std::mutex> lock(self->mu);
    self->freed.insert(ptr);
  }
  // Arms the watch for the next zarena_create.
  void arm() {
    FaultPlan plan;
    plan.observe = &BackendFrees::observe;
    plan.observe_ctx = this;
    plan.tally = tally;
    zarena_core::arm_faults_for_next_create(plan);
  }
  size_t count(const void* p) {
    std::lock_guard<std::mutex> lock(mu);
    return freed.count(p);
  }
  uint64_t allocs() const { return tally->ok_at(FaultSite::kOverflowAlloc); }
  uint64_t frees() const { return tally->ok_at(FaultSite::kOverflowFree); }
};

// A program's overflow allocator over malloc: counts every call, checks what it is given
// back, and can be told to fail or to hand out a misaligned pointer.
struct CountingAllocator {
  std::mutex mu;
  std::map<void*, uint64_t> live;  // what it handed out and did not get back: size
  std::atomic<uint64_t> allocs{0}, frees{0}, wrong_frees{0};
  std::atomic<int32_t> fail_with{ZARENA_OK};
  std::atomic<bool> misalign{false};
  std::atomic<uint64_t> last_alignment{0};
  std::atomic<void*> last_stream{nullptr};
  std::set<void*> misaligned_back;  // misaligned blocks given back (under mu)

  static zarena_status alloc(void* ctx, uint64_t bytes, uint64_t alignment, void* stream,
                             void** out) {
    auto* self = static_cast<CountingAllocator*>(ctx);
    self->last_alignment = alignment;
    self->last_stream = stream;
    const int32_t f = self->fail_with.load();
    if (f != ZARENA_OK) return f;
    void* p = std::aligned_alloc(alignment, (bytes + alignment) & ~(alignment - 1));
    if (p == nullptr) return ZARENA_E_OUT_OF_MEMORY;
    std::lock_guard<std::mutex> lock(self->mu);
    if (self->misalign) {
      p = static_cast<char*>(p) + 8;
    }
    self->live[p] = bytes;
    ++self->allocs;
    *out = p;
    return ZARENA_OK;
  }
  static void free(void* ctx, void* ptr, uint64_t bytes, void*) {
    auto* self = static_cast<CountingAllocator*>(ctx);
    std::lock_guard<std::mutex> lock(self->mu);
    auto it = self->live.find(ptr);
    if (it == self->live.end() || it->second != bytes) {
      ++self->wrong_frees;
      return;
    }
    self->live.erase(it);
    ++self->frees;
    const bool shifted = (reinterpret_cast<uintptr_t>(ptr) & 255) == 8;
    if (shifted) self->misaligned_back.insert(ptr);
    std::free(shifted ? static_cast<char*>(ptr) - 8 : ptr);
  }
  zarena_overflow_allocator c_api(const char* name = "counting") {
    zarena_overflow_allocator a{};
    a.struct_size = sizeof a;
    a.ctx = this;
    a.allocate = &CountingAllocator::alloc;
    a.deallocate = &CountingAllocator::free;
    a.name = name;
    return a;
  }
  size_t live_count() {
    std::lock_guard<std::mutex> lock(mu);
    return live.size();
  }
  bool owns(void* p) {
    std::lock_guard<std::mutex> lock(mu);
    return live.count(p) != 0;
  }
};

TEST(OverflowRoute, BlocksKeepTheirRouteAcrossPolicyChanges) {
  LogCapture log;
  BackendFrees backend;
  CountingAllocator custom;
  backend.arm();
  ArenaHolder h(host_config(ZARENA_OVERFLOW_SYNC));
  ASSERT_EQ(zarena_overflow_policy(h.a), ZARENA_OVERFLOW_SYNC);
  fill_region(h.a);

  zarena_block sync_block, async_block, custom_block;
  ASSERT_EQ(zarena_alloc_ex(h.a, kBlock, 0, &sync_block), ZARENA_OK) << zarena_last_error();
  ASSERT_EQ(zarena_set_overflow_policy(h.a, ZARENA_OVERFLOW_ASYNC), ZARENA_OK)
      << zarena_last_error();
  EXPECT_EQ(zarena_overflow_policy(h.a), ZARENA_OVERFLOW_ASYNC);
  ASSERT_EQ(zarena_alloc_ex(h.a, kBlock, 0, &async_block), ZARENA_OK) << zarena_last_error();
  const zarena_overflow_allocator ca = custom.c_api();
  ASSERT_EQ(zarena_set_overflow_allocator(h.a, &ca), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(zarena_overflow_policy(h.a), ZARENA_OVERFLOW_CUSTOM);
  ASSERT_EQ(zarena_alloc_ex(h.a, kBlock, 0, &custom_block), ZARENA_OK) << zarena_last_error();
  ASSERT_EQ(zarena_set_overflow_policy(h.a, ZARENA_OVERFLOW_REFUSE), ZARENA_OK);
  void* refused = nullptr;
  EXPECT_EQ(zarena_alloc(h.a, kBlock, &refused), ZARENA_E_OUT_OF_MEMORY);
  EXPECT_NE(std::string(zarena_last_error()).find("REFUSE"), std::string::npos)
      << zarena_last_error();

  for (const zarena_block* b : {&sync_block, &async_block, &custom_block}) {
    EXPECT_EQ(b->flags & ZARENA_BLOCK_OVERFLOW, ZARENA_BLOCK_OVERFLOW);
  }
  EXPECT_EQ(backend.allocs(), 2u);  // sync and async: the backend's
  EXPECT_EQ(custom.allocs.load(), 1u);
  EXPECT_TRUE(custom.owns(custom_block.ptr));
  EXPECT_EQ(custom.last_alignment.load(), kAlign);
  EXPECT_EQ(stats_of(h.a).overflow_live_blocks, 3u);

  // Freed under REFUSE, each goes back by its own route.
  ASSERT_EQ(zarena_free(h.a, sync_block.ptr), ZARENA_OK) << zarena_last_error();
  ASSERT_EQ(zarena_free(h.a, async_block.ptr), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(backend.count(sync_block.ptr), 1u);
  EXPECT_EQ(backend.count(async_block.ptr), 1u);
  EXPECT_EQ(custom.frees.load(), 0u);
  ASSERT_EQ(zarena_free(h.a, custom_block.ptr), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(custom.frees.load(), 1u);
  EXPECT_EQ(custom.wrong_frees.load(), 0u);
  EXPECT_EQ(backend.count(custom_block.ptr), 0u);
  EXPECT_EQ(backend.frees(), 2u);
  EXPECT_EQ(stats_of(h.a).overflow_live_blocks, 0u);

  // One record per change, naming both ends.
  const auto changes = log.of("arena.overflow_policy");
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0].str("previous"), "sync");
  EXPECT_EQ(changes[0].str("policy"), "async");
  EXPECT_EQ(changes[1].str("policy"), "custom");
  EXPECT_EQ(changes[1].str("allocator"), "counting");
  EXPECT_EQ(changes[1].u("overflow_live_blocks"), 2u);
  EXPECT_EQ(changes[2].str("policy"), "refuse");
}

TEST(OverflowRoute, RefusedChangesChangeNothing) {
  LogCapture log;
  CountingAllocator custom;
  ArenaHolder h(host_config(ZARENA_OVERFLOW_SYNC));
  EXPECT_EQ(zarena_set_overflow_policy(nullptr, ZARENA_OVERFLOW_SYNC), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(zarena_overflow_policy(nullptr), -1);
  for (int32_t bad : {-1, 5, 1000}) {
    EXPECT_EQ(zarena_set_overflow_policy(h.a, bad), ZARENA_E_INVALID_ARGUMENT);
    EXPECT_NE(std::string(zarena_last_error()).find("is no overflow policy"), std::string::npos)
        << zarena_last_error();
    EXPECT_EQ(zarena_overflow_policy(h.a), ZARENA_OVERFLOW_SYNC);
  }
  EXPECT_EQ(zarena_set_overflow_policy(h.a, ZARENA_OVERFLOW_CUSTOM), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(zarena_last_error()).find("none is installed"), std::string::npos)
      << zarena_last_error();
  EXPECT_EQ(zarena_overflow_policy(h.a), ZARENA_OVERFLOW_SYNC);

  zarena_overflow_allocator ca = custom.c_api();
  EXPECT_EQ(zarena_set_overflow_allocator(nullptr, &ca), ZARENA_E_INVALID_ARGUMENT);
  zarena_overflow_allocator bad = ca;
  bad.deallocate = nullptr;
  EXPECT_EQ(zarena_set_overflow_allocator(h.a, &bad), ZARENA_E_INVALID_ARGUMENT);
  bad = ca;
  bad.struct_size = 8;
  EXPECT_EQ(zarena_set_overflow_allocator(h.a, &bad), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(zarena_last_error()).find("struct_size"), std::string::npos);
  bad = ca;
  bad.reserved = 1;
  EXPECT_EQ(zarena_set_overflow_allocator(h.a, &bad), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(zarena_overflow_policy(h.a), ZARENA_OVERFLOW_SYNC);
  EXPECT_EQ(log.count("arena.overflow_policy"), 0u);

  // With a block of the allocator live, it can be neither replaced nor removed.
  ASSERT_EQ(zarena_set_overflow_allocator(h.a, &ca), ZARENA_OK) << zarena_last_error();
  fill_region(h.a);
  void* p = nullptr;
  ASSERT_EQ(zarena_alloc(h.a, kBlock, &p), ZARENA_OK) << zarena_last_error();
  CountingAllocator other;
  const zarena_overflow_allocator oa = other.c_api("other");
  EXPECT_EQ(zarena_set_overflow_allocator(h.a, &oa), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(zarena_last_error()).find("1 overflow block(s) of the installed allocator"),
            std::string::npos)
      << zarena_last_error();
  EXPECT_EQ(zarena_set_overflow_allocator(h.a, nullptr), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(zarena_overflow_policy(h.a), ZARENA_OVERFLOW_CUSTOM);
  void* q = nullptr;
  ASSERT_EQ(zarena_alloc(h.a, kBlock, &q), ZARENA_OK);
  EXPECT_TRUE(custom.owns(q));  // still the installed one
  EXPECT_EQ(other.allocs.load(), 0u);

  // Switching away keeps the allocator installed (CUSTOM can come back), and its blocks
  // still pin it.
  ASSERT_EQ(zarena_set_overflow_policy(h.a, ZARENA_OVERFLOW_SYNC), ZARENA_OK);
  EXPECT_EQ(zarena_set_overflow_allocator(h.a, nullptr), ZARENA_E_INVALID_ARGUMENT);
  ASSERT_EQ(zarena_set_overflow_policy(h.a, ZARENA_OVERFLOW_CUSTOM), ZARENA_OK);

  // Once they are back, it can go; CUSTOM falls back to what DEFAULT resolves to.
  ASSERT_EQ(zarena_reset(h.a), ZARENA_OK);
  EXPECT_EQ(custom.live_count(), 0u);
  ASSERT_EQ(zarena_set_overflow_allocator(h.a, nullptr), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(zarena_overflow_policy(h.a), ZARENA_OVERFLOW_SYNC);  // no stream
  EXPECT_EQ(zarena_set_overflow_policy(h.a, ZARENA_OVERFLOW_CUSTOM), ZARENA_E_INVALID_ARGUMENT);
}

TEST(OverflowRoute, DefaultResolvesFromTheStreamNow) {
  LogCapture log(ZARENA_LOG_OFF);
  ArenaHolder h(host_config(ZARENA_OVERFLOW_REFUSE));
  ASSERT_EQ(zarena_set_overflow_policy(h.a, ZARENA_OVERFLOW_DEFAULT), ZARENA_OK);
  EXPECT_EQ(zarena_overflow_policy(h.a), ZARENA_OVERFLOW_SYNC);
  int stream_stand_in = 0;  // the host backend keeps the handle and orders nothing
  ASSERT_EQ(zarena_set_stream(h.a, &stream_stand_in), ZARENA_OK) << zarena_last_error();
  ASSERT_EQ(zarena_set_overflow_policy(h.a, ZARENA_OVERFLOW_DEFAULT), ZARENA_OK);
  EXPECT_EQ(zarena_overflow_policy(h.a), ZARENA_OVERFLOW_ASYNC);
}

TEST(OverflowAllocator, EveryBlockComesFromItAndGoesBackToIt) {
  LogCapture log;
  BackendFrees backend;
  CountingAllocator custom;
  backend.arm();
  {
    zarena_config c = host_config(ZARENA_OVERFLOW_SYNC);
    int stream_stand_in = 0;
    c.stream = &stream_stand_in;
    ArenaHolder h(c);
    const zarena_overflow_allocator ca = custom.c_api("ztensor.MemPool");
    ASSERT_EQ(zarena_set_overflow_allocator(h.a, &ca), ZARENA_OK) << zarena_last_error();
    fill_region(h.a);

    // Freed one by one.
    std::vector<void*> blocks;
    for (int i = 0; i < 3; ++i) {
      zarena_block b;
      ASSERT_EQ(zarena_alloc_ex(h.a, kBlock + 1, 0, &b), ZARENA_OK) << zarena_last_error();
      EXPECT_EQ(b.flags & ZARENA_BLOCK_OVERFLOW, ZARENA_BLOCK_OVERFLOW);
      EXPECT_EQ(b.size, kBlock + kAlign);  // what the allocator was asked for
      EXPECT_TRUE(custom.owns(b.ptr));
      blocks.push_back(b.ptr);
    }
    EXPECT_EQ(custom.last_stream.load(), &stream_stand_in);
    EXPECT_EQ(log.of("arena.first_overflow").back().str("path"), "custom");
    for (void* p : blocks) ASSERT_EQ(zarena_free(h.a, p), ZARENA_OK) << zarena_last_error();
    EXPECT_EQ(custom.frees.load(), 3u);
    EXPECT_EQ(zarena_free(h.a, blocks[0]), ZARENA_E_DOUBLE_FREE);
    EXPECT_EQ(custom.frees.load(), 3u);

    // Reclaimed by a reset; a pinned one is kept through it and goes at its last unpin.
    void *r1 = nullptr, *r2 = nullptr;
    ASSERT_EQ(zarena_alloc(h.a, kBlock, &r1), ZARENA_OK);
    ASSERT_EQ(zarena_alloc(h.a, kBlock, &r2), ZARENA_OK);
    ASSERT_EQ(zarena_pin(h.a, r2), ZARENA_OK);
    ASSERT_EQ(zarena_reset(h.a), ZARENA_OK);
    EXPECT_EQ(custom.frees.load(), 4u);
    EXPECT_FALSE(custom.owns(r1));
    EXPECT_TRUE(custom.owns(r2));
    ASSERT_EQ(zarena_free(h.a, r2), ZARENA_OK);  // deferred: pinned
    EXPECT_TRUE(custom.owns(r2));
    ASSERT_EQ(zarena_unpin(h.a, r2), ZARENA_OK);
    EXPECT_FALSE(custom.owns(r2));
    EXPECT_EQ(custom.frees.load(), 5u);

    // Left live: destroy gives them back.
    fill_region(h.a);
    for (int i = 0; i < 2; ++i) {
      void* p = nullptr;
      ASSERT_EQ(zarena_alloc(h.a, kBlock, &p), ZARENA_OK);
    }
    EXPECT_EQ(custom.live_count(), 2u);
    const zarena_stats s = stats_of(h.a);
    EXPECT_EQ(s.overflow_allocs, 7u);
    EXPECT_EQ(s.overflow_live_blocks, 2u);
  }
  EXPECT_EQ(custom.allocs.load(), 7u);
  EXPECT_EQ(custom.frees.load(), 7u);
  EXPECT_EQ(custom.live_count(), 0u);
  EXPECT_EQ(custom.wrong_frees.load(), 0u);
  EXPECT_EQ(backend.allocs(), 0u);  // nothing went to the backend
  EXPECT_EQ(backend.frees(), 0u);
}

TEST(OverflowAllocator, ItsFailuresAreOverflowFailures) {
  LogCapture log;
  CountingAllocator custom;
  ArenaHolder h(host_config(ZARENA_OVERFLOW_SYNC));
  const zarena_overflow_allocator ca = custom.c_api("pool");
  ASSERT_EQ(zarena_set_overflow_allocator(h.a, &ca), ZARENA_OK);
  fill_region(h.a);

  custom.fail_with = ZARENA_E_OUT_OF_MEMORY;
  void* p = nullptr;
  EXPECT_EQ(zarena_alloc(h.a, kBlock, &p), ZARENA_E_OUT_OF_MEMORY);
  const std::string msg = zarena_last_error();
  EXPECT_NE(msg.find("overflow failed (custom)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the overflow allocator 'pool' could not allocate"), std::string::npos) << msg;
  EXPECT_NE(msg.find("verdict="), std::string::npos) << msg;
  const auto rec = log.of("arena.first_overflow");
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec[0].str("path"), "custom");
  EXPECT_EQ(stats_of(h.a).overflow_failures, 1u);

  custom.fail_with = 77;  // no overflow status: read as a backend failure
  EXPECT_EQ(zarena_alloc(h.a, kBlock, &p), ZARENA_E_BACKEND);
  custom.fail_with = ZARENA_E_CAPTURE_UNSAFE;
  EXPECT_EQ(zarena_alloc(h.a, kBlock, &p), ZARENA_E_CAPTURE_UNSAFE);
  custom.fail_with = ZARENA_OK;

  custom.misalign = true;
  EXPECT_EQ(zarena_alloc(h.a, kBlock, &p), ZARENA_E_BACKEND);
  EXPECT_NE(std::string(zarena_last_error()).find("not aligned"), std::string::npos)
      << zarena_last_error();
  custom.misalign = false;
  {
    std::lock_guard<std::mutex> lock(custom.mu);
    EXPECT_EQ(custom.misaligned_back.size(), 1u);  // given back at once
  }
  EXPECT_EQ(custom.live_count(), 0u);
  EXPECT_EQ(stats_of(h.a).overflow_failures, 4u);
  EXPECT_EQ(stats_of(h.a).overflow_live_blocks, 0u);

  // Nothing of the failures pins the allocator.
  EXPECT_EQ(zarena_set_overflow_allocator(h.a, nullptr), ZARENA_OK) << zarena_last_error();
}

// Policy changes racing allocations and frees on other threads: every block goes back by
// its route, exactly once (the counts balance; ASan/TSan builds watch the rest).
TEST(OverflowRoute, ChangesRaceAllocations) {
  LogCapture log(ZARENA_LOG_OFF);
  BackendFrees backend;
  CountingAllocator custom;
  backend.arm();
  {
    ArenaHolder h(host_config(ZARENA_OVERFLOW_SYNC));
    const zarena_overflow_allocator ca = custom.c_api();
    ASSERT_EQ(zarena_set_overflow_allocator(h.a, &ca), ZARENA_OK);
    fill_region(h.a);
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> failures{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < 2; ++t) {
      workers.emplace_back([&] {
        for (int i = 0; i < 300; ++i) {
          zarena_block b[3];
          for (auto& x : b) {
            if (zarena_alloc_ex(h.a, kBlock, 0, &x) != ZARENA_OK) x.ptr = nullptr;
          }
          for (auto& x : b) {
            if (x.ptr != nullptr && zarena_free_at(h.a, x.ptr, x.epoch) != ZARENA_OK) ++failures;
          }
        }
      });
    }
    std::thread switcher([&] {
      const int32_t order[] = {ZARENA_OVERFLOW_ASYNC, ZARENA_OVERFLOW_CUSTOM,
                               ZARENA_OVERFLOW_REFUSE, ZARENA_OVERFLOW_SYNC};
      for (int i = 0; !stop.load(); ++i) {
        if (zarena_set_overflow_policy(h.a, order[i % 4]) != ZARENA_OK) ++failures;
        std::this_thread::yield();
      }
    });
    for (auto& w : workers) w.join();
    stop = true;
    switcher.join();
    EXPECT_EQ(failures.load(), 0u);
    EXPECT_EQ(stats_of(h.a).overflow_live_blocks, 0u);
    EXPECT_EQ(custom.live_count(), 0u);
  }
  EXPECT_EQ(custom.allocs.load(), custom.frees.load());
  EXPECT_EQ(custom.wrong_frees.load(), 0u);
  EXPECT_EQ(backend.allocs(), backend.frees());
}

// The diagnosis of an overflow that succeeds: with ZARENA_FLAG_DIAGNOSE_SYNC it has reached
// the callback when the call returns, emitted by the calling thread (no reporter job);
// without, it goes through the reporter as before.
TEST(DiagnoseSync, TheRecordArrivesBeforeTheCallReturns) {
  LogCapture log;
  ArenaHolder h(host_config(ZARENA_OVERFLOW_SYNC, ZARENA_FLAG_DIAGNOSE_SYNC));
  fill_region(h.a);
  const uint64_t jobs = zarena_core::Reporter::jobs_run();
  void* p = nullptr;
  ASSERT_EQ(zarena_alloc(h.a, kBlock, &p), ZARENA_OK) << zarena_last_error();
  const auto now = log.arrived("arena.first_overflow");  // no flush, no wait
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0].str("path"), "sync");
  EXPECT_EQ(now[0].u("requested_bytes"), kBlock);
  EXPECT_EQ(zarena_core::Reporter::jobs_run(), jobs);
  // The next epoch's first overflow too.
  ASSERT_EQ(zarena_reset(h.a), ZARENA_OK);
  fill_region(h.a);
  ASSERT_EQ(zarena_alloc(h.a, kBlock, &p), ZARENA_OK);
  EXPECT_EQ(log.arrived("arena.first_overflow").size(), 2u);
}

TEST(DiagnoseSync, WithoutTheFlagTheReporterEmitsIt) {
  LogCapture log;
  ArenaHolder h(host_config(ZARENA_OVERFLOW_SYNC));
  fill_region(h.a);
  const uint64_t jobs = zarena_core::Reporter::jobs_run();
  void* p = nullptr;
  ASSERT_EQ(zarena_alloc(h.a, kBlock, &p), ZARENA_OK) << zarena_last_error();
  ASSERT_EQ(log.of("arena.first_overflow").size(), 1u);  // waits for the reporter
  EXPECT_EQ(zarena_core::Reporter::jobs_run(), jobs + 1);
}

TEST(DiagnoseSync, TheEnvironmentSetsIt) {
  ASSERT_EQ(setenv("ZARENA_DIAGNOSE_SYNC", "1", 1), 0);
  zarena_config c;
  zarena_config_init(&c);
  unsetenv("ZARENA_DIAGNOSE_SYNC");
  EXPECT_EQ(c.flags & ZARENA_FLAG_DIAGNOSE_SYNC, ZARENA_FLAG_DIAGNOSE_SYNC);
  zarena_config_init(&c);
  EXPECT_EQ(c.flags & ZARENA_FLAG_DIAGNOSE_SYNC, 0u);
}

}  // namespace
