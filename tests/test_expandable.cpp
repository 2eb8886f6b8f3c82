// The expandable arena at the arena level, host backend: growth through many commit
// chunks with pointers stable and data intact, the stats and the arena.config record, trim
// at reset (trim_keep_bytes) that keeps pins and the floor, and a commit failure
// (injected) that sends the request to overflow, logs arena.commit_failed with the reason,
// and is diagnosed as commit_failed, not working_set_full. Then the commit protocol
// (engine/expandable.h): a commit or decommit that blocks holds up only the allocations
// that need its memory, and no block ever lies in memory that is not committed (the host
// backend maps uncommitted memory PROT_NONE, so a write there kills the test).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../capi/handle.h"
#include "backend/backend_faults.h"
#include "support.h"
#include "torch_sequence.h"
#include "zarena/zarena.h"

namespace {

using zarena_core::FaultInjectingBackend;
using zarena_core::FaultSite;
using zarena_test::kKiB;
using zarena_test::kMiB;
using zarena_test::LogCapture;
using zarena_test::stats_of;

constexpr uint64_t kChunk = 1 * kMiB;

zarena_config expandable(uint64_t max, int32_t policy = ZARENA_OVERFLOW_REFUSE,
                         uint64_t trim_keep = 0) {
  zarena_config c;
  zarena_config_init(&c);
  c.backend = ZARENA_BACKEND_HOST;
  c.capacity_bytes = max;
  c.alignment = 256;
  c.overflow_policy = policy;
  c.overflow_limit_bytes = ZARENA_OVERFLOW_UNLIMITED;
  c.flags = ZARENA_FLAG_EXPANDABLE;
  c.commit_chunk_bytes = kChunk;
  c.trim_keep_bytes = trim_keep;
  c.name = "expandable";
  return c;
}

// An arena of the host backend, whose fault injector the tests drive.
struct Arena : zarena_test::ArenaHolder {
  using ArenaHolder::ArenaHolder;
  FaultInjectingBackend& faults() const { return *a->arena->fault_injector(); }
};

using zarena_test::region_of;

::testing::AssertionResult holds(const void* p, uint64_t n, unsigned char v) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (uint64_t i = 0; i < n; i += 251) {
    if (b[i] != v) {
      return ::testing::AssertionFailure()
             << "byte " << i << " of " << p << " is " << int(b[i]) << ", not " << int(v);
    }
  }
  if (b[n - 1] != v) return ::testing::AssertionFailure() << "last byte of " << p;
  return ::testing::AssertionSuccess();
}

// bytes rounded up to whole commit chunks: the most an arena needing `bytes` keeps committed.
uint64_t in_chunks(uint64_t bytes) { return (bytes + kChunk - 1) / kChunk * kChunk; }

// One step of a training-like loop (zarena_step_begin first): `count` blocks of `block`
// bytes and, with extra != 0, one of `extra` bytes (a deviation from a plan learned without
// it); block i is written whole with v + i and checked before the frees (uncommitted host
// memory is PROT_NONE: a block in decommitted space kills the test).
void written_step(zarena* g, int count, uint64_t block, uint64_t extra, unsigned char v) {
  ASSERT_EQ(zarena_step_begin(g), ZARENA_OK);
  std::vector<std::pair<void*, uint64_t>> blocks;
  for (int i = 0; i <= count; ++i) {
    const uint64_t n = i < count ? block : extra;
    if (n == 0) continue;
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(g, n, &p), ZARENA_OK) << zarena_last_error();
    std::memset(p, static_cast<unsigned char>(v + i), n);
    blocks.emplace_back(p, n);
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    ASSERT_TRUE(holds(blocks[i].first, blocks[i].second, static_cast<unsigned char>(v + i)));
    ASSERT_EQ(zarena_free(g, blocks[i].first), ZARENA_OK);
  }
}

class Expandable : public ::testing::Test {
 protected:
  LogCapture log_{ZARENA_LOG_DEBUG};
};

TEST_F(Expandable, GrowsThroughManyChunksWithPointersStableAndDataIntact) {
  Arena g(expandable(64 * kMiB));
  zarena_region r = region_of(g);
  void* const base = r.base;
  EXPECT_EQ(r.expandable, 1u);
  EXPECT_EQ(r.capacity_bytes, 64 * kMiB);
  EXPECT_EQ(r.committed_bytes, 0u) << "nothing committed before the first allocation";
  EXPECT_EQ(stats_of(g).committed_bytes, 0u);

  struct Block {
    void* p;
    unsigned char v;
  };
  std::vector<Block> blocks;
  uint64_t last_committed = 0;
  uint64_t growths = 0;
  for (int i = 0; i < 240; ++i) {  // 240 x 256 KiB = 60 MiB
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(g, 256 * kKiB, &p), ZARENA_OK) << i << ": " << zarena_last_error();
    ASSERT_TRUE(zarena_contains(g, p));
    const unsigned char v = static_cast<unsigned char>(i * 7 + 1);
    std::memset(p, v, 256 * kKiB);  // faults if the memory was not committed
    blocks.push_back({p, v});
    const zarena_stats s = stats_of(g);
    ASSERT_GE(s.committed_bytes, s.top_bytes) << "the top never passes the committed end";
    ASSERT_EQ(s.committed_bytes % kChunk, 0u) << "committed in whole chunks";
    if (s.committed_bytes != last_committed) {
      ++growths;
      last_committed = s.committed_bytes;
      for (const Block& b : blocks) ASSERT_TRUE(holds(b.p, 256 * kKiB, b.v)) << "after growth";
    }
  }
  r = region_of(g);
  EXPECT_EQ(r.base, base) << "the base never moves";
  const zarena_stats s = stats_of(g);
  EXPECT_EQ(r.committed_bytes, s.committed_bytes);
  EXPECT_GE(s.committed_bytes, 60 * kMiB);
  EXPECT_LE(s.committed_bytes, 62 * kMiB) << "committed only what the top needed";
  EXPECT_GE(growths, 30u) << "many chunks";
  EXPECT_EQ(s.commit_events, growths);
  EXPECT_EQ(s.commit_failures, 0u);
  EXPECT_EQ(s.trim_events, 0u);
  EXPECT_EQ(s.overflow_allocs, 0u);
  // Up to the maximum, then the arena is full like any other.
  void* p = nullptr;
  while (zarena_alloc(g, 256 * kKiB, &p) == ZARENA_OK) std::memset(p, 0xAB, 256 * kKiB);
  EXPECT_EQ(stats_of(g).committed_bytes, 64 * kMiB);
  EXPECT_EQ(stats_of(g).commit_failures, 0u) << "full is not a commit failure";
  for (const Block& b : blocks) ASSERT_TRUE(holds(b.p, 256 * kKiB, b.v));
  ASSERT_EQ(zarena_reset(g), ZARENA_OK);
  EXPECT_EQ(stats_of(g).committed_bytes, 64 * kMiB) << "no trim_keep_bytes: nothing trimmed";
}

