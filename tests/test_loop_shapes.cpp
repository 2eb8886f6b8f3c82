// The diagnosis for the loop shapes people write (issue 11), through the C API: for each
// shape the early warning (whether and when, before 90 % full), the verdict and advice at
// the overflow, the message of the failing call, and zarena_diagnose. Shapes: explicit
// steps (zarena_step_begin) never reset, reset every step, freeing everything, reset for
// ten steps and then stopped; the same without zarena_step_begin; a loop that keeps one or
// two same-size blocks per step; a general-purpose (PyTorch-style) workload that frees
// every block, shapes varying, never reset.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "log/log.h"
#include "support.h"

using zarena_test::kKiB;
using zarena_test::kMiB;
using zarena_test::kPassAllocs;
using zarena_test::LogCapture;
using zarena_test::make_host_arena;
using zarena_test::Record;
using zarena_test::sample_pass;
using zarena_test::stats_of;

namespace {

// Each test starts with a fresh log rate limiter: "arena.reset_cadence" is limited
// process-wide (a burst of 5), and these tests warn on purpose, one after another.
struct FreshLimiter : ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo&) override {
    zarena_core::log_set_clock_for_testing(nullptr);
  }
};
const bool kFreshLimiter = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new FreshLimiter);
  return true;
}();

struct Parsed {
  bool ok = false;
  std::string verdict, advice;
};

// The documented format: the message ends with "verdict=<name>; fix: <advice>".
Parsed parse_error(const std::string& msg) {
  static const std::regex re("verdict=([a-z_]+); fix: (.*)$");
  std::smatch m;
  Parsed p;
  if (std::regex_search(msg, m, re)) {
    p.ok = true;
    p.verdict = m[1];
    p.advice = m[2];
  }
  return p;
}

zarena_diagnosis diagnose(zarena* a) {
  zarena_diagnosis d;
  d.struct_size = sizeof d;
  EXPECT_EQ(zarena_diagnose(a, &d), ZARENA_OK) << zarena_last_error();
  return d;
}

double fill(const Record& r) {
  const zarena_test::Field* f = r.field("fill_percent");
  EXPECT_NE(f, nullptr);
  return f == nullptr ? 100.0 : f->f;
}

bool has(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

// "When resets == 0 at an overflow and steps repeat, never advise raising the capacity
// alone": the advice then names the reset, or says why a reset would not help.
void expect_not_capacity_alone(const std::string& advice) {
  EXPECT_TRUE(has(advice, "zarena_reset") || has(advice, "reset would not help")) << advice;
}

uint64_t lcg(uint64_t* s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

// --- explicit steps -------------------------------------------------------------------

// The warning comes when the steps have kept memory twice: at the third step's begin (one
// rise alone may be state created once, in the first step).
TEST(ExplicitSteps, NeverResetWarnsAtTheThirdStep) {
  LogCapture cap;
  zarena* a = make_host_arena(16 * kMiB, "explicit-never");
  void* w = nullptr;
  ASSERT_EQ(zarena_alloc(a, 1 * kMiB, &w), ZARENA_OK);  // weights
  ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
  int step = 0;
  zarena_status st = ZARENA_OK;
  while (st == ZARENA_OK && step < 1000) {
    ++step;
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    if (step <= 2) {
      EXPECT_TRUE(cap.of("arena.reset_cadence").empty());
    }
    if (step == 3) {
      const auto warn = cap.of("arena.reset_cadence");
      ASSERT_EQ(warn.size(), 1u) << "the warning comes at the third step";
      EXPECT_EQ(warn[0].str("verdict"), "never_reset");
      EXPECT_EQ(warn[0].u("steps"), 3u);
      EXPECT_EQ(warn[0].field("steps_explicit")->i, 1);
      EXPECT_LT(fill(warn[0]), 90.0);
      EXPECT_TRUE(has(warn[0].str("advice"), "zarena_reset after every step"));
      EXPECT_GT(warn[0].u("steps_to_full"), 5u);
      const zarena_diagnosis d = diagnose(a);
      EXPECT_STREQ(d.verdict, "never_reset");
      EXPECT_EQ(d.overflowed, 0u);
      EXPECT_EQ(d.warned, 1u);
      EXPECT_EQ(d.steps, 3u);
      EXPECT_EQ(d.steps_explicit, 1u);
    }
    st = sample_pass(a, 16 * kKiB);
  }
  ASSERT_EQ(st, ZARENA_E_OUT_OF_MEMORY);
  const Parsed p = parse_error(zarena_last_error());
  ASSERT_TRUE(p.ok) << zarena_last_error();
  EXPECT_EQ(p.verdict, "never_reset");
  EXPECT_TRUE(has(p.advice, "call zarena_reset after every step")) << p.advice;
  const auto over = cap.of("arena.first_overflow");
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].str("verdict"), "never_reset");
  EXPECT_EQ(over[0].u("steps"), static_cast<uint64_t>(step)) << "the loop's own count";
  EXPECT_EQ(cap.of("arena.reset_cadence").size(), 1u);
  const zarena_diagnosis d = diagnose(a);
  EXPECT_EQ(d.overflowed, 1u);
  EXPECT_STREQ(d.verdict, "never_reset");
  EXPECT_EQ(d.steps, static_cast<uint64_t>(step));
  EXPECT_EQ(std::string(d.advice), p.advice);
  EXPECT_GT(d.kept_bytes, 8 * kMiB);
  const zarena_stats s = stats_of(a);
  EXPECT_EQ(s.steps, static_cast<uint64_t>(step));
  EXPECT_EQ(s.epoch_steps, static_cast<uint64_t>(step));
  zarena_destroy(a);
}

TEST(ExplicitSteps, OneSameSizeBlockKeptPerStepWarnsAtTheThirdStep) {
  // A constant-size stream: no guess can tell it from one big step; the step calls can.
  LogCapture cap;
  zarena* a = make_host_arena(4 * kMiB, "explicit-one-block");
  void* p = nullptr;
  for (int step = 1; step <= 4; ++step) {
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    EXPECT_EQ(cap.of("arena.reset_cadence").size(), step >= 3 ? 1u : 0u) << step;
    ASSERT_EQ(zarena_alloc(a, 4 * kKiB, &p), ZARENA_OK);
  }
  const auto warn = cap.of("arena.reset_cadence");
  ASSERT_EQ(warn.size(), 1u);
  EXPECT_EQ(warn[0].u("steps"), 3u);
  EXPECT_EQ(warn[0].u("step_bytes"), 4 * kKiB);
  zarena_destroy(a);
}

