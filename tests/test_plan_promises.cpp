// The header's promises on the planned path, one test each, under the interleavings that
// broke them (issue 31, part 1): pins racing resets, zones given back and claimed at
// resets, interior pointers, stale pointers while a zone goes back, the epoch a run
// engages with, poison at resets, floors lowered, the plans' memory, what one stats or
// live-block snapshot shows, and what a reset costs while plans learn. Each failed on the
// library before its fix (docs/PLANS.md, "Promises").
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "base/test_points.h"
#include "support.h"
#include "zarena/zarena_plan.h"
#include "zarena/zarena_testing.h"

namespace {

using namespace zarena_test;
namespace tp = zarena_core::test_points;

constexpr uint64_t kCapacity = 32 * kMiB;
constexpr uint64_t kBlock = 4096;

zarena* plan_arena(const char* name, uint32_t flags = 0) {
  return make_host_arena(kCapacity, name, ZARENA_OVERFLOW_REFUSE, ZARENA_FLAG_PLAN | flags);
}

// Runs steps of `n` allocations of kBlock, each left to the reset that ends the step,
// until the plan serves one whole; the blocks of that step come back (live, planned).
std::vector<zarena_block> planned_step(zarena* a, int n) {
  std::vector<zarena_block> b(n);
  for (int step = 0; step < 8; ++step) {
    EXPECT_EQ(zarena_reset(a), ZARENA_OK);
    bool all = true;
    for (auto& x : b) {
      EXPECT_EQ(zarena_alloc_ex(a, kBlock, 0, &x), ZARENA_OK) << zarena_last_error();
      all = all && (x.flags & ZARENA_BLOCK_PLANNED) != 0;
    }
    if (all) return b;
  }
  ADD_FAILURE() << "the plan never served a whole step";
  return b;
}

// A pin that answers OK keeps its block across a reset that races it: after the unpin the
// block is live (freed OK, never STALE), and no later planned block lands on its bytes
// while it is pinned. (PlanRun::pin stamped its pin after the reset's re-stamp looked.)
TEST(PlanPromises, PinRacingAResetKeepsItsBlock) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena* a = plan_arena("pin-race");
  constexpr int kN = 64;
  const int rounds = 300 / kSanitizerSlowdown;
  // One window per round, on the first pin, held until the round's reset has begun and
  // had 20 yields to get as far as it can: the reset lands between that pin's check and
  // its mark, or waits for the mark where the library excludes that.
  std::atomic<bool> reset_begun{false};
  int begun_at = -1;  // the pinning thread's alone: only it reaches the point
  YieldAt window({tp::Point::kPlanPinChecked}, 2000, [&](int i) {
    if (i == 0) begun_at = -1;
    if (!reset_begun.load()) return false;
    if (begun_at < 0) begun_at = i;
    return i - begun_at >= 20;
  });
  uint64_t pinned_ok = 0, raced = 0, planned = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<zarena_block> b = planned_step(a, kN);
    if (HasFailure()) break;
    planned += kN;
    for (auto& x : b) std::memset(x.ptr, round & 0xFF, 64);
    std::atomic<bool> go{false};
    reset_begun.store(false);
    window.allow(1);
    std::thread resetter([&] {
      while (!go.load()) std::this_thread::yield();
      reset_begun.store(true);
      EXPECT_EQ(zarena_reset(a), ZARENA_OK);
    });
    std::vector<zarena_status> pin(kN);
    const uint64_t before = zarena_epoch(a);
    go.store(true);
    for (int i = 0; i < kN; ++i) pin[i] = zarena_pin(a, b[i].ptr);
    resetter.join();
    if (zarena_epoch(a) == before + 1) ++raced;
    // The next step's planned blocks must not land on a pinned one.
    std::vector<zarena_block> next(kN);
    for (auto& x : next) ASSERT_EQ(zarena_alloc_ex(a, kBlock, 0, &x), ZARENA_OK);
    for (int i = 0; i < kN; ++i) {
      if (pin[i] != ZARENA_OK) {
        ASSERT_EQ(pin[i], ZARENA_E_STALE) << "round " << round << " block " << i;
        continue;
      }
      ++pinned_ok;
      const auto* p = static_cast<const uint8_t*>(b[i].ptr);
      for (const auto& x : next) {
        const auto* q = static_cast<const uint8_t*>(x.ptr);
        ASSERT_TRUE(q + x.size <= p || q >= p + b[i].size)
            << "round " << round << ": a planned block over a block pinned across the reset";
      }
      ASSERT_EQ(p[0], round & 0xFF);
      ASSERT_EQ(zarena_unpin(a, b[i].ptr), ZARENA_OK) << zarena_last_error();
      ASSERT_EQ(zarena_free(a, b[i].ptr), ZARENA_OK)
          << "round " << round
          << ": a block pinned OK across a reset was dead after its unpin: " << zarena_last_error();
    }
  }
  EXPECT_GT(planned, 0u);
  EXPECT_GT(pinned_ok, 0u);
  EXPECT_GT(raced, 0u);
  EXPECT_GT(window.ended_by_event(), 0u) << "no reset began inside a pin's window";
  EXPECT_EQ(stats_of(a).pinned_bytes, 0u);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// Steps of two shapes, each repeated until planned: every change of shape gives the zone
