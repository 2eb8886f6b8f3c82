// The engine's own tracer (cfg.trace_file): a record -> replay round trip reproduces the
// live stats exactly (single-threaded, every kind of call); with many threads that free,
// pin and unpin each other's blocks, the recorded order is one the engine could have
// executed (every free and unpin replays with the status it had); the slot lanes' keys.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "format/stats_fields.h"
#include "replay.h"
#include "report.h"
#include "support.h"
#include "trace/trace.h"
#include "trace/trace_reader.h"
#include "trace_test_support.h"
#include "zarena/zarena.h"

namespace {

using zarena_replay::ReplayConfig;
using zarena_replay::ReplayResult;
using zarena_trace::Kind;
using zarena_trace::Trace;

using zarena_test::kKiB;
using zarena_test::kMiB;

using zarena_test::read_or_die;
using zarena_test::stats_of;

std::string temp_path(const std::string& stem) {
  return zarena_test::trace_temp_path("zarena_engine_", stem);
}

zarena* traced_arena(const std::string& path, uint64_t capacity, const char* name) {
  zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_OFF);
  zarena_config c;
  zarena_config_init(&c);
  c.backend = ZARENA_BACKEND_HOST;
  c.capacity_bytes = capacity;
  c.overflow_policy = ZARENA_OVERFLOW_SYNC;
  c.overflow_limit_bytes = ZARENA_OVERFLOW_UNLIMITED;
  c.name = name;
  c.trace_file = path.c_str();
  zarena* a = nullptr;
  EXPECT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  return a;
}

ReplayResult replay_exact(const Trace& t) {
  return zarena_test::replay_or_die(t, zarena_test::config_of(t));
}

void* alloc(zarena* a, uint64_t n, uint32_t tag = 0) {
  zarena_block b;
  EXPECT_EQ(zarena_alloc_ex(a, n, tag, &b), ZARENA_OK) << zarena_last_error();
  return b.ptr;
}

