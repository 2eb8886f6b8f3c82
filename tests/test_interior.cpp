// Interior pointers: a pointer inside a live block, region or overflow, is not a block the
// caller can free. zarena.h promises ZARENA_E_NOT_OWNED for it, and nothing changes but the
// invalid_frees counter; a pin of it pins that block (a view), and nothing else. The hard cases are
// the addresses where an older block once started (an earlier epoch's, one freed and merged into a
// neighbour, an overflow block whose memory the backend handed out again inside a larger one):
// their records said "stale" or "double free". A random workload (allocations of many sizes, frees,
// resets, step boundaries, overflow) probes many interior offsets of every kind of block.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "support.h"
#include "zarena/zarena.h"

namespace {

using zarena_test::kKiB;
using zarena_test::kMiB;
using zarena_test::stats_of;

struct Live {
  char* p;
  uint64_t size;   // aligned
  uint64_t epoch;  // handed out in
  bool overflow;
  bool persistent;  // kept by a step boundary
};

TEST(Interior, PointersInsideLiveBlocksAreNotOwned) {
  zarena_test::LogCapture quiet(ZARENA_LOG_OFF);
  zarena_config c;
  zarena_config_init(&c);
  c.backend = ZARENA_BACKEND_HOST;
  c.capacity_bytes = 4 * kMiB;
  c.alignment = 256;
  c.overflow_policy = ZARENA_OVERFLOW_SYNC;
  c.overflow_limit_bytes = ZARENA_OVERFLOW_UNLIMITED;
  c.name = "interior";
  zarena_test::ArenaHolder a(c);
  std::mt19937_64 rng(20261202);
  std::vector<Live> live;
  uint64_t probes = 0, region_probes = 0, overflow_probes = 0;
  const int steps = 6000 / zarena_test::kSanitizerSlowdown;
  for (int step = 0; step < steps; ++step) {
    const uint64_t op = rng() % 100;
    if (op < 55 || live.empty()) {
      // Mostly small and medium blocks, some large ones that overflow when the region is
      // full (and coalesce into big free spans when freed).
      const uint64_t r = rng() % 100;
      const uint64_t size = r < 70   ? 256 + rng() % (16 * kKiB)
                            : r < 95 ? 16 * kKiB + rng() % (256 * kKiB)
                                     : kMiB + rng() % (3 * kMiB);
      zarena_block b;
      ASSERT_EQ(zarena_alloc_ex(a, size, 0, &b), ZARENA_OK) << zarena_last_error();
      live.push_back(Live{static_cast<char*>(b.ptr), b.size, b.epoch,
                          (b.flags & ZARENA_BLOCK_OVERFLOW) != 0, false});
    } else if (op < 90) {
      const size_t i = rng() % live.size();
      ASSERT_EQ(zarena_free(a, live[i].p), ZARENA_OK) << zarena_last_error();
      live[i] = live.back();
      live.pop_back();
    } else if (op < 95) {
      ASSERT_EQ(zarena_reset(a), ZARENA_OK);
      std::vector<Live> kept;
      for (const Live& l : live) {
        if (l.persistent) kept.push_back(l);
      }
      live.swap(kept);
    } else if (op < 97) {
      ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
      for (Live& l : live) l.persistent = true;
    }
    // Probe a few live blocks at a few interior offsets each.
    const uint64_t epoch = zarena_epoch(a);
    for (int k = 0; k < 4 && !live.empty(); ++k) {
      const Live& l = live[rng() % live.size()];
      if (l.size < 2) continue;
      for (int j = 0; j < 4; ++j) {
        // Granule-aligned offsets mostly (where records start), some arbitrary ones.
        uint64_t off = 1 + rng() % (l.size - 1);
        if (j < 3) off = std::max<uint64_t>(256, off / 256 * 256);
        if (off >= l.size) continue;
        char* q = l.p + off;
        const zarena_stats before = stats_of(a);
        ASSERT_EQ(zarena_free(a, q), ZARENA_E_NOT_OWNED)
            << (l.overflow ? "overflow" : "region") << " block of " << l.size << " bytes at +"
            << off << ", step " << step << ": " << zarena_last_error();
        ASSERT_EQ(zarena_free_at(a, q, epoch), ZARENA_E_NOT_OWNED)
            << "free_at, current epoch, +" << off << ": " << zarena_last_error();
        // A pin of an inner address pins the block (engines pin views), and only it.
        ASSERT_EQ(zarena_pin(a, q), ZARENA_OK) << "pin +" << off << ": " << zarena_last_error();
        const zarena_stats pinned = stats_of(a);
        ASSERT_EQ(pinned.pinned_blocks, before.pinned_blocks + 1) << "pin +" << off;
        ASSERT_EQ(pinned.pinned_bytes, before.pinned_bytes + l.size) << "pin +" << off;
        ASSERT_EQ(zarena_unpin(a, q), ZARENA_OK) << "unpin +" << off;
        const zarena_stats after = stats_of(a);
        ASSERT_EQ(after.pinned_blocks, before.pinned_blocks);
        ASSERT_EQ(after.invalid_frees, before.invalid_frees + 2);
        ASSERT_EQ(after.stale_frees, before.stale_frees);
        ASSERT_EQ(after.used_bytes, before.used_bytes);
        ASSERT_EQ(after.live_allocs, before.live_allocs);
        ++probes;
        ++(l.overflow ? overflow_probes : region_probes);
      }
    }
  }
  // The workload reached what it claims to.
  EXPECT_GT(region_probes, 1000u / zarena_test::kSanitizerSlowdown);
  EXPECT_GT(overflow_probes, 100u / zarena_test::kSanitizerSlowdown);
  const zarena_stats s = stats_of(a);
  EXPECT_GT(s.resets, 10u / zarena_test::kSanitizerSlowdown);
  EXPECT_GT(s.reuses, 0u);
  for (const Live& l : live) EXPECT_EQ(zarena_free(a, l.p), ZARENA_OK);
}

}  // namespace
