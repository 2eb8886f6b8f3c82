// Replay: a trace recorded from a direct run replays to the same stats, number for
// number; the sizing answer, the verdict, the step finder and the what-if replay on
// cases whose answers are known; RMM CSV logs parse, and malformed ones are refused with
// the line; the pictures' building blocks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "chrome_trace.h"
#include "support.h"
#include "replay.h"
#include "rmm_csv.h"
#include "sizing.h"
#include "steps.h"
#include "svg.h"
#include "trace/trace_reader.h"
#include "trace_recording.h"
#include "trace_test_support.h"
#include "units.h"

namespace {

using zarena_replay::EpochStats;
using zarena_replay::ReplayConfig;
using zarena_replay::ReplayResult;
using zarena_test::kKiB;
using zarena_test::kMiB;
using zarena_test::RecordedArena;
using zarena_trace::Kind;
using zarena_trace::Trace;

using zarena_test::config_of;
using zarena_test::read_or_die;
using zarena_test::replay_or_die;

std::string temp_path(const std::string& stem) {
  return zarena_test::trace_temp_path("zarena_replay_", stem);
}

void expect_same_stats(const zarena_stats& a, const zarena_stats& b) {
#define ZARENA_SAME(f) EXPECT_EQ(a.f, b.f) << #f
  ZARENA_SAME(capacity_bytes);
  ZARENA_SAME(used_bytes);
  ZARENA_SAME(floor_bytes);
  ZARENA_SAME(high_water_bytes);
  ZARENA_SAME(epoch);
  ZARENA_SAME(epoch_allocs);
  ZARENA_SAME(epoch_max_alloc_bytes);
  ZARENA_SAME(epoch_high_water_bytes);
  ZARENA_SAME(hits);
  ZARENA_SAME(misses);
  ZARENA_SAME(reuses);
  ZARENA_SAME(resets);
  ZARENA_SAME(free_list_len);
  ZARENA_SAME(free_list_bytes);
  ZARENA_SAME(largest_free_block_bytes);
  ZARENA_SAME(live_allocs);
  ZARENA_SAME(stale_frees);
  ZARENA_SAME(invalid_frees);
  ZARENA_SAME(overflow_allocs);
  ZARENA_SAME(overflow_live_bytes);
  ZARENA_SAME(overflow_peak_bytes);
  ZARENA_SAME(overflow_reclaimed);
  ZARENA_SAME(overflow_failures);
#undef ZARENA_SAME
  // overflow_max_latency_ns is a wall-clock measurement: not reproducible by design.
}

// Every kind of call the 1.0 API has, including failed frees and overflow, over three
// epochs and a boundary.
void mixed_sequence(RecordedArena& a) {
  void* w = a.alloc(100 * kKiB);
  a.alloc(3000);
  a.boundary();
  std::vector<void*> live;
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (int i = 0; i < 40; ++i) {
      void* p = a.alloc((1 + (i * 7) % 13) * 4 * kKiB);
      if (i % 3 == 0) {
        a.free(p);
      } else {
        live.push_back(p);
      }
    }
    for (size_t i = 0; i < live.size(); i += 2) a.free(live[i]);
    for (int i = 0; i < 10; ++i) a.alloc(4 * kKiB);  // into the holes: reuse
    a.free(live[0]);                                 // double free (or stale)
    a.free(static_cast<char*>(live[1]) + 256);       // interior: not owned
    int on_stack = 0;
    a.free(&on_stack);    // not owned
    a.alloc(0);           // a no-op request
    a.free(nullptr);      // a no-op free
    a.alloc(600 * kKiB);  // beyond the region: overflow
    void* o = a.alloc(700 * kKiB);
    a.free(o);  // overflow block freed
    a.reset();
    a.free(live[1]);  // reclaimed by the reset: stale
    live.clear();
  }
  a.free(w);
}

