// The expandable arena (issue 15) at the arena level, host backend: growth through many
// commit chunks with pointers stable and data intact, the stats and the arena.config
// record, trim at reset (trim_keep_bytes) that keeps pins and the floor, and a commit
// failure (injected) that sends the request to overflow, logs arena.commit_failed with
// the reason, and is diagnosed as commit_failed, not working_set_full.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "../capi/handle.h"
#include "backend/backend_faults.h"
#include "support.h"
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

}  // namespace
