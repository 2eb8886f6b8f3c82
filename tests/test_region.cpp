// Region allocator tests: layout invariants, reuse and coalescing, top roll-back, floor
// and epochs, free classification, and long random sequences checked against a model.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <vector>

#include "region.h"

using zarena_core::FreeOutcome;
using zarena_core::Region;

namespace {

constexpr uint64_t kG = 256;

uint64_t must_alloc(Region& r, uint64_t size, bool* reused = nullptr) {
  uint64_t off = ~0ull;
  bool re = false;
  EXPECT_TRUE(r.alloc(size, &off, &re)) << "alloc " << size;
  if (reused) *reused = re;
  return off;
}

FreeOutcome do_free(Region& r, uint64_t off) {
  uint64_t size = 0;
  return r.free(off, &size);
}

TEST(Region, BumpsAlignedAndContiguous) {
  Region r(1 << 20, kG);
  EXPECT_EQ(must_alloc(r, 256), 0u);
  EXPECT_EQ(must_alloc(r, 512), 256u);
  EXPECT_EQ(must_alloc(r, 256), 768u);
  EXPECT_EQ(r.top(), 1024u);
  EXPECT_EQ(r.live_bytes(), 1024u);
  EXPECT_EQ(r.live_count(), 3u);
  EXPECT_EQ(r.check_invariants(), "");
}

TEST(Region, ReusesFreedBlockAndSplitsIt) {
  Region r(1 << 20, kG);
  const uint64_t a = must_alloc(r, 4096);
  must_alloc(r, 256);  // keeps a from being the top block
  ASSERT_EQ(do_free(r, a), FreeOutcome::kOk);
  EXPECT_EQ(r.free_count(), 1u);
  EXPECT_EQ(r.free_bytes(), 4096u);
  bool reused = false;
  EXPECT_EQ(must_alloc(r, 1024, &reused), a);
  EXPECT_TRUE(reused);
  EXPECT_EQ(r.free_count(), 1u);
  EXPECT_EQ(r.free_bytes(), 3072u);
  EXPECT_EQ(must_alloc(r, 3072, &reused), a + 1024);
  EXPECT_TRUE(reused);
  EXPECT_EQ(r.free_count(), 0u);
  EXPECT_EQ(r.check_invariants(), "");
}

TEST(Region, CoalescesWithBothNeighbours) {
  Region r(1 << 20, kG);
  const uint64_t a = must_alloc(r, 256);
  const uint64_t b = must_alloc(r, 512);
  const uint64_t c = must_alloc(r, 768);
  must_alloc(r, 256);  // guard
  ASSERT_EQ(do_free(r, a), FreeOutcome::kOk);
  ASSERT_EQ(do_free(r, c), FreeOutcome::kOk);
  EXPECT_EQ(r.free_count(), 2u);
  ASSERT_EQ(do_free(r, b), FreeOutcome::kOk);
  EXPECT_EQ(r.free_count(), 1u);
  EXPECT_EQ(r.free_bytes(), 1536u);
  EXPECT_EQ(r.largest_free(), 1536u);
  EXPECT_EQ(must_alloc(r, 1536), a);  // the merged block serves a request none alone could
  EXPECT_EQ(r.check_invariants(), "");
}

TEST(Region, FreeingTopBlockRollsTopBackThroughFreeNeighbours) {
  Region r(1 << 20, kG);
  must_alloc(r, 256);
  const uint64_t b = must_alloc(r, 256);
  const uint64_t c = must_alloc(r, 256);
  ASSERT_EQ(do_free(r, b), FreeOutcome::kOk);
  EXPECT_EQ(r.top(), 768u);
  ASSERT_EQ(do_free(r, c), FreeOutcome::kOk);  // top block: c and the free b go back
  EXPECT_EQ(r.top(), 256u);
  EXPECT_EQ(r.free_count(), 0u);
  EXPECT_EQ(must_alloc(r, 256), 256u);
  EXPECT_EQ(r.check_invariants(), "");
}

TEST(Region, ResetRewindsToFloorAndStartsEpoch) {
  Region r(1 << 20, kG);
  const uint64_t w = must_alloc(r, 1024);  // "weights"
  r.mark_step_boundary();
  EXPECT_EQ(r.floor(), 1024u);
  for (int i = 0; i < 100; ++i) must_alloc(r, 256 * (1 + i % 7));
  const uint64_t x = must_alloc(r, 256);
  EXPECT_GT(r.top(), 1024u);
  const uint64_t epoch = r.epoch();
  r.reset([](uint64_t, uint64_t) {});
  EXPECT_EQ(r.epoch(), epoch + 1);
  EXPECT_EQ(r.top(), 1024u);
  EXPECT_EQ(r.floor(), 1024u);
  EXPECT_EQ(r.live_count(), 1u);
  EXPECT_EQ(r.live_bytes(), 1024u);
  EXPECT_EQ(r.free_count(), 0u);
  EXPECT_EQ(r.check_invariants(), "");
  // Blocks of the old epoch are stale; the weights survive and can still be freed.
  EXPECT_EQ(do_free(r, x), FreeOutcome::kStale);
  EXPECT_EQ(do_free(r, w), FreeOutcome::kOk);
  EXPECT_EQ(r.check_invariants(), "");
}

TEST(Region, ResetReportsReclaimedRanges) {
  Region r(1 << 20, kG);
  must_alloc(r, 512);
  r.mark_step_boundary();
  must_alloc(r, 256);
  must_alloc(r, 768);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  r.reset([&](uint64_t off, uint64_t n) { ranges.emplace_back(off, n); });
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0].first, 512u);
  EXPECT_EQ(ranges[0].second, 1024u);
}

