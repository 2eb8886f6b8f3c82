// The planned paths of a step plan (src/plan/plan_run.h) on hand-made plans, and the
// learner (src/plan/learner.h): what a handout checks, how frees, pins and resets change
// an instance, and when two steps count as the same.
#include <gtest/gtest.h>

#include <cstdint>

#include "plan/learner.h"
#include "plan/plan_run.h"

namespace zarena_core {
namespace {

constexpr uintptr_t kZone = 0x100000;

// A: 512 B freed before C; B: 256 B freed at the step's end; C: 512 B in A's space.
PlanLayout three_items() {
  PlanLayout l;
  l.n = 3;
  l.period = 1;
  l.item_size = {512, 256, 512};
  l.item_tag = {0, 7, 0};
  l.item_planned = {1, 1, 1};
  l.offset = {0, 512, 0};
  // C (instance 2) checks A (0), which dies before it; A checks C (its last user before
  // A's next incarnation) and B checks itself (its own next incarnation reuses it).
  l.check_begin = {0, 1, 2, 3};
  l.check_list = {2, 1, 0};
  l.peak_bytes = 768;
  l.lower_bound_bytes = 768;
  return l;
}

TEST(PlanRun, ServesTheStepFromItsOffsets) {
  PlanRun run(three_items(), kZone);
  PlanRun::Block b{};
  EXPECT_EQ(run.alloc(512, 0, &b), PlanRun::Alloc::kLibrary) << "not engaged yet";
  run.engage();
  for (int step = 0; step < 3; ++step) {
    ASSERT_EQ(run.alloc(512, 0, &b), PlanRun::Alloc::kServed);
    EXPECT_EQ(b.ptr, kZone);
    const uintptr_t a = b.ptr;
    ASSERT_EQ(run.alloc(256, 7, &b), PlanRun::Alloc::kServed);
    EXPECT_EQ(b.ptr, kZone + 512);
    const uintptr_t bb = b.ptr;
    uint64_t size = 0;
    ASSERT_EQ(run.free(a, ZARENA_ANY_EPOCH, &size), FreeOutcome::kOk);
    EXPECT_EQ(size, 512u);
    ASSERT_EQ(run.alloc(512, 0, &b), PlanRun::Alloc::kServed);
    EXPECT_EQ(b.ptr, kZone);
    ASSERT_EQ(run.free(b.ptr, ZARENA_ANY_EPOCH, &size), FreeOutcome::kOk);
    ASSERT_EQ(run.free(bb, ZARENA_ANY_EPOCH, &size), FreeOutcome::kOk);
    ASSERT_TRUE(run.end_step()) << step;
  }
  EXPECT_EQ(run.hits(), 9u);
  EXPECT_EQ(run.steps(), 3u);
  EXPECT_FALSE(run.any_live());
}

TEST(PlanRun, ALateFreeEndsThePlanBeforeTheSpaceIsHandedOut) {
  PlanRun run(three_items(), kZone);
  run.engage();
  PlanRun::Block b{};
  ASSERT_EQ(run.alloc(512, 0, &b), PlanRun::Alloc::kServed);
  ASSERT_EQ(run.alloc(256, 7, &b), PlanRun::Alloc::kServed);
  // A is still live: C would overlap it.
  EXPECT_EQ(run.alloc(512, 0, &b), PlanRun::Alloc::kDeviation);
  EXPECT_EQ(run.miss_reason(), uint64_t{ZARENA_PLAN_MISS_LATE});
  EXPECT_EQ(run.miss_index(), 2u);
  EXPECT_FALSE(run.engaged());
  EXPECT_EQ(run.alloc(512, 0, &b), PlanRun::Alloc::kLibrary) << "the rest of the step is dynamic";
  PlanRun::Totals t;
  run.totals(&t);
  EXPECT_EQ(t.live_bytes, 768u);
  EXPECT_EQ(t.live_count, 2u);
  EXPECT_FALSE(run.end_step());
}

TEST(PlanRun, AnotherSizeTagOrAnExtraAllocationIsADeviation) {
  {
    PlanRun run(three_items(), kZone);
    run.engage();
    PlanRun::Block b{};
    EXPECT_EQ(run.alloc(1024, 0, &b), PlanRun::Alloc::kDeviation);
    EXPECT_EQ(run.miss_reason(), uint64_t{ZARENA_PLAN_MISS_SIZE});
  }
  {
    PlanRun run(three_items(), kZone);
    run.engage();
    PlanRun::Block b{};
    ASSERT_EQ(run.alloc(512, 0, &b), PlanRun::Alloc::kServed);
    EXPECT_EQ(run.alloc(256, 8, &b), PlanRun::Alloc::kDeviation);
    EXPECT_EQ(run.miss_reason(), uint64_t{ZARENA_PLAN_MISS_TAG});
    EXPECT_EQ(run.miss_index(), 1u);
  }
  {
    PlanRun run(three_items(), kZone);
    run.engage();
    PlanRun::Block b{};
    uint64_t size = 0;
    ASSERT_EQ(run.alloc(512, 0, &b), PlanRun::Alloc::kServed);
    ASSERT_EQ(run.free(b.ptr, ZARENA_ANY_EPOCH, &size), FreeOutcome::kOk);
    ASSERT_EQ(run.alloc(256, 7, &b), PlanRun::Alloc::kServed);
    ASSERT_EQ(run.alloc(512, 0, &b), PlanRun::Alloc::kServed);
    EXPECT_EQ(run.alloc(64, 0, &b), PlanRun::Alloc::kDeviation);
    EXPECT_EQ(run.miss_reason(), uint64_t{ZARENA_PLAN_MISS_EXTRA});
  }
  {
    PlanRun run(three_items(), kZone);
    run.engage();
    PlanRun::Block b{};
    ASSERT_EQ(run.alloc(512, 0, &b), PlanRun::Alloc::kServed);
    EXPECT_FALSE(run.end_step()) << "a step cut short";
    EXPECT_EQ(run.miss_reason(), uint64_t{ZARENA_PLAN_MISS_SHORT});
  }
}

TEST(PlanRun, FreeErrorsChangeNothing) {
  PlanRun run(three_items(), kZone);
  run.engage();
  PlanRun::Block a{}, b{};
  uint64_t size = 0;
  ASSERT_EQ(run.alloc(512, 0, &a), PlanRun::Alloc::kServed);
  ASSERT_EQ(run.alloc(256, 7, &b), PlanRun::Alloc::kServed);
  EXPECT_EQ(run.free(a.ptr + 256, ZARENA_ANY_EPOCH, &size), FreeOutcome::kNotOwned);
  EXPECT_EQ(run.free(b.ptr, 3, &size), FreeOutcome::kStale) << "another epoch named";
  ASSERT_EQ(run.free(b.ptr, 0, &size), FreeOutcome::kOk);
  EXPECT_EQ(run.free(b.ptr, ZARENA_ANY_EPOCH, &size), FreeOutcome::kDoubleFree);
  PlanRun::Totals t;
  run.totals(&t);
  EXPECT_EQ(t.live_count, 1u);
  run.set_epoch(1);  // a reset: A is reclaimed
  EXPECT_EQ(run.free(a.ptr, ZARENA_ANY_EPOCH, &size), FreeOutcome::kStale);
  EXPECT_FALSE(run.any_live());
}

TEST(PlanRun, PinsDeferFreesAndSurviveResets) {
  PlanRun run(three_items(), kZone);
  run.engage();
  PlanRun::Block a{};
  uint64_t size = 0, freed = 0;
  ASSERT_EQ(run.alloc(512, 0, &a), PlanRun::Alloc::kServed);
  ASSERT_EQ(run.pin(a.ptr), PinOutcome::kOk);
  ASSERT_EQ(run.free(a.ptr, ZARENA_ANY_EPOCH, &size), FreeOutcome::kDeferred);
  EXPECT_EQ(run.free(a.ptr, ZARENA_ANY_EPOCH, &size), FreeOutcome::kDoubleFree);
  run.set_epoch(1);
  EXPECT_TRUE(run.any_live()) << "a pinned block survives the reset";
  ASSERT_EQ(run.unpin(a.ptr, &freed), PinOutcome::kOk);
  EXPECT_EQ(freed, 512u) << "the last unpin completes the deferred free";
  EXPECT_FALSE(run.any_live());
  EXPECT_EQ(run.unpin(a.ptr, &freed), PinOutcome::kFreed);

  PlanRun run2(three_items(), kZone);
  run2.engage();
  ASSERT_EQ(run2.alloc(512, 0, &a), PlanRun::Alloc::kServed);
  ASSERT_EQ(run2.pin(a.ptr), PinOutcome::kOk);
  run2.set_epoch(1);
  run2.set_epoch(2);
  ASSERT_EQ(run2.unpin(a.ptr, &freed), PinOutcome::kOk);
  EXPECT_EQ(freed, 0u);
  EXPECT_TRUE(run2.any_live()) << "an unpinned survivor stays live in the new epoch";
  EXPECT_EQ(run2.unpin(a.ptr, &freed), PinOutcome::kNotPinned);
  EXPECT_EQ(run2.free(a.ptr, 0, &size), FreeOutcome::kOk) << "freed by its handed-out epoch";
}

TEST(PlanRun, PersistentInstancesSurviveResets) {
  PlanRun run(three_items(), kZone);
  run.engage();
  PlanRun::Block a{};
  ASSERT_EQ(run.alloc(512, 0, &a), PlanRun::Alloc::kServed);
  run.apply_floor(a.ptr + 512, 0);  // the floor right above it
  run.set_epoch(5);
  EXPECT_TRUE(run.any_live());
  std::vector<PlanRun::LiveInstance> live;
  run.live_instances(&live);
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].ptr, kZone);
  EXPECT_EQ(live[0].epoch, 0u);
}