TEST_F(Expandable, ArenaConfigSaysExpandableAndTheChunkSize) {
  Arena g(expandable(64 * kMiB, ZARENA_OVERFLOW_REFUSE, 8 * kMiB));
  const auto recs = log_.of("arena.config");
  ASSERT_EQ(recs.size(), 1u);
  const zarena_test::Field* e = recs[0].field("flags.expandable");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->kind, ZARENA_FIELD_BOOL);
  EXPECT_EQ(e->i, 1);
  EXPECT_EQ(recs[0].u("commit_chunk_bytes"), kChunk);
  EXPECT_EQ(recs[0].u("trim_keep_bytes"), 8 * kMiB);
  EXPECT_EQ(recs[0].u("capacity_bytes"), 64 * kMiB);
  EXPECT_NE(recs[0].message.find("expandable"), std::string::npos) << recs[0].message;
  EXPECT_NE(recs[0].message.find("1.0 MiB chunks"), std::string::npos) << recs[0].message;
}

TEST_F(Expandable, TrimAtResetKeepsPinsAndTheFloor) {
  Arena g(expandable(64 * kMiB, ZARENA_OVERFLOW_REFUSE, 4 * kMiB));
  // Weights under the floor.
  void* weights = nullptr;
  ASSERT_EQ(zarena_alloc(g, 2 * kMiB, &weights), ZARENA_OK);
  std::memset(weights, 0x11, 2 * kMiB);
  ASSERT_EQ(zarena_mark_step_boundary(g), ZARENA_OK);
  // A step that grows the arena to ~32 MiB; one block near 20 MiB is pinned.
  std::vector<void*> step;
  for (int i = 0; i < 30; ++i) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(g, 1 * kMiB, &p), ZARENA_OK) << zarena_last_error();
    std::memset(p, 0x22, 1 * kMiB);
    step.push_back(p);
  }
  void* pinned = step[18];
  std::memset(pinned, 0x33, 1 * kMiB);
  ASSERT_EQ(zarena_pin(g, pinned), ZARENA_OK);
  const uint64_t pinned_end =
      static_cast<uint64_t>(static_cast<char*>(pinned) - static_cast<char*>(region_of(g).base)) +
      1 * kMiB;
  zarena_stats s = stats_of(g);
  ASSERT_GE(s.committed_bytes, 32 * kMiB);
  const uint64_t events0 = s.commit_events;

  ASSERT_EQ(zarena_reset(g), ZARENA_OK);
  s = stats_of(g);
  EXPECT_EQ(s.trim_events, 1u);
  EXPECT_GE(s.committed_bytes, pinned_end) << "a pinned block stays committed";
  EXPECT_LE(s.committed_bytes, pinned_end + 2 * kChunk) << "the rest was given back";
  EXPECT_TRUE(holds(pinned, 1 * kMiB, 0x33));
  EXPECT_TRUE(holds(weights, 2 * kMiB, 0x11));

  ASSERT_EQ(zarena_unpin(g, pinned), ZARENA_OK);
  ASSERT_EQ(zarena_reset(g), ZARENA_OK);  // reclaims it; now only the keep size stays
  s = stats_of(g);
  EXPECT_EQ(s.trim_events, 2u);
  EXPECT_GE(s.committed_bytes, 4 * kMiB);
  EXPECT_LE(s.committed_bytes, 4 * kMiB + 2 * kChunk);
  EXPECT_TRUE(holds(weights, 2 * kMiB, 0x11));

  // The floor: raise it to 12 MiB with live blocks up to there; trim keeps it committed.
  std::vector<void*> kept;
  for (int i = 0; i < 10; ++i) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(g, 1 * kMiB, &p), ZARENA_OK) << zarena_last_error();
    std::memset(p, static_cast<int>(0x40 + i), 1 * kMiB);
    kept.push_back(p);
  }
  ASSERT_EQ(zarena_mark_step_boundary(g), ZARENA_OK);
  const uint64_t floor = stats_of(g).floor_bytes;
  EXPECT_EQ(floor, 12 * kMiB);
  for (int i = 0; i < 16; ++i) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(g, 1 * kMiB, &p), ZARENA_OK) << zarena_last_error();
    std::memset(p, 0x55, 1 * kMiB);
  }
  ASSERT_EQ(zarena_reset(g), ZARENA_OK);
  s = stats_of(g);
  EXPECT_GE(s.committed_bytes, floor) << "nothing under the floor is decommitted";
  EXPECT_LE(s.committed_bytes, floor + 2 * kChunk);
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(holds(kept[i], 1 * kMiB, static_cast<unsigned char>(0x40 + i)));
  }
  // Growing again recommits; a trimmed range comes back usable.
  for (int i = 0; i < 20; ++i) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(g, 1 * kMiB, &p), ZARENA_OK) << zarena_last_error();
    std::memset(p, 0x66, 1 * kMiB);
  }
  EXPECT_GT(stats_of(g).commit_events, events0);
  // No trim during a capture (decommitting would wait for the stream).
  const uint64_t trims = stats_of(g).trim_events;
  ASSERT_EQ(zarena_set_capture_active(g, 1), ZARENA_OK);
  ASSERT_EQ(zarena_reset(g), ZARENA_OK);
  EXPECT_EQ(stats_of(g).trim_events, trims);
  ASSERT_EQ(zarena_set_capture_active(g, 0), ZARENA_OK);
  ASSERT_EQ(zarena_reset(g), ZARENA_OK);
  EXPECT_EQ(stats_of(g).trim_events, trims + 1);
}