TEST(Region, FreeErrorsChangeNothing) {
  Region r(1 << 20, kG);
  const uint64_t a = must_alloc(r, 1024);
  must_alloc(r, 256);
  const std::string before = r.check_invariants();
  const uint64_t live = r.live_bytes(), top = r.top(), nfree = r.free_count();
  EXPECT_EQ(do_free(r, a + 256), FreeOutcome::kNotOwned);  // interior
  EXPECT_EQ(do_free(r, 1 << 19), FreeOutcome::kNotOwned);  // never handed out
  EXPECT_EQ(r.live_bytes(), live);
  EXPECT_EQ(r.top(), top);
  EXPECT_EQ(r.free_count(), nfree);
  ASSERT_EQ(do_free(r, a), FreeOutcome::kOk);
  const uint64_t live2 = r.live_bytes(), nfree2 = r.free_count();
  EXPECT_EQ(do_free(r, a), FreeOutcome::kDoubleFree);
  EXPECT_EQ(r.live_bytes(), live2);
  EXPECT_EQ(r.free_count(), nfree2);
  EXPECT_EQ(before, "");
  EXPECT_EQ(r.check_invariants(), "");
}

TEST(Region, FullRegionFailsWithoutStateChange) {
  Region r(4096, kG);
  must_alloc(r, 4096);
  uint64_t off = 7;
  bool reused = false;
  EXPECT_FALSE(r.alloc(256, &off, &reused));
  EXPECT_EQ(off, 7u);
  EXPECT_EQ(r.live_count(), 1u);
}

TEST(Region, HolesBelowFloorAreBorrowedAndReturnedAtReset) {
  Region r(4096, kG);
  const uint64_t w1 = must_alloc(r, 1024);
  must_alloc(r, 1024);
  r.mark_step_boundary();
  ASSERT_EQ(do_free(r, w1), FreeOutcome::kOk);  // a hole below the floor
  must_alloc(r, 2048);                          // fills the space above the floor
  bool reused = false;
  const uint64_t borrowed = must_alloc(r, 512, &reused);  // only the hole can serve it
  EXPECT_TRUE(reused);
  EXPECT_LT(borrowed, r.floor());
  EXPECT_EQ(r.check_invariants(), "");
  r.reset([](uint64_t, uint64_t) {});
  EXPECT_EQ(r.check_invariants(), "");
  EXPECT_EQ(r.free_bytes(), 1024u);  // the whole hole is back, coalesced
  EXPECT_EQ(do_free(r, borrowed), FreeOutcome::kStale);
}