// Every call the engine traces, on one thread: weights under a boundary, tagged blocks,
// reuse, pins (a deferred free), epoch-checked frees (one stale), a floor move, failed
// frees of every kind, overflow blocks, step marks, and resets.
TEST(EngineTrace, RoundTripReproducesTheLiveStatsExactly) {
  const std::string path = temp_path("roundtrip");
  zarena* a = traced_arena(path, 1 * kMiB, "roundtrip");
  uint32_t t_w = 0, t_act = 0;
  ASSERT_EQ(zarena_tag_register("rt.weights", &t_w), ZARENA_OK);
  ASSERT_EQ(zarena_tag_register("rt.act", &t_act), ZARENA_OK);
  void* w = alloc(a, 100 * kKiB, t_w);
  alloc(a, 3000, t_w);
  ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
  std::vector<void*> kept;
  for (int epoch = 0; epoch < 3; ++epoch) {
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    std::vector<void*> live;
    for (int i = 0; i < 40; ++i) {
      void* p = alloc(a, (1 + (i * 7) % 13) * 4 * kKiB, i % 2 ? t_act : 0);
      if (i % 3 == 0) {
        EXPECT_EQ(zarena_free(a, p), ZARENA_OK);
      } else {
        live.push_back(p);
      }
    }
    for (size_t i = 0; i < live.size(); i += 2) EXPECT_EQ(zarena_free(a, live[i]), ZARENA_OK);
    for (int i = 0; i < 10; ++i) alloc(a, 4 * kKiB);  // into the holes: reuse
    (void)zarena_free(a, live[0]);  // a double free (unless the reuse above took it)
    EXPECT_EQ(zarena_free(a, static_cast<char*>(live[1]) + 256), ZARENA_E_NOT_OWNED);
    int on_stack = 0;
    EXPECT_EQ(zarena_free(a, &on_stack), ZARENA_E_NOT_OWNED);
    zarena_block b;
    ASSERT_EQ(zarena_alloc_ex(a, 8 * kKiB, t_act, &b), ZARENA_OK);
    EXPECT_EQ(zarena_free_at(a, b.ptr, b.epoch + 1), ZARENA_E_STALE);
    EXPECT_EQ(zarena_free_at(a, b.ptr, b.epoch), ZARENA_OK);
    // A pinned block freed, then unpinned: the unpin completes the free.
    ASSERT_EQ(zarena_pin(a, live[3]), ZARENA_OK);
    EXPECT_EQ(zarena_free(a, live[3]), ZARENA_OK);
    EXPECT_EQ(zarena_unpin(a, live[3]), ZARENA_OK);
    // A pin that survives the reset below (unpinned next epoch).
    ASSERT_EQ(zarena_pin(a, live[5]), ZARENA_OK);
    for (void* p : kept) EXPECT_EQ(zarena_unpin(a, p), ZARENA_OK);
    kept.assign(1, live[5]);
    alloc(a, 600 * kKiB);  // beyond the region: overflow
    void* o = alloc(a, 700 * kKiB);
    EXPECT_EQ(zarena_free(a, o), ZARENA_OK);
    ASSERT_EQ(zarena_reset(a), ZARENA_OK);
    EXPECT_EQ(zarena_free(a, live[1]), ZARENA_E_STALE);  // reclaimed by the reset
  }
  zarena_region r;
  r.struct_size = sizeof r;
  ASSERT_EQ(zarena_region_info(a, &r), ZARENA_OK);
  EXPECT_EQ(zarena_set_floor(a, r.floor_bytes + 100), ZARENA_E_INVALID_ARGUMENT);
  void* x = alloc(a, 64 * kKiB);
  ASSERT_EQ(zarena_region_info(a, &r), ZARENA_OK);
  ASSERT_EQ(zarena_set_floor(a, r.top_bytes), ZARENA_OK);  // x survives resets now
  ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  EXPECT_EQ(zarena_free(a, x), ZARENA_OK);
  EXPECT_EQ(zarena_free(a, w), ZARENA_OK);
  const zarena_stats direct = stats_of(a);
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);

  const Trace t = read_or_die(path);
  EXPECT_TRUE(t.summary.complete);
  EXPECT_EQ(t.summary.missing, 0u);
  const ReplayResult rr = replay_exact(t);
  EXPECT_EQ(rr.status_mismatches, 0u);
  EXPECT_EQ(rr.unmatched_frees, 0u);
  EXPECT_TRUE(rr.not_replayed.empty());
  for (const auto& f : zarena_core::kStatsFields) {
    if (f.member == &zarena_stats::overflow_max_latency_ns) continue;  // wall clock
    EXPECT_EQ(rr.final_stats.*f.member, direct.*f.member) << f.name;
  }
  // The run did exercise what it claims to.
  EXPECT_EQ(direct.resets, 4u);
  EXPECT_GT(direct.overflow_allocs, 0u);
  EXPECT_GT(direct.invalid_frees, 0u);
  EXPECT_GT(direct.stale_frees, 0u);
  EXPECT_GT(direct.reuses, 0u);
  EXPECT_GT(direct.pinned_blocks, 0u);
  EXPECT_EQ(t.tags.count(t_act), 1u);
  std::remove(path.c_str());
}