TEST(ExplicitSteps, ResettingEveryStepIsQuiet) {
  LogCapture cap;
  zarena* a = make_host_arena(4 * kMiB, "explicit-reset");
  for (int step = 0; step < 100; ++step) {
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    ASSERT_EQ(sample_pass(a, 16 * kKiB), ZARENA_OK);
    ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  }
  EXPECT_TRUE(cap.of("arena.reset_cadence").empty());
  const zarena_diagnosis d = diagnose(a);
  EXPECT_STREQ(d.verdict, "ok");
  EXPECT_STREQ(d.advice, "");
  EXPECT_EQ(d.warned, 0u);
  EXPECT_EQ(stats_of(a).steps, 100u);
  EXPECT_EQ(stats_of(a).epoch_steps, 0u);
  zarena_destroy(a);
}

TEST(ExplicitSteps, StepsThatFreeEverythingWithoutResetAreQuiet) {
  LogCapture cap;
  zarena* a = make_host_arena(8 * kMiB, "explicit-free");
  uint64_t seed = 3;
  for (int step = 0; step < 200; ++step) {
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    std::vector<void*> live;
    const int n = 10 + static_cast<int>(lcg(&seed) % 20);
    for (int i = 0; i < n; ++i) {
      void* p = nullptr;
      ASSERT_EQ(zarena_alloc(a, (1 + lcg(&seed) % 64) * kKiB, &p), ZARENA_OK);
      live.push_back(p);
    }
    for (void* p : live) ASSERT_EQ(zarena_free(a, p), ZARENA_OK);
  }
  EXPECT_TRUE(cap.of("arena.reset_cadence").empty());
  const zarena_diagnosis d = diagnose(a);
  EXPECT_STREQ(d.verdict, "ok") << d.cause;
  EXPECT_EQ(d.steps, 200u);
  EXPECT_EQ(d.kept_bytes, 0u);
  zarena_destroy(a);
}

TEST(ExplicitSteps, ResetForTenStepsThenStopped) {
  LogCapture cap;
  zarena* a = make_host_arena(16 * kMiB, "explicit-stopped");
  void* w = nullptr;
  ASSERT_EQ(zarena_alloc(a, 1 * kMiB, &w), ZARENA_OK);
  ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
  int step = 0;
  zarena_status st = ZARENA_OK;
  for (; step < 10; ++step) {
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    ASSERT_EQ(sample_pass(a, 16 * kKiB), ZARENA_OK);
    ASSERT_EQ(zarena_reset(a), ZARENA_OK);  // the reset, until it moved under a condition
  }
  int since = 0;
  while (st == ZARENA_OK && since < 1000) {
    ++since;
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    EXPECT_EQ(cap.of("arena.reset_cadence").size(), since >= 3 ? 1u : 0u) << since;
    st = sample_pass(a, 16 * kKiB);
  }
  ASSERT_EQ(st, ZARENA_E_OUT_OF_MEMORY);
  const auto warn = cap.of("arena.reset_cadence");
  ASSERT_EQ(warn.size(), 1u);
  EXPECT_EQ(warn[0].str("verdict"), "reset_stopped");
  EXPECT_EQ(warn[0].u("steps"), 3u);
  EXPECT_LT(fill(warn[0]), 90.0);
  EXPECT_TRUE(has(warn[0].str("advice"), "again")) << warn[0].str("advice");
  const Parsed p = parse_error(zarena_last_error());
  ASSERT_TRUE(p.ok) << zarena_last_error();
  EXPECT_EQ(p.verdict, "reset_stopped");
  EXPECT_FALSE(has(p.advice, "capacity")) << p.advice;
  const auto over = cap.of("arena.first_overflow");
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].str("verdict"), "reset_stopped");
  EXPECT_EQ(over[0].u("steps"), static_cast<uint64_t>(since));
  zarena_destroy(a);
}

// --- without zarena_step_begin ----------------------------------------------------------

TEST(GuessedSteps, ResetForTenStepsThenStopped) {
  LogCapture cap;
  zarena* a = make_host_arena(64 * kMiB, "stopped");
  void* w = nullptr;
  for (int i = 0; i < 4; ++i) ASSERT_EQ(zarena_alloc(a, 1 * kMiB, &w), ZARENA_OK);
  ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(sample_pass(a, 16 * kKiB), ZARENA_OK);
    ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  }
  int since = 0;
  int warned_in = 0;
  zarena_status st = ZARENA_OK;
  while (st == ZARENA_OK && since < 10000) {
    ++since;
    st = sample_pass(a, 16 * kKiB);
    if (warned_in == 0 && !cap.of("arena.reset_cadence").empty()) warned_in = since;
  }
  ASSERT_EQ(st, ZARENA_E_OUT_OF_MEMORY);
  const auto warn = cap.of("arena.reset_cadence");
  ASSERT_EQ(warn.size(), 1u) << "no early warning for a loop that stopped resetting";
  EXPECT_EQ(warn[0].str("verdict"), "reset_stopped");
  EXPECT_EQ(warn[0].u("steps"), static_cast<uint64_t>(warned_in)) << "the loop's count";
  EXPECT_LE(warned_in, 8);
  EXPECT_LT(fill(warn[0]), 50.0);
  EXPECT_GT(since, 3 * warned_in);
  const Parsed p = parse_error(zarena_last_error());
  ASSERT_TRUE(p.ok) << zarena_last_error();
  EXPECT_EQ(p.verdict, "reset_stopped");
  EXPECT_TRUE(has(p.advice, "zarena_reset after every step again")) << p.advice;
  EXPECT_FALSE(has(p.advice, "capacity")) << "the exact wrong advice: " << p.advice;
  const auto over = cap.of("arena.first_overflow");
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].str("verdict"), "reset_stopped");
  EXPECT_EQ(over[0].u("steps"), static_cast<uint64_t>(since));
  EXPECT_EQ(over[0].u("resets"), 10u);
  const zarena_diagnosis d = diagnose(a);
  EXPECT_STREQ(d.verdict, "reset_stopped");
  EXPECT_EQ(d.prior_allocs, kPassAllocs);
  zarena_destroy(a);
}

