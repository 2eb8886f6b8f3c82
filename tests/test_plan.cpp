// The offset planner (src/plan/plan.h): hand-made steps with known answers, random steps
// checked against a brute-force reference planner and both verification modes, and the
// replay of the runtime's protocol (check lists, abandoning, re-engaging) over programs
// that free late, early and out of order, where no planned block may ever be handed out
// over a live one.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "plan_workload.h"
#include "support.h"

namespace {

using zarena_core::Status;
using zarena_core::plan::ByteRange;
using zarena_core::plan::FreeKind;
using zarena_core::plan::kNoOffset;
using zarena_core::plan::Leftover;
using zarena_core::plan::lower_bound_bytes;
using zarena_core::plan::OffsetPlan;
using zarena_core::plan::period_steps;
using zarena_core::plan::Placement;
using zarena_core::plan::plan_step;
using zarena_core::plan::PlanLimits;
using zarena_core::plan::StepItem;
using zarena_core::plan::StepRequest;
using zarena_core::plan::verify_plan;
using zarena_core::plan::VerifyMode;
using zarena_test::step_request;

constexpr uint64_t kG = 256;

OffsetPlan must_plan(const std::vector<StepItem>& items,
                     Placement placement = Placement::kGreedyBySize) {
  OffsetPlan plan;
  const auto r = plan_step(step_request(items), PlanLimits{}, &plan, placement);
  EXPECT_TRUE(r.is_ok()) << r.message;
  return plan;
}

std::vector<uint32_t> list_of(const OffsetPlan& p, uint32_t id) {
  return {p.check_ids.begin() + p.check_begin[id], p.check_ids.begin() + p.check_begin[id + 1]};
}

// --- the model, written again from plan.h's words, for the references below -----------

struct Arc {
  uint64_t start, end;  // unrolled
};

struct Model {
  uint32_t n = 0, period = 1, ticks = 0;
  std::vector<uint64_t> size;  // per instance
  std::vector<Arc> arc;        // per instance; end == 0: not planned
  explicit Model(const std::vector<StepItem>& items) : n(static_cast<uint32_t>(items.size())) {
    for (uint32_t i = 0; i < n; ++i) {
      if (items[i].free_kind == FreeKind::kNextStep && items[i].free_before > i) period = 2;
    }
    ticks = period * n;
    for (uint32_t q = 0; q < period; ++q) {
      for (uint32_t i = 0; i < n; ++i) {
        const StepItem& it = items[i];
        size.push_back(it.size);
        const uint64_t s = q * n + i;
        if (it.free_kind == FreeKind::kSameStep) {
          arc.push_back({s, q * n + it.free_before});
        } else if (it.free_kind == FreeKind::kNextStep) {
          arc.push_back({s, (q + 1) * n + it.free_before});
        } else {
          arc.push_back({s, 0});
        }
      }
    }
  }
  bool planned(uint32_t id) const { return arc[id].end != 0; }
  // Arcs share a tick of the circle: some turn of one meets the other.
  bool conflict(uint32_t a, uint32_t b) const {
    for (int m = -1; m <= 1; ++m) {
      const int64_t s = static_cast<int64_t>(arc[b].start) + m * static_cast<int64_t>(ticks);
      const int64_t e = static_cast<int64_t>(arc[b].end) + m * static_cast<int64_t>(ticks);
      if (static_cast<int64_t>(arc[a].start) < e && s < static_cast<int64_t>(arc[a].end)) {
        return true;
      }
    }
    return false;
  }
};

bool overlap(uint64_t a, uint64_t as, uint64_t b, uint64_t bs) { return a < b + bs && b < a + as; }

// The planner's placement done the slow way: every placed instance it conflicts with,
// sorted by offset, then the first (or best) gap.
std::vector<uint64_t> reference_offsets(const std::vector<StepItem>& items, Placement placement,
                                        const std::vector<ByteRange>& obstacles = {},
                                        const std::vector<Leftover>& leftovers = {}) {
  const Model m(items);
  std::vector<uint32_t> order;
  for (uint32_t id = 0; id < m.ticks; ++id) {
    if (m.planned(id)) order.push_back(id);
  }
  auto len = [&](uint32_t id) { return m.arc[id].end - m.arc[id].start; };
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (m.size[a] != m.size[b]) return m.size[a] > m.size[b];
    if (len(a) != len(b)) return len(a) > len(b);
    return a < b;
  });
  std::vector<uint64_t> off(m.ticks, kNoOffset);
  std::vector<uint32_t> placed;
  for (uint32_t id : order) {
    std::vector<std::pair<uint64_t, uint64_t>> taken;
    for (const ByteRange& o : obstacles) taken.push_back({o.offset, o.offset + o.size});
    for (const Leftover& o : leftovers) {  // the first step's instances allocated before its free
      if (id < items.size() && id < o.until) taken.push_back({o.offset, o.offset + o.size});
    }
    for (uint32_t p : placed) {
      if (m.conflict(id, p)) taken.push_back({off[p], off[p] + m.size[p]});
    }
    std::sort(taken.begin(), taken.end());
    uint64_t at = 0, best = kNoOffset, best_gap = ~0ull;
    for (const auto& t : taken) {
      if (t.first > at) {
        const uint64_t gap = t.first - at;
        if (placement == Placement::kGreedyBySize && gap >= m.size[id]) break;
        if (gap >= m.size[id] && gap < best_gap) {
          best = at;
          best_gap = gap;
        }
      }
      at = std::max(at, t.second);
    }
    off[id] = (placement == Placement::kBestFitGap && best != kNoOffset) ? best : at;
    placed.push_back(id);
  }
  return off;
}