TEST(TraceReplay, ReproducesTheDirectRunExactly) {
  const std::string path = temp_path("exact");
  zarena_test::LogCapture quiet(ZARENA_LOG_OFF);
  RecordedArena a(path, 1 * kMiB, ZARENA_OVERFLOW_SYNC, "exact");
  mixed_sequence(a);
  const std::vector<EpochStats> direct = a.collector().epochs();
  a.close();

  const Trace t = read_or_die(path);
  const ReplayResult r = replay_or_die(t, config_of(t));
  expect_same_stats(r.final_stats, a.final_stats());
  EXPECT_EQ(r.status_mismatches, 0u);
  EXPECT_EQ(r.unmatched_frees, 0u);
  ASSERT_EQ(r.epochs.size(), direct.size());
  for (size_t i = 0; i < direct.size(); ++i) {
    EXPECT_TRUE(r.epochs[i] == direct[i]) << "epoch " << i;
  }
  // The sequence did exercise what it claims to.
  EXPECT_EQ(a.final_stats().resets, 3u);
  EXPECT_GT(a.final_stats().overflow_allocs, 0u);
  EXPECT_GT(a.final_stats().invalid_frees, 0u);
  EXPECT_GT(a.final_stats().stale_frees, 0u);
  EXPECT_GT(a.final_stats().reuses, 0u);
  EXPECT_GT(r.epochs[1].overflow_allocs, 0u);
  std::remove(path.c_str());
}

// The top is derived from the stats (live + free blocks tile [0, top)); its per-epoch
// peak must be the engine's own epoch high water.
TEST(TraceReplay, DerivedTopPeaksAtTheEpochHighWater) {
  const std::string path = temp_path("top");
  zarena_test::LogCapture quiet(ZARENA_LOG_OFF);
  RecordedArena a(path, 64 * kMiB, ZARENA_OVERFLOW_REFUSE, "top");
  std::vector<uint64_t> high_water;
  for (int epoch = 0; epoch < 4; ++epoch) {
    std::vector<void*> v;
    for (int i = 0; i < 200; ++i) {
      v.push_back(a.alloc((1 + (i * 5 + epoch) % 11) * 8 * kKiB));
      if (i % 4 == 3) {
        a.free(v[static_cast<size_t>(i) - 2]);
        a.free(v.back());
      }
    }
    high_water.push_back(a.stats().epoch_high_water_bytes);
    a.reset();
  }
  const auto& ep = a.collector().epochs();
  ASSERT_EQ(ep.size(), 5u);
  for (size_t i = 0; i < high_water.size(); ++i) EXPECT_EQ(ep[i].peak_top, high_water[i]);
  std::remove(path.c_str());
}

// Known answer: 1 MiB and 2 MiB live, the 1 MiB freed and refilled by two 512 KiB
// requests, then a 1 MiB request after freeing the 2 MiB: the top never passes 3 MiB,
// and 3 MiB - 256 cannot hold both first blocks.
TEST(TraceReplay, SizingFindsTheKnownSmallestCapacity) {
  const std::string path = temp_path("sizing");
  {
    zarena_test::LogCapture quiet(ZARENA_LOG_OFF);
    RecordedArena a(path, 16 * kMiB, ZARENA_OVERFLOW_REFUSE, "sizing");
    void* x = a.alloc(1 * kMiB);
    void* y = a.alloc(2 * kMiB);
    a.free(x);
    a.alloc(512 * kKiB);
    a.alloc(512 * kKiB);
    a.free(y);
    a.alloc(1 * kMiB);
  }
  const Trace t = read_or_die(path);
  zarena_replay::SizingResult s;
  std::string err;
  ASSERT_TRUE(zarena_replay::smallest_capacity(t, config_of(t), &s, &err)) << err;
  EXPECT_TRUE(s.found);
  EXPECT_EQ(s.capacity_bytes, 3 * kMiB);
  EXPECT_EQ(s.unlimited_top, 3 * kMiB);
  EXPECT_GT(s.replays, 2u);

  ReplayConfig c = config_of(t);
  c.capacity_bytes = 3 * kMiB;
  EXPECT_EQ(replay_or_die(t, c).misses, 0u);
  c.capacity_bytes = 3 * kMiB - 256;
  EXPECT_GT(replay_or_die(t, c).misses, 0u);
  std::remove(path.c_str());
}

// Below the unlimited top, a request that cannot bump may still fit a hole below the
// floor: the bisection finds the smaller capacity.
TEST(TraceReplay, SizingCanGoBelowTheUnlimitedTop) {
  const std::string path = temp_path("below");
  {
    zarena_test::LogCapture quiet(ZARENA_LOG_OFF);
    RecordedArena a(path, 16 * kMiB, ZARENA_OVERFLOW_REFUSE, "below");
    void* hole = a.alloc(1 * kMiB);
    a.alloc(1 * kMiB);
    a.boundary();
    a.free(hole);       // a 1 MiB hole below the floor
    a.alloc(1 * kMiB);  // bumps (unlimited), or takes the hole (2 MiB arena)
  }
  const Trace t = read_or_die(path);
  zarena_replay::SizingResult s;
  std::string err;
  ASSERT_TRUE(zarena_replay::smallest_capacity(t, config_of(t), &s, &err)) << err;
  EXPECT_EQ(s.unlimited_top, 3 * kMiB);
  EXPECT_EQ(s.capacity_bytes, 2 * kMiB);
  std::remove(path.c_str());
}