// A run under step plans (ZARENA_FLAG_PLAN) with a trace: the plans stay on (a trace
// turned them off: plan_hits 0, with no word why), the trace records what they served
// (alloc records of outcome kPlanned, frees, pins and unpins of planned blocks flagged
// kAddrPlanned), and the replay at the traced settings serves the same steps from the
// same plans: every stats field agrees with the live run's, plan hits and peaks included,
// and the report says both.
TEST(EngineTrace, PlannedRunReplaysAsItRan) {
  const std::string path = temp_path("planned");
  zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_OFF);
  zarena_config c;
  zarena_config_init(&c);
  c.backend = ZARENA_BACKEND_HOST;
  c.capacity_bytes = 8 * kMiB;
  c.overflow_policy = ZARENA_OVERFLOW_REFUSE;
  c.name = "planned";  // plans on: the default
  c.trace_file = path.c_str();
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  uint32_t t_act = 0;
  ASSERT_EQ(zarena_tag_register("plan.act", &t_act), ZARENA_OK);
  void* w = alloc(a, 256 * kKiB);  // weights
  ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
  void* carried = nullptr;  // the previous step's output, freed in the next step
  uint64_t planned_blocks_seen = 0;
  for (int step = 0; step < 30; ++step) {
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    std::vector<zarena_block> blocks(12);
    for (int i = 0; i < 12; ++i) {
      ASSERT_EQ(zarena_alloc_ex(a, (1 + (i * 5) % 7) * 16 * kKiB, i % 2 ? t_act : 0, &blocks[i]),
                ZARENA_OK);
      planned_blocks_seen += (blocks[i].flags & ZARENA_BLOCK_PLANNED) != 0;
      if (i == 4) {
        EXPECT_EQ(zarena_free(a, blocks[2].ptr), ZARENA_OK);  // a temporary, mid-step
      }
    }
    if (step == 12) {  // a pinned planned block freed, then unpinned: the unpin frees it
      ASSERT_EQ(zarena_pin(a, blocks[5].ptr), ZARENA_OK);
    }
    if (carried != nullptr) {
      EXPECT_EQ(zarena_free(a, carried), ZARENA_OK);
    }
    carried = blocks[11].ptr;
    EXPECT_EQ(zarena_free_at(a, blocks[3].ptr, blocks[3].epoch), ZARENA_OK);
    for (int i = 0; i < 11; ++i) {
      if (i == 2 || i == 3) continue;
      EXPECT_EQ(zarena_free(a, blocks[i].ptr), ZARENA_OK);
    }
    if (step == 12) {
      EXPECT_EQ(zarena_unpin(a, blocks[5].ptr), ZARENA_OK);
    }
    if (step % 10 == 9) {
      ASSERT_EQ(zarena_reset(a), ZARENA_OK);  // reclaims the carried output
      carried = nullptr;
    }
  }
  EXPECT_EQ(zarena_free(a, w), ZARENA_OK);
  const zarena_stats live = stats_of(a);
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
  ASSERT_GT(live.plan_hits, 0u) << "the traced arena's plans never served";
  EXPECT_EQ(planned_blocks_seen, live.plan_hits);
  ASSERT_GT(live.plan_steps, 10u);

  const Trace t = read_or_die(path);
  EXPECT_TRUE(t.summary.whole());
  EXPECT_TRUE(t.info.plans_traced());
  uint64_t planned_allocs = 0, planned_frees = 0, planned_pins = 0;
  for (const auto& e : t.events) {
    if (e.kind == Kind::kAlloc && e.outcome == zarena_trace::AllocOutcome::kPlanned) {
      ++planned_allocs;
      EXPECT_NE(e.flags & zarena_trace::kAddrPlanned, 0);
    }
    if (e.kind == Kind::kFree && (e.flags & zarena_trace::kAddrPlanned) != 0) ++planned_frees;
    if ((e.kind == Kind::kPin || e.kind == Kind::kUnpin) &&
        (e.flags & zarena_trace::kAddrPlanned) != 0) {
      ++planned_pins;
    }
  }
  EXPECT_EQ(planned_allocs, live.plan_hits);
  EXPECT_GT(planned_frees, live.plan_hits / 2);
  EXPECT_EQ(planned_pins, 2u);

  const ReplayResult rr = replay_exact(t);
  EXPECT_EQ(rr.status_mismatches, 0u);
  EXPECT_EQ(rr.unmatched_frees, 0u);
  EXPECT_TRUE(rr.not_replayed.empty());
  EXPECT_EQ(rr.traced_planned, live.plan_hits);
  for (const auto& f : zarena_core::kStatsFields) {
    if (f.member == &zarena_stats::overflow_max_latency_ns) continue;  // wall clock
    EXPECT_EQ(rr.final_stats.*f.member, live.*f.member) << f.name;
  }

  zarena_replay::Report rep;
  rep.input = "planned";
  rep.trace = &t;
  rep.config = zarena_test::config_of(t);
  rep.main = rr;
  std::ostringstream out;
  zarena_replay::print_text(out, rep, 20);
  const std::string want = "the traced run served " + std::to_string(live.plan_hits) +
                           " allocations from plans, the replay " + std::to_string(live.plan_hits);
  EXPECT_NE(out.str().find(want), std::string::npos) << out.str();
  std::remove(path.c_str());
}