// --- hand-made steps ----------------------------------------------------------------

TEST(Plan, PeriodIsOneWhenEveryNextStepFreeComesBeforeItsRepeat) {
  const std::vector<StepItem> items = {StepItem::next_step(kG, 0), StepItem::same_step(kG, 2),
                                       StepItem::next_step(kG, 2)};
  EXPECT_EQ(period_steps(step_request(items)), 1u);
  const OffsetPlan p = must_plan(items);
  EXPECT_EQ(p.period_steps, 1u);
  EXPECT_EQ(p.instances(), 3u);
  EXPECT_EQ(verify_plan(step_request(items), p, VerifyMode::kBruteForce), "");
}

// PyTorch's `loss = model(x)`: the new loss is allocated while the old one is referenced,
// and the old one goes right after. Its two incarnations overlap in time: two offsets.
TEST(Plan, ARebindingItemAlternatesTwoOffsets) {
  const std::vector<StepItem> items = {StepItem::next_step(4 * kG, 1), StepItem::same_step(kG, 2)};
  EXPECT_EQ(period_steps(step_request(items)), 2u);
  const OffsetPlan p = must_plan(items);
  ASSERT_EQ(p.period_steps, 2u);
  ASSERT_EQ(p.instances(), 4u);
  // Instances: 0 = loss of even steps (ticks [0, 3)), 1 = the temporary ([1, 2)),
  // 2 = loss of odd steps ([2, 5): wraps to tick 0), 3 = the temporary ([3, 4)).
  EXPECT_EQ(p.offsets, (std::vector<uint64_t>{0, 4 * kG, 4 * kG, 0}));
  EXPECT_EQ(p.peak_bytes, 8 * kG);
  EXPECT_EQ(p.lower_bound_bytes, 8 * kG);  // both losses live at ticks 0 and 2
  // Deadlines: the loss at 0 ends at 3, where instance 3 takes its first bytes; the
  // temporary at 1 ends at 2, where the odd loss lands on it; the odd loss ends at 5 = 1
  // of the next turn, where the temporary comes back; that temporary ends at 4 = 0, where
  // the even loss returns.
  EXPECT_EQ(p.check_begin, (std::vector<uint32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(p.check_ids, (std::vector<uint32_t>{3, 2, 1, 0}));
  EXPECT_EQ(verify_plan(step_request(items), p, VerifyMode::kBruteForce), "");
  EXPECT_EQ(verify_plan(step_request(items), p, VerifyMode::kSweep), "");
}

TEST(Plan, ReachesTheLowerBoundOnANestedStep) {
  // A lives through the step; B and C take turns above it; D comes last.
  const std::vector<StepItem> items = {StepItem::same_step(4 * kG, 4),
                                       StepItem::same_step(2 * kG, 2),
                                       StepItem::same_step(2 * kG, 4), StepItem::same_step(kG, 4)};
  const OffsetPlan p = must_plan(items);
  EXPECT_EQ(p.period_steps, 1u);
  EXPECT_EQ(p.lower_bound_bytes, 7 * kG);
  EXPECT_EQ(p.peak_bytes, 7 * kG);
  EXPECT_EQ(p.offsets, (std::vector<uint64_t>{0, 4 * kG, 4 * kG, 6 * kG}));
  uint64_t bound = 0;
  ASSERT_TRUE(lower_bound_bytes(step_request(items), &bound).is_ok());
  EXPECT_EQ(bound, 7 * kG);
  EXPECT_EQ(verify_plan(step_request(items), p, VerifyMode::kBruteForce), "");
}

TEST(Plan, NotPlannedItemsGetNoOffsetNoListAndNoBytes) {
  const std::vector<StepItem> items = {StepItem::same_step(kG, 2), StepItem::not_planned(64 * kG),
                                       StepItem::same_step(kG, 3), StepItem::next_step(2 * kG, 1),
                                       StepItem::not_planned(kG)};
  const OffsetPlan p = must_plan(items);
  ASSERT_EQ(p.instances(), 5u);
  EXPECT_EQ(p.offsets[1], kNoOffset);
  EXPECT_EQ(p.offsets[4], kNoOffset);
  EXPECT_TRUE(list_of(p, 1).empty());
  EXPECT_TRUE(list_of(p, 4).empty());
  EXPECT_EQ(p.check_ids.size(), 3u);
  for (uint32_t id : p.check_ids) EXPECT_TRUE(id != 1 && id != 4);
  EXPECT_EQ(p.lower_bound_bytes, 3 * kG);  // tick 0: item 0 and item 3 of the step before
  EXPECT_EQ(p.peak_bytes, 3 * kG);
  EXPECT_EQ(verify_plan(step_request(items), p, VerifyMode::kBruteForce), "");
}

TEST(Plan, AnItemLiveForAWholeTurnConflictsWithEverything) {
  // Item 1 is freed in the next step just before its own repeat: live on every tick.
  const std::vector<StepItem> items = {StepItem::same_step(kG, 1), StepItem::next_step(kG, 1),
                                       StepItem::same_step(kG, 3)};
  const OffsetPlan p = must_plan(items);
  EXPECT_EQ(p.period_steps, 1u);
  EXPECT_NE(p.offsets[0], p.offsets[1]);
  EXPECT_NE(p.offsets[2], p.offsets[1]);
  EXPECT_EQ(p.offsets, (std::vector<uint64_t>{kG, 0, kG}));  // 0 and 2 never meet
  EXPECT_EQ(list_of(p, 1), std::vector<uint32_t>{1});        // only its own repeat reuses it
  EXPECT_EQ(verify_plan(step_request(items), p, VerifyMode::kBruteForce), "");
}

TEST(Plan, AnEmptyStepHasAnEmptyPlan) {
  const std::vector<StepItem> none;
  const OffsetPlan p = must_plan(none);
  EXPECT_EQ(p.instances(), 0u);
  EXPECT_EQ(p.peak_bytes, 0u);
  EXPECT_EQ(p.check_begin, std::vector<uint32_t>{0});
  EXPECT_EQ(verify_plan(step_request(none), p), "");
}

TEST(Plan, BadRequestsAreRefusedAndLeaveThePlanAlone) {
  OffsetPlan p = must_plan({StepItem::same_step(kG, 1)});
  const OffsetPlan before = p;
  auto refused = [&](const std::vector<StepItem>& items, Status want, const char* says,
                     uint64_t granule = kG, PlanLimits limits = PlanLimits{}) {
    const auto r = plan_step(step_request(items, granule), limits, &p);
    EXPECT_EQ(r.status, want) << r.message;
    EXPECT_NE(r.message.find(says), std::string::npos) << r.message;
    EXPECT_EQ(p.offsets, before.offsets);
    EXPECT_EQ(p.check_ids, before.check_ids);
  };
  refused({StepItem::same_step(0, 1)}, Status::kInvalidArgument, "item 0: size 0");
  refused({StepItem::same_step(kG, 1), StepItem::same_step(100, 2)}, Status::kInvalidArgument,
          "item 1: size 100 is not a multiple of the granule 256");
  refused({StepItem::same_step(kG, 0)}, Status::kInvalidArgument, "outside [1, 1]");
  refused({StepItem::same_step(kG, 2)}, Status::kInvalidArgument, "outside [1, 1]");
  refused({StepItem::next_step(kG, 2)}, Status::kInvalidArgument, "beyond the step's 1");
  refused({StepItem{kG, 0, static_cast<FreeKind>(7)}}, Status::kInvalidArgument,
          "unknown free kind 7");
  refused({StepItem::same_step(kG, 1)}, Status::kInvalidArgument, "not a power of two", 384);
  refused({StepItem::same_step((uint64_t{1} << 61) + kG, 1)}, Status::kInvalidArgument, "exceed");
  PlanLimits two;
  two.max_items = 2;
  refused({StepItem::same_step(kG, 1), StepItem::same_step(kG, 2), StepItem::same_step(kG, 3)},
          Status::kUnsupported, "exceeds the planner's limit of 2", kG, two);
  const std::vector<StepItem> one = {StepItem::same_step(kG, 1)};
  EXPECT_EQ(plan_step(step_request(one), PlanLimits{}, nullptr).status, Status::kInvalidArgument);
  EXPECT_EQ(plan_step(step_request(one), PlanLimits{}, &p, static_cast<Placement>(9)).status,
            Status::kInvalidArgument);
  StepRequest null_items{nullptr, 3, kG};
  EXPECT_EQ(plan_step(null_items, PlanLimits{}, &p).status, Status::kInvalidArgument);
}

TEST(Plan, VerifyNamesTheFirstViolation) {
  const std::vector<StepItem> items = {StepItem::next_step(4 * kG, 1), StepItem::same_step(kG, 2)};
  const auto req = step_request(items);
  const OffsetPlan good = must_plan(items);
  for (auto mode : {VerifyMode::kSweep, VerifyMode::kBruteForce}) {
    OffsetPlan p = good;
    p.offsets[2] = 0;  // both losses in the same bytes
    p.peak_bytes = 5 * kG;
    EXPECT_NE(verify_plan(req, p, mode).find("overlap"), std::string::npos)
        << verify_plan(req, p, mode);
    p = good;
    std::swap(p.check_ids[0], p.check_ids[1]);  // 3 and 2 traded places
    EXPECT_NE(verify_plan(req, p, mode).find("check list"), std::string::npos)
        << verify_plan(req, p, mode);
    p = good;
    p.peak_bytes += kG;
    EXPECT_NE(verify_plan(req, p, mode).find("peak_bytes"), std::string::npos);
    p = good;
    p.period_steps = 1;
    EXPECT_NE(verify_plan(req, p, mode).find("period"), std::string::npos);
    p = good;
    p.check_begin = {0, 1, 1, 3, 4};  // instance 2's entry moved to 3's list
    EXPECT_NE(verify_plan(req, p, mode), "");
  }
}

// --- random steps -------------------------------------------------------------------

std::vector<StepItem> random_step(std::mt19937_64& rng) {
  const uint32_t n = static_cast<uint32_t>(rng() % 40);
  const uint64_t sizes[] = {1, 1, 2, 3, 4, 8, 16};
  const uint32_t next_pct = static_cast<uint32_t>(rng() % 40);
  const bool period_two = rng() % 3 == 0;
  std::vector<StepItem> items;
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t size = kG * sizes[rng() % 7] * (1 + rng() % 3);
    const uint32_t r = static_cast<uint32_t>(rng() % 100);
    if (r < 5) {
      items.push_back(StepItem::not_planned(size));
    } else if (r < 5 + next_pct) {
      // Mostly freed before the repeat; with period_two, now and then after it.
      const uint32_t k = (period_two && rng() % 4 == 0) ? static_cast<uint32_t>(rng() % (n + 1))
                                                        : static_cast<uint32_t>(rng() % (i + 1));
      items.push_back(StepItem::next_step(size, k));
    } else {
      const uint32_t span =
          rng() % 2 ? 1 + static_cast<uint32_t>(rng() % 3) : 1 + static_cast<uint32_t>(rng() % n);
      items.push_back(StepItem::same_step(size, std::min(n, i + span)));
    }
  }
  return items;
}

TEST(PlanModel, RandomStepsMatchTheReferenceAndVerify) {
  std::mt19937_64 rng(7);
  const int rounds = 3000 / zarena_test::kSanitizerSlowdown;
  int period_two = 0;
  for (int round = 0; round < rounds; ++round) {
    const auto items = random_step(rng);
    const auto req = step_request(items);
    uint64_t bound = 0;
    ASSERT_TRUE(lower_bound_bytes(req, &bound).is_ok());
    for (auto placement : {Placement::kGreedyBySize, Placement::kBestFitGap}) {
      const OffsetPlan p = must_plan(items, placement);
      period_two += p.period_steps == 2;
      ASSERT_EQ(p.offsets, reference_offsets(items, placement)) << "round " << round;
      ASSERT_EQ(verify_plan(req, p, VerifyMode::kBruteForce), "") << "round " << round;
      ASSERT_EQ(verify_plan(req, p, VerifyMode::kSweep), "") << "round " << round;
      ASSERT_EQ(p.lower_bound_bytes, bound);
      ASSERT_GE(p.peak_bytes, bound);
    }
  }
  EXPECT_GT(period_two, rounds / 10);  // both periods were exercised
}

// Obstacles (live blocks the plan lays out around): the placement is the reference's with
// the obstacles taken at every tick, no instance overlaps one, and the holes between them
// are used.
TEST(PlanModel, RandomStepsWithObstaclesMatchTheReferenceAndVerify) {
  std::mt19937_64 rng(11);
  const int rounds = 2000 / zarena_test::kSanitizerSlowdown;
  int used_a_hole = 0;
  for (int round = 0; round < rounds; ++round) {
    const auto items = random_step(rng);
    std::vector<ByteRange> obstacles;
    uint64_t at = 0;
    for (int j = static_cast<int>(rng() % 6); j > 0; --j) {
      at += kG * (rng() % 24);
      const uint64_t size = kG * (1 + rng() % 8);
      obstacles.push_back({at, size});
      at += size;
    }
    auto req = step_request(items);
    req.obstacles = obstacles.data();
    req.obstacle_count = static_cast<uint32_t>(obstacles.size());
    uint64_t bound = 0;
    ASSERT_TRUE(lower_bound_bytes(req, &bound).is_ok());
    for (auto placement : {Placement::kGreedyBySize, Placement::kBestFitGap}) {
      OffsetPlan p;
      ASSERT_TRUE(plan_step(req, PlanLimits{}, &p, placement).is_ok());
      ASSERT_EQ(p.offsets, reference_offsets(items, placement, obstacles)) << "round " << round;
      ASSERT_EQ(verify_plan(req, p, VerifyMode::kBruteForce), "") << "round " << round;
      ASSERT_EQ(verify_plan(req, p, VerifyMode::kSweep), "") << "round " << round;
      ASSERT_EQ(p.lower_bound_bytes, bound);
      for (uint64_t off : p.offsets) {
        used_a_hole += !obstacles.empty() && off != kNoOffset && off < obstacles.back().offset;
      }
    }
  }
  EXPECT_GT(used_a_hole, rounds / 4);
}

// Leftovers (blocks of the step before, freed early in the first planned step): the
// placement is the reference's with each leftover taken for the first step's instances
// allocated before its free only, verify agrees, and later instances use its bytes.
TEST(PlanModel, RandomStepsWithLeftoversMatchTheReferenceAndVerify) {
  std::mt19937_64 rng(12);
  const int rounds = 2000 / zarena_test::kSanitizerSlowdown;
  int used_a_leftover = 0;
  for (int round = 0; round < rounds; ++round) {
    const auto items = random_step(rng);
    const auto n = static_cast<uint32_t>(items.size());
    std::vector<ByteRange> obstacles;
    std::vector<Leftover> leftovers;
    uint64_t at = 0;
    for (int j = static_cast<int>(rng() % 8); j > 0; --j) {
      at += kG * (rng() % 12);
      const uint64_t size = kG * (1 + rng() % 8);
      if (rng() % 3 == 0) {
        obstacles.push_back({at, size});
      } else {
        leftovers.push_back({at, size, static_cast<uint32_t>(rng() % (n + 1))});
      }
      at += size;
    }
    auto req = step_request(items);
    req.obstacles = obstacles.data();
    req.obstacle_count = static_cast<uint32_t>(obstacles.size());
    req.leftovers = leftovers.data();
    req.leftover_count = static_cast<uint32_t>(leftovers.size());
    for (auto placement : {Placement::kGreedyBySize, Placement::kBestFitGap}) {
      OffsetPlan p;
      ASSERT_TRUE(plan_step(req, PlanLimits{}, &p, placement).is_ok());
      ASSERT_EQ(p.offsets, reference_offsets(items, placement, obstacles, leftovers))
          << "round " << round;
      ASSERT_EQ(verify_plan(req, p, VerifyMode::kBruteForce), "") << "round " << round;
      ASSERT_EQ(verify_plan(req, p, VerifyMode::kSweep), "") << "round " << round;
      for (uint32_t id = 0; id < p.offsets.size(); ++id) {
        if (p.offsets[id] == kNoOffset) continue;
        for (const Leftover& o : leftovers) {
          used_a_leftover += overlap(p.offsets[id], items[id % n].size, o.offset, o.size);
        }
      }
    }
  }
  EXPECT_GT(used_a_leftover, rounds / 4);
}

TEST(Plan, LeftoversAreTakenUntilTheirFreeAndCheckedByVerify) {
  // Item 0 lives over the step; item 1 is allocated after the leftover [0, 2G) is freed
  // (before allocation 1) and takes its bytes; item 0 cannot.
  const std::vector<StepItem> items = {StepItem::same_step(kG, 2), StepItem::same_step(2 * kG, 2)};
  const std::vector<Leftover> leftovers = {{0, 2 * kG, 1}};
  auto req = step_request(items);
  req.leftovers = leftovers.data();
  req.leftover_count = 1;
  OffsetPlan p;
  ASSERT_TRUE(plan_step(req, PlanLimits{}, &p).is_ok());
  EXPECT_EQ(p.offsets, (std::vector<uint64_t>{2 * kG, 0}));
  EXPECT_EQ(verify_plan(req, p), "");
  p.offsets = {0, kG};  // item 0 over the leftover before it is freed
  EXPECT_NE(verify_plan(req, p).find("overlaps the leftover"), std::string::npos);
  const std::vector<Leftover> late = {{0, 2 * kG, 3}};  // freed after the step's end
  req.leftovers = late.data();
  EXPECT_EQ(plan_step(req, PlanLimits{}, &p).status, Status::kInvalidArgument);
}

TEST(Plan, ObstaclesAreLaidOutAroundAndCheckedByVerify) {
  // Two blocks live over the whole step, one between two obstacles' gap of 2 granules.
  const std::vector<StepItem> items = {StepItem::same_step(2 * kG, 2), StepItem::same_step(kG, 2)};
  const std::vector<ByteRange> obstacles = {{0, kG}, {3 * kG, kG}};
  auto req = step_request(items);
  req.obstacles = obstacles.data();
  req.obstacle_count = 2;
  OffsetPlan p;
  ASSERT_TRUE(plan_step(req, PlanLimits{}, &p).is_ok());
  EXPECT_EQ(p.offsets, (std::vector<uint64_t>{kG, 4 * kG}));
  EXPECT_EQ(p.peak_bytes, 5 * kG);
  EXPECT_EQ(p.lower_bound_bytes, 3 * kG);
  EXPECT_EQ(verify_plan(req, p), "");
  p.offsets[1] = 3 * kG;  // onto the second obstacle
  p.peak_bytes = 4 * kG;
  EXPECT_NE(verify_plan(req, p).find("overlaps the obstacle"), std::string::npos);
  const std::vector<ByteRange> bad = {{kG, kG}, {0, kG}};  // unsorted
  req.obstacles = bad.data();
  EXPECT_EQ(plan_step(req, PlanLimits{}, &p).status, Status::kInvalidArgument);
}

// A corrupted plan: both verification modes must call it wrong, or both right (a change
// that keeps a plan valid, e.g. an offset moved into free space of the right size).
TEST(PlanModel, SweepAndBruteForceVerificationAgreeOnCorruptedPlans) {
  std::mt19937_64 rng(11);
  const int rounds = 3000 / zarena_test::kSanitizerSlowdown;
  int caught = 0;
  for (int round = 0; round < rounds; ++round) {
    const auto items = random_step(rng);
    OffsetPlan p = must_plan(items);
    if (p.check_ids.size() < 2) continue;
    switch (rng() % 3) {
      case 0: {  // an offset moved
        const uint32_t id = p.check_ids[rng() % p.check_ids.size()];
        p.offsets[id] = (rng() % 8) * kG;
        uint64_t peak = 0;
        for (uint32_t x : p.check_ids)
          peak = std::max(peak, p.offsets[x] + items[x % items.size()].size);
        p.peak_bytes = peak;
        break;
      }
      case 1:  // two entries of the lists swapped
        std::swap(p.check_ids[rng() % p.check_ids.size()], p.check_ids[rng() % p.check_ids.size()]);
        break;
      default: {  // a list boundary moved
        const size_t at = 1 + rng() % (p.check_begin.size() - 2);
        if (p.check_begin[at] > p.check_begin[at - 1]) --p.check_begin[at];
        break;
      }
    }
    const std::string sweep = verify_plan(step_request(items), p, VerifyMode::kSweep);
    const std::string brute = verify_plan(step_request(items), p, VerifyMode::kBruteForce);
    ASSERT_EQ(sweep.empty(), brute.empty())
        << "round " << round << "\nsweep: " << sweep << "\nbrute force: " << brute;
    caught += !sweep.empty();
  }
  EXPECT_GT(caught, rounds / 4);
}

TEST(PlanModel, TrainingStepsPlanWithinAFewPercentOfTheLowerBound) {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    zarena_test::TrainingStepShape shape;
    shape.seed = seed;
    shape.target_items = 200 + 150 * static_cast<uint32_t>(seed);
    shape.rebound = static_cast<uint32_t>(seed % 4);
    const auto items = zarena_test::training_step(shape);
    const OffsetPlan p = must_plan(items);
    EXPECT_EQ(p.period_steps, shape.rebound > 0 ? 2u : 1u);
    ASSERT_EQ(verify_plan(step_request(items), p), "") << "seed " << seed;
    EXPECT_GE(p.peak_bytes, p.lower_bound_bytes);
    // A guard against a placement gone wrong, far above what the benchmarks show.
    EXPECT_LE(static_cast<double>(p.peak_bytes), 1.10 * static_cast<double>(p.lower_bound_bytes))
        << "seed " << seed << " items " << items.size();
  }
}

