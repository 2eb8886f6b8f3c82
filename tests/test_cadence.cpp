// The reset-cadence detector: it must fire in the failure's shape (per-sample passes, no
// reset) within the first few samples and long before the arena is full, and stay quiet
// for one big first step, a constant-size stream, a loop that frees what it allocates
// (however its top moves), and a loop that resets every step. Unit tests drive the
// detector with synthetic tops and frees; the C API tests drive real arenas.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "diagnosis/cadence.h"
#include "support.h"

using zarena_core::CadenceDetector;
using zarena_test::kKiB;
using zarena_test::kMiB;
using zarena_test::kPassAllocs;
using zarena_test::LogCapture;
using zarena_test::make_host_arena;
using zarena_test::Record;
using zarena_test::sample_pass;

namespace {

constexpr uint64_t kCap = 64 * kMiB;

// Feeds steps of requests; every request raises the top by its size times `keep`, and with
// keep 0 the block is freed at once (the step gives back what it allocates). Records where
// the detector fired.
struct Driver {
  CadenceDetector d{kCap};
  uint64_t top = 0;
  uint64_t fired_at = 0;  // global request index
  uint64_t fired_top = 0;
  uint64_t requests = 0;
  int fired = 0;

  void step(const std::vector<uint64_t>& sizes, uint64_t keep = 1) {
    for (uint64_t s : sizes) {
      top += s * keep;
      ++requests;
      if (d.on_alloc(s, top)) {
        ++fired;
        if (fired_at == 0) {
          fired_at = requests;
          fired_top = top;
        }
      }
      if (keep == 0) d.on_free(s);
    }
  }
  void free_one(uint64_t size = 0) { d.on_free(size); }
  void reset(uint64_t floor) {
    top = floor;
    d.on_reset(top);
  }
};

std::vector<uint64_t> pass_sizes(uint64_t unit) {
  std::vector<uint64_t> v = {3 * unit};
  for (int l = 0; l < 4; ++l) {
    v.push_back(2 * unit);
    v.push_back((5 + l) * unit);
  }
  for (int l = 3; l >= 0; --l) {
    v.push_back((5 + l) * unit);
    v.push_back(16 * unit);
  }
  return v;
}

uint64_t lcg(uint64_t* state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return *state >> 33;
}

TEST(CadenceUnit, FiresEightRequestsIntoTheFourthPass) {
  // The troughs of passes 1..3 rose twice: the fourth pass's opening confirms it.
  Driver dr;
  const auto pass = pass_sizes(16 * kKiB);  // each pass keeps ~1.4 MiB
  for (int i = 0; i < 10; ++i) dr.step(pass);
  EXPECT_EQ(dr.fired, 1);
  EXPECT_EQ(dr.fired_at, 3 * pass.size() + CadenceDetector::kAnchorLen);
  EXPECT_EQ(dr.d.restarts(), 9u);
  EXPECT_EQ(dr.d.step_allocs(), pass.size());
  EXPECT_EQ(dr.d.steps(), 10u);  // as the loop counts them: the tenth pass is running
}

TEST(CadenceUnit, QuietUntilTheStepsAddAShareOfTheCapacity) {
  Driver dr;
  const auto pass = pass_sizes(128);  // ~16 KiB per pass: 1/64 of 64 MiB takes ~65 passes
  for (int i = 0; i < 40; ++i) dr.step(pass);
  EXPECT_EQ(dr.fired, 0);
  EXPECT_EQ(dr.d.restarts(), 39u);
  for (int i = 0; i < 200; ++i) dr.step(pass);
  EXPECT_EQ(dr.fired, 1);
  EXPECT_GE(dr.fired_top, kCap / CadenceDetector::kMinShareDivisor);
  EXPECT_LT(dr.fired_top, kCap / CadenceDetector::kMinShareDivisor + 3 * 16 * kKiB);
}

TEST(CadenceUnit, QuietWhenTheStepsFreeWhatTheyAllocate) {
  Driver dr;
  const auto pass = pass_sizes(64 * kKiB);
  for (int i = 0; i < 1000; ++i) dr.step(pass, /*keep=*/0);
  EXPECT_EQ(dr.fired, 0);
  EXPECT_EQ(dr.d.restarts(), 999u);  // it saw the steps, but nothing piles up
}

TEST(CadenceUnit, QuietForAConstantSizeStream) {
  Driver dr;
  dr.step(std::vector<uint64_t>(100000, 256));
  EXPECT_EQ(dr.fired, 0);
  EXPECT_EQ(dr.d.restarts(), 0u);
}

TEST(CadenceUnit, QuietForOneBigFirstStep) {
  Driver dr;
  uint64_t seed = 42;
  std::vector<uint64_t> step;
  for (int i = 0; i < 20000; ++i) step.push_back((1 + lcg(&seed) % 4096) * 256);
  dr.step(step);
  EXPECT_EQ(dr.fired, 0);
}

TEST(CadenceUnit, QuietForALayeredStepThatOpensWithItsInput) {
  // Input upload, 48 identical layers (activations kept), a backward that differs: the
  // layers repeat, but not the step's opening.
  Driver dr;
  std::vector<uint64_t> step = {777 * 256};
  for (int l = 0; l < 48; ++l) {
    for (uint64_t s : {4 * kKiB, 64 * kKiB, 64 * kKiB, 16 * kKiB, 256 * kKiB, 64 * kKiB}) {
      step.push_back(s);
    }
  }
  for (int l = 0; l < 48; ++l) {
    for (uint64_t s : {64 * kKiB, 256 * kKiB, 8 * kKiB}) step.push_back(s);
  }
  dr.step(step);
  EXPECT_EQ(dr.fired, 0);
  EXPECT_EQ(dr.d.restarts(), 0u);
  // The same step run again without a reset is caught.
  dr.step(step);
  dr.step(step);
  dr.step(step);
  EXPECT_EQ(dr.fired, 1);
  EXPECT_EQ(dr.d.steps(), 4u);
}

TEST(CadenceUnit, AResetForgetsTheSteps) {
  // (The arena switches the detector off at its first reset: CadenceApi below.)
  Driver dr;
  const auto pass = pass_sizes(64 * kKiB);
  for (int i = 0; i < 3; ++i) dr.step(pass);
  EXPECT_EQ(dr.d.restarts(), 2u);
  dr.reset(0);
  EXPECT_EQ(dr.d.restarts(), 0u);
  EXPECT_EQ(dr.d.steps(), 0u);
  EXPECT_EQ(dr.d.kept_bytes(), 0u);
}

TEST(CadenceUnit, LoopThatResetsEveryStepIsQuiet) {
  Driver dr;
  const auto pass = pass_sizes(256 * kKiB);  // ~14 MiB per step: a fifth of the arena
  for (int i = 0; i < 100; ++i) {
    dr.step(pass);
    dr.reset(0);
  }
  EXPECT_EQ(dr.fired, 0);
}

TEST(CadenceUnit, OverlappingOpeningIsMatched) {
  // The step ends with the first two sizes of its own opening: a naive matcher loses
  // the restart that follows, KMP does not.
  const uint64_t A = 64 * kKiB, B = 128 * kKiB, C = 192 * kKiB, D = 256 * kKiB, E = 320 * kKiB,
                 F = 384 * kKiB;
  const std::vector<uint64_t> step = {A, A, A, B, C, D, E, F, A, A};
  Driver dr;
  for (int i = 0; i < 20; ++i) dr.step(step);
  EXPECT_EQ(dr.d.restarts(), 19u);
  EXPECT_EQ(dr.fired, 1);
}

TEST(CadenceUnit, StepsShorterThanTheAnchor) {
  Driver dr;
  const std::vector<uint64_t> step = {256 * kKiB, 512 * kKiB, 768 * kKiB};
  for (int i = 0; i < 20; ++i) dr.step(step);
  EXPECT_EQ(dr.fired, 1);
  EXPECT_GE(dr.d.restarts(), 10u);
}

TEST(CadenceUnit, TheStepBoundaryReanchorsPastTheWeights) {
  Driver dr;
  std::vector<uint64_t> weights;
  for (int i = 0; i < 12; ++i) weights.push_back((100 + i) * kKiB);
  dr.step(weights);
  dr.d.on_step_boundary(dr.top);
  const auto pass = pass_sizes(16 * kKiB);
  for (int i = 0; i < 5; ++i) dr.step(pass);
  EXPECT_EQ(dr.fired, 1);
  EXPECT_EQ(dr.fired_at, weights.size() + 3 * pass.size() + CadenceDetector::kAnchorLen);
  EXPECT_EQ(dr.d.steps(), 5u);
}

TEST(CadenceUnit, ABoundaryAfterEveryStepWithoutResetIsStillCaught) {
  Driver dr;
  const auto pass = pass_sizes(16 * kKiB);
  for (int i = 0; i < 6; ++i) {
    dr.step(pass);
    dr.d.on_step_boundary(dr.top);
  }
  EXPECT_EQ(dr.fired, 1);
}

TEST(CadenceUnit, WeightsWithoutABoundaryAreSeenPastThroughTheFirstFree) {
  // Weights uploaded without zarena_mark_step_boundary anchor the detector on an upload
  // that never recurs; the first free (inside the first step) re-anchors it.
  Driver dr;
  std::vector<uint64_t> weights;
  for (int i = 0; i < 12; ++i) weights.push_back((100 + i) * kKiB);
  dr.step(weights);
  const auto pass = pass_sizes(16 * kKiB);
  for (int i = 0; i < 12 && dr.fired == 0; ++i) {
    dr.step(std::vector<uint64_t>(pass.begin(), pass.begin() + 5));
    dr.free_one();
    dr.step(std::vector<uint64_t>(pass.begin() + 5, pass.end()));
  }
  EXPECT_EQ(dr.fired, 1);
  EXPECT_GE(dr.d.restarts(), CadenceDetector::kLateGrowingRestartsToWarn);
  EXPECT_LT(dr.fired_top, kCap / 2) << "the warning must come long before the arena is full";
}

TEST(CadenceUnit, LayeredBackwardThatFreesAndResetsEveryStepIsQuiet) {
  // A correct step: input, 48 identical layers whose activations are kept, then a
  // backward pass that frees each layer's activation and allocates its gradient in the
  // freed space (the top stays put), then a reset. The backward repeats after the first
  // free, but without growth: no warning, in the first step or later.
  Driver dr;
  for (int step = 0; step < 10; ++step) {
    dr.step({777 * 256});
    for (int l = 0; l < 48; ++l) dr.step({64 * kKiB, 256 * kKiB, 16 * kKiB});
    for (int l = 0; l < 48; ++l) {
      dr.free_one();
      dr.step({256 * kKiB, 64 * kKiB}, 0);
    }
    dr.reset(0);
  }
  EXPECT_EQ(dr.fired, 0);
}

TEST(CadenceUnit, ABoundaryDisarmsTheLateAnchor) {
  Driver dr;
  const auto pass = pass_sizes(64 * kKiB);
  dr.step(std::vector<uint64_t>(pass.begin(), pass.begin() + 5));
  dr.free_one();
  dr.d.on_step_boundary(dr.top);  // from here the boundary anchor decides
  for (int i = 0; i < 5; ++i) dr.step(pass);
  EXPECT_EQ(dr.fired, 1);
  EXPECT_EQ(dr.fired_at, 5 + 3 * pass.size() + CadenceDetector::kAnchorLen);
}

TEST(CadenceUnit, ShortStepsAfterWeightsAreCountedAsTheLoopCounts) {
  // Weights without a boundary, then steps of three requests (a temporary and two kept
  // blocks of one size) that free the temporary at their end: the late anchor starts in
  // the second step and spans three steps, yet the count is the loop's.
  Driver dr;
  std::vector<uint64_t> weights;
  for (int i = 0; i < 12; ++i) weights.push_back((100 + i) * kKiB);
  dr.step(weights);
  for (int i = 1; i <= 40; ++i) {
    dr.step({48 * kKiB, 64 * kKiB, 64 * kKiB});
    dr.free_one(48 * kKiB);
    if (dr.d.restarts() > 0) {
      EXPECT_EQ(dr.d.steps(), static_cast<uint64_t>(i)) << "after iteration " << i;
    }
  }
  EXPECT_GT(dr.d.restarts(), 30u);
  EXPECT_EQ(dr.d.step_allocs(), 3u);
  EXPECT_EQ(dr.fired, 1);
}

TEST(CadenceUnit, LongStepsAfterWeightsAreCountedAsTheLoopCounts) {
  // The late anchor starts at the first free, in the middle of the first step.
  Driver dr;
  std::vector<uint64_t> weights;
  for (int i = 0; i < 12; ++i) weights.push_back((100 + i) * kKiB);
  dr.step(weights);
  const auto pass = pass_sizes(16 * kKiB);
  for (int i = 1; i <= 20; ++i) {
    dr.step(std::vector<uint64_t>(pass.begin(), pass.begin() + 5));
    dr.free_one(2 * 16 * kKiB);
    dr.step(std::vector<uint64_t>(pass.begin() + 5, pass.end()));
    if (dr.d.restarts() > 0) {
      EXPECT_EQ(dr.d.steps(), static_cast<uint64_t>(i)) << i;
    }
  }
}

TEST(CadenceUnit, QuietWhenTheTopCreepsButLiveBytesDoNot) {
  // A general-purpose workload: the same step every time, every block freed, but the top
  // moves up through fragmentation. The top alone once made this a false alarm.
  CadenceDetector d{kCap};
  uint64_t top = 0;
  int fired = 0;
  const auto pass = pass_sizes(16 * kKiB);
  for (int i = 0; i < 500; ++i) {
    for (uint64_t s : pass) {
      top += 8 * kKiB;  // creeps by half a unit a request
      fired += d.on_alloc(s, top);
    }
    for (uint64_t s : pass) d.on_free(s);
  }
  EXPECT_EQ(fired, 0);
  EXPECT_EQ(d.restarts(), 499u);  // it saw the steps, but nothing piles up
  EXPECT_EQ(d.kept_bytes(), 0u);
}

TEST(CadenceUnit, QuietWhenStateIsCreatedOnceInTheFirstStep) {
  // Optimizer state allocated in the first step and kept: the troughs rise once, not twice.
  Driver dr;
  const auto pass = pass_sizes(16 * kKiB);
  dr.step(pass, 0);
  dr.step({8 * kMiB, 4 * kMiB});  // the state, kept
  for (int i = 0; i < 100; ++i) dr.step(pass, 0);
  EXPECT_EQ(dr.fired, 0);
  EXPECT_GT(dr.d.restarts(), 90u);
}

TEST(CadenceUnit, StepsToFullFollowsTheAverageGrowth) {
  Driver dr;
  const auto pass = pass_sizes(16 * kKiB);  // keeps ~1.4 MiB a pass
  uint64_t per_pass = 0;
  for (uint64_t s : pass) per_pass += s;
  for (int i = 0; i < 6; ++i) dr.step(pass);
  const uint64_t truth = (kCap - dr.top) / per_pass;
  const uint64_t est = dr.d.steps_to_full(dr.top);
  EXPECT_GE(est, truth * 9 / 10);
  EXPECT_LE(est, truth * 11 / 10 + 1);
}

// --- through the C API ------------------------------------------------------------

TEST(CadenceApi, PerSamplePassesWarnInTheFourthSampleLongBeforeFull) {
  LogCapture cap;
  zarena* a = make_host_arena(64 * kMiB, "warn");
  void* w = nullptr;
  for (int i = 0; i < 4; ++i) ASSERT_EQ(zarena_alloc(a, 1 * kMiB, &w), ZARENA_OK);
  ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
  int samples = 0;
  while (sample_pass(a, 16 * kKiB) == ZARENA_OK) ++samples;
  const auto warn = cap.of("arena.reset_cadence");
  ASSERT_EQ(warn.size(), 1u);
  const Record& r = warn[0];
  EXPECT_EQ(r.level, ZARENA_LOG_WARN);
  EXPECT_EQ(r.u("step_repeats"), 3u);
  EXPECT_EQ(r.u("steps"), 4u);
  EXPECT_EQ(r.u("epoch_allocs"), 4 + 3 * kPassAllocs + CadenceDetector::kAnchorLen);
  EXPECT_EQ(r.u("step_allocs"), kPassAllocs);
  EXPECT_EQ(r.u("resets"), 0u);
  EXPECT_EQ(r.str("verdict"), "never_reset");
  ASSERT_NE(r.field("fill_percent"), nullptr);
  EXPECT_EQ(r.field("fill_percent")->kind, ZARENA_FIELD_DOUBLE);
  EXPECT_LT(r.field("fill_percent")->f, 15.0);
  EXPECT_GT(r.u("steps_to_full"), 30u);
  EXPECT_GT(samples, 30);
  // The warning came first, then the diagnosis.
  const auto all = cap.all();
  size_t warn_at = all.size(), overflow_at = all.size();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].event == "arena.reset_cadence") warn_at = i;
    if (all[i].event == "arena.first_overflow") overflow_at = i;
  }
  ASSERT_LT(overflow_at, all.size());
  EXPECT_LT(warn_at, overflow_at);
  EXPECT_EQ(all[overflow_at].str("verdict"), "never_reset");
  zarena_destroy(a);
}

