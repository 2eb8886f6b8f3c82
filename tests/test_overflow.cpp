// The overflow pool over the host backend with fault injection: every policy, the cap,
// backend failures, the watchdog, reset reclaim, persistent blocks and free validation.
// Runs in CI without a GPU; the CUDA routes are covered by gpu_test_cuda.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend_faults_testing.h"
#include "log/log.h"
#include "support.h"
#include "zarena/zarena.h"
#include "zarena/zarena_testing.h"

using zarena_test::ArenaHolder;
using zarena_test::LogCapture;
using zarena_test::stats_of;

namespace {

constexpr uint64_t kCapacity = 64 * 1024;
constexpr uint64_t kBlock = 16 * 1024;  // four fill the region

zarena_config host_config(int32_t policy) {
  return zarena_test::host_overflow_config(kCapacity, "overflow-test", policy);
}

// Fills the region so that the next allocation of kBlock overflows.
std::vector<void*> fill_region(zarena* a) {
  std::vector<void*> v;
  const uint64_t misses = stats_of(a).misses;
  for (uint64_t i = 0; i < kCapacity / kBlock; ++i) {
    void* p = nullptr;
    EXPECT_EQ(zarena_alloc(a, kBlock, &p), ZARENA_OK) << zarena_last_error();
    v.push_back(p);
  }
  EXPECT_EQ(stats_of(a).misses, misses) << "the region must serve these";
  return v;
}

bool in_region(const std::vector<void*>& region_blocks, void* p) {
  const char* lo = static_cast<const char*>(region_blocks.front());
  const char* c = static_cast<const char*>(p);
  return c >= lo && c < lo + kCapacity;
}

std::string first_overflow_path(const LogCapture& log) {
  auto ev = log.of("arena.first_overflow");
  if (ev.empty()) return "<none>";
  return ev.back().str("path");
}

class OverflowPolicy : public ::testing::TestWithParam<int32_t> {};

TEST_P(OverflowPolicy, SpillsTracksAndNamesThePath) {
  LogCapture log;
  ArenaHolder h(host_config(GetParam()));
  auto region = fill_region(h.a);
  void* p = nullptr;
  ASSERT_EQ(zarena_alloc(h.a, kBlock, &p), ZARENA_OK) << zarena_last_error();
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(in_region(region, p));
  std::memset(p, 0x5A, kBlock);  // really usable memory
  const zarena_stats s = stats_of(h.a);
  EXPECT_EQ(s.overflow_allocs, 1u);
  EXPECT_EQ(s.overflow_live_bytes, kBlock);
  EXPECT_EQ(s.overflow_peak_bytes, kBlock);
  EXPECT_EQ(s.live_allocs, region.size() + 1);
  EXPECT_EQ(first_overflow_path(log), GetParam() == ZARENA_OVERFLOW_ASYNC ? "async" : "sync");
  EXPECT_EQ(zarena_free(h.a, p), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(stats_of(h.a).overflow_live_bytes, 0u);
  EXPECT_EQ(stats_of(h.a).overflow_peak_bytes, kBlock);
}

INSTANTIATE_TEST_SUITE_P(AsyncAndSync, OverflowPolicy,
                         ::testing::Values(ZARENA_OVERFLOW_ASYNC, ZARENA_OVERFLOW_SYNC));

TEST(Overflow, RefuseMeansOutOfMemory) {
  LogCapture log;
  ArenaHolder h(host_config(ZARENA_OVERFLOW_REFUSE));
  fill_region(h.a);
  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(zarena_alloc(h.a, kBlock, &p), ZARENA_E_OUT_OF_MEMORY);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(std::string(zarena_last_error()).find("refused"), std::string::npos)
      << zarena_last_error();
  const zarena_stats s = stats_of(h.a);
  EXPECT_EQ(s.overflow_allocs, 0u);
  EXPECT_EQ(s.overflow_failures, 1u);
  EXPECT_EQ(first_overflow_path(log), "refused");
}

TEST(Overflow, DefaultIsSyncWithoutStreamAndAsyncWithOne) {
  for (bool with_stream : {false, true}) {
    LogCapture log;
    zarena_config c = host_config(ZARENA_OVERFLOW_DEFAULT);
    // The host backend never dereferences the stream; any non-NULL value selects ASYNC.
    static int fake_stream;
    c.stream = with_stream ? &fake_stream : nullptr;
    ArenaHolder h(c);
    auto cfg = log.of("arena.config");
    ASSERT_EQ(cfg.size(), 1u);
    EXPECT_EQ(cfg[0].str("overflow_policy_resolved"), with_stream ? "async" : "sync");
    fill_region(h.a);
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(h.a, kBlock, &p), ZARENA_OK);
    EXPECT_EQ(first_overflow_path(log), with_stream ? "async" : "sync");
  }
}

TEST(Overflow, LimitCapsLiveOverflowBytes) {
  LogCapture log;
  zarena_config c = host_config(ZARENA_OVERFLOW_SYNC);
  c.overflow_limit_bytes = 2 * kBlock;
  ArenaHolder h(c);
  fill_region(h.a);
  void *p1 = nullptr, *p2 = nullptr, *p3 = nullptr;
  ASSERT_EQ(zarena_alloc(h.a, kBlock, &p1), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(h.a, kBlock, &p2), ZARENA_OK);
  EXPECT_EQ(zarena_alloc(h.a, kBlock, &p3), ZARENA_E_OUT_OF_MEMORY);
  EXPECT_EQ(p3, nullptr);
  EXPECT_NE(std::string(zarena_last_error()).find("limit"), std::string::npos)
      << zarena_last_error();
  // A request larger than the whole cap is refused too, whatever is live.
  EXPECT_EQ(zarena_free(h.a, p2), ZARENA_OK);
  EXPECT_EQ(zarena_alloc(h.a, 3 * kBlock, &p3), ZARENA_E_OUT_OF_MEMORY);
  // Freeing makes room again.
  ASSERT_EQ(zarena_alloc(h.a, kBlock, &p3), ZARENA_OK);
  const zarena_stats s = stats_of(h.a);
  EXPECT_EQ(s.overflow_live_bytes, 2 * kBlock);
  EXPECT_EQ(s.overflow_peak_bytes, 2 * kBlock);
  EXPECT_EQ(s.overflow_failures, 2u);
  EXPECT_EQ(s.overflow_allocs, 3u);
}

TEST(Overflow, LimitNamedAsPathWhenTheFirstOverflowHitsIt) {
  LogCapture log;
  zarena_config c = host_config(ZARENA_OVERFLOW_ASYNC);
  c.overflow_limit_bytes = kBlock / 2;
  ArenaHolder h(c);
  fill_region(h.a);
  void* p = nullptr;
  EXPECT_EQ(zarena_alloc(h.a, kBlock, &p), ZARENA_E_OUT_OF_MEMORY);
  EXPECT_EQ(first_overflow_path(log), "limit");
}

TEST(Overflow, LimitHoldsUnderConcurrentOverflow) {
  zarena_config c = host_config(ZARENA_OVERFLOW_ASYNC);
  c.overflow_limit_bytes = 5 * kBlock;
  ArenaHolder h(c);
  fill_region(h.a);
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        void* p = nullptr;
        const zarena_status s = zarena_alloc(h.a, kBlock, &p);
        if (s == ZARENA_E_OUT_OF_MEMORY) {
          ++refused;
          continue;
        }
        ASSERT_EQ(s, ZARENA_OK);
        std::memset(p, t, kBlock);  // would trip sanitizers if two blocks overlapped
        ASSERT_EQ(static_cast<unsigned char*>(p)[kBlock - 1], t);
        ASSERT_EQ(zarena_free(h.a, p), ZARENA_OK);
      }
    });
  }
  for (auto& th : threads) th.join();
  const zarena_stats s = stats_of(h.a);
  EXPECT_LE(s.overflow_peak_bytes, c.overflow_limit_bytes);
  EXPECT_EQ(s.overflow_live_bytes, 0u);
  EXPECT_EQ(s.overflow_allocs + static_cast<uint64_t>(refused.load()), 8u * 300u);
}