// back at a reset (a new layout gets a new zone). A free of a planned block of the old
// zone, which that reset reclaimed, is STALE (plain or naming its epoch), wherever its
// address lies now: in the region again, or in the new zone.
TEST(PlanPromises, FreeOfAPlannedBlockWhoseZoneWentBackIsStale) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena* a = plan_arena("zone-back");
  uint64_t checked = 0;
  for (int shape = 0; shape < 6; ++shape) {
    const uint64_t size = kBlock * (1 + shape % 2) * (shape + 1);
    std::vector<zarena_block> last;
    for (int step = 0; step < 5; ++step) {
      ASSERT_EQ(zarena_reset(a), ZARENA_OK);
      last.assign(6, zarena_block{});
      for (auto& x : last) ASSERT_EQ(zarena_alloc_ex(a, size, 0, &x), ZARENA_OK);
      ASSERT_EQ(zarena_free(a, last[1].ptr), ZARENA_OK);
      last.erase(last.begin() + 1);
    }
    ASSERT_NE(last[0].flags & ZARENA_BLOCK_PLANNED, 0u) << "shape " << shape;
    // The reset that ends the shape reclaims them; the next shape's learning steps and
    // its zone's claim follow.
    ASSERT_EQ(zarena_reset(a), ZARENA_OK);
    for (int step = 0; step < 3; ++step) {
      ASSERT_EQ(zarena_reset(a), ZARENA_OK);
      zarena_block y;
      for (int i = 0; i < 5; ++i) ASSERT_EQ(zarena_alloc_ex(a, size * 3, 1, &y), ZARENA_OK);
    }
    ASSERT_EQ(zarena_reset(a), ZARENA_OK);
    for (const auto& x : last) {
      EXPECT_EQ(zarena_free_at(a, x.ptr, x.epoch), ZARENA_E_STALE)
          << "shape " << shape << ": " << zarena_last_error();
      EXPECT_EQ(zarena_free(a, x.ptr), ZARENA_E_STALE)
          << "shape " << shape << ": " << zarena_last_error();
      ++checked;
    }
  }
  EXPECT_GT(stats_of(a).plans_learned, 3u);
  EXPECT_GT(checked, 0u);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// The reset that ends the second learning step reclaims its blocks, and the plan's zone is