// zarena_trim (experimental): an arena that never resets (zarena.torch's, at
// torch.cuda.empty_cache) gives back what is committed above its top without a reset:
// live blocks stay, freed ones at the top are given back (after the slots' caches are
// drained), and growing again commits again. Not during a capture; nothing to do for an
// arena that is not expandable.
TEST_F(Expandable, TrimWithoutAResetGivesBackWhatLiesAboveTheTop) {
  Arena g(expandable(64 * kMiB, ZARENA_OVERFLOW_REFUSE));
  void* low = nullptr;
  ASSERT_EQ(zarena_alloc(g, 2 * kMiB, &low), ZARENA_OK);
  std::memset(low, 0x77, 2 * kMiB);
  std::vector<void*> high;
  for (int i = 0; i < 30; ++i) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(g, 1 * kMiB, &p), ZARENA_OK) << zarena_last_error();
    high.push_back(p);
  }
  for (void* p : high) ASSERT_EQ(zarena_free(g, p), ZARENA_OK);
  ASSERT_GE(stats_of(g).committed_bytes, 32 * kMiB);
  ASSERT_EQ(zarena_set_capture_active(g, 1), ZARENA_OK);
  EXPECT_EQ(zarena_trim(g, 0), ZARENA_E_CAPTURE_UNSAFE);
  EXPECT_GE(stats_of(g).committed_bytes, 32 * kMiB) << "nothing given back during a capture";
  ASSERT_EQ(zarena_set_capture_active(g, 0), ZARENA_OK);
  ASSERT_EQ(zarena_trim(g, 0), ZARENA_OK) << zarena_last_error();
  zarena_stats s = stats_of(g);
  EXPECT_EQ(s.trim_events, 1u);
  EXPECT_LE(s.committed_bytes, 2 * kMiB + 2 * kChunk) << "what lay above the live block";
  EXPECT_EQ(s.used_bytes, 2 * kMiB);
  EXPECT_EQ(s.resets, 0u);
  EXPECT_TRUE(holds(low, 2 * kMiB, 0x77));
  ASSERT_EQ(zarena_trim(g, 16 * kMiB), ZARENA_OK);  // keep: nothing above it is committed
  EXPECT_EQ(stats_of(g).trim_events, 1u);
  for (int i = 0; i < 20; ++i) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(g, 1 * kMiB, &p), ZARENA_OK) << zarena_last_error();
    std::memset(p, 0x66, 1 * kMiB);
  }
  EXPECT_GE(stats_of(g).committed_bytes, 22 * kMiB);
  EXPECT_EQ(zarena_trim(nullptr, 0), ZARENA_E_INVALID_ARGUMENT);

  zarena_config fixed = expandable(4 * kMiB);
  fixed.flags = 0;
  Arena f(fixed);
  EXPECT_EQ(zarena_trim(f, 0), ZARENA_OK);
  EXPECT_EQ(stats_of(f).trim_events, 0u);
}

// A growth of many chunks (one large allocation) is committed one range per chunk, so a
// trim gives it back chunk by chunk down to the top: a block now at its bottom keeps only
// the chunks it lies in. (As one range, it could go back only whole: not at all while the
// top lies above its start.)
TEST_F(Expandable, AGrowthOfManyChunksGoesBackDownToTheTop) {
  Arena g(expandable(64 * kMiB, ZARENA_OVERFLOW_REFUSE));
  void* low = nullptr;
  ASSERT_EQ(zarena_alloc(g, 1 * kMiB, &low), ZARENA_OK) << zarena_last_error();
  void* big = nullptr;
  ASSERT_EQ(zarena_alloc(g, 30 * kMiB, &big), ZARENA_OK) << zarena_last_error();
  std::memset(big, 0x21, 30 * kMiB);
  zarena_stats s = stats_of(g);
  EXPECT_EQ(s.committed_bytes, 31 * kMiB);
  EXPECT_EQ(s.commit_events, 2u) << "one event per growth, however many chunks";
  ASSERT_EQ(zarena_free(g, big), ZARENA_OK);
  void* mid = nullptr;  // where the large block began
  ASSERT_EQ(zarena_alloc(g, 4 * kMiB, &mid), ZARENA_OK) << zarena_last_error();
  ASSERT_LT(static_cast<char*>(mid), static_cast<char*>(big) + 4 * kMiB);
  ASSERT_EQ(zarena_trim(g, 0), ZARENA_OK) << zarena_last_error();
  s = stats_of(g);
  EXPECT_EQ(s.trim_events, 1u);
  EXPECT_LE(s.committed_bytes, in_chunks(s.top_bytes)) << "the chunks above the top went back";
  EXPECT_GE(s.committed_bytes, s.top_bytes);
  std::memset(mid, 0x31, 4 * kMiB);  // still committed
  std::memset(low, 0x41, 1 * kMiB);
  void* again = nullptr;  // growing again commits again
  ASSERT_EQ(zarena_alloc(g, 20 * kMiB, &again), ZARENA_OK) << zarena_last_error();
  std::memset(again, 0x51, 20 * kMiB);
  EXPECT_TRUE(holds(mid, 4 * kMiB, 0x31));
}