// Threads that hand blocks to each other: each allocates, frees some of its own, and
// passes some to a shared queue from which the others free (or pin, free, unpin). The
// replay, in the recorded order on one thread, must find every block live when its
// free or pin comes, and answer every call as the engine did.
TEST(EngineTrace, ManyThreadsRecordAnOrderTheEngineCouldHaveExecuted) {
  const std::string path = temp_path("threads");
  zarena* a = traced_arena(path, 256 * kMiB, "threads");
  constexpr int kThreads = 4, kOps = 20000;
  std::mutex mu;
  std::deque<void*> handed;
  std::vector<std::thread> threads;
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(w + 1);
      std::vector<void*> mine;
      for (int i = 0; i < kOps; ++i) {
        const int what = static_cast<int>(rng() % 10);
        if (what < 4 || mine.empty()) {
          void* p = nullptr;
          ASSERT_EQ(zarena_alloc(a, 1 + rng() % (32 * kKiB), &p), ZARENA_OK);
          mine.push_back(p);
        } else if (what < 6) {
          EXPECT_EQ(zarena_free(a, mine.back()), ZARENA_OK);
          mine.pop_back();
        } else if (what < 8) {
          std::lock_guard<std::mutex> lock(mu);
          handed.push_back(mine.back());
          mine.pop_back();
        } else {
          void* p = nullptr;
          {
            std::lock_guard<std::mutex> lock(mu);
            if (handed.empty()) continue;
            p = handed.front();
            handed.pop_front();
          }
          if (what == 9) {
            EXPECT_EQ(zarena_pin(a, p), ZARENA_OK);
            EXPECT_EQ(zarena_free(a, p), ZARENA_OK);
            EXPECT_EQ(zarena_unpin(a, p), ZARENA_OK);
          } else {
            EXPECT_EQ(zarena_free(a, p), ZARENA_OK);
          }
        }
      }
      for (void* p : mine) EXPECT_EQ(zarena_free(a, p), ZARENA_OK);
    });
  }
  for (auto& th : threads) th.join();
  for (void* p : handed) EXPECT_EQ(zarena_free(a, p), ZARENA_OK);
  const zarena_stats direct = stats_of(a);
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);

  const Trace t = read_or_die(path);
  EXPECT_TRUE(t.summary.complete);
  EXPECT_EQ(t.summary.missing, 0u);
  std::set<uint16_t> lanes;
  uint64_t frees = 0;
  for (const auto& e : t.events) {
    if (e.thread & zarena_trace::kLaneThread) lanes.insert(e.thread);
    if (e.kind == Kind::kFree) ++frees;
  }
  EXPECT_GE(lanes.size(), 2u) << "the threads used several slots";
  EXPECT_GT(frees, static_cast<uint64_t>(kThreads) * kOps / 4);
  const ReplayResult rr = replay_exact(t);
  EXPECT_EQ(rr.status_mismatches, 0u);
  EXPECT_EQ(rr.unmatched_frees, 0u);
  EXPECT_EQ(rr.final_stats.used_bytes, direct.used_bytes);
  EXPECT_EQ(rr.final_stats.live_allocs, 0u);
  EXPECT_EQ(rr.final_stats.hits, direct.hits);
  EXPECT_EQ(rr.final_stats.invalid_frees, 0u);
  EXPECT_EQ(rr.final_stats.stale_frees, 0u);
  std::remove(path.c_str());
}

// The case the lanes must get right, made deterministic: two threads (two slots) that
// have their spans already allocate one block each without taking the central lock, so
// the order counter does not move, then each frees the other's block. Had the frees only
// read the counter, both slots' events would carry the same counter value and one slot's
// lane would sort first: its free of the other's block would come before that block's
// allocation. Each takes a number of its own instead.
TEST(EngineTrace, AFreeFromAnotherSlotComesAfterTheAllocation) {
  const std::string path = temp_path("cross");
  zarena* a = traced_arena(path, 256 * kMiB, "cross");
  std::atomic<int> phase{0};
  void* block[2] = {nullptr, nullptr};
  const auto wait_for = [&](int n) {
    while (phase.load() < n) std::this_thread::yield();
  };
  const auto body = [&](int me) {
    void* warm = nullptr;  // takes this slot's span (central lock) before the test
    ASSERT_EQ(zarena_alloc(a, 256, &warm), ZARENA_OK);
    ++phase;
    wait_for(2);
    ASSERT_EQ(zarena_alloc(a, 256, &block[me]), ZARENA_OK);
    ++phase;
    wait_for(4);
    EXPECT_EQ(zarena_free(a, block[1 - me]), ZARENA_OK);
    EXPECT_EQ(zarena_free(a, warm), ZARENA_OK);
  };
  std::thread t0(body, 0), t1(body, 1);
  t0.join();
  t1.join();
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
  const Trace t = read_or_die(path);
  const ReplayResult rr = replay_exact(t);
  EXPECT_EQ(rr.status_mismatches, 0u);
  EXPECT_EQ(rr.unmatched_frees, 0u);
  EXPECT_EQ(rr.final_stats.live_allocs, 0u);
  EXPECT_EQ(rr.final_stats.invalid_frees, 0u);
  std::remove(path.c_str());
}

