// Verdicts and the records that carry them, driven through the C API: each verdict from
// a scenario, the exact typed fields of arena.first_overflow, once-per-epoch delivery,
// arena.config sources and arena.destroy.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "diagnosis/diagnostics.h"
#include "support.h"

using zarena_test::kKiB;
using zarena_test::kMiB;
using zarena_test::LogCapture;
using zarena_test::make_host_arena;
using zarena_test::Record;
using zarena_test::sample_pass;
using zarena_test::stats_of;

namespace {

// Runs per-sample passes until an allocation fails; returns the passes completed.
int passes_until_full(zarena* a, uint64_t unit, bool reset_each) {
  for (int n = 0; n < 100000; ++n) {
    if (sample_pass(a, unit) != ZARENA_OK) return n;
    if (reset_each) {
      EXPECT_EQ(zarena_reset(a), ZARENA_OK);
    }
  }
  return -1;
}

Record only(const LogCapture& cap, const char* event) {
  auto v = cap.of(event);
  EXPECT_EQ(v.size(), 1u) << event;
  return v.empty() ? Record{} : v[0];
}

TEST(Verdict, NeverResetFromPerSamplePasses) {
  LogCapture cap;
  zarena* a = make_host_arena(4 * kMiB, "never");
  void* w = nullptr;
  ASSERT_EQ(zarena_alloc(a, 512 * kKiB, &w), ZARENA_OK);  // weights
  ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
  const int passes = passes_until_full(a, kKiB, false);
  ASSERT_GT(passes, 10);
  const Record r = only(cap, "arena.first_overflow");
  EXPECT_EQ(r.str("verdict"), "never_reset");
  EXPECT_EQ(r.str("path"), "refused");
  EXPECT_EQ(r.u("resets"), 0u);
  EXPECT_NE(r.str("advice").find("zarena_reset after every step"), std::string::npos);
  EXPECT_NE(r.message.find("never_reset"), std::string::npos);
  zarena_destroy(a);
}

TEST(Verdict, RunawayBufferWhenTheRequestCanNeverFit) {
  LogCapture cap;
  zarena* a = make_host_arena(1 * kMiB, "runaway");
  void* p = nullptr;
  ASSERT_EQ(zarena_alloc(a, 64 * kKiB, &p), ZARENA_OK);
  EXPECT_EQ(zarena_alloc(a, 2 * kMiB, &p), ZARENA_E_OUT_OF_MEMORY);
  const Record r = only(cap, "arena.first_overflow");
  EXPECT_EQ(r.str("verdict"), "runaway_buffer");
  EXPECT_EQ(r.u("requested_bytes"), 2 * kMiB);
  zarena_destroy(a);
}

TEST(Verdict, RunawayBufferWhenOneRequestIsHalfTheSpace) {
  LogCapture cap;
  zarena* a = make_host_arena(1 * kMiB, "runaway2");
  void* p = nullptr;
  ASSERT_EQ(zarena_reset(a), ZARENA_OK);  // resets > 0: not a never_reset candidate
  for (int i = 0; i < 8; ++i) ASSERT_EQ(zarena_alloc(a, 64 * kKiB, &p), ZARENA_OK);
  EXPECT_EQ(zarena_alloc(a, 600 * kKiB, &p), ZARENA_E_OUT_OF_MEMORY);
  EXPECT_EQ(only(cap, "arena.first_overflow").str("verdict"), "runaway_buffer");
  zarena_destroy(a);
}

TEST(Verdict, WorkingSetFullWhenOneStepNeedsMore) {
  LogCapture cap;
  zarena* a = make_host_arena(1 * kMiB, "wsf");
  void* p = nullptr;
  // A few steps that fit, reset between them, then one that does not.
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < 20; ++i) ASSERT_EQ(zarena_alloc(a, (8 + i % 5) * kKiB, &p), ZARENA_OK);
    ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  }
  // The bigger step opens differently (a larger input): not the earlier steps repeated.
  zarena_status s = ZARENA_OK;
  for (int i = 0; i < 1000 && s == ZARENA_OK; ++i) s = zarena_alloc(a, (40 + i % 7) * kKiB, &p);
  ASSERT_EQ(s, ZARENA_E_OUT_OF_MEMORY);
  const Record r = only(cap, "arena.first_overflow");
  EXPECT_EQ(r.str("verdict"), "working_set_full");
  EXPECT_EQ(r.u("resets"), 3u);
  EXPECT_NE(r.str("advice").find("capacity"), std::string::npos);
  zarena_destroy(a);
}