// zarena_test::sample_pass, through the recorder: an input, forward activations with
// scratch freed at once, backward gradients, the rest left for a reset.
void recorded_pass(RecordedArena& a, uint64_t unit) {
  a.alloc(3 * unit, 2);
  for (uint64_t l = 0; l < 4; ++l) {
    void* scratch = a.alloc(2 * unit, 4);
    a.alloc((5 + l) * unit, 3);
    a.free(scratch);
  }
  for (uint64_t l = 4; l-- > 0;) {
    a.alloc((5 + l) * unit, 3);
    void* scratch = a.alloc(16 * unit, 4);
    a.free(scratch);
  }
}
constexpr uint64_t kUnit = 64 * kKiB;
constexpr uint64_t kPassBytes = (3 + 2 * (5 + 6 + 7 + 8)) * kUnit;  // left by one pass

// Weights, a boundary, then passes without a reset (the original failure), optionally
// marking each step's start.
Trace never_reset_trace(const std::string& path, bool step_begin, bool boundary_per_step = false) {
  {
    zarena_test::LogCapture quiet(ZARENA_LOG_OFF);
    RecordedArena a(path, 20 * kMiB, ZARENA_OVERFLOW_SYNC, "never");
    a.tag(1, "weights");
    a.tag(2, "input");
    a.tag(3, "activations & grads");
    a.tag(4, "scratch");
    a.alloc(1 * kMiB, 1);
    a.boundary();
    for (int pass = 0; pass < 12; ++pass) {
      if (step_begin) a.step_begin();
      recorded_pass(a, kUnit);
      if (boundary_per_step) a.boundary();
    }
  }
  return read_or_die(path);
}

TEST(TraceReplay, NeverResetVerdictAndTheResetPerStepAnswer) {
  const std::string path = temp_path("never");
  const Trace t = never_reset_trace(path, true);
  ReplayConfig c = config_of(t);
  c.timeline = true;
  const ReplayResult r = replay_or_die(t, c);
  ASSERT_FALSE(r.first_overflows.empty());
  EXPECT_EQ(r.first_overflows[0].verdict, "never_reset");
  EXPECT_FALSE(r.first_overflows[0].advice.empty());
  EXPECT_EQ(r.first_overflows[0].path, "sync");
  EXPECT_GT(r.overflow_allocs, 0u);
  EXPECT_EQ(r.misses, r.overflow_allocs);
  EXPECT_TRUE(r.cadence_warned);
  EXPECT_LT(r.cadence_event, r.first_overflows[0].event);
  // Step begins are replayed (zarena_step_begin), not skipped.
  EXPECT_EQ(r.not_replayed.count("step_begin"), 0u);
  ASSERT_EQ(r.timeline.size(), t.events.size());
  EXPECT_NE(r.timeline[r.first_overflows[0].event].marks & zarena_replay::kMarkOverflow, 0);
  // Tags: the live bytes the tool keeps per tag add up to the live bytes of the region
  // at the end (everything left is in the region or in overflow).
  ASSERT_EQ(r.tags.ids.size(), 4u);
  EXPECT_GT(r.tags.bytes.size(), 10u);

  const zarena_replay::StepPlan plan = zarena_replay::find_steps(t);
  EXPECT_EQ(plan.method, "step_begin");
  ASSERT_EQ(plan.starts.size(), 12u);
  EXPECT_FALSE(plan.boundary_before_first);  // the trace marks one after the weights
  ReplayConfig w = c;
  w.exact = false;
  w.timeline = false;
  w.reset_before.assign(plan.starts.begin() + 1, plan.starts.end());
  const ReplayResult wr = replay_or_die(t, w);
  EXPECT_EQ(wr.inserted_resets, 11u);
  EXPECT_EQ(wr.overflow_allocs, 0u);
  EXPECT_TRUE(wr.first_overflows.empty());
  // The weights and one pass: what it leaves, the 2-unit scratch hole the forward pass
  // leaves below its activations, and the last 16-unit scratch on top.
  EXPECT_EQ(wr.peak_top, 1 * kMiB + kPassBytes + 2 * kUnit + 16 * kUnit);
  // Each reset reclaims what one pass left (never freed by the program afterwards).
  EXPECT_EQ(wr.reclaimed_live_blocks, 11u * 9u);
  EXPECT_EQ(wr.max_reclaimed_live_bytes, kPassBytes);
  EXPECT_EQ(wr.frees_after_reclaim, 0u);

  zarena_replay::SizingResult s;
  std::string err;
  ASSERT_TRUE(zarena_replay::smallest_capacity(t, w, &s, &err)) << err;
  EXPECT_TRUE(s.found);
  EXPECT_LE(s.capacity_bytes, wr.peak_top);
  EXPECT_GE(s.capacity_bytes, 1 * kMiB + kPassBytes);
  std::remove(path.c_str());
}