// PyTorch's shape: the main thread allocates (the forward), a long-lived second thread
// frees (its autograd thread frees the activations). The freed blocks land in the freeing
// thread's slot, whose budget comes from the capacity (a device's memory for
// zarena.torch, so hundreds of MiB); before an expandable region commits more memory it
// drains the slots, so the allocating thread reuses them instead of growing the region step
// after step (before: 600 MiB for this test's 10 MiB live; 458 MiB for a 130 MiB live peak
// in a host model of a training step). Plans off (ZARENA_FLAG_NO_PLAN):
// the dynamic engine's growth is the subject.
TEST_F(Expandable, BlocksAnotherThreadFreedAreReusedBeforeTheRegionGrows) {
  zarena_config c = expandable(uint64_t{64} << 30);  // address space only, as a device's
  c.flags |= ZARENA_FLAG_NO_PLAN;
  Arena g(c);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<void*> to_free;
  bool quit = false;
  std::thread freer([&] {
    std::unique_lock<std::mutex> l(mu);
    for (;;) {
      cv.wait(l, [&] { return quit || !to_free.empty(); });
      if (to_free.empty()) return;
      for (void* p : to_free) EXPECT_EQ(zarena_free(g, p), ZARENA_OK) << zarena_last_error();
      to_free.clear();
      cv.notify_all();
    }
  });
  constexpr int kBlocks = 16;  // 256 KiB .. 1 MiB, 10 MiB in all, live at once
  uint64_t live = 0;
  for (int step = 0; step < 60; ++step) {
    std::vector<void*> held;
    live = 0;
    for (int i = 0; i < kBlocks; ++i) {
      const uint64_t n = (1 + (i + step) % 4) * 256 * kKiB;
      void* p = nullptr;
      ASSERT_EQ(zarena_alloc(g, n, &p), ZARENA_OK) << zarena_last_error();
      // Committed memory at both ends (PROT_NONE otherwise); a few KiB written a block.
      std::memset(p, step & 0xff, 4 * kKiB);
      std::memset(static_cast<char*>(p) + n - 4 * kKiB, step & 0xff, 4 * kKiB);
      held.push_back(p);
      live += n;
    }
    std::unique_lock<std::mutex> l(mu);
    to_free = std::move(held);
    cv.notify_all();
    cv.wait(l, [&] { return to_free.empty(); });
  }
  {
    std::lock_guard<std::mutex> l(mu);
    quit = true;
  }
  cv.notify_all();
  freer.join();
  const zarena_stats s = stats_of(g);
  EXPECT_EQ(live, 10 * kMiB);
  EXPECT_LE(s.high_water_bytes, 2 * live) << "the region grew past what was live at once";
  EXPECT_LE(s.committed_bytes, in_chunks(2 * live));
}

// The same shape inside one commit chunk: the region has committed memory above its top,
// so raising the top commits nothing, yet the top is what an expandable region keeps
// committed from then on. Before a new span raises it, the slots are drained (once): the
// blocks another thread freed, cached in its slot, serve the request. Without that, the
// 4 MiB below went above the 8 MiB the other thread had freed, and the top rose to 12 MiB
// (train_compare's second step set the run's committed peak this way). Plans off: the
// dynamic engine is the subject.
TEST_F(Expandable, AnotherThreadsCachedBlocksServeBeforeANewSpanRaisesTheTop) {
  zarena_config c = expandable(uint64_t{64} << 30);  // a slot budget of hundreds of MiB
  c.flags |= ZARENA_FLAG_NO_PLAN;
  c.commit_chunk_bytes = 64 * kMiB;  // the first commit covers every request below
  Arena g(c);
  std::vector<void*> blocks(8, nullptr);
  for (void*& p : blocks)
    ASSERT_EQ(zarena_alloc(g, 1 * kMiB, &p), ZARENA_OK) << zarena_last_error();
  zarena_stats s = stats_of(g);
  ASSERT_EQ(s.top_bytes, 8 * kMiB);
  ASSERT_EQ(s.commit_events, 1u);
  std::thread freer([&] {  // its slot keeps what it frees
    for (void* p : blocks) EXPECT_EQ(zarena_free(g, p), ZARENA_OK) << zarena_last_error();
  });
  freer.join();
  void* big = nullptr;
  ASSERT_EQ(zarena_alloc(g, 4 * kMiB, &big), ZARENA_OK) << zarena_last_error();
  std::memset(big, 0x5a, 4 * kMiB);
  s = stats_of(g);
  EXPECT_EQ(s.high_water_bytes, 8 * kMiB) << "a new span raised the top over 8 MiB of free blocks";
  EXPECT_EQ(s.commit_events, 1u);
  const zarena_region r = region_of(g);
  EXPECT_LT(static_cast<char*>(big), static_cast<char*>(r.base) + 8 * kMiB);
}