TEST(Verdict, FragmentationWhenFreeBytesAreInSmallHoles) {
  LogCapture cap;
  zarena* a = make_host_arena(1 * kMiB, "frag");
  ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  std::vector<void*> blocks(64);
  for (auto& b : blocks) ASSERT_EQ(zarena_alloc(a, 16 * kKiB, &b), ZARENA_OK);
  for (size_t i = 0; i < blocks.size(); i += 2) ASSERT_EQ(zarena_free(a, blocks[i]), ZARENA_OK);
  const zarena_stats st = stats_of(a);
  ASSERT_EQ(st.free_list_bytes, 512 * kKiB);  // 32 holes, none adjacent
  void* p = nullptr;
  EXPECT_EQ(zarena_alloc(a, 32 * kKiB, &p), ZARENA_E_OUT_OF_MEMORY);
  const Record r = only(cap, "arena.first_overflow");
  EXPECT_EQ(r.str("verdict"), "fragmentation");
  EXPECT_EQ(r.u("free_list_len"), 32u);
  zarena_destroy(a);
}

TEST(Verdict, CaptureRefusedComesFromThePath) {
  // The capture path needs a CUDA stream under capture; the rule itself is pure.
  zarena_core::ExhaustionFacts f;
  f.path = "capture_refused";
  f.capacity_bytes = 1 << 20;
  f.aligned_bytes = 4096;
  f.resets = 0;
  f.steps = 6;  // would be never_reset on any other path
  f.kept_bytes = f.capacity_bytes / 2;
  EXPECT_STREQ(zarena_core::diagnose(f).name, "capture_refused");
  f.path = "refused";
  EXPECT_STREQ(zarena_core::diagnose(f).name, "never_reset");
}

TEST(Verdict, NoResetAndNoRepetitionIsAFirstStepThatDoesNotFit) {
  zarena_core::ExhaustionFacts f;
  f.path = "sync";
  f.capacity_bytes = 1 << 20;
  f.aligned_bytes = 4096;
  f.step_max_alloc_bytes = 4096;
  f.epoch_allocs = 300;
  const zarena_core::Verdict v = zarena_core::diagnose(f);
  EXPECT_STREQ(v.name, "working_set_full");
  EXPECT_NE(v.advice.find("zarena_reset after every step"), std::string::npos);
}

TEST(Verdict, WeightsBelowTheFloorDoNotMakeARunaway) {
  zarena_core::ExhaustionFacts f;
  f.path = "refused";
  f.capacity_bytes = 100 << 20;
  f.floor_bytes = 70 << 20;  // big weights, on purpose
  f.epoch_max_alloc_bytes = 70 << 20;
  f.step_max_alloc_bytes = 1 << 20;
  f.aligned_bytes = 1 << 20;
  f.resets = 4;
  f.epoch_allocs = 5000;
  EXPECT_STREQ(zarena_core::diagnose(f).name, "working_set_full");
}