// --- the runtime's protocol, replayed -----------------------------------------------

struct Deviations {
  int late_pct = 15;             // freed later than planned, by up to two steps
  int early_pct = 15;            // freed earlier than planned (never before its allocation)
  int very_late_pct = 2;         // freed two to four steps late
  int abandon_pct = 5;           // a step whose plan ends at a random allocation (another size)
  bool wait_until_clear = true;  // re-engage only when no planned instance is live
};

struct ReplayResult {
  std::string violation;  // "" when no planned block was handed out over a live one
  uint64_t handed_out = 0, abandoned = 0, engaged = 0;
};

// Runs `steps` steps of a program that allocates `items` in order each step and frees each
// block around its planned point, under the protocol the runtime follows (plan.h): before
// handing out planned instance Y, every instance in Y's check list must be dead, else the
// plan is abandoned for the step; it is taken up again at a step boundary with no planned
// instance live, at a random phase of the period. Every hand-out is compared with every
// live planned block, by brute force.
ReplayResult replay(const std::vector<StepItem>& items, const OffsetPlan& plan, uint64_t seed,
                    int steps, const Deviations& dev) {
  ReplayResult out;
  std::mt19937_64 rng(seed);
  const uint32_t n = static_cast<uint32_t>(items.size());
  const uint32_t L = plan.instances();
  const uint32_t P = plan.period_steps;
  if (n == 0) return out;
  if (plan.step_items != n || plan.check_begin.size() != L + 1 || plan.offsets.size() != L) {
    out.violation = "no plan for this step";
    return out;
  }
  std::vector<char> live(L, 0);
  uint32_t live_count = 0;
  // frees[t]: the planned instances the program frees just before tick t's allocation.
  std::vector<std::vector<uint32_t>> frees(static_cast<size_t>(steps + 6) * n + 1);
  bool engaged = false;
  uint32_t q = 0;
  for (int step = 0; step < steps; ++step) {
    if (engaged) {
      q = (q + 1) % P;
    } else if (live_count == 0 || !dev.wait_until_clear) {
      engaged = true;
      q = static_cast<uint32_t>(rng() % P);
    }
    out.engaged += engaged;
    const uint32_t mismatch_at =
        static_cast<int>(rng() % 100) < dev.abandon_pct ? static_cast<uint32_t>(rng() % n) : n;
    for (uint32_t i = 0; i < n; ++i) {
      const uint64_t tick = uint64_t{static_cast<uint32_t>(step)} * n + i;
      for (uint32_t id : frees[tick]) {
        live[id] = 0;
        --live_count;
      }
      frees[tick].clear();
      if (i == mismatch_at && engaged) {
        engaged = false;
        ++out.abandoned;
      }
      const StepItem& it = items[i];
      if (!engaged || it.free_kind == FreeKind::kNotPlanned) continue;  // served dynamically
      const uint32_t y = q * n + i;
      bool clear = true;
      for (uint32_t x = plan.check_begin[y]; x < plan.check_begin[y + 1]; ++x) {
        clear = clear && !live[plan.check_ids[x]];
      }
      if (!clear) {
        engaged = false;
        ++out.abandoned;
        continue;
      }
      for (uint32_t z = 0; z < L; ++z) {
        if (live[z] && overlap(plan.offsets[z], items[z % n].size, plan.offsets[y], it.size)) {
          out.violation = "step " + std::to_string(step) + ": instance " + std::to_string(y) +
                          " handed out over live instance " + std::to_string(z);
          return out;
        }
      }
      live[y] = 1;
      ++live_count;
      ++out.handed_out;
      // When the program frees it: planned, or around it.
      uint64_t end = uint64_t{static_cast<uint32_t>(step)} * n +
                     (it.free_kind == FreeKind::kSameStep ? it.free_before : n + it.free_before);
      const int r = static_cast<int>(rng() % 100);
      if (r < dev.late_pct) {
        end += 1 + rng() % (2 * n);
      } else if (r < dev.late_pct + dev.early_pct) {
        end = tick + 1 + rng() % (end - tick);
      } else if (r < dev.late_pct + dev.early_pct + dev.very_late_pct) {
        end += n * (2 + rng() % 3);
      }
      frees[std::min<uint64_t>(end, frees.size() - 1)].push_back(y);
    }
  }
  return out;
}