TEST(TraceReplay, StepsFromBoundariesAndFromRepeats) {
  const std::string path = temp_path("steps");
  Trace t = never_reset_trace(path, false, true);
  zarena_replay::StepPlan plan = zarena_replay::find_steps(t);
  EXPECT_EQ(plan.method, "boundaries");
  EXPECT_TRUE(plan.drop_boundaries_after_first);
  // After the weights' boundary and after each pass but the last (nothing follows it).
  EXPECT_EQ(plan.starts.size(), 12u);
  std::remove(path.c_str());

  t = never_reset_trace(path, false, false);
  plan = zarena_replay::find_steps(t);
  EXPECT_EQ(plan.method, "repeats");
  ASSERT_EQ(plan.starts.size(), 12u);
  EXPECT_FALSE(plan.boundary_before_first);
  // Every start is a pass's first request: its input (3 units).
  for (uint64_t i : plan.starts) {
    EXPECT_EQ(t.events[i].kind, Kind::kAlloc);
    EXPECT_EQ(t.events[i].size, 3 * kUnit);
  }
  std::remove(path.c_str());

  // One request size over and over says nothing about steps.
  {
    zarena_test::LogCapture quiet(ZARENA_LOG_OFF);
    RecordedArena a(path, 20 * kMiB, ZARENA_OVERFLOW_SYNC, "flat");
    for (int i = 0; i < 100; ++i) a.alloc(kUnit);
  }
  EXPECT_EQ(zarena_replay::find_steps(read_or_die(path)).method, "none");
  std::remove(path.c_str());
}

// What-if settings change placements, so frees that failed in the trace are not passed
// on (they would hit other blocks), and they are counted.
TEST(TraceReplay, WhatIfSkipsTheTracesFailedFrees) {
  const std::string path = temp_path("whatif");
  {
    zarena_test::LogCapture quiet(ZARENA_LOG_OFF);
    RecordedArena a(path, 1 * kMiB, ZARENA_OVERFLOW_SYNC, "whatif");
    mixed_sequence(a);
  }
  const Trace t = read_or_die(path);
  ReplayConfig c = config_of(t);
  c.exact = false;
  c.capacity_bytes = 4 * kMiB;
  c.alignment = 1024;
  const ReplayResult r = replay_or_die(t, c);
  EXPECT_GT(r.skipped_failed_frees, 0u);
  EXPECT_EQ(r.final_stats.invalid_frees, 0u);
  EXPECT_EQ(r.final_stats.capacity_bytes, 4 * kMiB);
  EXPECT_EQ(r.overflow_allocs, 0u);  // 4 MiB holds what overflowed 1 MiB
  std::remove(path.c_str());
}

const char* const kRmmSample =
    "Thread,Time,Action,Pointer,Size,Stream\n"
    "140573312345856,23:59:59:999000,allocate,0x7f8a40000000,1024,0x0\n"
    "140573312345856,23:59:59:999500,allocate,0x7f8a40000400,2048,0x0\n"
    "140573312349999,00:00:00:000100,allocate,0x7f8a40001000,4096,0x7f8a38001020\n"
    "140573312345856,00:00:00:000200,free,0x7f8a40000000,1024,0x0\r\n"
    "\n"
    "140573312349999,00:00:00:000300,deallocate,0x7f8a40001000,4096,0x7f8a38001020\n"
    "140573312345856,00:00:00:000400,allocate failure,0x0,1099511627776,0x0\n"
    "140573312345856,00:00:00:000500,free,0x7f8a4000beef,64,0x0\n";