TEST(FirstOverflow, ExactTypedFields) {
  LogCapture cap;
  zarena* a = make_host_arena(64 * kKiB, "exact");
  void* p = nullptr;
  void* first = nullptr;
  ASSERT_EQ(zarena_alloc(a, 256, &p), ZARENA_OK);
  ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(a, 10000, &first), ZARENA_OK);           // 10240 aligned, offset 0
  ASSERT_EQ(zarena_alloc(a, 20000, &p), ZARENA_OK);               // 20224 aligned, top 30464
  ASSERT_EQ(zarena_free(a, first), ZARENA_OK);                    // one free block, below p
  ASSERT_EQ(zarena_alloc(a, 40000, &p), ZARENA_E_OUT_OF_MEMORY);  // 40192 > 35072 left

  const Record r = only(cap, "arena.first_overflow");
  EXPECT_EQ(r.level, ZARENA_LOG_WARN);
  EXPECT_EQ(r.arena, "exact");
  // The 1.0 keys in their order, then epoch and the step facts (1.1).
  const std::vector<std::string> keys = {
      "path",         "requested_bytes",       "aligned_bytes", "capacity_bytes", "offset_bytes",
      "epoch_allocs", "epoch_max_alloc_bytes", "hits",          "misses",         "reuses",
      "resets",       "free_list_len",         "verdict",       "advice",         "epoch",
      "steps",        "steps_explicit",        "kept_bytes"};
  ASSERT_EQ(r.fields.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(r.fields[i].key, keys[i]);
  EXPECT_EQ(r.str("path"), "refused");
  EXPECT_EQ(r.u("requested_bytes"), 40000u);
  EXPECT_EQ(r.u("aligned_bytes"), 40192u);
  EXPECT_EQ(r.u("capacity_bytes"), 65536u);
  EXPECT_EQ(r.u("offset_bytes"), 30464u);
  EXPECT_EQ(r.u("epoch_allocs"), 3u);
  // The largest request served (a refused one moves only failure counters: issue 13);
  // the refused request itself is requested_bytes.
  EXPECT_EQ(r.u("epoch_max_alloc_bytes"), 20000u);
  EXPECT_EQ(r.u("hits"), 3u);
  EXPECT_EQ(r.u("misses"), 1u);
  EXPECT_EQ(r.u("reuses"), 0u);
  EXPECT_EQ(r.u("resets"), 1u);
  EXPECT_EQ(r.u("free_list_len"), 1u);
  EXPECT_EQ(r.str("verdict"), "runaway_buffer");  // 40192 >= half of 64 KiB
  EXPECT_FALSE(r.str("advice").empty());
  // The record agrees with the stats the program can read.
  const zarena_stats st = stats_of(a);
  EXPECT_EQ(st.misses, r.u("misses"));
  EXPECT_EQ(st.hits, r.u("hits"));
  zarena_destroy(a);
}

TEST(FirstOverflow, OncePerEpochAndAgainAfterReset) {
  LogCapture cap;
  zarena* a = make_host_arena(64 * kKiB, "once");
  void* p = nullptr;
  for (int epoch = 0; epoch < 3; ++epoch) {
    while (zarena_alloc(a, 4 * kKiB, &p) == ZARENA_OK) {
    }
    for (int i = 0; i < 5; ++i) EXPECT_EQ(zarena_alloc(a, 4 * kKiB, &p), ZARENA_E_OUT_OF_MEMORY);
    EXPECT_EQ(cap.of("arena.first_overflow").size(), static_cast<size_t>(epoch + 1));
    ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  }
  const auto recs = cap.of("arena.first_overflow");
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0].u("resets"), 0u);
  EXPECT_EQ(recs[2].u("resets"), 2u);
  EXPECT_EQ(stats_of(a).misses, 18u);
  zarena_destroy(a);
}

TEST(FirstOverflow, NeverDroppedByTheRateLimiter) {
  LogCapture cap;
  constexpr int kArenas = 3 * static_cast<int>(zarena_core::kRateBurst);
  for (int i = 0; i < kArenas; ++i) {
    zarena* a = make_host_arena(16 * kKiB, "many");
    void* p = nullptr;
    EXPECT_EQ(zarena_alloc(a, 32 * kKiB, &p), ZARENA_E_OUT_OF_MEMORY);
    zarena_destroy(a);
  }
  EXPECT_EQ(cap.of("arena.first_overflow").size(), static_cast<size_t>(kArenas));
  EXPECT_EQ(cap.of("arena.config").size(), static_cast<size_t>(kArenas));
  EXPECT_EQ(cap.of("arena.destroy").size(), static_cast<size_t>(kArenas));
}

