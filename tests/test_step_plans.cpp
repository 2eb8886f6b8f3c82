// The step-plan controller (src/plan/step_plans.h) driven the way the arena drives it, with
// a stand-in dynamic engine: a random training loop that repeats a step, with random
// deviations (other sizes, extra and missing allocations, late, early and out-of-order
// frees, resets and pins mid-step, a step cut short), checked against a model of every
// live block. The claim under test: a planned block is never handed out over a live one.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "plan/step_plans.h"

namespace zarena_core {
namespace {

constexpr uint64_t kGranule = 256;
constexpr uintptr_t kZones = uintptr_t{1} << 30;    // zones are carved from here
constexpr uintptr_t kDynamic = uintptr_t{1} << 40;  // the dynamic engine's blocks

// Zones carved from kZones. Each window has two obstacles (its zone in pieces around
// them) unless `obstacles` is off; a zone that cannot be claimed falls back to one block.
class FakeZones final : public ZoneOps {
 public:
  bool zone_window(const Zone&, PlanWindow* where) noexcept override {
    if (!obstacles) return false;
    where->window = 0;
    where->obstacles = {{0, kGranule}, {4 * kGranule, 2 * kGranule}};
    return true;
  }
  bool claim_zone(const PlanWindow& where, uint64_t bytes, Zone* out,
                  UnderLock publish) noexcept override {
    if (refuse || refuse_claim) return false;
    if (refuse_next_claims > 0) {
      --refuse_next_claims;
      return false;
    }
    out->base = next_;
    out->pieces.clear();
    uint64_t at = 0;
    for (const plan::ByteRange& o : where.obstacles) {
      if (o.offset >= bytes) break;
      if (o.offset > at) out->pieces.push_back({at, o.offset - at});
      at = std::max(at, o.offset + o.size);
    }
    if (at < bytes) out->pieces.push_back({at, bytes - at});
    take(bytes, out);
    ++claimed;
    publish(now());
    return true;
  }
  bool reserve_zone(uint64_t bytes, Zone* out, UnderLock publish) noexcept override {
    if (refuse) return false;
    out->base = next_;
    out->pieces.assign(1, plan::ByteRange{0, bytes});
    take(bytes, out);
    publish(now());
    return true;
  }
  void release_zone(const Zone& zone, UnderLock unpublish) noexcept override {
    unpublish(now());
    ++released;
    held -= zone.bytes();
  }
  void under_lock(UnderLock fn) noexcept override { fn(now()); }
  bool split_zone_block_w(uintptr_t) noexcept override { return true; }  // no region here
  RegionNow now() const { return RegionNow{epoch, floor}; }
  uint64_t epoch = 0;   // the region's, as the loop's resets move it
  uintptr_t floor = 0;  // no floor
  bool refuse = false, refuse_claim = false, obstacles = true;
  int refuse_next_claims = 0;  // the window changed since the layout: refused, laid out again
  int reserved = 0, released = 0, claimed = 0;
  uint64_t held = 0;

 private:
  void take(uint64_t bytes, Zone* out) {
    next_ += (bytes + 4095) / 4096 * 4096 + 4096;
    ++reserved;
    held += out->bytes();
  }
  uintptr_t next_ = kZones;
};

// The program's view of its blocks, and the check that none overlaps another.
class Model {
 public:
  void add(uintptr_t p, uint64_t size, bool planned, const std::string& where) {
    auto it = live_.upper_bound(p);
    if (it != live_.end()) {
      ASSERT_GE(it->first, p + size)
          << where << ": block " << p << "+" << size << " overlaps live " << it->first;
    }
    if (it != live_.begin()) {
      --it;
      ASSERT_LE(it->first + it->second.size, p)
          << where << ": block " << p << "+" << size << " overlaps live " << it->first << "+"
          << it->second.size;
    }
    live_[p] = Block{size, planned, 0};
  }
  struct Block {
    uint64_t size;
    bool planned;
    uint32_t pins;
  };
  std::map<uintptr_t, Block> live_;
};

// One item of the step the loop repeats.
struct Item {
  uint64_t size;
  uint32_t tag;
  int free_before;  // < n: freed before allocation free_before of the same step; >= n: of the next
                    // step (free_before - n); -1: never
};

std::vector<Item> random_step(std::mt19937_64& rng) {
  const int n = 3 + static_cast<int>(rng() % 40);
  std::vector<Item> step(n);
  for (int i = 0; i < n; ++i) {
    step[i].size = kGranule * (1 + rng() % 8) * ((rng() % 5 == 0) ? 16 : 1);
    step[i].tag = static_cast<uint32_t>(rng() % 3);
    const int r = static_cast<int>(rng() % 10);
    if (r < 6) {
      step[i].free_before = i + 1 + static_cast<int>(rng() % (n - i));  // same step
    } else if (r < 9) {
      step[i].free_before = n + static_cast<int>(rng() % (n + 1));  // next step
    } else {
      step[i].free_before = -1;
    }
  }
  return step;
}

struct Loop {
  explicit Loop(uint64_t seed, uint64_t budget = StepPlans::kRunBudgetBytes)
      : rng(seed), plans(true, kGranule, budget) {}