TEST(Overflow, FailTheNthLeavesStateUnchanged) {
  LogCapture log;
  ArenaHolder h(host_config(ZARENA_OVERFLOW_SYNC));
  fill_region(h.a);
  ASSERT_EQ(zarena_debug_inject_overflow_fault(h.a, 3, 0, 0), ZARENA_OK);
  void *p1 = nullptr, *p2 = nullptr, *p3 = nullptr, *p4 = nullptr;
  ASSERT_EQ(zarena_alloc(h.a, kBlock, &p1), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(h.a, kBlock, &p2), ZARENA_OK);
  const zarena_stats before = stats_of(h.a);
  EXPECT_EQ(zarena_alloc(h.a, kBlock, &p3), ZARENA_E_BACKEND);
  EXPECT_EQ(p3, nullptr);
  EXPECT_NE(std::string(zarena_last_error()).find("injected fault"), std::string::npos)
      << zarena_last_error();
  const zarena_stats after = stats_of(h.a);
  EXPECT_EQ(after.overflow_live_bytes, before.overflow_live_bytes);
  EXPECT_EQ(after.overflow_allocs, before.overflow_allocs);
  EXPECT_EQ(after.overflow_failures, before.overflow_failures + 1);
  // Only the 3rd call fails; the 4th succeeds.
  ASSERT_EQ(zarena_alloc(h.a, kBlock, &p4), ZARENA_OK);
  EXPECT_EQ(stats_of(h.a).overflow_live_bytes, 3 * kBlock);
}