TEST(Region, FreeingTheLastWeightsLowersTheFloor) {
  Region r(1 << 20, kG);
  must_alloc(r, 1024);
  const uint64_t w2 = must_alloc(r, 1024);
  r.mark_step_boundary();
  EXPECT_EQ(r.floor(), 2048u);
  ASSERT_EQ(do_free(r, w2), FreeOutcome::kOk);
  EXPECT_EQ(r.floor(), 1024u);
  EXPECT_EQ(r.top(), 1024u);
  EXPECT_EQ(r.check_invariants(), "");
}

TEST(Region, MarkMovesEpochFreeBlocksBelowTheFloor) {
  Region r(1 << 20, kG);
  const uint64_t a = must_alloc(r, 1024);
  must_alloc(r, 256);
  ASSERT_EQ(do_free(r, a), FreeOutcome::kOk);
  r.mark_step_boundary();
  EXPECT_EQ(r.check_invariants(), "");
  r.reset([](uint64_t, uint64_t) {});
  EXPECT_EQ(r.free_bytes(), 1024u);  // the hole survived the reset, below the floor
  EXPECT_EQ(r.check_invariants(), "");
}

TEST(Region, ExactSizeReuseAcrossRepeatedSteps) {
  // A training step repeats its request sizes; after the first step frees everything
  // (but the top block) the next step should be served mostly from freed blocks.
  Region r(64 << 20, kG);
  const std::vector<uint64_t> sizes = {4096, 12288, 256, 65536, 1024, 8192, 512, 30720};
  std::vector<uint64_t> live;
  for (uint64_t s : sizes) live.push_back(must_alloc(r, s));
  const uint64_t keep = must_alloc(r, 256);
  for (uint64_t off : live) ASSERT_EQ(do_free(r, off), FreeOutcome::kOk);
  const uint64_t top = r.top();
  int reuses = 0;
  for (uint64_t s : sizes) {
    bool re = false;
    must_alloc(r, s, &re);
    reuses += re;
  }
  EXPECT_EQ(reuses, static_cast<int>(sizes.size()));
  EXPECT_EQ(r.top(), top);
  (void)keep;
  EXPECT_EQ(r.check_invariants(), "");
}

// Random alloc/free/reset/mark sequences against a reference model: no two live blocks
// overlap, every block is aligned and inside the region, frees of stale/freed pointers
// are never accepted, and the layout invariants hold throughout.
class RegionModel : public ::testing::TestWithParam<std::tuple<uint32_t, uint64_t>> {};