// The other hand-over, through the central part: a slot frees a block (its own, so the
// free only reads the order counter), and another slot's allocation can only be served
// by that space (the region holds one such block), which it gets through the central
// lock. The central lock moves the counter, so the allocation sorts after the free. Run
// with each thread in each role, so that one run has the lower slot allocating (equal
// counter values would sort that slot's lane first).
TEST(EngineTrace, SpaceGivenBackThroughTheCentralPartComesAfterTheFree) {
  std::atomic<int> phase{0};
  const auto wait_for = [&](int n) {
    while (phase.load() < n) std::this_thread::yield();
  };
  zarena* arenas[2];
  std::string paths[2];
  for (int run = 0; run < 2; ++run) {
    paths[run] = temp_path("central" + std::to_string(run));
    arenas[run] = traced_arena(paths[run], 1 * kMiB, "central");
  }
  // Per run: the freeing thread's turn is phase 3*run, the allocating thread's 3*run + 1.
  const auto body = [&](int me) {
    for (int run = 0; run < 2; ++run) {
      zarena* a = arenas[run];
      if (me == run) {
        wait_for(3 * run);
        void* x = nullptr;
        ASSERT_EQ(zarena_alloc(a, 600 * kKiB, &x), ZARENA_OK);
        ASSERT_EQ(zarena_free(a, x), ZARENA_OK);
        phase = 3 * run + 1;
      } else {
        wait_for(3 * run + 1);
        // Only the freed space fits. The block stays live: had it been sorted before the
        // free, the replay would have to put the other block elsewhere (overflow).
        void* y = nullptr;
        ASSERT_EQ(zarena_alloc(a, 600 * kKiB, &y), ZARENA_OK);
        phase = 3 * run + 3;
      }
    }
  };
  std::thread t0(body, 0), t1(body, 1);
  t0.join();
  t1.join();
  for (int run = 0; run < 2; ++run) {
    const zarena_stats direct = stats_of(arenas[run]);
    EXPECT_EQ(direct.overflow_allocs, 0u) << "the space was reused, not spilled";
    ASSERT_EQ(zarena_destroy(arenas[run]), ZARENA_OK);
    const Trace t = read_or_die(paths[run]);
    const ReplayResult rr = replay_exact(t);
    EXPECT_EQ(rr.status_mismatches, 0u) << "run " << run;
    EXPECT_EQ(rr.final_stats.overflow_allocs, 0u) << "run " << run;
    EXPECT_EQ(rr.final_stats.hits, direct.hits) << "run " << run;
    std::remove(paths[run].c_str());
  }
}

// The slot lanes' keys: a free of a block its own slot allocated since the order counter
// last moved only reads the counter; any other free takes a number of its own.
TEST(EngineTrace, LaneKeys) {
  const std::string path = temp_path("keys");
  zarena_trace::TraceHeader h;
  h.arena_name = "keys";
  h.alignment = 256;
  zarena_trace::TraceOptions o;
  o.slots = 4;
  zarena_core::Result err;
  auto t = zarena_trace::Tracer::open(path, h, &err, o);
  ASSERT_TRUE(t != nullptr) << err.message;
  using zarena_trace::is_lane_key;
  t->slot_alloc(1, 100, 0, false, 0);
  t->slot_alloc(1, 100, 256, false, 0);
  t->slot_alloc(2, 100, 512, false, 0);
  EXPECT_TRUE(is_lane_key(t->slot_free_key(1, 0))) << "its own block";
  EXPECT_TRUE(is_lane_key(t->slot_free_key(1, 0))) << "a double free: after the first";
  EXPECT_FALSE(is_lane_key(t->slot_free_key(1, 512))) << "slot 2's block";
  // slot_free_key(1, 512) took a number: the counter moved, slot 1's other block too.
  EXPECT_FALSE(is_lane_key(t->slot_free_key(1, 256)));
  t->slot_alloc(3, 100, 768, false, 0);
  t->order_counter()->fetch_add(1);  // a central-lock acquisition
  EXPECT_FALSE(is_lane_key(t->slot_free_key(3, 768)));
  ASSERT_TRUE(t->close().is_ok());
  const Trace r = read_or_die(path);
  ASSERT_EQ(r.events.size(), 4u);  // the allocations (the keys alone write nothing)
  EXPECT_EQ(r.events[0].thread, zarena_trace::kLaneThread | 1);
  EXPECT_EQ(r.events[0].addr, 0u);
  EXPECT_EQ(r.events[1].addr, 256u);
  EXPECT_EQ(r.events[2].thread, zarena_trace::kLaneThread | 2);
  EXPECT_EQ(r.events[3].addr, 768u);
  std::remove(path.c_str());
}