// --- the learner ----------------------------------------------------------------------

// One step of a loop: x (freed at once), y (freed at the step's end), g (freed early in
// the next step, like a gradient), w (never freed).
void loop_step(StepLearner& l, uintptr_t base, uintptr_t* g_prev, bool with_w) {
  l.on_alloc(base + 0, 1024, 1, 9, 0);
  if (*g_prev != 0) l.on_free(*g_prev);
  l.on_alloc(base + 1024, 512, 2, 9, 0);
  l.on_free(base + 0);
  l.on_alloc(base + 4096, 256, 3, 11, 0);
  if (with_w) l.on_alloc(base + 8192 + base / 16, 256, 4, 9, 0);
  l.on_free(base + 1024);
  *g_prev = base + 4096;
}

TEST(StepLearner, TwoEqualStepsGiveEveryFreePoint) {
  StepLearner l;
  LearnedStep s;
  uintptr_t g = 0;
  loop_step(l, 0x10000, &g, true);
  EXPECT_FALSE(l.end_step(&s)) << "one step is not a repetition";
  loop_step(l, 0x20000, &g, true);
  ASSERT_TRUE(l.end_step(&s));
  ASSERT_EQ(s.items.size(), 4u);
  EXPECT_EQ(s.items[0].freed, LearnedItem::Freed::kSameStep);
  EXPECT_EQ(s.items[0].before, 2u);
  EXPECT_EQ(s.items[1].freed, LearnedItem::Freed::kSameStep);
  EXPECT_EQ(s.items[1].before, 4u);
  EXPECT_EQ(s.items[2].freed, LearnedItem::Freed::kNextStep);
  EXPECT_EQ(s.items[2].before, 1u);
  EXPECT_EQ(s.items[3].freed, LearnedItem::Freed::kNotPlanned);
  EXPECT_EQ(s.items[2].tag, 3u);
  EXPECT_EQ(s.thread_count, 2u);
  EXPECT_FALSE(s.any_thread);
}