// The same loop under a step plan: the ten steps that reset are served by the plan, whose
// requests never reach the diagnosis; the epochs' openings are the plan's. It warned
// nothing before (no opening was seen, so no epoch was watched for it).
TEST(GuessedSteps, ResetForTenStepsThenStoppedUnderAPlan) {
  LogCapture cap;
  zarena* a =
      make_host_arena(64 * kMiB, "stopped-planned", ZARENA_OVERFLOW_REFUSE, ZARENA_FLAG_PLAN);
  void* w = nullptr;
  for (int i = 0; i < 4; ++i) ASSERT_EQ(zarena_alloc(a, 1 * kMiB, &w), ZARENA_OK);
  ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(sample_pass(a, 16 * kKiB), ZARENA_OK);
    ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  }
  ASSERT_GT(stats_of(a).plan_hits, 0u) << "the plan never served: the test proves nothing";
  int since = 0, warned_in = 0;
  zarena_status st = ZARENA_OK;
  while (st == ZARENA_OK && since < 10000) {
    ++since;
    st = sample_pass(a, 16 * kKiB);
    if (warned_in == 0 && !cap.of("arena.reset_cadence").empty()) warned_in = since;
  }
  ASSERT_EQ(st, ZARENA_E_OUT_OF_MEMORY);
  const auto warn = cap.of("arena.reset_cadence");
  ASSERT_EQ(warn.size(), 1u) << "no early warning for a planned loop that stopped resetting";
  EXPECT_EQ(warn[0].str("verdict"), "reset_stopped");
  // The loop's count: the first step after the last reset was planned, and counts.
  EXPECT_EQ(warn[0].u("steps"), static_cast<uint64_t>(warned_in));
  EXPECT_LT(fill(warn[0]), 50.0);
  const Parsed p = parse_error(zarena_last_error());
  EXPECT_EQ(p.verdict, "reset_stopped") << zarena_last_error();
  zarena_destroy(a);
}

TEST(GuessedSteps, ResetForTenStepsThenStoppedWithShapesThatVary) {
  // Each step opens with a different input size: no repeat can be seen, only counts.
  LogCapture cap;
  zarena* a = make_host_arena(8 * kMiB, "stopped-varied");
  void* w = nullptr;
  ASSERT_EQ(zarena_alloc(a, 1 * kMiB, &w), ZARENA_OK);
  ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
  int n = 0;
  auto step = [&](bool reset) {
    void* p = nullptr;
    ++n;
    zarena_status st = zarena_alloc(a, (8 + n % 13) * kKiB, &p);  // the input, its size varies
    for (int l = 0; l < 8 && st == ZARENA_OK; ++l) st = zarena_alloc(a, 32 * kKiB, &p);
    if (reset) {
      EXPECT_EQ(zarena_reset(a), ZARENA_OK);
    }
    return st;
  };
  for (int i = 0; i < 10; ++i) ASSERT_EQ(step(true), ZARENA_OK);
  int since = 0;
  zarena_status st = ZARENA_OK;
  while (st == ZARENA_OK && since < 1000) {
    ++since;
    st = step(false);
  }
  ASSERT_EQ(st, ZARENA_E_OUT_OF_MEMORY);
  const Parsed p = parse_error(zarena_last_error());
  EXPECT_EQ(p.verdict, "reset_stopped") << zarena_last_error();
  const auto over = cap.of("arena.first_overflow");
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].u("steps"), static_cast<uint64_t>(since));
  zarena_destroy(a);
}

TEST(GuessedSteps, TwoSameSizeBlocksKeptPerStep) {
  // Weights without a boundary; each iteration allocates temporaries of varied sizes,
  // keeps two blocks of one size, and frees the temporaries.
  LogCapture cap;
  const uint64_t capacity = 16 * kMiB;
  zarena* a = make_host_arena(capacity, "kept-two");
  void* w = nullptr;
  for (int i = 0; i < 4; ++i) ASSERT_EQ(zarena_alloc(a, 1 * kMiB, &w), ZARENA_OK);
  const uint64_t temps[6] = {3, 7, 2, 5, 9, 4};
  int iter = 0;
  int warned_at = 0;
  uint64_t steps_to_full = 0;
  zarena_status st = ZARENA_OK;
  while (st == ZARENA_OK && iter < 10000) {
    ++iter;
    std::vector<void*> tmp;
    for (int k = 0; k < 6 && st == ZARENA_OK; ++k) {
      void* p = nullptr;
      st = zarena_alloc(a, temps[k] * 16 * kKiB, &p);
      if (st == ZARENA_OK) tmp.push_back(p);
      if (k == 1 || k == 4) {  // the two kept blocks
        void* kept = nullptr;
        if (st == ZARENA_OK) st = zarena_alloc(a, 64 * kKiB, &kept);
      }
    }
    if (st != ZARENA_OK) break;
    for (void* p : tmp) ASSERT_EQ(zarena_free(a, p), ZARENA_OK);
    if (warned_at == 0) {
      const auto warn = cap.of("arena.reset_cadence");
      if (!warn.empty()) {
        warned_at = iter;
        EXPECT_EQ(warn[0].str("verdict"), "never_reset");
        EXPECT_EQ(warn[0].u("steps"), static_cast<uint64_t>(iter)) << "the loop's count";
        EXPECT_LT(fill(warn[0]), 90.0);
        steps_to_full = warn[0].u("steps_to_full");
      }
    }
  }
  ASSERT_EQ(st, ZARENA_E_OUT_OF_MEMORY);
  ASSERT_GT(warned_at, 0) << "no early warning";
  // "About N more steps" is about right: within a fifth of what was left.
  const uint64_t left = static_cast<uint64_t>(iter - warned_at);
  EXPECT_GE(steps_to_full, left * 4 / 5) << left;
  EXPECT_LE(steps_to_full, left * 6 / 5 + 1) << left;
  const Parsed p = parse_error(zarena_last_error());
  ASSERT_TRUE(p.ok) << zarena_last_error();
  EXPECT_EQ(p.verdict, "never_reset");
  expect_not_capacity_alone(p.advice);
  const auto over = cap.of("arena.first_overflow");
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].str("verdict"), "never_reset");
  EXPECT_EQ(over[0].u("steps"), static_cast<uint64_t>(iter)) << "the loop's count";
  zarena_destroy(a);
}

TEST(GuessedSteps, TextbookPerSampleLoopCountsItsSteps) {
  LogCapture cap;
  zarena* a = make_host_arena(64 * kMiB, "textbook");
  void* w = nullptr;
  for (int i = 0; i < 4; ++i) ASSERT_EQ(zarena_alloc(a, 1 * kMiB, &w), ZARENA_OK);
  int iter = 0;
  zarena_status st = ZARENA_OK;
  while (st == ZARENA_OK) {
    ++iter;
    st = sample_pass(a, 16 * kKiB);
  }
  const auto over = cap.of("arena.first_overflow");
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].str("verdict"), "never_reset");
  EXPECT_EQ(over[0].u("steps"), static_cast<uint64_t>(iter));
  const auto warn = cap.of("arena.reset_cadence");
  ASSERT_EQ(warn.size(), 1u);
  EXPECT_LT(fill(warn[0]), 25.0);
  expect_not_capacity_alone(parse_error(zarena_last_error()).advice);
  zarena_destroy(a);
}