TEST(TraceReplay, RmmCsvSampleParses) {
  std::istringstream in(kRmmSample);
  Trace t;
  std::string err;
  ASSERT_TRUE(zarena_replay::parse_rmm_csv(in, "dir/sample.csv", &t, &err)) << err;
  EXPECT_EQ(t.info.source, "rmm csv");
  EXPECT_EQ(t.info.arena_name, "sample.csv");
  EXPECT_EQ(t.info.capacity_bytes, 0u);
  EXPECT_EQ(t.info.alignment, 256u);
  ASSERT_EQ(t.events.size(), 7u);
  EXPECT_EQ(t.events[0].kind, Kind::kAlloc);
  EXPECT_EQ(t.events[0].addr, 0x7f8a40000000ull);
  EXPECT_EQ(t.events[0].size, 1024u);
  EXPECT_EQ(t.events[0].thread, 0);
  EXPECT_EQ(t.events[2].thread, 1);
  EXPECT_EQ(t.events[1].time_ns, 500'000u);
  EXPECT_EQ(t.events[2].time_ns, 1'100'000u);  // across midnight
  EXPECT_EQ(t.events[3].kind, Kind::kFree);
  EXPECT_EQ(t.events[4].kind, Kind::kFree);  // "deallocate"
  EXPECT_EQ(t.events[5].outcome, zarena_trace::AllocOutcome::kRefused);
  for (size_t i = 0; i < t.events.size(); ++i) EXPECT_EQ(t.events[i].seq, i);

  // Replayed: the refused terabyte is refused again, the free of an unknown block skipped.
  ReplayConfig c = config_of(t);
  c.capacity_bytes = 1 * kMiB;
  c.exact = false;
  const ReplayResult r = replay_or_die(t, c);
  EXPECT_EQ(r.allocs, 4u);
  EXPECT_EQ(r.refused, 1u);
  EXPECT_EQ(r.unmatched_frees, 1u);
  EXPECT_EQ(r.final_stats.used_bytes, 2048u);

  // Seconds-since-epoch times, as later RMM versions write them.
  std::istringstream in2(
      "Thread,Time,Action,Pointer,Size,Stream\n"
      "1,1634567890.123456,allocate,0x1000,10,0x0\n"
      "1,1634567890.234567,free,0x1000,10,0x0\n");
  ASSERT_TRUE(zarena_replay::parse_rmm_csv(in2, "s.csv", &t, &err)) << err;
  EXPECT_EQ(t.events[1].time_ns, 111'111'000u);
}

TEST(TraceReplay, MalformedRmmCsvNamesTheLine) {
  struct Case {
    const char* text;
    const char* where;
    const char* why;
  };
  const Case cases[] = {
      {"", "x.csv:0", "no header"},
      {"Thread,Time,Pointer,Size\n", "x.csv:1", "'Action'"},
      {"Thread,Time,Action,Pointer,Size,Stream\n1,00:00:00:000001,allocate,0x10,5\n", "x.csv:2",
       "5 fields"},
      {"Thread,Time,Action,Pointer,Size,Stream\n1,00:00:00:000001,resize,0x10,5,0\n", "x.csv:2",
       "unknown action"},
      {"Thread,Time,Action,Pointer,Size,Stream\n1,00:00:00:000001,free,zz,5,0\n", "x.csv:2",
       "pointer"},
      {"Thread,Time,Action,Pointer,Size,Stream\n1,00:00:00:000001,free,0x10,-5,0\n", "x.csv:2",
       "size"},
      {"Thread,Time,Action,Pointer,Size,Stream\n\n1,noon,free,0x10,5,0\n", "x.csv:3", "time"},
  };
  for (const Case& k : cases) {
    std::istringstream in(k.text);
    Trace t;
    std::string err;
    EXPECT_FALSE(zarena_replay::parse_rmm_csv(in, "x.csv", &t, &err)) << k.text;
    EXPECT_EQ(err.rfind(std::string(k.where) + ":", 0), 0u) << err;
    EXPECT_NE(err.find(k.why), std::string::npos) << err;
  }
}

TEST(TraceReplay, PictureEscapesNamesAndShowsTheVerdict) {
  const std::string path = temp_path("picture");
  Trace t = never_reset_trace(path, true);
  t.info.arena_name = "a<b>&\"c\"";
  t.tags[3] = "grad <fp32> & more";
  ReplayConfig c = config_of(t);
  c.timeline = true;
  const ReplayResult r = replay_or_die(t, c);
  zarena_replay::PictureInput in;
  in.trace = &t;
  in.result = &r;
  in.capacity_bytes = c.capacity_bytes;
  in.verdict = r.first_overflows.at(0).verdict;
  in.advice = r.first_overflows.at(0).advice;
  const std::string svg = zarena_replay::render_svg(in);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("a&lt;b&gt;&amp;&quot;c&quot;"), std::string::npos);
  EXPECT_EQ(svg.find("a<b>"), std::string::npos);
  EXPECT_NE(svg.find("grad &lt;fp32&gt; &amp; more"), std::string::npos);
  EXPECT_NE(svg.find("verdict never_reset"), std::string::npos);
  EXPECT_NE(svg.find("capacity 20.0 MiB"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  std::remove(path.c_str());
}

// --plan --svg: the replay under step plans, its planned blocks drawn apart, in the legend.
// A reset ends every step, so what a pass leaves is reclaimed by it: planned too.
TEST(TraceReplay, PictureUnderPlansDrawsPlannedBlocks) {
  const std::string path = temp_path("plan-picture");
  const Trace t = never_reset_trace(path, true);
  const zarena_replay::StepPlan steps = zarena_replay::find_steps(t);
  ASSERT_EQ(steps.starts.size(), 12u);
  ReplayConfig c = config_of(t);
  c.exact = false;
  c.timeline = true;
  c.reset_before.assign(steps.starts.begin() + 1, steps.starts.end());
  c.plans = 0;  // the dynamic engine (the traced arena had plans on: the default)
  const ReplayResult dynamic = replay_or_die(t, c);
  c.plans = 1;
  const ReplayResult r = replay_or_die(t, c);
  ASSERT_GT(r.final_stats.plan_hits, 0u);
  uint64_t planned = 0;
  for (const zarena_replay::Sample& s : r.timeline) planned = std::max(planned, s.planned);
  EXPECT_GE(planned, kPassBytes) << "what a pass leaves to the reset is planned";
  zarena_replay::PictureInput in;
  in.trace = &t;
  in.result = &r;
  in.capacity_bytes = c.capacity_bytes;
  in.verdict = "fits";
  in.under_plan = true;
  in.dynamic_peak_top = dynamic.peak_top;
  const std::string svg = zarena_replay::render_svg(in);
  EXPECT_NE(svg.find("class=\"planned\""), std::string::npos);
  EXPECT_NE(svg.find(">planned blocks (live)<"), std::string::npos);
  EXPECT_NE(svg.find("under step plans"), std::string::npos);
  EXPECT_NE(svg.find("(without plans " + zarena_replay::human_bytes(dynamic.peak_top) + ")"),
            std::string::npos);
  // Without plans: no planned area, no legend entry.
  in.result = &dynamic;
  in.under_plan = false;
  const std::string plain = zarena_replay::render_svg(in);
  EXPECT_EQ(plain.find("planned"), std::string::npos);
  std::remove(path.c_str());
}

TEST(TraceReplay, ChromeTraceHasCountersAndInstants) {
  const std::string path = temp_path("chrome");
  const Trace t = never_reset_trace(path, true);
  ReplayConfig c = config_of(t);
  c.timeline = true;
  const ReplayResult r = replay_or_die(t, c);
  std::ostringstream out;
  zarena_replay::write_chrome_trace(out, t, r);
  const nlohmann::json j = nlohmann::json::parse(out.str());
  uint64_t counters = 0, overflows = 0, boundaries = 0;
  double last_ts = -1;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") == "C") {
      ++counters;
      EXPECT_GE(e.at("ts").get<double>(), last_ts);
      last_ts = e.at("ts").get<double>();
      EXPECT_TRUE(e.at("args").contains("top"));
    }
    if (e.at("ph") == "i" && e.at("name") == "overflow") ++overflows;
    if (e.at("ph") == "i" && e.at("name") == "step boundary") ++boundaries;
  }
  EXPECT_EQ(counters, t.events.size());
  EXPECT_EQ(overflows, r.overflow_allocs);
  EXPECT_EQ(boundaries, 1u);
  std::remove(path.c_str());
}

// A coarse clock stamps runs of events alike; for display they are spread, in order.
TEST(TraceReplay, DisplayTimesSpreadCoarseStamps) {
  Trace t;
  t.info.clock_resolution_ns = 1000;
  for (uint64_t ts : {0, 0, 0, 0, 1000, 1000, 5000}) {
    zarena_trace::Event e;
    e.time_ns = ts;
    t.events.push_back(e);
  }
  const std::vector<double> d = zarena_replay::display_times_ns(t);
  const std::vector<double> want = {0, 250, 500, 750, 1000, 1500, 5000};
  EXPECT_EQ(d, want);
}

}  // namespace