TEST(StepLearner, ADifferentStepIsNotARepetition) {
  StepLearner l;
  LearnedStep s;
  uintptr_t g = 0;
  loop_step(l, 0x10000, &g, true);
  EXPECT_FALSE(l.end_step(&s));
  loop_step(l, 0x20000, &g, false);  // one allocation fewer
  EXPECT_FALSE(l.end_step(&s));
  loop_step(l, 0x30000, &g, false);
  EXPECT_TRUE(l.end_step(&s)) << "two equal steps in a row";
  // The previous step's block freed at another point: the step is still the same (the
  // plan takes that point from the latest step).
  l.on_alloc(0x40000, 1024, 1, 9, 0);
  l.on_alloc(0x41000, 512, 2, 9, 0);
  l.on_free(0x40000);
  l.on_free(g);
  l.on_alloc(0x44000, 256, 3, 11, 0);
  l.on_free(0x41000);
  ASSERT_TRUE(l.end_step(&s));
  EXPECT_EQ(s.items[2].freed, LearnedItem::Freed::kNextStep);
  EXPECT_EQ(s.items[2].before, 2u);
  // A block of its own step freed at another point: not the same.
  l.on_alloc(0x50000, 1024, 1, 9, 0);
  l.on_free(0x44000);
  l.on_alloc(0x51000, 512, 2, 9, 0);
  l.on_alloc(0x54000, 256, 3, 11, 0);
  l.on_free(0x50000);
  l.on_free(0x51000);
  EXPECT_FALSE(l.end_step(&s));
}

TEST(StepLearner, APinnedBlockIsNotPartOfAPlan) {
  StepLearner l;
  LearnedStep s;
  uintptr_t g = 0;
  loop_step(l, 0x10000, &g, false);
  l.on_pin(0x10000 + 4096);
  EXPECT_FALSE(l.end_step(&s));
  loop_step(l, 0x20000, &g, false);
  EXPECT_FALSE(l.end_step(&s));
}

}  // namespace
}  // namespace zarena_core