// The guess follows one thread: a loop that runs on a thread of its own (not the one that
// created the arena) is recognised like any other.
TEST(GuessedSteps, TextbookLoopOnAWorkerThreadWarns) {
  LogCapture cap;
  zarena* a = make_host_arena(64 * kMiB, "worker-loop");
  int iter = 0;
  std::thread([&] {
    zarena_status st = ZARENA_OK;
    while (st == ZARENA_OK) {
      ++iter;
      st = sample_pass(a, 16 * kKiB);
    }
  }).join();
  const auto warn = cap.of("arena.reset_cadence");
  ASSERT_EQ(warn.size(), 1u);
  EXPECT_LT(fill(warn[0]), 25.0);
  const auto over = cap.of("arena.first_overflow");
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].str("verdict"), "never_reset");
  zarena_destroy(a);
}

// One thread allocates every step's blocks, another frees them all (a finalizer, a queue
// of frees): nothing is kept, nothing may be reported, although the allocating thread
// alone never frees.
TEST(GuessedSteps, BlocksFreedByAnotherThreadNeverWarn) {
  LogCapture cap;
  zarena* a = make_host_arena(16 * kMiB, "cross-thread-frees");
  for (int step = 0; step < 200; ++step) {
    std::vector<void*> blocks;
    for (int i = 0; i < 12; ++i) {
      void* p = nullptr;
      ASSERT_EQ(zarena_alloc(a, (4 + i % 5) * 16 * kKiB, &p), ZARENA_OK) << zarena_last_error();
      blocks.push_back(p);
    }
    std::thread([&] {
      for (void* p : blocks) EXPECT_EQ(zarena_free(a, p), ZARENA_OK);
    }).join();
  }
  EXPECT_TRUE(cap.of("arena.reset_cadence").empty());
  EXPECT_TRUE(cap.of("arena.first_overflow").empty());
  EXPECT_STREQ(diagnose(a).verdict, "ok");
  zarena_destroy(a);
}

// A general-purpose workload as PyTorch drives an allocator: per step an input whose size
// varies, a forward pass keeping activations (sizes follow the input), a backward pass
// freeing them in reverse with temporaries, the previous step's loss freed late; every
// block is freed, nothing is ever reset.
zarena_status free_everything_step(zarena* a, uint64_t len, void** loss) {
  std::vector<void*> acts;
  void* p = nullptr;
  zarena_status st = zarena_alloc(a, len * 4 * kKiB, &p);
  if (st != ZARENA_OK) return st;
  acts.push_back(p);
  for (int l = 0; l < 12; ++l) {
    if ((st = zarena_alloc(a, len * (8 + l % 3) * kKiB, &p)) != ZARENA_OK) return st;
    acts.push_back(p);
  }
  if (*loss != nullptr && (st = zarena_free(a, *loss)) != ZARENA_OK) return st;
  if ((st = zarena_alloc(a, 256, loss)) != ZARENA_OK) return st;
  while (!acts.empty()) {
    void* tmp = nullptr;
    if ((st = zarena_alloc(a, len * 6 * kKiB, &tmp)) != ZARENA_OK) return st;
    if ((st = zarena_free(a, tmp)) != ZARENA_OK) return st;
    if ((st = zarena_free(a, acts.back())) != ZARENA_OK) return st;
    acts.pop_back();
  }
  return ZARENA_OK;
}

TEST(GuessedSteps, FreeEverythingWorkloadNeverWarns) {
  LogCapture cap;
  zarena* a = make_host_arena(64 * kMiB, "pytorch");
  void* weights = nullptr;
  ASSERT_EQ(zarena_alloc(a, 8 * kMiB, &weights), ZARENA_OK);
  uint64_t seed = 11;
  void* loss = nullptr;
  for (int step = 0; step < 400; ++step) {
    const uint64_t len = step % 50 < 40 ? 4 : 1 + lcg(&seed) % 8;  // mostly one shape
    ASSERT_EQ(free_everything_step(a, len, &loss), ZARENA_OK) << step;
  }
  EXPECT_TRUE(cap.of("arena.reset_cadence").empty()) << cap.of("arena.reset_cadence")[0].message;
  const zarena_diagnosis d = diagnose(a);
  EXPECT_STREQ(d.verdict, "ok") << d.cause;
  EXPECT_GT(d.steps, 1u) << "it saw the repeated steps, yet no warning";
  EXPECT_EQ(d.kept_bytes, 0u);
  zarena_destroy(a);
}

TEST(GuessedSteps, FreeEverythingWorkloadThatOverflowsIsNotToldToReset) {
  LogCapture cap;
  zarena* a = make_host_arena(4 * kMiB, "pytorch-small");
  uint64_t seed = 5;
  void* loss = nullptr;
  for (int step = 0; step < 300; ++step) {
    ASSERT_EQ(free_everything_step(a, 1 + lcg(&seed) % 8, &loss), ZARENA_OK) << step;
  }
  EXPECT_EQ(free_everything_step(a, 64, &loss), ZARENA_E_OUT_OF_MEMORY);  // a long input
  const Parsed p = parse_error(zarena_last_error());
  ASSERT_TRUE(p.ok) << zarena_last_error();
  EXPECT_NE(p.verdict, "never_reset");
  EXPECT_FALSE(has(p.advice, "call zarena_reset")) << p.advice;
  EXPECT_TRUE(cap.of("arena.reset_cadence").empty());
  const auto over = cap.of("arena.first_overflow");
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].str("verdict"), p.verdict);
  zarena_destroy(a);
}

// --- steps that give back what they allocate, plans on and off (issue 31) ---------------

// A step of a general-purpose loop whose output is carried into the next step and freed
// there once the new one exists (PyTorch rebinding `out = model(x)`): its size follows the
// step's input, so the live bytes at a step's begin go up and down with the shapes, while
// nothing piles up.
zarena_status rebind_step(zarena* a, uint64_t len, void** out) {
  std::vector<void*> acts;
  zarena_status st = ZARENA_OK;
  for (int l = 0; l < 6; ++l) {
    void* p = nullptr;
    if ((st = zarena_alloc(a, len * (8 + l % 3) * kKiB, &p)) != ZARENA_OK) return st;
    acts.push_back(p);
  }
  void* o = nullptr;
  if ((st = zarena_alloc(a, len * 16 * kKiB, &o)) != ZARENA_OK) return st;
  if (*out != nullptr && (st = zarena_free(a, *out)) != ZARENA_OK) return st;
  *out = o;
  for (void* x : acts) {
    if ((st = zarena_free(a, x)) != ZARENA_OK) return st;
  }
  return ZARENA_OK;
}