TEST(Overflow, FaultInjectionAppliesToEveryRoute) {
  for (int32_t policy : {ZARENA_OVERFLOW_ASYNC, ZARENA_OVERFLOW_SYNC}) {
    ArenaHolder h(host_config(policy));
    fill_region(h.a);
    ASSERT_EQ(zarena_debug_inject_overflow_fault(h.a, 1, 0, 0), ZARENA_OK);
    void* p = nullptr;
    EXPECT_EQ(zarena_alloc(h.a, kBlock, &p), ZARENA_E_BACKEND);
    EXPECT_EQ(zarena_alloc(h.a, kBlock, &p), ZARENA_OK);
  }
}

TEST(Overflow, WatchdogReportsSlowCallsAndMaxLatency) {
  // overflow.slow is rate-limited process-wide: under a sanitizer the earlier tests' calls
  // may pass the default threshold often enough to empty the bucket. Start with a full one.
  zarena_core::log_set_clock_for_testing(nullptr);
  LogCapture log;
  zarena_config c = host_config(ZARENA_OVERFLOW_ASYNC);
  c.overflow_slow_ns = 5'000'000;  // 5 ms
  ArenaHolder h(c);
  fill_region(h.a);
  constexpr uint64_t kDelay = 30'000'000;  // 30 ms, only on the 2nd overflow call
  ASSERT_EQ(zarena_debug_inject_overflow_fault(h.a, 0, 2, kDelay), ZARENA_OK);
  void *p1 = nullptr, *p2 = nullptr, *p3 = nullptr;
  ASSERT_EQ(zarena_alloc(h.a, kBlock, &p1), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(h.a, kBlock, &p2), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(h.a, kBlock, &p3), ZARENA_OK);
  const auto slow = log.of("overflow.slow");
  ASSERT_GE(slow.size(), 1u);
  // The delayed call is reported with at least the injected delay (on a loaded machine, or
  // under a sanitizer, another call may pass the 5 ms threshold too: take the slowest).
  const auto& rec = *std::max_element(slow.begin(), slow.end(), [](const auto& x, const auto& y) {
    return x.u("duration_ns") < y.u("duration_ns");
  });
  EXPECT_GE(rec.u("duration_ns"), kDelay);
  EXPECT_EQ(rec.u("threshold_ns"), c.overflow_slow_ns);
  EXPECT_EQ(rec.str("path"), "async");
  EXPECT_GE(stats_of(h.a).overflow_max_latency_ns, kDelay);
}

TEST(Overflow, WatchdogQuietBelowThreshold) {
  LogCapture log;
  zarena_config c = host_config(ZARENA_OVERFLOW_SYNC);
  c.overflow_slow_ns = 10'000'000'000ull;  // 10 s: no host allocation takes that long
  ArenaHolder h(c);
  fill_region(h.a);
  ASSERT_EQ(zarena_debug_inject_overflow_fault(h.a, 0, 0, 1'000'000), ZARENA_OK);  // 1 ms each
  for (int i = 0; i < 3; ++i) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(h.a, kBlock, &p), ZARENA_OK);
  }
  EXPECT_EQ(log.count("overflow.slow"), 0u);
  EXPECT_GE(stats_of(h.a).overflow_max_latency_ns, 1'000'000u);
}