TEST(CadenceApi, WeightsWithoutABoundaryStillWarnAndDiagnoseNeverReset) {
  // The original failure's shape with the weights in the arena and no step boundary.
  LogCapture cap;
  zarena* a = make_host_arena(64 * kMiB, "no-boundary");
  void* w = nullptr;
  for (int i = 0; i < 4; ++i) ASSERT_EQ(zarena_alloc(a, 1 * kMiB, &w), ZARENA_OK);
  int samples = 0;
  while (sample_pass(a, 16 * kKiB) == ZARENA_OK) ++samples;
  const auto warn = cap.of("arena.reset_cadence");
  ASSERT_EQ(warn.size(), 1u);
  EXPECT_LT(warn[0].field("fill_percent")->f, 25.0);
  EXPECT_EQ(warn[0].str("verdict"), "never_reset");
  const auto over = cap.of("arena.first_overflow");
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].str("verdict"), "never_reset");
  EXPECT_GT(samples, 30);
  zarena_destroy(a);
}

TEST(CadenceApi, ResettingEverySampleIsQuiet) {
  LogCapture cap;
  zarena* a = make_host_arena(4 * kMiB, "quiet");
  void* w = nullptr;
  ASSERT_EQ(zarena_alloc(a, 1 * kMiB, &w), ZARENA_OK);
  ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
  for (int i = 0; i < 300; ++i) {
    ASSERT_EQ(sample_pass(a, 16 * kKiB), ZARENA_OK);  // ~1 MiB, a quarter of the arena
    ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  }
  EXPECT_TRUE(cap.of("arena.reset_cadence").empty());
  EXPECT_TRUE(cap.of("arena.first_overflow").empty());
  zarena_destroy(a);
}