TEST_P(RegionModel, RandomSequencesMatchReference) {
  const uint64_t cap = std::get<1>(GetParam());
  Region r(cap, kG);
  std::mt19937_64 rng(std::get<0>(GetParam()));
  uint64_t failed_allocs = 0, below_floor_allocs = 0, resets = 0;
  struct LiveBlock {
    uint64_t size;
    bool persistent;
  };
  std::map<uint64_t, LiveBlock> live;  // offset -> block
  std::map<uint64_t, uint64_t> stale;  // offset -> epoch it was reclaimed into
  std::map<uint64_t, uint64_t> freed;  // offset -> epoch freed
  uint64_t live_bytes = 0;

  auto random_size = [&]() -> uint64_t {
    const int shift = static_cast<int>(rng() % 16);  // 1 B .. 64 KiB, skewed small
    return 1 + rng() % (uint64_t{1} << (shift + 1));
  };
  auto overlaps = [&](uint64_t off, uint64_t size) {
    auto it = live.upper_bound(off);
    if (it != live.end() && it->first < off + size) return true;
    if (it != live.begin()) {
      --it;
      if (it->first + it->second.size > off) return true;
    }
    return false;
  };

  for (int step = 0; step < 40000; ++step) {
    const uint64_t op = rng() % 1000;
    if (op < 560 || op >= 964) {
      const uint64_t size = (random_size() + kG - 1) / kG * kG;
      uint64_t off = 0;
      bool re = false;
      if (r.alloc(size, &off, &re)) {
        ASSERT_EQ(off % kG, 0u);
        ASSERT_LE(off + size, cap);
        ASSERT_FALSE(overlaps(off, size)) << "overlap at " << off << " step " << step;
        live[off] = {size, false};
        if (off < r.floor()) ++below_floor_allocs;
        live_bytes += size;
        stale.erase(off);
        freed.erase(off);
      } else {
        ASSERT_GT(size, cap - r.top()) << "failed although the bump space fits";
        ++failed_allocs;
      }
    } else if (op < 900 && !live.empty()) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      uint64_t size = 0;
      ASSERT_EQ(r.free(it->first, &size), FreeOutcome::kOk) << "step " << step;
      ASSERT_EQ(size, it->second.size);
      live_bytes -= size;
      freed[it->first] = r.epoch();
      live.erase(it);
    } else if (op >= 900 && op < 930 && !stale.empty()) {
      auto it = stale.begin();
      std::advance(it, static_cast<long>(rng() % stale.size()));
      if (live.count(it->first) == 0) {
        const FreeOutcome o = do_free(r, it->first);
        ASSERT_NE(o, FreeOutcome::kOk) << "stale pointer accepted at step " << step;
        if (it->second == r.epoch()) {  // reclaimed by the latest reset
          ASSERT_EQ(o, FreeOutcome::kStale) << "step " << step;
        }
      }
    } else if (op >= 930 && op < 960 && !freed.empty()) {
      auto it = freed.begin();
      std::advance(it, static_cast<long>(rng() % freed.size()));
      if (live.count(it->first) == 0) {
        const FreeOutcome o = do_free(r, it->first);
        ASSERT_NE(o, FreeOutcome::kOk) << "freed pointer accepted at step " << step;
        if (it->second == r.epoch()) {
          ASSERT_EQ(o, FreeOutcome::kDoubleFree) << "step " << step;
        }
      }
    } else if (op >= 960 && op < 963) {
      r.reset([](uint64_t, uint64_t) {});
      ++resets;
      for (auto it = live.begin(); it != live.end();) {
        if (!it->second.persistent) {
          live_bytes -= it->second.size;
          stale[it->first] = r.epoch();
          it = live.erase(it);
        } else {
          ++it;
        }
      }
    } else if (op == 963) {
      r.mark_step_boundary();
      for (auto& kv : live) kv.second.persistent = true;
    }
    ASSERT_EQ(r.live_bytes(), live_bytes) << "step " << step;
    ASSERT_EQ(r.live_count(), live.size()) << "step " << step;
    if (step % 500 == 0) {
      ASSERT_EQ(r.check_invariants(), "") << "step " << step;
    }
  }
  ASSERT_EQ(r.check_invariants(), "");
  // The sequence must have exercised what it claims to.
  EXPECT_GT(resets, 60u);
  if (cap <= (1u << 20)) {
    EXPECT_GT(failed_allocs, 0u) << "a small region should fill up";
  }
  RecordProperty("failed_allocs", static_cast<int>(failed_allocs));
  RecordProperty("below_floor_allocs", static_cast<int>(below_floor_allocs));
}

INSTANTIATE_TEST_SUITE_P(Seeds, RegionModel,
                         ::testing::Combine(::testing::Values(1u, 2u, 3u, 42u, 1234u),
                                            ::testing::Values(uint64_t{256} << 10,
                                                              uint64_t{1} << 20,
                                                              uint64_t{8} << 20)));

}  // namespace