TEST(PlanReplay, NoPlannedBlockIsEverHandedOutOverALiveOne) {
  std::mt19937_64 rng(3);
  const int rounds = 1500 / zarena_test::kSanitizerSlowdown;
  ReplayResult total;
  for (int round = 0; round < rounds; ++round) {
    std::vector<StepItem> items;
    if (round % 10 == 0) {
      zarena_test::TrainingStepShape shape;
      shape.seed = static_cast<uint64_t>(round);
      shape.target_items = 60;
      shape.rebound = static_cast<uint32_t>(round % 4);
      items = zarena_test::training_step(shape);
    } else {
      items = random_step(rng);
    }
    const OffsetPlan plan =
        must_plan(items, round % 2 ? Placement::kBestFitGap : Placement::kGreedyBySize);
    Deviations dev;
    if (round % 3 == 0) dev = Deviations{40, 20, 5, 10};  // a program that rarely keeps to it
    const ReplayResult r = replay(items, plan, rng(), 24, dev);
    ASSERT_EQ(r.violation, "") << "round " << round;
    total.handed_out += r.handed_out;
    total.abandoned += r.abandoned;
    total.engaged += r.engaged;
  }
  // The replay did exercise both sides: plenty of planned hand-outs and of abandons.
  EXPECT_GT(total.handed_out, 100000u / zarena_test::kSanitizerSlowdown);
  EXPECT_GT(total.abandoned, 1000u / zarena_test::kSanitizerSlowdown);
}