// One size, never freed, never reset, no boundary: no warning (it may be one step's
// buffers), but the overflow names never_reset, a newcomer's first loop (issue 34; it was
// working_set_full).
TEST(CadenceApi, ConstantSizeStreamIsQuiet) {
  LogCapture cap;
  zarena* a = make_host_arena(8 * kMiB, "constant");
  void* p = nullptr;
  while (zarena_alloc(a, 4 * kKiB, &p) == ZARENA_OK) {
  }
  EXPECT_TRUE(cap.of("arena.reset_cadence").empty());
  const auto over = cap.of("arena.first_overflow");
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].str("verdict"), "never_reset");
  zarena_destroy(a);
}

TEST(CadenceApi, OneBigFirstStepIsQuiet) {
  LogCapture cap;
  zarena* a = make_host_arena(64 * kMiB, "bigstep");
  uint64_t seed = 7;
  void* p = nullptr;
  std::vector<void*> live;
  while (zarena_alloc(a, (1 + lcg(&seed) % 512) * 256, &p) == ZARENA_OK) {
    live.push_back(p);
    if (lcg(&seed) % 4 == 0) {  // some frees, as real ops do
      ASSERT_EQ(zarena_free(a, live.back()), ZARENA_OK);
      live.pop_back();
    }
  }
  EXPECT_TRUE(cap.of("arena.reset_cadence").empty());
  zarena_destroy(a);
}

TEST(CadenceApi, StepsThatFreeEverythingAreQuiet) {
  LogCapture cap;
  zarena* a = make_host_arena(4 * kMiB, "steady");
  for (int i = 0; i < 500; ++i) {
    std::vector<void*> ps;
    for (uint64_t s : pass_sizes(4 * kKiB)) {
      void* p = nullptr;
      ASSERT_EQ(zarena_alloc(a, s, &p), ZARENA_OK);
      ps.push_back(p);
    }
    for (void* p : ps) ASSERT_EQ(zarena_free(a, p), ZARENA_OK);
  }
  EXPECT_TRUE(cap.of("arena.reset_cadence").empty());
  zarena_destroy(a);
}

}  // namespace