// Loops that free everything they allocate every step (a block carried into the next step
// at most), shapes varying every step, never reset: no warning and zarena_diagnose says ok,
// with zarena_step_begin or without, plans on or off. (With step_begin, any step that
// began with more live bytes than the one before warned: the loss carried from the first
// step, or a carried output larger than the last.)
TEST(FreeingSteps, ShapesThatVaryNeverWarn) {
  for (int v = 0; v < 8; ++v) {
    const bool plan = (v & 1) != 0, marked = (v & 2) != 0, rebind = (v & 4) != 0;
    const std::string what = std::string(plan ? "plans on" : "plans off") +
                             (marked ? ", step_begin" : ", no step_begin") +
                             (rebind ? ", output carried" : ", loss carried");
    LogCapture cap;
    zarena_core::log_set_clock_for_testing(nullptr);  // one warning per case may pass
    zarena* a =
        make_host_arena(64 * kMiB, "freeing", ZARENA_OVERFLOW_REFUSE, plan ? ZARENA_FLAG_PLAN : 0);
    void* w = nullptr;
    ASSERT_EQ(zarena_alloc(a, 8 * kMiB, &w), ZARENA_OK);
    uint64_t seed = 11;
    void* carried = nullptr;
    for (int step = 0; step < 400; ++step) {
      if (marked) {
        ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
      }
      const uint64_t len = 1 + lcg(&seed) % 8;
      const zarena_status st =
          rebind ? rebind_step(a, len, &carried) : free_everything_step(a, len, &carried);
      ASSERT_EQ(st, ZARENA_OK) << what << ", step " << step;
    }
    const auto warn = cap.of("arena.reset_cadence");
    EXPECT_TRUE(warn.empty()) << what << ": " << warn[0].message;
    const zarena_diagnosis d = diagnose(a);
    EXPECT_STREQ(d.verdict, "ok") << what << ": " << d.cause;
    EXPECT_EQ(d.kept_bytes, 0u) << what;
    zarena_destroy(a);
  }
}

// The same steps with one shape: a plan serves them (its zone is pinned region memory
// that outlives every step, and the diagnosis counts the planned blocks live in it, not
// the zone). It warned "no reset yet ... likely verdict never_reset", and zarena_diagnose
// said never_reset.
TEST(FreeingSteps, StepsAPlanServesNeverWarn) {
  for (bool plan : {false, true}) {
    LogCapture cap;
    zarena* a = make_host_arena(64 * kMiB, "planned-freeing", ZARENA_OVERFLOW_REFUSE,
                                plan ? ZARENA_FLAG_PLAN : 0);
    void* w = nullptr;
    ASSERT_EQ(zarena_alloc(a, 8 * kMiB, &w), ZARENA_OK);
    void* loss = nullptr;
    for (int step = 0; step < 50; ++step) {
      ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
      ASSERT_EQ(free_everything_step(a, 4, &loss), ZARENA_OK) << step;
    }
    const zarena_stats s = stats_of(a);
    if (plan) {
      ASSERT_GT(s.plan_hits, 0u) << "the plan never served: the test proves nothing";
      ASSERT_GT(s.plan_zone_bytes, 0u);
    }
    const auto warn = cap.of("arena.reset_cadence");
    EXPECT_TRUE(warn.empty()) << "plan " << plan << ": " << warn[0].message;
    const zarena_diagnosis d = diagnose(a);
    EXPECT_STREQ(d.verdict, "ok") << "plan " << plan << ": " << d.cause;
    EXPECT_EQ(d.steps, 50u);
    EXPECT_EQ(d.kept_bytes, 0u) << "plan " << plan;
    zarena_destroy(a);
  }
}

// The real thing under a plan: each step frees its temporaries and keeps one block, never
// reset. The plan serves the temporaries; the warning still comes at the third step, with
// every request counted (planned ones too), and the overflow says never_reset.
TEST(FreeingSteps, StepsThatKeepABlockUnderAPlanStillWarn) {
  for (bool plan : {false, true}) {
    LogCapture cap;
    zarena* a = make_host_arena(8 * kMiB, "planned-keeping", ZARENA_OVERFLOW_REFUSE,
                                plan ? ZARENA_FLAG_PLAN : 0);
    constexpr uint64_t kKept = 64 * kKiB;
    constexpr int kTemps = 6;
    int step = 0;
    uint64_t requests = 0;
    zarena_status st = ZARENA_OK;
    while (st == ZARENA_OK && step < 1000) {
      ++step;
      ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
      if (step == 3) {
        const auto warn = cap.of("arena.reset_cadence");
        ASSERT_EQ(warn.size(), 1u) << "plan " << plan;
        EXPECT_EQ(warn[0].str("verdict"), "never_reset");
        EXPECT_EQ(warn[0].u("steps"), 3u);
        EXPECT_EQ(warn[0].u("step_bytes"), kKept) << warn[0].message;
        EXPECT_EQ(warn[0].u("epoch_allocs"), 2u * (kTemps + 1)) << "plan " << plan;
        EXPECT_TRUE(has(warn[0].message, "keeping 128.0 KiB (64.0 KiB per step"))
            << warn[0].message;
      }
      std::vector<void*> temps;
      for (int i = 0; i < kTemps && st == ZARENA_OK; ++i) {
        void* p = nullptr;
        st = zarena_alloc(a, (4 + i) * 16 * kKiB, &p);
        ++requests;
        if (st == ZARENA_OK) temps.push_back(p);
      }
      void* kept = nullptr;
      if (st == ZARENA_OK) {
        st = zarena_alloc(a, kKept, &kept);
        ++requests;
      }
      for (void* p : temps) ASSERT_EQ(zarena_free(a, p), ZARENA_OK);
    }
    ASSERT_EQ(st, ZARENA_E_OUT_OF_MEMORY) << "plan " << plan;
    if (plan) {
      EXPECT_GT(stats_of(a).plan_hits, 0u) << "the plan never served: the test proves less";
    }
    const Parsed p = parse_error(zarena_last_error());
    EXPECT_EQ(p.verdict, "never_reset") << "plan " << plan << ": " << zarena_last_error();
    EXPECT_EQ(cap.of("arena.reset_cadence").size(), 1u);
    const auto over = cap.of("arena.first_overflow");
    ASSERT_EQ(over.size(), 1u);
    EXPECT_EQ(over[0].str("verdict"), "never_reset");
    // Every request the loop made, those the plan served too.
    EXPECT_EQ(over[0].u("epoch_allocs"), requests) << "plan " << plan;
    EXPECT_EQ(over[0].u("steps"), static_cast<uint64_t>(step));
    zarena_destroy(a);
  }
}

// --- issue 26: no false alarm, one verdict per program ---------------------------------