// A real training run's two threads (train_compare's sequence, recorded on an H100 and
// replayed in its order, tests/torch_sequence.h) lay out the same at a capacity of 2 GiB
// and at a device-sized one. The slots' budget is derived from the capacity; before big
// freed blocks were shared (docs/CONCURRENCY.md), the autograd thread's slot kept the
// activations it freed at the larger capacity, and the top reached 573 MiB against 493
// (583 against 493 plans off). zarena.torch's default capacity is the device's memory.
TEST_F(Expandable, ATrainingRunsLayoutDoesNotDependOnTheCapacity) {
  zarena_test::TorchSequence seq;
  std::string error;
  ASSERT_TRUE(zarena_test::load_torch_sequence(zarena_test::torch_sequence_path(), &seq, &error))
      << error;
  ASSERT_GT(seq.allocs, 3000u);
  auto top_at = [&](uint64_t capacity) {
    zarena_config c = expandable(capacity);
    c.flags |= ZARENA_FLAG_NO_RESETS | ZARENA_FLAG_NO_PLAN;  // the dynamic engine's layout
    c.commit_chunk_bytes = 2 * kMiB;                         // zarena.torch's
    Arena g(c);
    std::string failure;
    EXPECT_TRUE(zarena_test::replay_torch_sequence(g, seq, &failure)) << failure;
    return stats_of(g).high_water_bytes;
  };
  const uint64_t small = top_at(uint64_t{2} << 30);
  const uint64_t device_sized = top_at(uint64_t{64} << 30);
  EXPECT_EQ(device_sized, small) << "the top at 64 GiB against 2 GiB, for a live peak of "
                                 << seq.live_peak << " bytes";
  EXPECT_GE(small, seq.live_peak);
}

// A step plan engaging gives back what the learning steps committed (issue 31 part 2): an
// arena that never resets (zarena.torch's; trim_keep_bytes 0) grew to a larger first step,
// and once the plan engages only the zone and the live blocks stay committed, rounded up
// to the chunk. The planned steps' blocks are written whole (uncommitted host memory is
// PROT_NONE, so a block in decommitted space kills the test), a step that deviates
// commits again for what the dynamic engine serves, which stays when the plan is taken up
// again in its zone and goes back when a new layout claims its zone.
TEST_F(Expandable, PlanEngagingGivesBackWhatLearningCommitted) {
  constexpr uint64_t kBlock = 512 * kKiB;
  constexpr int kPerStep = 8;  // 4 MiB live at the step's peak
  Arena g(expandable(64 * kMiB, ZARENA_OVERFLOW_REFUSE));
  void* params = nullptr;  // lives through every step, below them
  ASSERT_EQ(zarena_alloc(g, 2 * kMiB, &params), ZARENA_OK) << zarena_last_error();
  std::memset(params, 0x11, 2 * kMiB);
  // A first step larger than the rest (a warm-up, a first batch): 24 MiB committed.
  ASSERT_EQ(zarena_step_begin(g), ZARENA_OK);
  std::vector<void*> big;
  for (int i = 0; i < 24; ++i) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(g, 1 * kMiB, &p), ZARENA_OK) << zarena_last_error();
    std::memset(p, 0x22, 1 * kMiB);
    big.push_back(p);
  }
  for (void* p : big) ASSERT_EQ(zarena_free(g, p), ZARENA_OK);
  ASSERT_GE(stats_of(g).committed_bytes, 26 * kMiB);
  // extra_mib: a deviation, which the dynamic engine serves above the zone.
  auto step = [&](uint64_t extra_mib, unsigned char v, int count = 0) {  // 0: kPerStep
    written_step(g, count != 0 ? count : kPerStep, kBlock, extra_mib * kMiB, v);
  };
  uint64_t steps_to_engage = 0;
  while (stats_of(g).plan_zone_bytes == 0 && steps_to_engage < 8) {
    ASSERT_NO_FATAL_FAILURE(step(0, 0x30));
    ++steps_to_engage;
  }
  ASSERT_EQ(zarena_step_begin(g), ZARENA_OK);  // a boundary: engaged by now
  zarena_stats s = stats_of(g);
  ASSERT_NE(s.plan_zone_bytes, 0u) << "the plan never engaged";
  const uint64_t need = 2 * kMiB + s.plan_zone_bytes;  // the live blocks and the zone
  EXPECT_LE(s.committed_bytes, in_chunks(need))
      << "what the learning steps committed above the zone went back";
  EXPECT_GE(s.committed_bytes, s.top_bytes);
  EXPECT_GE(s.trim_events, 1u);
  const uint64_t trims = s.trim_events;
  for (int k = 0; k < 4; ++k)
    ASSERT_NO_FATAL_FAILURE(step(0, static_cast<unsigned char>(0x40 + k)));
  s = stats_of(g);
  EXPECT_GE(s.plan_hits, 4u * kPerStep) << "the planned steps were served from the zone";
  EXPECT_EQ(s.trim_events, trims) << "a plan serving gives nothing back at each boundary";
  EXPECT_LE(s.committed_bytes, in_chunks(need));
  // A step that deviates: the dynamic engine commits again for its 8 MiB.
  ASSERT_NO_FATAL_FAILURE(step(8, 0x50));
  EXPECT_GE(stats_of(g).committed_bytes, need + 8 * kMiB);
  // Learned again, the plan is taken up again in its zone, and what the deviation committed
  // stays (a program that deviates now and then would commit and decommit each time).
  const uint64_t hits = stats_of(g).plan_hits;
  for (int k = 0; k < 6; ++k)
    ASSERT_NO_FATAL_FAILURE(step(0, static_cast<unsigned char>(0x60 + k)));
  s = stats_of(g);
  EXPECT_GT(s.plan_hits, hits) << "taken up again";
  EXPECT_EQ(s.trim_events, trims);
  EXPECT_GE(s.committed_bytes, need + 8 * kMiB);
  // Another step (6 blocks), laid out anew: its zone claimed now, the rest goes back.
  for (int k = 0; k < 6; ++k)
    ASSERT_NO_FATAL_FAILURE(step(0, static_cast<unsigned char>(0x70 + k), 6));
  s = stats_of(g);
  EXPECT_GT(s.trim_events, trims);
  EXPECT_EQ(s.plans_learned, 2u);
  EXPECT_LE(s.committed_bytes, in_chunks(2 * kMiB + s.plan_zone_bytes));
  EXPECT_TRUE(holds(params, 2 * kMiB, 0x11));
  EXPECT_EQ(s.commit_failures, 0u);
}

