// Teardown edges of issue 35 on the host backend, whose fault injector simulates the two
// device events a host cannot have (FaultPlan::capture, FaultPlan::device_reset), so the
// engine's bookkeeping is checked on any machine (gpu_test_edges.cpp checks the same on a
// device):
//   1. an arena destroyed during a capture the backend sees: nothing goes back while the
//      capture lasts, though zarena's release thread looks again and again; once it ends
//      (the test clears the flag: no zarena call) the memory goes back from that thread,
//      which then stops; a safe point (zarena_create) still releases at once; a capture
//      declared only by the destroyed arena's flag ends with the arena;
//   2. a device reset under a live arena: zarena_destroy frees nothing and says so,
//      zarena_reset, zarena_free and overflow allocations answer ZARENA_E_BACKEND and touch
//      nothing of the arena's memory (no trim, no free); an arena destroyed during a capture
//      whose memory still waits when the device is reset is forgotten, not freed.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>

#include "backend/backend_faults_testing.h"
#include "engine/deferred_release.h"
#include "support.h"
#include "zarena/zarena.h"

namespace {

using zarena_core::deferred_releases;
using zarena_core::FaultPlan;
using zarena_core::FaultSite;
using zarena_core::FaultTally;
using zarena_core::release_thread_passes;
using zarena_core::release_thread_running;
using zarena_test::eventually;
using zarena_test::kKiB;
using zarena_test::kMiB;
using zarena_test::LogCapture;

constexpr uint64_t kCapacity = 64 * kKiB;

// The next host arena's backend: counted, with the simulated events the test flips.
struct Simulated {
  std::shared_ptr<FaultTally> tally = std::make_shared<FaultTally>();
  std::shared_ptr<std::atomic<bool>> capture = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<std::atomic<bool>> reset = std::make_shared<std::atomic<bool>>(false);
  Simulated() {
    FaultPlan plan;
    plan.tally = tally;
    plan.capture = capture;
    plan.device_reset = reset;
    zarena_core::arm_faults_for_next_create(plan);
  }
  ~Simulated() { zarena_core::disarm_faults_for_next_create(); }
  uint64_t frees() const { return tally->ok_at(FaultSite::kOverflowFree); }
};

zarena* make_arena(int32_t policy = ZARENA_OVERFLOW_SYNC, uint32_t flags = 0) {
  const zarena_config c = zarena_test::host_overflow_config(kCapacity, "teardown", policy, flags);
  zarena* a = nullptr;
  EXPECT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  return a;
}

void* overflow_block(zarena* a) {
  void* p = nullptr;
  EXPECT_EQ(zarena_alloc(a, 2 * kCapacity, &p), ZARENA_OK) << zarena_last_error();
  return p;
}

// The arena with two overflow blocks, one of them freed (given back: one free).
zarena* arena_with_a_live_overflow_block(const Simulated& sim) {
  zarena* a = make_arena();
  void* o1 = overflow_block(a);
  (void)overflow_block(a);
  EXPECT_EQ(zarena_free(a, o1), ZARENA_OK);
  EXPECT_EQ(sim.frees(), 1u);
  return a;
}

// --- 1. destroy during a capture ------------------------------------------------------

TEST(TeardownDuringCapture, ReleasedWithoutAFurtherCallOnceTheCaptureEnds) {
  LogCapture log(ZARENA_LOG_INFO);
  Simulated sim;
  zarena* a = arena_with_a_live_overflow_block(sim);
  sim.capture->store(true);
  const size_t waiting0 = deferred_releases();
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(deferred_releases(), waiting0 + 1);
  ASSERT_EQ(log.count("arena.destroy_deferred"), 1u);
  EXPECT_EQ(log.of("arena.destroy_deferred")[0].u("overflow_blocks"), 1u);
  // The thread looks, twice, while the capture lasts: nothing goes back.
  const uint64_t passes = release_thread_passes();
  ASSERT_TRUE(eventually([&] { return release_thread_passes() >= passes + 2; }))
      << "no release thread looked at the waiting arena";
  EXPECT_EQ(deferred_releases(), waiting0 + 1);
  EXPECT_EQ(sim.frees(), 1u) << "a give-back during the capture";
  EXPECT_EQ(log.arrived("arena.released").size(), 0u);
  // The capture ends; the program makes no zarena call from here on.
  sim.capture->store(false);
  ASSERT_TRUE(eventually([&] { return log.arrived("arena.released").size() == 1; }))
      << "the memory did not go back without a further call";
  EXPECT_EQ(sim.frees(), 2u) << "the live block went back";
  EXPECT_EQ(log.arrived("arena.released")[0].u("overflow_blocks"), 1u);
  EXPECT_EQ(deferred_releases(), waiting0);
  EXPECT_TRUE(eventually([] { return !release_thread_running(); }))
      << "the release thread goes on with nothing to release";
}

TEST(TeardownDuringCapture, ASafePointStillReleasesBeforeItReturns) {
  LogCapture log(ZARENA_LOG_INFO);
  Simulated sim;
  zarena* a = arena_with_a_live_overflow_block(sim);
  sim.capture->store(true);
  const size_t waiting0 = deferred_releases();
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(log.count("arena.destroy"), 1u) << "the lifetime summary comes at once";
  sim.capture->store(false);
  // The thread may be releasing it right now: the create waits for that, records included.
  zarena* b = zarena_test::make_host_arena(kCapacity, "next");
  EXPECT_EQ(deferred_releases(), waiting0);
  EXPECT_EQ(sim.frees(), 2u) << "the block went back by the time the safe point returned";
  EXPECT_EQ(log.arrived("arena.released").size(), 1u) << "and was logged";
  ASSERT_EQ(zarena_destroy(b), ZARENA_OK);
}

// zarena_set_capture_active(a, 1) and then a destroy: the flag went with the arena, and the
// backend sees no capture, so the memory goes back soon (from the thread) without a call.
TEST(TeardownDuringCapture, ACaptureOnlyItsFlagDeclaredEndsWithTheArena) {
  LogCapture log(ZARENA_LOG_INFO);
  Simulated sim;
  zarena* a = arena_with_a_live_overflow_block(sim);
  ASSERT_EQ(zarena_set_capture_active(a, 1), ZARENA_OK);
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(log.count("arena.destroy_deferred"), 1u) << "no call at destroy";
  ASSERT_TRUE(eventually([&] { return log.arrived("arena.released").size() == 1; }));
  EXPECT_EQ(sim.frees(), 2u);
  EXPECT_TRUE(eventually([] { return !release_thread_running(); }));
}

// A capture scope on the arena's stream keeps the memory waiting (the thread checks the
// scopes too) until the scope's end.
TEST(TeardownDuringCapture, AScopeKeepsItWaitingUntilItsEnd) {
  static char stream;  // a host "stream": any pointer names one
  LogCapture log(ZARENA_LOG_INFO);
  Simulated sim;
  zarena_config c = zarena_test::host_overflow_config(kCapacity, "scoped", ZARENA_OVERFLOW_SYNC);
  c.stream = &stream;
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  (void)overflow_block(a);
  ASSERT_EQ(zarena_capture_begin(ZARENA_CAPTURE_STREAM, &stream), ZARENA_OK);
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
  const uint64_t passes = release_thread_passes();
  ASSERT_TRUE(eventually([&] { return release_thread_passes() >= passes + 2; }));
  EXPECT_EQ(sim.frees(), 0u) << "released while the scope covered its stream";
  ASSERT_EQ(zarena_capture_end(ZARENA_CAPTURE_STREAM, &stream), ZARENA_OK);
  EXPECT_EQ(sim.frees(), 1u) << "the end of the scope is a safe point";
  EXPECT_EQ(log.arrived("arena.released").size(), 1u);
}

// --- 2. a device reset ----------------------------------------------------------------

TEST(TeardownAfterDeviceReset, DestroyFreesNothingAndSaysSo) {
  LogCapture log(ZARENA_LOG_INFO);
  Simulated sim;
  zarena* a = arena_with_a_live_overflow_block(sim);
  void* p = nullptr;
  ASSERT_EQ(zarena_alloc(a, 4 * kKiB, &p), ZARENA_OK);
  sim.reset->store(true);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(sim.frees(), 1u) << "a block went back to a reset device";
  EXPECT_EQ(sim.tally->after_reset.load(), 0u) << "a call that would touch memory was made";
  const auto recs = log.of("arena.device_reset");
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].str("call"), "zarena_destroy");
  EXPECT_EQ(recs[0].u("overflow_blocks"), 1u);
  EXPECT_EQ(recs[0].u("region_bytes"), kCapacity);
  EXPECT_EQ(log.count("arena.destroy"), 1u);
}