// One step of a model whose layers repeat (the same sizes in every layer of the step, the
// sizes following the step's input length), never reset: the layers' blocks are kept
// while the step runs, half of them are freed at once, the rest at the step's end. With
// `temporaries`, each layer also frees a scratch block of its own (as a forward pass does).
zarena_status layered_step(zarena* a, uint64_t len, int layers, bool temporaries) {
  std::vector<void*> kept;
  zarena_status st = ZARENA_OK;
  for (int l = 0; l < layers && st == ZARENA_OK; ++l) {
    for (uint64_t k : {4, 1, 8, 2}) {
      void* p = nullptr;
      if ((st = zarena_alloc(a, len * k * kKiB, &p)) != ZARENA_OK) break;
      kept.push_back(p);
    }
    if (st == ZARENA_OK && temporaries) {
      void* t = nullptr;
      if ((st = zarena_alloc(a, len * kKiB / 2, &t)) == ZARENA_OK) st = zarena_free(a, t);
    }
  }
  for (size_t i = 0; i < kept.size(); i += 2) EXPECT_EQ(zarena_free(a, kept[i]), ZARENA_OK);
  for (size_t i = 1; i < kept.size(); i += 2) EXPECT_EQ(zarena_free(a, kept[i]), ZARENA_OK);
  return st;
}

// Item 15's host shape: the steps give back everything, so nothing may warn. The layers
// repeat inside each step (after the first free, that looked like steps that keep their
// blocks: "no reset after 10 steps, each keeping 9.6 MiB").
TEST(GuessedSteps, RepeatingLayersOfStepsThatFreeEverythingNeverWarn) {
  LogCapture cap;
  zarena* a = make_host_arena(64 * kMiB, "layers", ZARENA_OVERFLOW_SYNC);
  void* w = nullptr;
  for (int i = 0; i < 20; ++i) ASSERT_EQ(zarena_alloc(a, (64 + 8 * i) * kKiB, &w), ZARENA_OK);
  uint64_t seed = 7;
  for (int step = 0; step < 60; ++step) {
    ASSERT_EQ(layered_step(a, 8 * (1 + lcg(&seed) % 8), 12, false), ZARENA_OK) << step;
  }
  EXPECT_TRUE(cap.of("arena.reset_cadence").empty()) << cap.of("arena.reset_cadence")[0].message;
  const zarena_diagnosis d = diagnose(a);
  EXPECT_STREQ(d.verdict, "ok") << d.cause;
  EXPECT_EQ(d.kept_bytes, 0u);
  zarena_destroy(a);
}

// Items 15 and 16 under zarena.torch (ZARENA_FLAG_NO_RESETS): layers that each free a
// temporary, varying shapes, never reset; no warning, and when a step no longer fits the
// arena (overflow serves the rest), the verdict is working_set_full, not never_reset.
TEST(GuessedSteps, APoolThatNeverResetsIsNeverToldToReset) {
  LogCapture cap;
  zarena* a = make_host_arena(8 * kMiB, "torch-like", ZARENA_OVERFLOW_SYNC, ZARENA_FLAG_NO_RESETS);
  void* w = nullptr;
  for (int i = 0; i < 20; ++i) ASSERT_EQ(zarena_alloc(a, (16 + i) * kKiB, &w), ZARENA_OK);
  uint64_t seed = 3;
  for (int step = 0; step < 40; ++step) {
    ASSERT_EQ(layered_step(a, 1 + lcg(&seed) % 4, 12, true), ZARENA_OK) << step;
  }
  EXPECT_TRUE(cap.of("arena.reset_cadence").empty()) << cap.of("arena.reset_cadence")[0].message;
  EXPECT_TRUE(cap.of("arena.first_overflow").empty());
  ASSERT_EQ(layered_step(a, 64, 12, true), ZARENA_OK);  // 64 KiB units: ~12 MiB live at once
  const auto over = cap.of("arena.first_overflow");
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].str("verdict"), "working_set_full") << over[0].message;
  EXPECT_FALSE(has(over[0].str("advice"), "zarena_reset")) << over[0].str("advice");
  EXPECT_TRUE(cap.of("arena.reset_cadence").empty());
  zarena_destroy(a);
}

// Item 16's shape without the flag: the steps free everything and one step outgrows the
// arena after many steps; what the repeating layers "kept" was given back at every step's
// end, so the verdict is working_set_full.
TEST(GuessedSteps, AStepThatOutgrowsTheArenaAfterStepsThatFreedEverything) {
  LogCapture cap;
  zarena* a = make_host_arena(8 * kMiB, "outgrown", ZARENA_OVERFLOW_SYNC);
  void* w = nullptr;
  for (int i = 0; i < 20; ++i) ASSERT_EQ(zarena_alloc(a, (16 + i) * kKiB, &w), ZARENA_OK);
  uint64_t seed = 9;
  for (int step = 0; step < 40; ++step) {
    ASSERT_EQ(layered_step(a, 1 + lcg(&seed) % 4, 12, false), ZARENA_OK) << step;
  }
  ASSERT_EQ(layered_step(a, 64, 12, false), ZARENA_OK);
  const auto over = cap.of("arena.first_overflow");
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].str("verdict"), "working_set_full") << over[0].message;
  EXPECT_EQ(over[0].u("steps"), 0u) << "the layers are not steps: " << over[0].message;
  EXPECT_TRUE(cap.of("arena.reset_cadence").empty());
  zarena_destroy(a);
}

// Item 17: the verdict must not depend on which OS thread carries the program's calls (a
// Go goroutine moves between threads). The same call sequence, from one thread, handed to
// a second thread before the first step was recognised, and moved between two threads at
// every step, each forced by a join: the same warning, the same verdict, the same count.
struct Outcome {
  std::string verdict;
  size_t warnings = 0;
  uint64_t warned_steps = 0, steps = 0;
  int samples = 0;
};

Outcome never_reset_loop(int handoff) {  // 0: one thread; 1: moved once; 2: every step
  LogCapture cap;
  zarena* a = make_host_arena(16 * kMiB, "handoff");
  Outcome o;
  auto on_thread = [](auto&& fn) { std::thread(fn).join(); };
  zarena_status st = ZARENA_OK;
  void* w = nullptr;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(zarena_alloc(a, 256 * kKiB, &w), ZARENA_OK);
  std::string error;  // the failing call's message, read on the thread that made it
  while (st == ZARENA_OK && o.samples < 1000) {
    auto step = [&] {
      st = sample_pass(a, 16 * kKiB);
      if (st != ZARENA_OK) error = zarena_last_error();
    };
    const bool other = handoff == 2 ? o.samples % 2 == 1 : handoff == 1 && o.samples >= 1;
    if (other) {
      on_thread(step);
    } else {
      step();
    }
    if (st == ZARENA_OK) ++o.samples;
  }
  EXPECT_EQ(st, ZARENA_E_OUT_OF_MEMORY);
  o.verdict = parse_error(error).verdict;
  const auto over = cap.of("arena.first_overflow");
  EXPECT_EQ(over.size(), 1u);
  if (!over.empty()) {
    EXPECT_EQ(over[0].str("verdict"), o.verdict);
  }
  const auto warn = cap.of("arena.reset_cadence");
  o.warnings = warn.size();
  if (!warn.empty()) o.warned_steps = warn[0].u("steps");
  o.steps = diagnose(a).steps;
  zarena_destroy(a);
  return o;
}