// Why the runtime waits for a step boundary with nothing planned live: an instance that
// was still live when the plan was abandoned missed its check, and a plan taken up again
// around it can hand its bytes out.
TEST(PlanReplay, ReEngagingWhilePlannedBlocksLiveIsUnsafe) {
  std::mt19937_64 rng(9);
  int unsafe = 0;
  for (int round = 0; round < 200 && unsafe == 0; ++round) {
    const auto items = random_step(rng);
    Deviations dev{50, 0, 10, 20};
    dev.wait_until_clear = false;
    unsafe += !replay(items, must_plan(items), rng(), 16, dev).violation.empty();
  }
  EXPECT_GT(unsafe, 0);
}

// The replay above can fail: with check lists that miss an instance, or that check it only
// at its own repeat, some hand-out lands on a late block, and verify_plan says so too.
TEST(PlanReplay, CatchesCheckListsThatAreWrong) {
  std::mt19937_64 rng(5);
  int dropped_caught = 0, deferred_caught = 0, mutations = 0;
  const int rounds = 600 / zarena_test::kSanitizerSlowdown;
  for (int round = 0; round < rounds; ++round) {
    const auto items = random_step(rng);
    const OffsetPlan plan = must_plan(items);
    // An instance whose deadline is another's allocation.
    std::vector<uint32_t> movable;
    for (uint32_t y = 0; y < plan.instances(); ++y) {
      for (uint32_t x : list_of(plan, y)) {
        if (x != y) movable.push_back(x);
      }
    }
    if (movable.empty()) continue;
    const uint32_t victim = movable[rng() % movable.size()];
    ++mutations;
    for (int kind = 0; kind < 2; ++kind) {
      OffsetPlan bad = plan;
      // Take the victim out of its list; kind 1 puts it in its own slot's list instead.
      auto at = std::find(bad.check_ids.begin(), bad.check_ids.end(), victim);
      const uint32_t pos = static_cast<uint32_t>(at - bad.check_ids.begin());
      bad.check_ids.erase(at);
      for (auto& b : bad.check_begin) b -= b > pos;
      if (kind == 1) {
        bad.check_ids.insert(bad.check_ids.begin() + bad.check_begin[victim + 1], victim);
        for (uint32_t y = victim + 1; y < bad.check_begin.size(); ++y) ++bad.check_begin[y];
      }
      EXPECT_NE(verify_plan(step_request(items), bad), "") << "round " << round;
      bool caught = false;
      for (uint64_t s = 0; s < 8 && !caught; ++s) {
        caught = !replay(items, bad, rng(), 16, Deviations{50, 0, 10, 0}).violation.empty();
      }
      (kind == 0 ? dropped_caught : deferred_caught) += caught;
    }
  }
  ASSERT_GT(mutations, rounds / 2);
  EXPECT_GT(dropped_caught, mutations / 4);
  EXPECT_GT(deferred_caught, mutations / 4);
}

}  // namespace