// The trims at engaging boundaries race another thread that writes its own live blocks,
// trims (zarena_trim) and reads stats the whole time: no live block is ever decommitted
// under it (a write there would kill the test: PROT_NONE), the committed end never falls
// below the top, and the planned steps keep their bytes. The main thread's step changes
// its shape every tenth step (5 or 6 blocks: a new layout, whose zone is claimed, and a
// trim) and deviates at the eighth of each ten (an extra 6 MiB allocation, which the
// plan taken up again keeps), so plans engage again and again.
TEST_F(Expandable, EngagingTrimsRaceWritesTrimsAndStats) {
  Arena g(expandable(64 * kMiB, ZARENA_OVERFLOW_REFUSE));
  ASSERT_EQ(zarena_step_begin(g), ZARENA_OK);
  void* big = nullptr;
  ASSERT_EQ(zarena_alloc(g, 24 * kMiB, &big), ZARENA_OK) << zarena_last_error();
  ASSERT_EQ(zarena_free(g, big), ZARENA_OK);
  std::vector<void*> theirs(6);  // the other thread's blocks, live throughout
  for (void*& p : theirs) {
    ASSERT_EQ(zarena_alloc(g, 1 * kMiB, &p), ZARENA_OK) << zarena_last_error();
  }
  std::atomic<bool> done{false};
  std::atomic<uint64_t> below_top{0}, rounds{0};
  std::thread other([&] {
    uint64_t k = 0;
    do {  // at least one round, however the threads are scheduled
      for (void* p : theirs) std::memset(p, static_cast<int>(k & 0xFF), 1 * kMiB);
      if (k % 4 == 0) (void)zarena_trim(g, 0);
      zarena_stats s;
      std::memset(&s, 0, sizeof s);
      s.struct_size = sizeof s;
      if (zarena_get_stats(g, &s) == ZARENA_OK && s.committed_bytes < s.top_bytes) {
        below_top.fetch_add(1, std::memory_order_relaxed);
      }
      rounds.fetch_add(1, std::memory_order_relaxed);
      ++k;
    } while (!done.load(std::memory_order_relaxed));
  });
  for (int step = 0; step < 40; ++step) {
    ASSERT_NO_FATAL_FAILURE(written_step(g, (step / 10) % 2 == 0 ? 6 : 5, 512 * kKiB,
                                         step % 10 == 7 ? 6 * kMiB : 0,
                                         static_cast<unsigned char>(step)));
  }
  done.store(true);
  other.join();
  const zarena_stats s = stats_of(g);
  EXPECT_EQ(below_top.load(), 0u) << "the committed end fell below the top";
  EXPECT_GT(rounds.load(), 0u);
  EXPECT_GT(s.plan_hits, 0u) << "plans served, or the test proves nothing";
  EXPECT_GE(s.plans_learned, 3u) << "zones claimed again and again";
  EXPECT_GE(s.trim_events, 1u);  // the first one's; the rest race the other thread's trims
  EXPECT_EQ(s.commit_failures, 0u);
}

// Not while a capture may run (a decommit waits for the stream): a plan engaging then
// gives nothing back; zarena_trim does once it ended.
TEST_F(Expandable, PlanEngagingDuringACaptureGivesNothingBack) {
  Arena g(expandable(64 * kMiB, ZARENA_OVERFLOW_REFUSE));
  ASSERT_EQ(zarena_step_begin(g), ZARENA_OK);
  void* big = nullptr;
  ASSERT_EQ(zarena_alloc(g, 24 * kMiB, &big), ZARENA_OK) << zarena_last_error();
  ASSERT_EQ(zarena_free(g, big), ZARENA_OK);
  ASSERT_EQ(zarena_set_capture_active(g, 1), ZARENA_OK);
  for (int k = 0; k < 6; ++k) {
    ASSERT_EQ(zarena_step_begin(g), ZARENA_OK);
    void* p = nullptr;
    void* q = nullptr;
    ASSERT_EQ(zarena_alloc(g, 512 * kKiB, &p), ZARENA_OK) << zarena_last_error();
    ASSERT_EQ(zarena_alloc(g, 512 * kKiB, &q), ZARENA_OK) << zarena_last_error();
    ASSERT_EQ(zarena_free(g, p), ZARENA_OK);
    ASSERT_EQ(zarena_free(g, q), ZARENA_OK);
  }
  zarena_stats s = stats_of(g);
  ASSERT_NE(s.plan_zone_bytes, 0u) << "the plan engaged";
  EXPECT_EQ(s.trim_events, 0u);
  EXPECT_GE(s.committed_bytes, 24 * kMiB);
  ASSERT_EQ(zarena_set_capture_active(g, 0), ZARENA_OK);
  ASSERT_EQ(zarena_trim(g, 0), ZARENA_OK) << zarena_last_error();
  s = stats_of(g);
  EXPECT_EQ(s.trim_events, 1u);
  EXPECT_LE(s.committed_bytes, in_chunks(s.top_bytes));
}