// The lane records' layout: 24 bytes an allocation or free (32 an epoch-checked free), the
// order key and the time in 24-byte marks written only when they change and at the start
// of each chunk. Small chunks and a precise clock put marks at every chunk boundary; every
// event comes back once, in its lane's order, with what it carried.
TEST(EngineTrace, LaneRecordsAcrossChunks) {
  const std::string path = temp_path("lanechunks");
  zarena_trace::TraceHeader h;
  h.arena_name = "lanechunks";
  h.alignment = 256;
  zarena_trace::TraceOptions o;
  o.slots = 2;
  o.buffer_bytes = 4096;
  o.precise_clock = true;
  zarena_core::Result err;
  auto t = zarena_trace::Tracer::open(path, h, &err, o);
  ASSERT_TRUE(t != nullptr) << err.message;
  constexpr int kPairs = 2000;
  for (int i = 0; i < kPairs; ++i) {
    const uint32_t slot = static_cast<uint32_t>(i & 1);
    const uint64_t off = uint64_t(i) * 256;
    t->slot_alloc(slot, 100 + i, off, (i % 3) == 0, static_cast<uint32_t>(i % 5));
    const uint64_t key = t->slot_free_key(slot, off);
    t->slot_free(slot, key, off, ZARENA_OK, 256, (i % 7) == 0, uint64_t(i));
    if (i % 100 == 99) t->order_counter()->fetch_add(1);  // a central-lock acquisition
  }
  ASSERT_TRUE(t->close().is_ok());
  const Trace r = read_or_die(path);
  EXPECT_TRUE(r.summary.complete);
  EXPECT_EQ(r.summary.missing, 0u);
  ASSERT_EQ(r.events.size(), 2u * kPairs);
  // Each slot's events, in the order they were made.
  int next[2] = {0, 1};
  bool alloc_next[2] = {true, true};
  uint64_t last_time[2] = {0, 0};
  for (const auto& e : r.events) {
    ASSERT_TRUE(e.thread & zarena_trace::kLaneThread);
    const int slot = e.thread & ~zarena_trace::kLaneThread;
    ASSERT_TRUE(slot == 0 || slot == 1);
    const int i = next[slot];
    EXPECT_GE(e.time_ns, last_time[slot]);
    last_time[slot] = e.time_ns;
    EXPECT_EQ(e.addr, uint64_t(i) * 256);
    if (alloc_next[slot]) {
      ASSERT_EQ(e.kind, Kind::kAlloc) << "event of pair " << i;
      EXPECT_EQ(e.size, uint64_t(100 + i));
      EXPECT_EQ(e.aligned, (uint64_t(100 + i) + 255) / 256 * 256);
      EXPECT_EQ(e.tag, uint32_t(i % 5));
      EXPECT_EQ(e.outcome, (i % 3) == 0 ? zarena_trace::AllocOutcome::kRegionReuse
                                        : zarena_trace::AllocOutcome::kRegionBump);
    } else {
      ASSERT_EQ(e.kind, Kind::kFree) << "event of pair " << i;
      EXPECT_EQ(e.size, 256u);
      EXPECT_EQ(e.status, ZARENA_OK);
      if (i % 7 == 0) {
        EXPECT_TRUE(e.flags & zarena_trace::kFreeEpochChecked);
        EXPECT_EQ(e.epoch, uint64_t(i));
      } else {
        EXPECT_FALSE(e.flags & zarena_trace::kFreeEpochChecked);
      }
      next[slot] += 2;
    }
    alloc_next[slot] = !alloc_next[slot];
  }
  EXPECT_EQ(next[0], kPairs);
  EXPECT_EQ(next[1], kPairs + 1);
  std::remove(path.c_str());
}