TEST(TeardownAfterDeviceReset, CallsThatNeedTheDeviceGetAClearStatus) {
  LogCapture log(ZARENA_LOG_WARN);
  Simulated sim;
  zarena* a = make_arena(ZARENA_OVERFLOW_SYNC, ZARENA_FLAG_POISON);
  void* o1 = overflow_block(a);
  void* o2 = overflow_block(a);
  (void)o2;  // reclaimed by the reset below
  void* r = nullptr;
  ASSERT_EQ(zarena_alloc(a, 4 * kKiB, &r), ZARENA_OK);
  const uint64_t epoch = zarena_epoch(a);
  sim.reset->store(true);
  // A free of an overflow block: forgotten, not given back.
  EXPECT_EQ(zarena_free(a, o1), ZARENA_E_BACKEND);
  EXPECT_NE(std::string(zarena_last_error()).find("device was reset"), std::string::npos)
      << zarena_last_error();
  // A reset: rewound all the same, no give-back of the reclaimed block.
  EXPECT_EQ(zarena_reset(a), ZARENA_E_BACKEND);
  EXPECT_NE(std::string(zarena_last_error()).find("zarena_reset"), std::string::npos)
      << zarena_last_error();
  EXPECT_EQ(zarena_epoch(a), epoch + 1);
  EXPECT_EQ(zarena_test::stats_of(a).overflow_live_bytes, 0u);
  // An allocation that needs the backend.
  void* o3 = nullptr;
  EXPECT_EQ(zarena_alloc(a, 2 * kCapacity, &o3), ZARENA_E_BACKEND);
  EXPECT_NE(std::string(zarena_last_error()).find("reset"), std::string::npos)
      << zarena_last_error();
  // The region's own frees make no backend call (poison fills are refused, not made).
  EXPECT_EQ(zarena_free(a, r), ZARENA_E_STALE) << "reclaimed by the reset";
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(sim.frees(), 0u) << "nothing went back to a reset device";
  EXPECT_EQ(sim.tally->ok_at(FaultSite::kFill32), 0u) << "a fill reached the memory";
  const auto recs = log.of("arena.device_reset");
  ASSERT_EQ(recs.size(), 1u) << "once per arena";
  EXPECT_EQ(recs[0].str("call"), "an overflow give-back");
  EXPECT_EQ(log.count("overflow.give_failed"), 0u) << "a reset device's blocks do not wait";
}