TEST(Overflow, ResetReclaimsEveryEpochWithoutLeaking) {
  LogCapture log;
  ArenaHolder h(host_config(ZARENA_OVERFLOW_ASYNC));
  uint64_t reclaimed_expected = 0;
  for (int round = 0; round < 2000; ++round) {
    fill_region(h.a);
    std::vector<void*> over;
    for (int i = 0; i < 6; ++i) {
      void* p = nullptr;
      ASSERT_EQ(zarena_alloc(h.a, kBlock + 256 * i, &p), ZARENA_OK);
      over.push_back(p);
    }
    // Free some explicitly; the reset reclaims the rest.
    ASSERT_EQ(zarena_free(h.a, over[1]), ZARENA_OK);
    ASSERT_EQ(zarena_free(h.a, over[4]), ZARENA_OK);
    reclaimed_expected += 4;
    ASSERT_GT(stats_of(h.a).overflow_live_bytes, 0u);
    ASSERT_EQ(zarena_reset(h.a), ZARENA_OK);
    const zarena_stats s = stats_of(h.a);
    ASSERT_EQ(s.overflow_live_bytes, 0u) << "round " << round;
    ASSERT_EQ(s.live_allocs, 0u) << "round " << round;
    ASSERT_EQ(s.overflow_reclaimed, reclaimed_expected);
  }
  const zarena_stats s = stats_of(h.a);
  EXPECT_EQ(s.overflow_allocs, 2000u * 6u);
  EXPECT_EQ(s.resets, 2000u);
  // First-overflow records are once per epoch (and may be rate-limited by the log).
  EXPECT_GE(log.count("arena.first_overflow"), 1u);
  EXPECT_LE(log.count("arena.first_overflow"), 2000u);
}

TEST(Overflow, StaleDoubleAndForeignFreesOfOverflowBlocks) {
  ArenaHolder h(host_config(ZARENA_OVERFLOW_SYNC));
  fill_region(h.a);
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(zarena_alloc(h.a, kBlock, &p), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(h.a, kBlock, &q), ZARENA_OK);
  ASSERT_EQ(zarena_free(h.a, q), ZARENA_OK);
  zarena_stats before = stats_of(h.a);
  // Double free: error, nothing changes but the counter.
  EXPECT_EQ(zarena_free(h.a, q), ZARENA_E_DOUBLE_FREE);
  zarena_stats after = stats_of(h.a);
  EXPECT_EQ(after.invalid_frees, before.invalid_frees + 1);
  EXPECT_EQ(after.overflow_live_bytes, before.overflow_live_bytes);
  // Interior pointer of an overflow block: not owned.
  EXPECT_EQ(zarena_free(h.a, static_cast<char*>(p) + 256), ZARENA_E_NOT_OWNED);
  int on_stack = 0;
  EXPECT_EQ(zarena_free(h.a, &on_stack), ZARENA_E_NOT_OWNED);
  EXPECT_EQ(stats_of(h.a).overflow_live_bytes, kBlock);
  // After a reset the block is reclaimed: freeing it is stale, and dropped.
  ASSERT_EQ(zarena_reset(h.a), ZARENA_OK);
  before = stats_of(h.a);
  EXPECT_EQ(zarena_free(h.a, p), ZARENA_E_STALE);
  after = stats_of(h.a);
  EXPECT_EQ(after.stale_frees, before.stale_frees + 1);
  EXPECT_EQ(after.overflow_live_bytes, 0u);
  EXPECT_EQ(after.overflow_reclaimed, 1u);
}

TEST(Overflow, StepBoundaryKeepsOverflowBlocksAcrossResets) {
  ArenaHolder h(host_config(ZARENA_OVERFLOW_ASYNC));
  fill_region(h.a);
  void* weights = nullptr;
  ASSERT_EQ(zarena_alloc(h.a, kBlock, &weights), ZARENA_OK);
  std::memset(weights, 0x77, kBlock);
  ASSERT_EQ(zarena_mark_step_boundary(h.a), ZARENA_OK);
  for (int step = 0; step < 5; ++step) {
    void* tmp = nullptr;
    ASSERT_EQ(zarena_alloc(h.a, kBlock, &tmp), ZARENA_OK);  // region full: overflow
    std::memset(tmp, step, kBlock);
    ASSERT_EQ(zarena_reset(h.a), ZARENA_OK);
    const zarena_stats s = stats_of(h.a);
    EXPECT_EQ(s.overflow_live_bytes, kBlock) << "the persistent block must stay live";
    EXPECT_EQ(s.overflow_reclaimed, static_cast<uint64_t>(step + 1));
  }
  for (uint64_t i = 0; i < kBlock; ++i) {
    ASSERT_EQ(static_cast<unsigned char*>(weights)[i], 0x77) << "byte " << i;
  }
  EXPECT_EQ(zarena_free(h.a, weights), ZARENA_OK);
  EXPECT_EQ(stats_of(h.a).overflow_live_bytes, 0u);
  EXPECT_EQ(zarena_free(h.a, weights), ZARENA_E_DOUBLE_FREE);
}