TEST(GuessedSteps, TheVerdictDoesNotDependOnTheThreadThatCarriesTheCalls) {
  const Outcome one = never_reset_loop(0);
  EXPECT_EQ(one.verdict, "never_reset");
  EXPECT_EQ(one.warnings, 1u);
  EXPECT_EQ(one.steps, static_cast<uint64_t>(one.samples) + 1) << "the loop's count";
  for (int handoff : {1, 2}) {
    // (Each thread bumps into its own span, so the overflow may come a step earlier.)
    const Outcome moved = never_reset_loop(handoff);
    EXPECT_EQ(moved.verdict, one.verdict) << "handoff " << handoff;
    EXPECT_EQ(moved.warnings, one.warnings) << "handoff " << handoff;
    EXPECT_EQ(moved.warned_steps, one.warned_steps) << "handoff " << handoff;
    EXPECT_EQ(moved.steps, static_cast<uint64_t>(moved.samples) + 1) << "handoff " << handoff;
  }
}

// Threads running at once interleave their calls in no fixed order: the guess stops there
// (forced here: two threads take turns call by call, each keeping blocks of a repeating
// pattern and never resetting; guessed from the mixed stream, that warned).
TEST(GuessedSteps, ThreadsThatInterleaveTheirCallsStopTheGuess) {
  LogCapture cap;
  zarena* a = make_host_arena(64 * kMiB, "interleaved");
  std::mutex mu;
  std::condition_variable cv;
  int turn = 0;
  auto worker = [&](int me) {
    for (int i = 0; i < 1500; ++i) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return turn == me; });
      void* p = nullptr;
      EXPECT_EQ(zarena_alloc(a, (1 + i % 8) * kKiB, &p), ZARENA_OK);
      turn = 1 - me;
      cv.notify_all();
    }
  };
  std::thread t0(worker, 0), t1(worker, 1);
  t0.join();
  t1.join();
  EXPECT_TRUE(cap.of("arena.reset_cadence").empty()) << cap.of("arena.reset_cadence")[0].message;
  EXPECT_EQ(diagnose(a).steps, 0u);
  zarena_destroy(a);
}

// Item 18: weights, a step boundary, then one block of one size per step, never freed or
// reset. A constant-size stream alone cannot tell steps from one big step, but the floor
// says the program meant to come back to it: warned before it is full, never_reset at the
// overflow (it was working_set_full, with no warning).
TEST(GuessedSteps, OneSameSizeBlockPerStepAfterAFloorIsNeverReset) {
  LogCapture cap;
  zarena* a = make_host_arena(16 * kMiB, "one-block");
  void* w = nullptr;
  for (int i = 0; i < 4; ++i) ASSERT_EQ(zarena_alloc(a, (1 + i) * 256 * kKiB, &w), ZARENA_OK);
  ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
  int steps = 0;
  zarena_status st = ZARENA_OK;
  void* p = nullptr;
  while (st == ZARENA_OK && steps < 10000) {
    st = zarena_alloc(a, 64 * kKiB, &p);
    if (st == ZARENA_OK) ++steps;
  }
  ASSERT_EQ(st, ZARENA_E_OUT_OF_MEMORY);
  const Parsed parsed = parse_error(zarena_last_error());
  EXPECT_EQ(parsed.verdict, "never_reset") << zarena_last_error();
  EXPECT_TRUE(has(parsed.advice, "call zarena_reset after every step")) << parsed.advice;
  const auto warn = cap.of("arena.reset_cadence");
  ASSERT_EQ(warn.size(), 1u) << "no early warning";
  EXPECT_EQ(warn[0].str("verdict"), "never_reset");
  EXPECT_LT(fill(warn[0]), 80.0);
  EXPECT_EQ(warn[0].u("step_bytes"), 64 * kKiB);
  const auto over = cap.of("arena.first_overflow");
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].str("verdict"), "never_reset");
  EXPECT_TRUE(has(over[0].message, "a step boundary was marked")) << over[0].message;
  EXPECT_STREQ(diagnose(a).verdict, "never_reset");
  zarena_destroy(a);
}

// --- issue 34: a newcomer's loops --------------------------------------------------------

// A loop of one size that never frees, never resets and never marks a step (the first
// loop a newcomer writes): never_reset, in the record and in the error alike (it was
// working_set_full, the record saying "beyond 72.0 MiB" and the error "beyond 132.0 MiB").
// No early warning: one size alone cannot tell this from one step's buffers.
TEST(Newcomer, OneSizeLoopThatNeverResetsIsNeverReset) {
  LogCapture cap;
  zarena* a = make_host_arena(64 * kMiB, "one-size", ZARENA_OVERFLOW_SYNC);
  zarena_status st = ZARENA_OK;
  int blocks = 0;
  while (st == ZARENA_OK && blocks < 1000) {
    void* p = nullptr;
    st = zarena_alloc(a, 4 * kMiB, &p);
    if (st == ZARENA_OK) ++blocks;
  }
  ASSERT_EQ(st, ZARENA_E_OUT_OF_MEMORY);
  const std::string error = zarena_last_error();
  const Parsed p = parse_error(error);
  EXPECT_EQ(p.verdict, "never_reset") << error;
  const auto over = cap.of("arena.first_overflow");
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].str("verdict"), "never_reset") << over[0].message;
  EXPECT_EQ(over[0].str("advice"), p.advice) << "the record and the error disagree";
  EXPECT_TRUE(has(over[0].message, "none was freed")) << over[0].message;
  EXPECT_TRUE(cap.of("arena.reset_cadence").empty());
  EXPECT_STREQ(diagnose(a).verdict, "never_reset");
  zarena_destroy(a);
}

// The same loop that frees what it allocates is no pile: working_set_full when one
// request no longer fits beside what is live.
TEST(Newcomer, OneSizeLoopThatFreesIsNotNeverReset) {
  LogCapture cap;
  zarena* a = make_host_arena(64 * kMiB, "one-size-frees", ZARENA_OVERFLOW_REFUSE);
  std::vector<void*> live;
  for (int i = 0; i < 12; ++i) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(a, 4 * kMiB, &p), ZARENA_OK);
    live.push_back(p);
  }
  ASSERT_EQ(zarena_free(a, live.back()), ZARENA_OK);
  live.pop_back();
  zarena_status st = ZARENA_OK;
  while (st == ZARENA_OK && live.size() < 100) {
    void* p = nullptr;
    st = zarena_alloc(a, 4 * kMiB, &p);
    if (st == ZARENA_OK) live.push_back(p);
  }
  ASSERT_EQ(st, ZARENA_E_OUT_OF_MEMORY);
  EXPECT_NE(parse_error(zarena_last_error()).verdict, "never_reset") << zarena_last_error();
  zarena_destroy(a);
}