TEST_F(Expandable, CommitFailureSendsTheRequestToOverflowAndSaysWhy) {
  Arena g(expandable(64 * kMiB, ZARENA_OVERFLOW_SYNC));
  void* first = nullptr;
  ASSERT_EQ(zarena_alloc(g, 512 * kKiB, &first), ZARENA_OK);
  const uint64_t committed = stats_of(g).committed_bytes;
  ASSERT_EQ(committed, kChunk);
  // The device is out of memory from now on: every commit fails.
  g.faults().arm(FaultSite::kCommit, 1, zarena_core::Status::kOk, FaultInjectingBackend::kAlways);
  zarena_block b;
  ASSERT_EQ(zarena_alloc_ex(g, 2 * kMiB, 0, &b), ZARENA_OK) << zarena_last_error();
  EXPECT_TRUE(b.flags & ZARENA_BLOCK_OVERFLOW) << "the overflow route serves it";
  EXPECT_FALSE(zarena_contains(g, b.ptr));
  std::memset(b.ptr, 1, 2 * kMiB);
  zarena_stats s = stats_of(g);
  EXPECT_EQ(s.committed_bytes, committed) << "nothing committed";
  EXPECT_GE(s.commit_failures, 1u);
  EXPECT_EQ(s.overflow_allocs, 1u);

  const auto failed = log_.of("arena.commit_failed");
  ASSERT_GE(failed.size(), 1u);
  EXPECT_NE(failed[0].str("reason").find("injected fault: commit"), std::string::npos)
      << failed[0].str("reason");
  EXPECT_EQ(failed[0].u("committed_bytes"), committed);
  const auto over = log_.of("arena.first_overflow");
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].str("verdict"), "commit_failed")
      << "the device is full, not the arena: " << over[0].message;
  EXPECT_NE(over[0].str("verdict"), "working_set_full");
  EXPECT_EQ(over[0].str("path"), "sync");
  EXPECT_NE(over[0].message.find("injected fault"), std::string::npos) << over[0].message;

  // The small remainder of the committed chunk still serves small requests.
  void* small = nullptr;
  ASSERT_EQ(zarena_alloc(g, 256 * kKiB, &small), ZARENA_OK);
  EXPECT_TRUE(zarena_contains(g, small));
  // Memory is back: the next request grows the region again.
  g.faults().arm(FaultSite::kCommit, 0);
  ASSERT_EQ(zarena_alloc_ex(g, 2 * kMiB, 0, &b), ZARENA_OK);
  EXPECT_FALSE(b.flags & ZARENA_BLOCK_OVERFLOW);
  EXPECT_TRUE(zarena_contains(g, b.ptr));
  std::memset(b.ptr, 2, 2 * kMiB);
  EXPECT_GT(stats_of(g).committed_bytes, committed);
}

TEST_F(Expandable, CommitFailureWithOverflowRefusedIsOutOfMemoryWithTheVerdict) {
  Arena g(expandable(64 * kMiB, ZARENA_OVERFLOW_REFUSE));
  g.faults().arm(FaultSite::kCommit, 1, zarena_core::Status::kOk, FaultInjectingBackend::kAlways);
  void* p = reinterpret_cast<void*>(1);
  EXPECT_EQ(zarena_alloc(g, 4 * kKiB, &p), ZARENA_E_OUT_OF_MEMORY);
  EXPECT_EQ(p, nullptr);
  const auto over = log_.of("arena.first_overflow");
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].str("verdict"), "commit_failed");
  EXPECT_EQ(over[0].str("path"), "refused");
  EXPECT_EQ(stats_of(g).committed_bytes, 0u);
}

// A full, committed expandable arena is diagnosed like a fixed one: no commit failed.
TEST_F(Expandable, FullAtItsMaximumIsNotACommitFailure) {
  Arena g(expandable(4 * kMiB, ZARENA_OVERFLOW_SYNC));
  void* p = nullptr;
  ASSERT_EQ(zarena_alloc(g, 3 * kMiB, &p), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(g, 2 * kMiB, &p), ZARENA_OK);  // overflow
  const auto over = log_.of("arena.first_overflow");
  ASSERT_EQ(over.size(), 1u);
  EXPECT_NE(over[0].str("verdict"), "commit_failed");
  EXPECT_EQ(log_.of("arena.commit_failed").size(), 0u);
}

// Runs fn on its own thread; fails the test (without hanging it) when fn has not returned
// long after it could have: fn must not wait for what the test still holds.
void runs_while_held(const char* what, const std::function<void()>& fn,
                     const std::function<void()>& release) {
  std::packaged_task<void()> task(fn);
  std::future<void> done = task.get_future();
  std::thread t(std::move(task));
  // Generous: only a thread that waits for the held call takes this long.
  if (done.wait_for(std::chrono::seconds(120)) != std::future_status::ready) {
    ADD_FAILURE() << what << " waited for the commit or decommit in progress";
  }
  release();
  t.join();
}

void fill(void* p, uint64_t n, unsigned char v) { std::memset(p, v, n); }