  std::mt19937_64 rng;
  StepPlans plans;
  FakeZones zones;
  Model model;
  uintptr_t next_dynamic = kDynamic;
  uint64_t epoch = 0;
  uint64_t served = 0, boundaries = 0, engaged_boundaries = 0;

  uintptr_t alloc(uint64_t size, uint32_t tag, uint32_t thread, const std::string& where) {
    PlanRun::Block b{};
    if (plans.alloc(size, tag, thread, &b) == PlanRun::Alloc::kServed) {
      EXPECT_EQ(b.size, size);
      model.add(b.ptr, size, true, where);
      ++served;
      return b.ptr;
    }
    const uintptr_t p = next_dynamic;
    next_dynamic += size;
    if (plans.learning()) plans.learn_alloc(p, size, tag, thread, epoch);
    model.add(p, size, false, where);
    return p;
  }
  void free(uintptr_t p) {
    auto it = model.live_.find(p);
    ASSERT_NE(it, model.live_.end());
    if (PlanRun* run = plans.zone_of(p)) {
      uint64_t size = 0;
      const FreeOutcome f = run->free(p, ZARENA_ANY_EPOCH, &size);
      if (it->second.pins > 0) {
        ASSERT_EQ(f, FreeOutcome::kDeferred);
        deferred.push_back(p);
        return;
      }
      ASSERT_EQ(f, FreeOutcome::kOk) << "free of a live planned block";
      EXPECT_EQ(size, it->second.size);
    } else {
      ASSERT_FALSE(it->second.planned) << "a planned block outside any zone";
      if (plans.learning()) plans.learn_free(p);
      if (it->second.pins > 0) {
        deferred.push_back(p);
        return;
      }
    }
    model.live_.erase(it);
  }
  void pin(uintptr_t p) {
    auto it = model.live_.find(p);
    if (PlanRun* run = plans.zone_of(p)) {
      ASSERT_EQ(run->pin(p), PinOutcome::kOk);
    } else if (plans.learning()) {
      plans.learn_pin(p);
    }
    ++it->second.pins;
  }
  void unpin(uintptr_t p) {
    auto it = model.live_.find(p);
    ASSERT_NE(it, model.live_.end());
    ASSERT_GT(it->second.pins, 0u);
    if (PlanRun* run = plans.zone_of(p)) {
      uint64_t freed = 0;
      ASSERT_EQ(run->unpin(p, &freed), PinOutcome::kOk);
      const bool was_deferred = std::find(deferred.begin(), deferred.end(), p) != deferred.end();
      if (--it->second.pins == 0 && was_deferred) {
        EXPECT_EQ(freed, it->second.size);
        deferred.erase(std::find(deferred.begin(), deferred.end(), p));
        model.live_.erase(it);
      }
    } else if (--it->second.pins == 0 &&
               std::find(deferred.begin(), deferred.end(), p) != deferred.end()) {
      deferred.erase(std::find(deferred.begin(), deferred.end(), p));
      model.live_.erase(it);
    }
  }
  void boundary() {
    PlanEvents ev;
    plans.on_boundary(zones, &ev);
    ++boundaries;
    if (plans.view() != nullptr && (*plans.view()->state & ZARENA_PLAN_ENGAGED))
      ++engaged_boundaries;
  }
  // Every block not pinned is reclaimed; the program forgets them.
  void reset() {
    zones.epoch = ++epoch;
    plans.on_reset_locked(epoch);
    for (auto it = model.live_.begin(); it != model.live_.end();) {
      if (it->second.pins == 0) {
        it = model.live_.erase(it);
      } else {
        ++it;
      }
    }
    if (plans.learning()) {  // as the arena: what survived (pinned), in address order
      StepLearner::ResetSurvivors kept;
      kept.ended_epoch = epoch - 1;
      for (const auto& [p, b] : model.live_) kept.pinned.push_back(p);
      plans.learn_reset(kept);
    }
    boundary();
  }
  std::vector<uintptr_t> deferred;
};

// Runs `steps` steps of `tmpl` with deviations at `rate` (per mille per event).
void run_loop(Loop& L, const std::vector<Item>& tmpl, int steps, int rate, bool resets) {
  const int n = static_cast<int>(tmpl.size());
  std::vector<std::pair<int, uintptr_t>> carry;  // (free before, ptr) of the step before
  std::vector<uintptr_t> pinned;
  for (int s = 0; s < steps; ++s) {
    const std::string where = "step " + std::to_string(s);
    std::vector<std::pair<int, uintptr_t>> pending;  // this step's frees: (before, ptr)
    std::vector<std::pair<int, uintptr_t>> next;
    auto dev = [&] { return static_cast<int>(L.rng() % 1000) < rate; };
    int count = n;
    if (dev()) count = std::max(1, n - 1 - static_cast<int>(L.rng() % 3));  // cut short
    auto do_frees = [&](int at) {
      for (auto* list : {&carry, &pending}) {
        for (auto it = list->begin(); it != list->end();) {
          if (it->first <= at) {
            L.free(it->second);
            if (::testing::Test::HasFatalFailure()) return;
            it = list->erase(it);
          } else {
            ++it;
          }
        }
      }
    };
    for (int i = 0; i < count; ++i) {
      do_frees(i);
      if (::testing::Test::HasFatalFailure()) return;
      uint64_t size = tmpl[i].size;
      uint32_t tag = tmpl[i].tag;
      if (dev()) size += kGranule;
      if (dev()) tag += 7;
      const uint32_t thread =
          (i % 3 == 2) ? 2u : 1u;  // two threads take turns, as forward/backward
      const uintptr_t p = L.alloc(size, tag, thread, where + " item " + std::to_string(i));
      if (::testing::Test::HasFatalFailure()) return;
      if (dev()) {  // an extra allocation, freed at once
        const uintptr_t x = L.alloc(kGranule * 3, 9, thread, where + " extra");
        if (::testing::Test::HasFatalFailure()) return;
        L.free(x);
      }
      if (dev() && pinned.size() < 3) {
        L.pin(p);
        pinned.push_back(p);
      }
      int fb = tmpl[i].free_before;
      if (dev()) fb += 1 + static_cast<int>(L.rng() % 4);  // late
      if (dev() && fb > i + 1) fb = i + 1;                 // early
      if (fb < 0) continue;                                // never freed: leaks, as loops do
      if (fb < n) {
        pending.emplace_back(fb, p);
      } else {
        next.emplace_back(fb - n, p);
      }
      if (dev() && !pending.empty()) std::swap(pending.front(), pending.back());  // other order
    }
    do_frees(n);
    if (::testing::Test::HasFatalFailure()) return;
    for (auto& f : pending) next.emplace_back(f.first - n, f.second);  // late ones spill over
    // Unpin some.
    if (!pinned.empty() && L.rng() % 4 == 0) {
      const uintptr_t p = pinned.back();
      pinned.pop_back();
      if (L.model.live_.count(p)) L.unpin(p);
      if (::testing::Test::HasFatalFailure()) return;
    }
    if (resets && (L.rng() % 3 == 0 || dev())) {
      L.reset();
      // The program forgets what the reset reclaimed (pinned blocks stay).
      next.erase(std::remove_if(next.begin(), next.end(),
                                [&](auto& f) { return L.model.live_.count(f.second) == 0; }),
                 next.end());
      pinned.erase(std::remove_if(pinned.begin(), pinned.end(),
                                  [&](uintptr_t p) { return L.model.live_.count(p) == 0; }),
                   pinned.end());
    } else {
      L.boundary();
    }
    carry = std::move(next);
  }
}

TEST(StepPlans, AStepThatRepeatsIsServedFromItsPlan) {
  Loop L(1);
  std::mt19937_64 rng(7);
  const std::vector<Item> tmpl = random_step(rng);
  run_loop(L, tmpl, 20, 0, false);
  PlanStats st;
  L.plans.stats(&st);
  EXPECT_EQ(st.learned, 1u);
  EXPECT_GE(st.steps, 16u) << "learned after two steps, engaged from the third";
  EXPECT_EQ(st.misses, 0u);
  EXPECT_GT(L.served, 0u);
  EXPECT_EQ(L.zones.reserved, 1);
  EXPECT_EQ(L.zones.claimed, 1);  // laid out around the window's obstacles
}

// A claim refused (the window changed since the layout) lays the step out again around
// the blocks live now; refused again, the zone is one free block.
TEST(StepPlans, ARefusedClaimLaysOutAgainThenTakesOneBlock) {
  for (int refusals : {1, 2}) {
    Loop L(1);
    L.zones.refuse_next_claims = refusals;
    std::mt19937_64 rng(7);
    const std::vector<Item> tmpl = random_step(rng);
    run_loop(L, tmpl, 20, 0, false);
    PlanStats st;
    L.plans.stats(&st);
    EXPECT_EQ(st.learned, 2u) << refusals;  // laid out again once
    EXPECT_GE(st.steps, 16u);
    EXPECT_EQ(st.misses, 0u);
    EXPECT_EQ(L.zones.claimed, refusals == 1 ? 1 : 0);
    EXPECT_EQ(L.zones.reserved, 1);
  }
}

TEST(StepPlans, ModelNoPlannedBlockEverOverlapsALiveOne) {
  uint64_t served = 0, engaged = 0, boundaries = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    Loop L(seed);
    // Zones in pieces around obstacles, one block when a claim is refused, or no obstacles.
    L.zones.refuse_claim = seed % 3 == 1;
    L.zones.obstacles = seed % 3 != 2;
    const std::vector<Item> tmpl = random_step(L.rng);
    const int rate = static_cast<int>(seed % 4) * 4;  // 0, 4, 8, 12 per mille per event
    run_loop(L, tmpl, 40, rate, seed % 2 == 1);
    ASSERT_FALSE(::testing::Test::HasFatalFailure()) << "seed " << seed;
    served += L.served;
    engaged += L.engaged_boundaries;
    boundaries += L.boundaries;
  }
  // The test means something only if plans were engaged and served much of the time.
  EXPECT_GT(served, 10000u);
  EXPECT_GT(engaged * 3, boundaries);
  std::printf("served %llu planned blocks; engaged at %llu of %llu boundaries\n",
              static_cast<unsigned long long>(served), static_cast<unsigned long long>(engaged),
              static_cast<unsigned long long>(boundaries));
}

// A step too large to lay out at the boundary goes to the plan thread; the plan engages
// at a boundary after the thread is done, as long as the step keeps repeating. (No bound on
// how long the thread takes: the loop runs until it has.)
TEST(StepPlans, ALargeStepIsLaidOutOnThePlanThread) {
  Loop L(21);
  std::vector<Item> tmpl(StepPlans::kInlineItems + 900);
  for (size_t i = 0; i < tmpl.size(); ++i) {
    tmpl[i].size = kGranule * (1 + i % 5);
    tmpl[i].tag = 0;
    tmpl[i].free_before = static_cast<int>(std::min(tmpl.size(), i + 1 + i % 7));
  }
  PlanStats st;
  int steps = 0;
  for (; L.served == 0; ++steps) {
    run_loop(L, tmpl, 1, 0, false);
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    L.plans.stats(&st);
    if (st.learned == 0 && steps >= 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GE(steps, 3) << "not planned at the boundary itself";
  run_loop(L, tmpl, 3, 0, false);
  L.plans.stats(&st);
  EXPECT_EQ(st.learned, 1u);
  EXPECT_EQ(st.misses, 0u);
  EXPECT_GE(st.steps, 3u);
}

TEST(StepPlans, NoRoomForTheZoneKeepsLearning) {
  Loop L(3);
  L.zones.refuse = true;
  std::mt19937_64 rng(11);
  run_loop(L, random_step(rng), 10, 0, false);
  PlanStats st;
  L.plans.stats(&st);
  EXPECT_GE(st.learned, 1u);
  EXPECT_EQ(L.served, 0u);
  L.zones.refuse = false;
  run_loop(L, random_step(rng), 10, 0, false);
  L.plans.stats(&st);
  EXPECT_GT(L.served, 0u);
}

// Every plan made stays (bindings read its memory without a call) within a budget of host
// memory: a loop whose step keeps changing makes plans until the next one would pass it,
// then learns no more; the plans made keep their memory, and the steps stay safe.
TEST(StepPlans, PlansKeptStayWithinTheirBudget) {
  constexpr uint64_t kBudget = 256 << 10;
  Loop L(13, kBudget);
  std::mt19937_64 rng(17);
  PlanStats st;
  uint64_t learned_before = 0;
  int shapes = 0;
  for (; shapes < 200; ++shapes) {
    run_loop(L, random_step(rng), 6, 0, shapes % 2 == 0);
    if (::testing::Test::HasFatalFailure()) return;
    L.plans.stats(&st);
    ASSERT_LE(st.host_bytes, kBudget) << "shape " << shapes;
    if (st.learned == learned_before && shapes > 20 && !L.plans.learning()) break;
    learned_before = st.learned;
  }
  EXPECT_LT(shapes, 200) << "learning never stopped: the budget was never reached";
  EXPECT_GT(st.host_bytes, kBudget / 2) << "stopped long before the budget";
  EXPECT_EQ(st.host_budget, kBudget);
  const uint64_t learned = st.learned;
  run_loop(L, random_step(rng), 6, 0, false);  // another shape: no new plan
  L.plans.stats(&st);
  EXPECT_LE(st.learned, learned + 1);  // one laid out at most, never published
  EXPECT_LE(st.host_bytes, kBudget);
}

// A loop whose steps never repeat (plans are on by default) learns less and less: after
// 16 steps that did not repeat learning pauses, each pause twice as long as the one before
// (up to 1024 steps), so over 4000 steps it learns at most a few percent of them.
TEST(StepPlans, NeverRepeatingStepsLearnLessAndLess) {
  Loop L(21);
  std::mt19937_64 rng(23);
  int learned_at = 0;
  constexpr int kSteps = 4000;
  for (int s = 0; s < kSteps; ++s) {
    if (L.plans.learning()) ++learned_at;
    // A step of its own: sizes that never come again.
    for (int i = 0; i < 8; ++i) {
      const uintptr_t p = L.alloc(kGranule * (1 + (s * 8 + i) % 997), 0, 1, "never");
      if (::testing::Test::HasFatalFailure()) return;
      L.free(p);
    }
    L.boundary();
  }
  PlanStats st;
  L.plans.stats(&st);
  EXPECT_EQ(st.learned, 0u);
  EXPECT_LT(learned_at, kSteps / 20) << "learning did not back off";
  EXPECT_GT(learned_at, 16) << "learning never started again after a pause";
}

TEST(StepPlans, ThreadsOutsideThePlanGoToTheDynamicEngine) {
  Loop L(5);
  std::mt19937_64 rng(13);
  const std::vector<Item> tmpl = random_step(rng);
  run_loop(L, tmpl, 6, 0, false);
  ASSERT_GT(L.served, 0u);
  const uintptr_t p = L.alloc(kGranule, 0, 99, "other thread");
  EXPECT_GE(p, kDynamic) << "thread 99 made none of the learned allocations";
}

}  // namespace
}  // namespace zarena_core