// A loop that keeps 5 MiB a step (and frees its temporaries), no step_begin, no reset:
// the warning and the overflow say 5.0 MiB per step, and the overflow counts the loop's
// steps (the steps served by the overflow pool too). The warning said 7.5 MiB (the first
// trough was taken over the steps the guess needed to recognise the first, but divided as
// one), the overflow "91 steps ... 2.7 MiB per step" after 101 steps.
TEST(Newcomer, PerStepFiguresAreWhatAStepKeeps) {
  LogCapture cap;
  zarena* a = make_host_arena(256 * kMiB, "keeps-5", ZARENA_OVERFLOW_SYNC);
  zarena_status st = ZARENA_OK;
  int steps = 0;
  while (st == ZARENA_OK && steps < 1000) {
    ++steps;
    std::vector<void*> temps;
    for (uint64_t n : {3, 2, 4, 1}) {
      void* t = nullptr;
      if ((st = zarena_alloc(a, n * kMiB, &t)) != ZARENA_OK) break;
      temps.push_back(t);
    }
    void* kept = nullptr;
    if (st == ZARENA_OK) st = zarena_alloc(a, 5 * kMiB, &kept);
    for (void* t : temps) ASSERT_EQ(zarena_free(a, t), ZARENA_OK);
  }
  ASSERT_EQ(st, ZARENA_E_OUT_OF_MEMORY);
  const auto warn = cap.of("arena.reset_cadence");
  ASSERT_EQ(warn.size(), 1u);
  EXPECT_EQ(warn[0].u("step_bytes"), 5 * kMiB) << warn[0].message;
  EXPECT_TRUE(has(warn[0].message, "(5.0 MiB per step")) << warn[0].message;
  const auto over = cap.of("arena.first_overflow");
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].str("verdict"), "never_reset");
  const zarena_diagnosis d = diagnose(a);
  EXPECT_STREQ(d.verdict, "never_reset");
  EXPECT_EQ(d.steps, static_cast<uint64_t>(steps)) << d.cause;
  EXPECT_TRUE(has(d.cause, "(5.0 MiB per step")) << d.cause;
  zarena_destroy(a);
}

// A request larger than the whole arena finds it empty, not full: the record and the
// error say it is larger than the capacity (they said "arena full" and "is full", beside
// "region used 0").
TEST(Newcomer, ARequestLargerThanTheCapacityIsNotFull) {
  for (int32_t policy : {ZARENA_OVERFLOW_SYNC, ZARENA_OVERFLOW_REFUSE}) {
    LogCapture cap;
    zarena* a = make_host_arena(256 * kMiB, "huge", policy);
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(a, 1ull << 40, &p), ZARENA_E_OUT_OF_MEMORY);
    const std::string error = zarena_last_error();
    EXPECT_FALSE(has(error, "full")) << error;
    EXPECT_TRUE(has(error, "larger than the arena's capacity")) << error;
    EXPECT_EQ(parse_error(error).verdict, "runaway_buffer") << error;
    const auto over = cap.of("arena.first_overflow");
    ASSERT_EQ(over.size(), 1u);
    EXPECT_FALSE(has(over[0].message, "full")) << over[0].message;
    EXPECT_TRUE(has(over[0].message, "larger than")) << over[0].message;
    zarena_destroy(a);
  }
}

// --- the message carries the verdict ----------------------------------------------------

TEST(ErrorMessage, EveryFailingOverflowNamesTheVerdictAndTheFix) {
  struct Case {
    const char* verdict;
    uint64_t request;
  } cases[] = {{"runaway_buffer", 8 * kMiB}, {"working_set_full", 64 * kKiB}};
  for (const Case& c : cases) {
    zarena* a = make_host_arena(1 * kMiB, "msg");
    void* p = nullptr;
    ASSERT_EQ(zarena_reset(a), ZARENA_OK);
    zarena_status st = ZARENA_OK;
    for (int i = 0; i < 100 && st == ZARENA_OK; ++i) st = zarena_alloc(a, c.request, &p);
    ASSERT_EQ(st, ZARENA_E_OUT_OF_MEMORY);
    const std::string msg = zarena_last_error();
    const Parsed parsed = parse_error(msg);
    ASSERT_TRUE(parsed.ok) << msg;
    EXPECT_EQ(parsed.verdict, c.verdict) << msg;
    EXPECT_FALSE(parsed.advice.empty());
    EXPECT_EQ(parsed.advice.find(';'), std::string::npos) << parsed.advice;
    // Every later failure in the epoch carries it too.
    EXPECT_EQ(zarena_alloc(a, c.request, &p), ZARENA_E_OUT_OF_MEMORY);
    EXPECT_EQ(parse_error(zarena_last_error()).verdict, c.verdict);
    zarena_destroy(a);
  }
  // A request no arena can serve.
  zarena* a = make_host_arena(1 * kMiB, "msg-huge");
  void* p = nullptr;
  EXPECT_EQ(zarena_alloc(a, 1ull << 63, &p), ZARENA_E_OUT_OF_MEMORY);
  EXPECT_EQ(parse_error(zarena_last_error()).verdict, "runaway_buffer");
  zarena_destroy(a);
}

TEST(Diagnose, ArgumentsAndVersionedSize) {
  zarena* a = make_host_arena(1 * kMiB, "diag-args");
  zarena_diagnosis d;
  d.struct_size = sizeof d;
  EXPECT_EQ(zarena_diagnose(nullptr, &d), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(zarena_diagnose(a, nullptr), ZARENA_E_INVALID_ARGUMENT);
  d.struct_size = 8;
  EXPECT_EQ(zarena_diagnose(a, &d), ZARENA_E_INVALID_ARGUMENT);
  // An older, shorter struct gets its prefix and nothing beyond.
  struct {
    zarena_diagnosis head;
    unsigned char guard[16];
  } mem;
  std::memset(&mem, 0xAB, sizeof mem);
  mem.head.struct_size = offsetof(zarena_diagnosis, epoch);
  ASSERT_EQ(zarena_diagnose(a, &mem.head), ZARENA_OK);
  EXPECT_STREQ(mem.head.verdict, "ok");
  const unsigned char* tail =
      reinterpret_cast<const unsigned char*>(&mem.head) + offsetof(zarena_diagnosis, epoch);
  EXPECT_EQ(tail[0], 0xAB) << "written past struct_size";
  zarena_destroy(a);
}

}  // namespace