// A reset trims; its decommit is held in the backend. Meanwhile an allocation below the
// trim point is served at once (into committed memory), and one that needs the space
// above it is served only after the decommit finished, into memory committed again.
TEST_F(Expandable, ADecommitInProgressHoldsUpOnlyTheAllocationsThatNeedItsSpace) {
  Arena g(expandable(64 * kMiB, ZARENA_OVERFLOW_REFUSE, 4 * kMiB));
  for (int i = 0; i < 16; ++i) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(g, 1 * kMiB, &p), ZARENA_OK);
    fill(p, 1 * kMiB, 0x11);
  }
  ASSERT_GE(stats_of(g).committed_bytes, 16 * kMiB);
  g.faults().hold(FaultSite::kDecommit);
  std::thread resetter([&] { EXPECT_EQ(zarena_reset(g), ZARENA_OK); });
  g.faults().wait_held(FaultSite::kDecommit);

  std::atomic<bool> released{false};
  std::thread needs_space;
  runs_while_held(
      "an allocation below the trim point",
      [&] {
        for (int i = 0; i < 3; ++i) {
          void* p = nullptr;
          ASSERT_EQ(zarena_alloc(g, 1 * kMiB, &p), ZARENA_OK) << zarena_last_error();
          fill(p, 1 * kMiB, 0x22);  // committed: faults otherwise
        }
        // Above the trim point: waits for the decommit (checked below), then commits.
        needs_space = std::thread([&] {
          void* p = nullptr;
          ASSERT_EQ(zarena_alloc(g, 8 * kMiB, &p), ZARENA_OK) << zarena_last_error();
          EXPECT_TRUE(released.load()) << "served above the trim point during its decommit";
          fill(p, 8 * kMiB, 0x33);
        });
        // Most runs, the allocation is waiting by the time the decommit is released; the
        // check above holds either way.
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      },
      [&] {
        released.store(true);
        g.faults().release(FaultSite::kDecommit);
      });
  resetter.join();
  needs_space.join();
  const zarena_stats s = stats_of(g);
  EXPECT_EQ(s.trim_events, 1u);
  EXPECT_GE(s.committed_bytes, s.top_bytes);
  EXPECT_EQ(g.a->arena->check_invariants(), "");
}

// A commit is held in the backend. Meanwhile an allocation that fits below the committed
// end is served at once; the one that asked for the commit is served when it completes.
TEST_F(Expandable, ACommitInProgressHoldsUpOnlyTheAllocationsThatNeedIt) {
  Arena g(expandable(64 * kMiB, ZARENA_OVERFLOW_REFUSE));
  g.faults().arm(FaultSite::kCommit, 0);
  void* p = nullptr;
  ASSERT_EQ(zarena_alloc(g, 3 * kMiB, &p), ZARENA_OK);  // commits the first 3 chunks
  ASSERT_EQ(zarena_reset(g), ZARENA_OK);                // the top is 0 again; no trim
  const uint64_t committed = stats_of(g).committed_bytes;
  ASSERT_EQ(committed, 3 * kMiB);

  g.faults().hold(FaultSite::kCommit);
  std::atomic<bool> released{false};
  std::thread grower([&] {
    void* q = nullptr;
    ASSERT_EQ(zarena_alloc(g, 16 * kMiB, &q), ZARENA_OK) << zarena_last_error();
    EXPECT_TRUE(released.load()) << "served before its commit completed";
    fill(q, 16 * kMiB, 0x44);
  });
  g.faults().wait_held(FaultSite::kCommit);
  runs_while_held(
      "an allocation below the committed end",
      [&] {
        for (int i = 0; i < 2; ++i) {
          void* q = nullptr;
          ASSERT_EQ(zarena_alloc(g, 1 * kMiB, &q), ZARENA_OK) << zarena_last_error();
          fill(q, 1 * kMiB, 0x55);
          EXPECT_EQ(zarena_free(g, q), ZARENA_OK);
        }
        EXPECT_EQ(stats_of(g).committed_bytes, committed) << "no commit was needed";
      },
      [&] {
        released.store(true);
        g.faults().release(FaultSite::kCommit);
      });
  grower.join();
  const zarena_stats s = stats_of(g);
  EXPECT_GE(s.committed_bytes, 16 * kMiB);
  EXPECT_GE(s.committed_bytes, s.top_bytes);
  EXPECT_EQ(g.a->arena->check_invariants(), "");
}

// Many threads grow the region at once (small chunks: many commits race), and resets trim
// it between rounds: every block is written end to end as soon as it is handed out, so a
// block in uncommitted memory kills the test; the top never passes the committed end.
TEST_F(Expandable, ConcurrentGrowthAndTrimsNeverHandOutUncommittedMemory) {
  zarena_config c = expandable(48 * kMiB, ZARENA_OVERFLOW_REFUSE, 2 * kMiB);
  c.commit_chunk_bytes = 64 * kKiB;
  Arena g(c);
  constexpr int kThreads = 4;
  for (int round = 0; round < 6; ++round) {
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t) {
      ts.emplace_back([&, t] {
        uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(t + 1 + 8 * round);
        std::vector<void*> live;
        for (int i = 0; i < 200; ++i) {
          x ^= x >> 12;
          x ^= x << 25;
          x ^= x >> 27;
          const uint64_t size = 4 * kKiB * (1 + (x * 0x2545F4914F6CDD1Dull >> 58));  // <= 256 KiB
          void* p = nullptr;
          const zarena_status st = zarena_alloc(g, size, &p);
          if (st != ZARENA_OK) break;  // full: this thread's round is over
          fill(p, size, static_cast<unsigned char>(t));
          live.push_back(p);
          if (live.size() > 16) {
            EXPECT_EQ(zarena_free(g, live.front()), ZARENA_OK);
            live.erase(live.begin());
          }
        }
        for (void* p : live) EXPECT_EQ(zarena_free(g, p), ZARENA_OK);
      });
    }
    for (auto& t : ts) t.join();
    const zarena_stats s = stats_of(g);
    EXPECT_GE(s.committed_bytes, s.top_bytes) << "round " << round;
    EXPECT_EQ(g.a->arena->check_invariants(), "") << "round " << round;
    ASSERT_EQ(zarena_reset(g), ZARENA_OK);
  }
  EXPECT_GE(stats_of(g).trim_events, 1u);
  EXPECT_GT(stats_of(g).commit_events, 6u);
}

}  // namespace