// claimed over their space at that same boundary: a free of one of them is STALE (the
// plan, which holds the address now, knows no block of its own there).
TEST(PlanPromises, FreeOfABlockReclaimedAtTheZonesClaimIsStale) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena* a = plan_arena("zone-claim");
  std::vector<zarena_block> b(8);
  zarena_stats s{};
  for (int step = 0; step < 4; ++step) {
    ASSERT_EQ(zarena_reset(a), ZARENA_OK);
    for (size_t i = 0; i < b.size(); ++i) {
      ASSERT_EQ(zarena_alloc_ex(a, kBlock * (1 + i % 3), 0, &b[i]), ZARENA_OK);
    }
    ASSERT_EQ(b[0].flags & ZARENA_BLOCK_PLANNED, 0u) << "planned before a zone was claimed";
    const uint64_t learned = stats_of(a).plans_learned;
    ASSERT_EQ(zarena_reset(a), ZARENA_OK);
    s = stats_of(a);
    if (s.plans_learned > learned) break;  // this reset engaged the plan: its zone is claimed
  }
  ASSERT_GT(s.plan_zone_bytes, 0u) << "no zone: the test proves nothing";
  const zarena_plan_view* v = zarena_plan_view_get(a);
  ASSERT_NE(v, nullptr);
  int in_zone = 0;
  for (const auto& x : b) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(x.ptr);
    in_zone += p >= v->zone && p < v->zone + v->zone_bytes;
    EXPECT_EQ(zarena_free(a, x.ptr), ZARENA_E_STALE) << zarena_last_error();
    EXPECT_EQ(zarena_free_at(a, x.ptr, x.epoch), ZARENA_E_STALE) << zarena_last_error();
  }
  EXPECT_GT(in_zone, 0) << "the zone lies elsewhere: the test proves nothing";
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// A view of a planned block (a pointer inside it) pins and unpins the block, as a view of
// a region block does; a free at an interior address where another instance of the plan
// starts (freed earlier in the step) is NOT_OWNED, and a pin there pins the live block.
TEST(PlanPromises, InteriorPointersOfPlannedBlocks) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena* a = plan_arena("interior");
  zarena_block x{}, y{}, big{};
  for (int step = 0; step < 6; ++step) {
    ASSERT_EQ(zarena_reset(a), ZARENA_OK);
    // x and y freed, then a block as large as both: the plan puts it over their space.
    ASSERT_EQ(zarena_alloc_ex(a, kBlock, 0, &x), ZARENA_OK);
    ASSERT_EQ(zarena_alloc_ex(a, kBlock, 0, &y), ZARENA_OK);
    ASSERT_EQ(zarena_free(a, x.ptr), ZARENA_OK);
    ASSERT_EQ(zarena_free(a, y.ptr), ZARENA_OK);
    ASSERT_EQ(zarena_alloc_ex(a, 2 * kBlock, 0, &big), ZARENA_OK);
  }
  ASSERT_NE(big.flags & ZARENA_BLOCK_PLANNED, 0u) << "the plan did not serve";
  char* start = static_cast<char*>(big.ptr);
  char* dead =
      static_cast<char*>(x.ptr) == start ? static_cast<char*>(y.ptr) : static_cast<char*>(x.ptr);
  ASSERT_TRUE(dead > start && dead < start + big.size)
      << "the plan did not lay the large block over both: the test proves nothing";
  const zarena_stats before = stats_of(a);
  EXPECT_EQ(zarena_free(a, dead), ZARENA_E_NOT_OWNED) << zarena_last_error();
  EXPECT_EQ(zarena_free(a, start + 256), ZARENA_E_NOT_OWNED) << zarena_last_error();
  EXPECT_EQ(stats_of(a).live_allocs, before.live_allocs);
  // A view pins the block it lies in; its unpin goes through another view.
  ASSERT_EQ(zarena_pin(a, start + 512), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(stats_of(a).pinned_bytes, big.size);
  ASSERT_EQ(zarena_pin(a, dead), ZARENA_OK) << zarena_last_error();
  ASSERT_EQ(zarena_free(a, start), ZARENA_OK);  // deferred to the last unpin
  EXPECT_EQ(stats_of(a).deferred_frees, 1u);
  ASSERT_EQ(zarena_unpin(a, dead + 256), ZARENA_OK) << zarena_last_error();
  ASSERT_EQ(zarena_unpin(a, start + 1024), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(zarena_unpin(a, start), ZARENA_E_DOUBLE_FREE);       // freed at that unpin
  EXPECT_EQ(zarena_unpin(a, start + 1024), ZARENA_E_NOT_OWNED);  // as a region block's view
  const zarena_stats after = stats_of(a);
  EXPECT_EQ(after.pinned_bytes, 0u);
  EXPECT_EQ(after.deferred_frees, 0u);
  EXPECT_EQ(after.live_allocs, before.live_allocs - 1);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// While a zone goes back (its run no longer answers, its pieces not yet the region's), a
// pin, unpin or free of an old planned pointer is refused and changes nothing: it used to
// land on the zone's piece (a pin OK; an unpin took the zone's own pin).
struct ReleaseWindow {
  zarena* a = nullptr;
  std::vector<void*> stale;
  int hits = 0;
  std::vector<zarena_status> pin, unpin, free;
};

void in_release_window(tp::Point p, void* ctx) {
  if (p != tp::Point::kZoneUnpublished) return;
  auto* w = static_cast<ReleaseWindow*>(ctx);
  ++w->hits;
  for (void* q : w->stale) {
    w->pin.push_back(zarena_pin(w->a, q));
    w->unpin.push_back(zarena_unpin(w->a, q));
    w->free.push_back(zarena_free(w->a, q));
  }
}

TEST(PlanPromises, StalePointersWhileAZoneGoesBackAreRefused) {
  LogCapture logs(ZARENA_LOG_OFF);
  ReleaseWindow w;
  w.a = plan_arena("release-window");
  std::vector<zarena_block> b = planned_step(w.a, 6);
  ASSERT_FALSE(HasFailure());
  for (const auto& x : b) w.stale.push_back(x.ptr);
  w.stale.push_back(static_cast<char*>(b[2].ptr) + 256);  // a view
  ASSERT_EQ(zarena_reset(w.a), ZARENA_OK);                // reclaims them
  tp::set(&in_release_window, &w);
  // Another shape, until its plan engages: the old zone goes back on the way.
  for (int step = 0; step < 6 && w.hits == 0; ++step) {
    zarena_block y;
    for (int i = 0; i < 3; ++i) ASSERT_EQ(zarena_alloc_ex(w.a, 3 * kBlock, 2, &y), ZARENA_OK);
    ASSERT_EQ(zarena_reset(w.a), ZARENA_OK);
  }
  tp::set(nullptr, nullptr);
  ASSERT_GT(w.hits, 0) << "no zone went back: the test proves nothing";
  for (size_t i = 0; i < w.pin.size(); ++i) {
    EXPECT_NE(w.pin[i], ZARENA_OK) << "pin " << i << " of a stale planned pointer";
    EXPECT_NE(w.unpin[i], ZARENA_OK) << "unpin " << i << " of a stale planned pointer";
    EXPECT_NE(w.free[i], ZARENA_OK) << "free " << i << " of a stale planned pointer";
  }
  const zarena_stats s = stats_of(w.a);
  EXPECT_EQ(s.pinned_bytes, 0u);
  EXPECT_EQ(s.pinned_blocks, 0u);
  EXPECT_LT(s.pinned_peak_bytes, kCapacity) << "the pin tally went below zero";
  EXPECT_EQ(w.a != nullptr ? zarena_destroy(w.a) : ZARENA_OK, ZARENA_OK);
}

// One step of `n` allocations of kBlock * (1 + i), each checked to carry an epoch the
// arena had during its call, and freed by that epoch. ask_at: before the allocation of
// that index, a reset is asked for (-1: none). False after a wrong epoch.
bool epoch_checked_step(zarena* a, int step, int n, int ask_at, ResetThread* resets,
                        std::atomic<uint64_t>* handed, uint64_t* planned) {
  EXPECT_EQ(zarena_step_begin(a), ZARENA_OK);
  for (int i = 0; i < n; ++i) {
    if (i == ask_at) resets->ask();
    const uint64_t e0 = zarena_epoch(a);
    zarena_block x;
    if (zarena_alloc_ex(a, kBlock * (1 + i), 0, &x) != ZARENA_OK) {
      ADD_FAILURE() << zarena_last_error();
      return false;
    }
    handed->fetch_add(1);
    const uint64_t e1 = zarena_epoch(a);
    if (x.epoch < e0 || x.epoch > e1) {
      ADD_FAILURE() << "step " << step << ": a block of epoch " << x.epoch
                    << " handed out while the arena went from epoch " << e0 << " to " << e1;
      return false;
    }
    if (x.flags & ZARENA_BLOCK_PLANNED) ++*planned;
    (void)zarena_free_at(a, x.ptr, x.epoch);  // OK, or STALE after a racing reset
  }
  return true;
}

// A planned block carries the epoch of the arena at its allocation, also when the plan
// engages at a boundary that races another thread's reset (the run used to take its epoch
// from a copy read outside the reset's lock).
TEST(PlanPromises, PlannedBlocksCarryTheArenasEpoch) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena* a = plan_arena("epoch-race");
  YieldAt window({tp::Point::kPlanEngaging});
  uint64_t planned = 0;
  std::atomic<uint64_t> handed{0};
  {
    ResetThread resets(a);
    std::mt19937_64 rng(29);
    // A reset every few steps (so that steps repeat and plans engage), begun as the next
    // step begins: it races that step's boundary, where a plan engages.
    uint64_t next = 2;
    const int steps = 4000 / kSanitizerSlowdown;
    for (int step = 0; step < steps; ++step) {
      const bool ask = static_cast<uint64_t>(step) == next;
      if (ask) next = step + 2 + rng() % 4;
      if (!epoch_checked_step(a, step, 4, ask ? 0 : -1, &resets, &handed, &planned)) break;
    }
  }
  EXPECT_GT(planned, 0u) << "the plan never served: the test proves nothing";
  EXPECT_GT(zarena_epoch(a), 100u) << "few resets raced: the test proves little";
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// A reset moves the region's epoch and then the plans': a planned allocation between the
// two carried the ended epoch although zarena_epoch() already answered the new one, a
// block dead at birth whose bytes the plan could hand out again at once. The reset now
// holds the plans' lock while the epoch moves. Here the resetting thread waits at that
// point until the main thread's next allocation returns (or a while, where the library
// makes that allocation wait for the reset).
struct WaitForAnAllocation {
  std::atomic<uint64_t>* handed;
  static void hit(tp::Point p, void* ctx) {
    if (p != tp::Point::kResetEpochMoved) return;
    const auto* w = static_cast<const WaitForAnAllocation*>(ctx);
    const uint64_t before = w->handed->load();
    for (int i = 0; i < 300 && w->handed->load() == before; ++i) std::this_thread::yield();
  }
};

TEST(PlanPromises, AllocationsRacingAResetNeverCarryTheEndedEpoch) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena* a = plan_arena("epoch-moves");
  std::atomic<uint64_t> handed{0};
  WaitForAnAllocation wait{&handed};
  tp::set(&WaitForAnAllocation::hit, &wait);
  uint64_t planned = 0;
  {
    ResetThread resets(a);
    std::mt19937_64 rng(31);
    // Steps repeat, so the plan engages; every few steps a reset is asked for in the
    // middle of one, and the rest of that step's allocations race it.
    uint64_t next = 6;
    const int steps = 1200 / kSanitizerSlowdown;
    for (int step = 0; step < steps; ++step) {
      int ask_at = -1;
      if (static_cast<uint64_t>(step) == next) {
        ask_at = 1 + static_cast<int>(rng() % 3);
        next = step + 4 + rng() % 4;
      }
      if (!epoch_checked_step(a, step, 4, ask_at, &resets, &handed, &planned)) break;
    }
  }
  tp::set(nullptr, nullptr);
  EXPECT_GT(planned, 0u) << "the plan never served: the test proves nothing";
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// With poison on, a reset fills the planned blocks it reclaims, as it fills the region's.
TEST(PlanPromises, AResetPoisonsThePlannedBlocksItReclaims) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena* a = plan_arena("reset-poison", ZARENA_FLAG_POISON);
  std::vector<zarena_block> b = planned_step(a, 4);
  ASSERT_FALSE(HasFailure());
  for (auto& x : b) std::memset(x.ptr, 0x11, x.size);
  ASSERT_EQ(zarena_pin(a, b[3].ptr), ZARENA_OK);
  const uint64_t fills = stats_of(a).poison_fills;
  ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  uint32_t word = 0;
  for (int i = 0; i < 3; ++i) {
    std::memcpy(&word, static_cast<char*>(b[i].ptr) + b[i].size - 4, 4);
    EXPECT_EQ(word, zarena_core::kDefaultPoisonWord) << "block " << i << " reclaimed, not poisoned";
  }
  EXPECT_EQ(static_cast<uint8_t*>(b[3].ptr)[0], 0x11) << "a pinned block was poisoned";
  EXPECT_GE(stats_of(a).poison_fills, fills + 3);
  ASSERT_EQ(zarena_unpin(a, b[3].ptr), ZARENA_OK);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// The floor raised over the zone keeps its planned blocks across resets; lowered again,
// they are the current epoch's (the next reset reclaims them), as region blocks are.
TEST(PlanPromises, LoweringTheFloorGivesPlannedBlocksBack) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena* a = plan_arena("floor-down");
  std::vector<zarena_block> b = planned_step(a, 4);
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);  // the floor over everything
  ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  EXPECT_EQ(stats_of(a).plan_live_bytes, 4 * kBlock) << "persistent planned blocks survive";
  ASSERT_EQ(zarena_set_floor(a, 0), ZARENA_OK) << zarena_last_error();
  ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  const zarena_stats s = stats_of(a);
  EXPECT_EQ(s.plan_live_bytes, 0u) << "the floor came down: the reset reclaims them";
  EXPECT_EQ(s.used_bytes, 0u);
  for (const auto& x : b) EXPECT_EQ(zarena_free(a, x.ptr), ZARENA_E_STALE);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// One stats snapshot: never more bytes pinned than live, no count near 2^64, while
// threads pin, unpin and free planned blocks and the steps go on.
TEST(PlanPromises, OneStatsSnapshotIsOneInstant) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena* a = plan_arena("stats-instant");
  // Each window (20 yields) ends early once a snapshot began inside it and had 2 yields to
  // get as far as it can (where the library excludes the overlap, it waits for the mark).
  std::atomic<uint64_t> begun{0};
  uint64_t mark = 0;  // the worker's alone: only it reaches the points
  int seen_at = -1;
  YieldAt window({tp::Point::kPlanPinChecked, tp::Point::kPlanUnpinned}, 20, [&](int i) {
    if (i == 0) mark = begun.load(), seen_at = -1;
    if (begun.load() == mark) return false;
    if (seen_at < 0) seen_at = i;
    return i - seen_at >= 2;
  });
  std::atomic<bool> done{false};
  std::thread worker([&] {
    std::mt19937_64 rng(5);
    for (int step = 0; step < 800 / kSanitizerSlowdown; ++step) {
      std::vector<zarena_block> b(16);
      for (auto& x : b) EXPECT_EQ(zarena_alloc_ex(a, kBlock, 0, &x), ZARENA_OK);
      for (auto& x : b) {
        // Learned without pins (a pinned block is no part of a plan), then pinned at random.
        if (step >= 4 && rng() % 2) {
          EXPECT_EQ(zarena_pin(a, x.ptr), ZARENA_OK);
          EXPECT_EQ(zarena_free(a, x.ptr), ZARENA_OK);
          EXPECT_EQ(zarena_unpin(a, x.ptr), ZARENA_OK);
        } else {
          EXPECT_EQ(zarena_free(a, x.ptr), ZARENA_OK);
        }
      }
      EXPECT_EQ(zarena_reset(a), ZARENA_OK);
    }
    done.store(true);
  });
  uint64_t samples = 0;
  bool torn = false;
  while (!done.load() && !torn) {
    begun.fetch_add(1);
    const zarena_stats s = stats_of(a);
    torn = s.pinned_bytes > s.used_bytes || s.pinned_blocks > s.live_allocs ||
           s.deferred_frees > s.live_allocs;
    EXPECT_FALSE(torn) << "sample " << samples << ": pinned " << s.pinned_bytes << " bytes in "
                       << s.pinned_blocks << " blocks, used " << s.used_bytes << " in "
                       << s.live_allocs << ", deferred " << s.deferred_frees;
    ++samples;
  }
  worker.join();
  EXPECT_GT(stats_of(a).plan_hits, 0u);
  EXPECT_GT(window.ended_by_event(), 0u) << "no snapshot began inside a window";
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// One live-block walk: never two overlapping blocks, while another thread frees planned
// blocks and the plan hands their space to the next ones.
TEST(PlanPromises, OneLiveBlockWalkNeverOverlaps) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena* a = plan_arena("walk-instant");
  YieldAt window({tp::Point::kPlanWalkInstance}, 200);
  constexpr uint64_t kWalks = 300 / kSanitizerSlowdown;
  std::atomic<uint64_t> walks{0};
  std::thread worker([&] {
    // Until the walker is done (bounded: a busy machine may give it few turns).
    for (int step = 0; step < 100000 && walks.load() < kWalks; ++step) {
      zarena_block prev{};
      for (int i = 0; i < 32; ++i) {
        zarena_block x;
        EXPECT_EQ(zarena_alloc_ex(a, kBlock, 0, &x), ZARENA_OK);
        if (i > 0) {
          EXPECT_EQ(zarena_free(a, prev.ptr), ZARENA_OK);
        }
        prev = x;
      }
      EXPECT_EQ(zarena_reset(a), ZARENA_OK);
    }
    walks.store(kWalks);
  });
  struct Walk {
    std::vector<std::pair<uintptr_t, uint64_t>> blocks;
  };
  bool overlap = false;
  // The walks that count are those made while the plan serves.
  while (walks.load() < kWalks && stats_of(a).plan_hits == 0) std::this_thread::yield();
  for (; walks.load() < kWalks && !overlap; walks.fetch_add(1)) {
    Walk w;
    EXPECT_EQ(zarena_for_each_live_block(
                  a,
                  [](void* u, const zarena_live_block* b) {
                    static_cast<Walk*>(u)->blocks.push_back(
                        {reinterpret_cast<uintptr_t>(b->ptr), b->size});
                    return 0;
                  },
                  &w),
              ZARENA_OK);
    std::sort(w.blocks.begin(), w.blocks.end());
    for (size_t i = 1; i < w.blocks.size() && !overlap; ++i) {
      overlap = w.blocks[i - 1].first + w.blocks[i - 1].second > w.blocks[i].first;
      EXPECT_FALSE(overlap) << "walk " << walks.load()
                            << " listed two overlapping live blocks: " << w.blocks[i - 1].first
                            << "+" << w.blocks[i - 1].second << " and " << w.blocks[i].first << "+"
                            << w.blocks[i].second;
    }
  }
  walks.store(kWalks);
  worker.join();
  EXPECT_GT(stats_of(a).plan_hits, 0u);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// A planned block freed while pinned counts in deferred_frees and is listed as freed.
TEST(PlanPromises, APlannedBlockFreedWhilePinnedIsDeferred) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena* a = plan_arena("deferred");
  std::vector<zarena_block> b = planned_step(a, 3);
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(zarena_pin(a, b[1].ptr), ZARENA_OK);
  ASSERT_EQ(zarena_free(a, b[1].ptr), ZARENA_OK);
  EXPECT_EQ(stats_of(a).deferred_frees, 1u);
  uint32_t flags = 0;
  struct Find {
    void* ptr;
    uint32_t* flags;
  } f{b[1].ptr, &flags};
  ASSERT_EQ(zarena_for_each_live_block(
                a,
                [](void* u, const zarena_live_block* x) {
                  auto* f = static_cast<Find*>(u);
                  if (x->ptr == f->ptr) *f->flags = x->flags | 0x80000000u;
                  return 0;
                },
                &f),
            ZARENA_OK);
  EXPECT_NE(flags & 0x80000000u, 0u) << "the pinned block is not in the walk";
  EXPECT_NE(flags & ZARENA_LIVE_FREED, 0u);
  ASSERT_EQ(zarena_unpin(a, b[1].ptr), ZARENA_OK);
  EXPECT_EQ(stats_of(a).deferred_frees, 0u);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// During a capture a planned free skips its poison fill, and so does the free of a block
// of the program's overflow allocator: both count in poison_skipped.
zarena_status host_alloc(void*, uint64_t bytes, uint64_t alignment, void*, void** ptr) {
  *ptr = std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
  return *ptr != nullptr ? ZARENA_OK : ZARENA_E_OUT_OF_MEMORY;
}
void host_free(void*, void* ptr, uint64_t, void*) { std::free(ptr); }

TEST(PlanPromises, PoisonSkippedDuringACaptureIsCounted) {
  LogCapture logs;
  zarena* a = plan_arena("capture-skip", ZARENA_FLAG_POISON);
  zarena_overflow_allocator alloc{};
  alloc.struct_size = sizeof alloc;
  alloc.allocate = &host_alloc;
  alloc.deallocate = &host_free;
  alloc.name = "test";
  ASSERT_EQ(zarena_set_overflow_allocator(a, &alloc), ZARENA_OK) << zarena_last_error();
  std::vector<zarena_block> b = planned_step(a, 3);
  ASSERT_FALSE(HasFailure());
  zarena_block big;
  ASSERT_EQ(zarena_alloc_ex(a, kCapacity - kBlock, 0, &big), ZARENA_OK) << zarena_last_error();
  ASSERT_NE(big.flags & ZARENA_BLOCK_OVERFLOW, 0u);
  const uint64_t skipped = stats_of(a).poison_skipped;
  ASSERT_EQ(zarena_set_capture_active(a, 1), ZARENA_OK);
  ASSERT_EQ(zarena_free(a, b[0].ptr), ZARENA_OK);
  ASSERT_EQ(zarena_free(a, big.ptr), ZARENA_OK);
  EXPECT_EQ(stats_of(a).poison_skipped, skipped + 2);
  ASSERT_EQ(zarena_set_capture_active(a, 0), ZARENA_OK);
  EXPECT_EQ(logs.count("poison.skipped"), 1u);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// While plans learn, a reset walks no block list (the header: a reset is O(slots + pins +
// borrowed blocks)): what the learner needs of it comes from the pinned set and the floor.
TEST(PlanPromises, AResetWhilePlansLearnWalksNoBlocks) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena* a = plan_arena("reset-cost");
  // Weights below the floor: many blocks a walk would visit.
  std::vector<void*> weights(2000);
  for (auto& w : weights) ASSERT_EQ(zarena_alloc(a, 256, &w), ZARENA_OK);
  ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
  static std::atomic<int> walks{0};
  walks.store(0);
  tp::set([](tp::Point p, void*) { walks += p == tp::Point::kRegionWalk; }, nullptr);
  // Steps that never repeat: the plans learn at every reset, never plan.
  for (int step = 0; step < 20; ++step) {
    for (int i = 0; i <= step; ++i) {
      void* p;
      ASSERT_EQ(zarena_alloc(a, kBlock * (1 + (i + step) % 5), &p), ZARENA_OK);
    }
    ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  }
  tp::set(nullptr, nullptr);
  EXPECT_EQ(walks.load(), 0) << "resets walked the live blocks";
  EXPECT_EQ(stats_of(a).plans_learned, 0u);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

}  // namespace