TEST(TeardownAfterDeviceReset, AResetOfAnExpandableArenaTrimsNothing) {
  LogCapture log(ZARENA_LOG_WARN);
  Simulated sim;
  zarena_config c = zarena_test::host_overflow_config(
      64 * kMiB, "expandable", ZARENA_OVERFLOW_REFUSE, ZARENA_FLAG_EXPANDABLE);
  c.commit_chunk_bytes = kMiB;
  c.trim_keep_bytes = kMiB;
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  void* p = nullptr;
  ASSERT_EQ(zarena_alloc(a, 8 * kMiB, &p), ZARENA_OK) << zarena_last_error();
  ASSERT_EQ(zarena_free(a, p), ZARENA_OK);
  sim.reset->store(true);
  EXPECT_EQ(zarena_reset(a), ZARENA_E_BACKEND);
  EXPECT_EQ(sim.tally->calls_at(FaultSite::kDecommit), 0u) << "a trim after the reset";
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(sim.tally->after_reset.load(), 0u);
  ASSERT_EQ(log.count("arena.device_reset"), 1u);
  EXPECT_EQ(log.of("arena.device_reset")[0].str("call"), "zarena_reset");
  EXPECT_EQ(log.count("arena.trim_failed"), 0u);
}

TEST(TeardownAfterDeviceReset, AnArenaWaitingForACaptureIsForgotten) {
  LogCapture log(ZARENA_LOG_INFO);
  Simulated sim;
  zarena* a = arena_with_a_live_overflow_block(sim);
  sim.capture->store(true);
  const size_t waiting0 = deferred_releases();
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
  EXPECT_EQ(deferred_releases(), waiting0 + 1);
  sim.reset->store(true);
  ASSERT_TRUE(eventually([&] { return log.arrived("arena.device_reset").size() == 1; }));
  const auto rec = log.arrived("arena.device_reset")[0];
  EXPECT_EQ(rec.str("call"), "the release of an arena destroyed during a capture");
  EXPECT_EQ(rec.u("overflow_blocks"), 1u);
  EXPECT_EQ(deferred_releases(), waiting0);
  EXPECT_EQ(sim.frees(), 1u) << "a block went back to a reset device";
  EXPECT_EQ(sim.tally->after_reset.load(), 0u);
  EXPECT_EQ(log.arrived("arena.released").size(), 0u);
  EXPECT_TRUE(eventually([] { return !release_thread_running(); }));
}

}  // namespace