TEST(ConfigRecord, TypedValuesAndTheirSources) {
  // zarena_config_init reads the environment, and create reads it again to attribute
  // each value's source: keep it set across both.
  setenv("ZARENA_ALIGNMENT", "512", 1);
  setenv("ZARENA_OVERFLOW_SLOW_MS", "not-a-number", 1);
  zarena_config cfg;
  zarena_config_init(&cfg);
  cfg.backend = ZARENA_BACKEND_HOST;
  cfg.capacity_bytes = 1 * kMiB;
  cfg.name = "cfg";
  LogCapture cap;
  zarena* a = nullptr;
  const zarena_status created = zarena_create(&cfg, &a);
  unsetenv("ZARENA_ALIGNMENT");
  unsetenv("ZARENA_OVERFLOW_SLOW_MS");
  ASSERT_EQ(created, ZARENA_OK) << zarena_last_error();
  const Record r = only(cap, "arena.config");
  EXPECT_EQ(r.level, ZARENA_LOG_INFO);
  EXPECT_EQ(r.arena, "cfg");
  EXPECT_EQ(r.u("capacity_bytes"), 1 * kMiB);
  EXPECT_EQ(r.str("capacity_bytes_source"), "config");
  EXPECT_EQ(r.u("alignment"), 512u);
  EXPECT_EQ(r.str("alignment_source"), "env:ZARENA_ALIGNMENT");
  EXPECT_EQ(r.str("backend"), "host");
  EXPECT_EQ(r.str("backend_resolved"), "host");
  EXPECT_EQ(r.str("device_source"), "default");
  ASSERT_NE(r.field("device"), nullptr);
  EXPECT_EQ(r.field("device")->kind, ZARENA_FIELD_INT);
  ASSERT_NE(r.field("flags.poison"), nullptr);
  EXPECT_EQ(r.field("flags.poison")->kind, ZARENA_FIELD_BOOL);
  EXPECT_EQ(r.u("overflow_slow_ns"), 10000000u);
  EXPECT_EQ(r.str("overflow_slow_ns_source"), "default");
  // The backend's memory, so the first line says how much room a larger arena has.
  ASSERT_NE(r.field("memory_total_bytes"), nullptr);
  EXPECT_GT(r.u("memory_total_bytes"), 0u);
  EXPECT_LE(r.u("memory_free_bytes"), r.u("memory_total_bytes"));
  EXPECT_NE(r.message.find("host memory:"), std::string::npos) << r.message;
  ASSERT_NE(r.field("warning0"), nullptr);
  EXPECT_NE(r.field("warning0")->s.find("ZARENA_OVERFLOW_SLOW_MS"), std::string::npos);
  zarena_destroy(a);
}

TEST(DestroyRecord, LifetimeSummary) {
  LogCapture cap;
  zarena* a = make_host_arena(1 * kMiB, "life");
  void* p = nullptr;
  for (int i = 0; i < 10; ++i) ASSERT_EQ(zarena_alloc(a, kKiB, &p), ZARENA_OK);
  ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(a, kKiB, &p), ZARENA_OK);
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
  const Record r = only(cap, "arena.destroy");
  EXPECT_EQ(r.u("allocs"), 11u);
  EXPECT_EQ(r.u("resets"), 1u);
  EXPECT_EQ(r.u("high_water_bytes"), 10 * kKiB);
  EXPECT_EQ(r.u("live_allocs"), 1u);
  EXPECT_EQ(r.message.find('\n'), std::string::npos);
}

}  // namespace