// Without clock or counter moves, a lane's events cost their record alone: 24 bytes.
TEST(EngineTrace, LaneRecordBytes) {
  const std::string path = temp_path("lanebytes");
  zarena_trace::TraceHeader h;
  h.arena_name = "lanebytes";
  h.alignment = 256;
  zarena_trace::TraceOptions o;
  o.slots = 1;
  o.tick_ns = uint64_t{1} << 50;  // the coarse clock does not move during the test
  zarena_core::Result err;
  auto t = zarena_trace::Tracer::open(path, h, &err, o);
  ASSERT_TRUE(t != nullptr) << err.message;
  const std::string empty_path = temp_path("lanebytes_empty");
  auto empty = zarena_trace::Tracer::open(empty_path, h, &err, o);
  ASSERT_TRUE(empty != nullptr) << err.message;
  ASSERT_TRUE(empty->close().is_ok());
  constexpr int kPairs = 10000;
  for (int i = 0; i < kPairs; ++i) {
    t->slot_alloc(0, 256, 0, i > 0, 0);
    t->slot_free(0, t->slot_free_key(0, 0), 0, ZARENA_OK, 256, false, 0);
  }
  ASSERT_TRUE(t->close().is_ok());
  EXPECT_EQ(read_or_die(path).events.size(), 2u * kPairs);
  auto file_bytes = [](const std::string& p) {
    FILE* f = std::fopen(p.c_str(), "rb");
    EXPECT_TRUE(f != nullptr);
    std::fseek(f, 0, SEEK_END);
    const long n = std::ftell(f);
    std::fclose(f);
    return static_cast<uint64_t>(n);
  };
  const uint64_t events_bytes = file_bytes(path) - file_bytes(empty_path);
  const uint64_t chunks = (2u * kPairs * 24 + o.buffer_bytes - 1) / o.buffer_bytes + 1;
  EXPECT_GE(events_bytes, 2u * kPairs * 24);
  EXPECT_LE(events_bytes, 2u * kPairs * 24 + chunks * 2 * 24)
      << "24 bytes an event, two marks a chunk";
  std::remove(path.c_str());
  std::remove(empty_path.c_str());
}

// A lane record whose lane gave no order key before it is damage, not key 0.
TEST(EngineTrace, LaneRecordWithoutOrderMarkIsMalformed) {
  const std::string path = temp_path("nomark");
  zarena_trace::TraceHeader h;
  h.arena_name = "nomark";
  h.alignment = 256;
  zarena_trace::TraceOptions o;
  o.slots = 1;
  zarena_core::Result err;
  auto t = zarena_trace::Tracer::open(path, h, &err, o);
  ASSERT_TRUE(t != nullptr) << err.message;
  t->slot_alloc(0, 100, 0, false, 0);
  ASSERT_TRUE(t->close().is_ok());
  FILE* f = std::fopen(path.c_str(), "rb");
  ASSERT_TRUE(f != nullptr);
  std::vector<char> bytes;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;)
    bytes.insert(bytes.end(), buf, buf + n);
  std::fclose(f);
  Trace r;
  std::string e;
  ASSERT_TRUE(zarena_trace::parse_trace(bytes.data(), bytes.size(), &r, &e)) << e;
  ASSERT_EQ(r.events.size(), 1u);
  // Make the lane-order mark a kind no reader knows (skipped by its length).
  size_t marks = 0;
  for (size_t at = 0; at + 24 <= bytes.size(); at += 8) {
    if (static_cast<uint8_t>(bytes[at + 18]) == static_cast<uint8_t>(Kind::kLaneOrder) &&
        bytes[at + 19] == 3 && (static_cast<uint8_t>(bytes[at + 17]) & 0x80) != 0) {
      bytes[at + 18] = static_cast<char>(200);
      ++marks;
    }
  }
  ASSERT_EQ(marks, 1u);
  EXPECT_FALSE(zarena_trace::parse_trace(bytes.data(), bytes.size(), &r, &e));
  EXPECT_NE(e.find("order mark"), std::string::npos) << e;
  std::remove(path.c_str());
}

}  // namespace