TEST(Overflow, DestroyReleasesLiveOverflowBlocks) {
  // Under ASan/LSan a leak here fails the run; without it, destroy must still succeed.
  zarena* a = nullptr;
  zarena_config c = host_config(ZARENA_OVERFLOW_SYNC);
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK);
  fill_region(a);
  ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
  void* p = nullptr;
  ASSERT_EQ(zarena_alloc(a, kBlock, &p), ZARENA_OK);  // persistent after the next mark
  ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(a, kBlock, &p), ZARENA_OK);  // epoch-local
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
}

TEST(Overflow, FirstOverflowRecordCarriesTheDiagnosisFields) {
  LogCapture log;
  ArenaHolder h(host_config(ZARENA_OVERFLOW_SYNC));
  fill_region(h.a);
  void* p = nullptr;
  ASSERT_EQ(zarena_alloc(h.a, kBlock + 1, &p), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(h.a, kBlock, &p), ZARENA_OK);
  auto ev = log.of("arena.first_overflow");
  ASSERT_EQ(ev.size(), 1u) << "one record per epoch";
  auto& r = ev[0];
  EXPECT_EQ(r.str("path"), "sync");
  EXPECT_EQ(r.u("requested_bytes"), static_cast<uint64_t>(kBlock + 1));
  EXPECT_EQ(r.u("aligned_bytes"), static_cast<uint64_t>(kBlock + 256));
  EXPECT_EQ(r.u("capacity_bytes"), static_cast<uint64_t>(kCapacity));
  EXPECT_FALSE(r.str("verdict").empty());
}

TEST(Overflow, FaultInjectionChecksItsHandle) {
  ArenaHolder h(host_config(ZARENA_OVERFLOW_SYNC));
  EXPECT_EQ(zarena_debug_inject_overflow_fault(nullptr, 1, 0, 0), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(zarena_debug_inject_overflow_fault(h.a, 0, 0, 0), ZARENA_OK);
}

}  // namespace

// set_stream racing the give-back of an overflow block (item 12): a block's poison fill
// and its free must go to one stream. Before, set_stream held the region's locks, which a
// give-back does not take, so the fill could be ordered on the old stream and the free on
// the new one (the pool could then hand the block out again on the new stream while the
// fill still ran on the old). The backend records the stream of each fill and free; a
// short pause inside the fill widens the window a stream change would need.
namespace stream_race {

struct Seen {
  std::mutex mu;
  std::map<const void*, void*> fill_stream;  // block -> the stream its fill went to
  uint64_t pairs = 0, split = 0;
};

void observe(void* ctx, zarena_core::FaultSite site, const void* ptr, void* stream) {
  auto* s = static_cast<Seen*>(ctx);
  if (site == zarena_core::FaultSite::kFill32) {
    {
      std::lock_guard<std::mutex> lock(s->mu);
      s->fill_stream[ptr] = stream;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    return;
  }
  std::lock_guard<std::mutex> lock(s->mu);
  auto it = s->fill_stream.find(ptr);
  if (it == s->fill_stream.end()) return;
  ++s->pairs;
  if (it->second != stream) ++s->split;
  s->fill_stream.erase(it);
}

}  // namespace stream_race

TEST(OverflowStream, AGiveBackNeverStraddlesAStreamChange) {
  stream_race::Seen seen;
  zarena_core::FaultPlan plan;
  plan.observe = &stream_race::observe;
  plan.observe_ctx = &seen;
  zarena_core::arm_faults_for_next_create(plan);
  zarena_config c = host_config(ZARENA_OVERFLOW_SYNC);
  c.flags |= ZARENA_FLAG_POISON;
  ArenaHolder a(c);
  const int rounds = 400 / zarena_test::kSanitizerSlowdown;
  std::atomic<bool> done{false};
  std::thread changer([&] {
    char streams[2];
    for (uint64_t i = 0; !done.load(); ++i) {
      EXPECT_EQ(zarena_set_stream(a, &streams[i % 2]), ZARENA_OK) << zarena_last_error();
    }
  });
  for (int i = 0; i < rounds; ++i) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(a, 2 * kCapacity, &p), ZARENA_OK) << zarena_last_error();
    ASSERT_EQ(zarena_free(a, p), ZARENA_OK);
  }
  done.store(true);
  changer.join();
  std::lock_guard<std::mutex> lock(seen.mu);
  EXPECT_EQ(seen.pairs, static_cast<uint64_t>(rounds));
  EXPECT_EQ(seen.split, 0u) << "give-backs whose fill and free went to different streams";
}
