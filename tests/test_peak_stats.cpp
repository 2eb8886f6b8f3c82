// Peaks and their reset (zarena_reset_peak_stats): used_peak_bytes follows the highest
// used_bytes exactly on one thread, across resets and floors; a peak reset restarts
// high_water_bytes, overflow_peak_bytes and used_peak_bytes from the state at that
// instant and leaves the epoch figures alone; with many threads the peak stays between
// every used_bytes ever observed and the high water. pinned_peak_bytes follows the highest
// pinned_bytes (region and overflow) exactly, on one thread and with many.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "support.h"
#include "zarena/zarena.h"

namespace {

using zarena_test::kKiB;
using zarena_test::kMiB;

struct Arena {
  zarena* a = nullptr;
  explicit Arena(uint64_t capacity, int32_t policy = ZARENA_OVERFLOW_REFUSE) {
    zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_OFF);
    zarena_config c;
    zarena_config_init(&c);
    c.backend = ZARENA_BACKEND_HOST;
    c.capacity_bytes = capacity;
    c.overflow_policy = policy;
    c.overflow_limit_bytes = ZARENA_OVERFLOW_UNLIMITED;
    EXPECT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  }
  ~Arena() {
    EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
    zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_INFO);
  }
  zarena_stats stats() const { return zarena_test::stats_of(a); }
  void* alloc(uint64_t n) {
    void* p = nullptr;
    EXPECT_EQ(zarena_alloc(a, n, &p), ZARENA_OK) << zarena_last_error();
    return p;
  }
};

uint64_t aligned(uint64_t n) { return (n + 255) & ~uint64_t{255}; }

// A random single-threaded run against a model of the live bytes: the peak is exact at
// every step, through frees, resets (which keep the peak) and a floor.
TEST(PeakStats, ExactOnOneThreadAgainstAModel) {
  Arena t(64 * kMiB);
  std::mt19937_64 rng(42);
  struct Live {
    void* p;
    uint64_t bytes;
  };
  std::vector<Live> live;
  uint64_t model = 0, peak = 0, floor_bytes = 0;
  for (int i = 0; i < 3; ++i) {  // weights below a boundary: survive the resets
    const uint64_t n = 64 * kKiB;
    t.alloc(n);
    floor_bytes += aligned(n);
  }
  model = peak = floor_bytes;
  ASSERT_EQ(zarena_mark_step_boundary(t.a), ZARENA_OK);
  for (int step = 0; step < 2000; ++step) {
    const int what = static_cast<int>(rng() % 100);
    if (what < 55 || live.empty()) {
      const uint64_t n = 1 + rng() % (96 * kKiB);
      live.push_back({t.alloc(n), aligned(n)});
      model += aligned(n);
    } else if (what < 97) {
      const size_t k = rng() % live.size();
      ASSERT_EQ(zarena_free(t.a, live[k].p), ZARENA_OK);
      model -= live[k].bytes;
      live[k] = live.back();
      live.pop_back();
    } else {
      ASSERT_EQ(zarena_reset(t.a), ZARENA_OK);
      live.clear();
      model = floor_bytes;
    }
    peak = std::max(peak, model);
    const zarena_stats s = t.stats();
    ASSERT_EQ(s.used_bytes, model) << "step " << step;
    ASSERT_EQ(s.used_peak_bytes, peak) << "step " << step;
    ASSERT_LE(s.used_peak_bytes, s.high_water_bytes);
  }
  EXPECT_GT(t.stats().resets, 10u) << "the run did cross resets";
}

TEST(PeakStats, ResetRestartsThePeaksFromNow) {
  Arena t(4 * kMiB, ZARENA_OVERFLOW_SYNC);
  void* big = t.alloc(3 * kMiB);
  void* o1 = t.alloc(2 * kMiB);     // overflow
  void* o2 = t.alloc(1536 * kKiB);  // overflow
  void* small = t.alloc(100 * kKiB);
  ASSERT_EQ(zarena_free(t.a, big), ZARENA_OK);
  ASSERT_EQ(zarena_free(t.a, o1), ZARENA_OK);
  zarena_stats s = t.stats();
  ASSERT_GE(s.high_water_bytes, 3 * kMiB);
  EXPECT_EQ(s.used_peak_bytes, 3 * kMiB + aligned(100 * kKiB));
  EXPECT_EQ(s.overflow_allocs, 2u);
  EXPECT_EQ(s.overflow_peak_bytes, 3584 * kKiB);
  const uint64_t epoch_hw = s.epoch_high_water_bytes;
  const uint64_t epoch_max = s.epoch_max_alloc_bytes;

  ASSERT_EQ(zarena_reset_peak_stats(t.a), ZARENA_OK);
  s = t.stats();
  EXPECT_EQ(s.used_peak_bytes, s.used_bytes);
  EXPECT_EQ(s.used_bytes, aligned(100 * kKiB));
  EXPECT_EQ(s.high_water_bytes, s.top_bytes);
  EXPECT_EQ(s.overflow_peak_bytes, s.overflow_live_bytes);
  EXPECT_EQ(s.overflow_live_bytes, 1536 * kKiB);
  EXPECT_EQ(s.epoch_high_water_bytes, epoch_hw) << "epoch figures are left alone";
  EXPECT_EQ(s.epoch_max_alloc_bytes, epoch_max);

  // They rise again from there.
  void* p = t.alloc(512 * kKiB);
  s = t.stats();
  EXPECT_EQ(s.used_peak_bytes, aligned(100 * kKiB) + 512 * kKiB);
  EXPECT_GE(s.high_water_bytes, s.top_bytes);
  ASSERT_EQ(zarena_free(t.a, p), ZARENA_OK);
  ASSERT_EQ(zarena_free(t.a, small), ZARENA_OK);
  ASSERT_EQ(zarena_free(t.a, o2), ZARENA_OK);
  s = t.stats();
  EXPECT_EQ(s.used_peak_bytes, aligned(100 * kKiB) + 512 * kKiB) << "a peak does not fall";
  EXPECT_EQ(s.overflow_peak_bytes, 1536 * kKiB);

  // Across an epoch reset the peak window goes on.
  ASSERT_EQ(zarena_reset(t.a), ZARENA_OK);
  s = t.stats();
  EXPECT_EQ(s.used_peak_bytes, aligned(100 * kKiB) + 512 * kKiB);
  ASSERT_EQ(zarena_reset_peak_stats(t.a), ZARENA_OK);
  s = t.stats();
  EXPECT_EQ(s.used_peak_bytes, 0u);
  EXPECT_EQ(s.overflow_peak_bytes, 0u);
  EXPECT_EQ(s.high_water_bytes, s.top_bytes);
}

// One step's peak, the use the header describes: a peak reset before the step, a
// snapshot after it.
TEST(PeakStats, PerStepPeak) {
  Arena t(64 * kMiB);
  for (uint64_t step = 1; step <= 4; ++step) {
    ASSERT_EQ(zarena_reset_peak_stats(t.a), ZARENA_OK);
    std::vector<void*> blocks;
    for (uint64_t i = 0; i < step; ++i) blocks.push_back(t.alloc(1 * kMiB));
    for (void* p : blocks) ASSERT_EQ(zarena_free(t.a, p), ZARENA_OK);
    (void)t.alloc(256 * kKiB);
    ASSERT_EQ(zarena_reset(t.a), ZARENA_OK);
    EXPECT_EQ(t.stats().used_peak_bytes, step * kMiB) << "step " << step;
  }
}

// Many threads: the peak is kept per slot without a shared counter, so it may read high,
// but never below any used_bytes a snapshot saw, and never above the high water.
TEST(PeakStats, ManyThreadsBoundedByWhatWasSeenAndTheHighWater) {
  Arena t(256 * kMiB);
  constexpr int kThreads = 4;
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < kThreads; ++w) {
    workers.emplace_back([&, w] {
      std::mt19937_64 rng(w);
      std::vector<void*> mine;
      for (int i = 0; i < 20000; ++i) {
        if (mine.size() < 64 && rng() % 3 != 0) {
          void* p = nullptr;
          if (zarena_alloc(t.a, 1 + rng() % (64 * kKiB), &p) == ZARENA_OK) mine.push_back(p);
        } else if (!mine.empty()) {
          EXPECT_EQ(zarena_free(t.a, mine.back()), ZARENA_OK);
          mine.pop_back();
        }
      }
      for (void* p : mine) EXPECT_EQ(zarena_free(t.a, p), ZARENA_OK);
    });
  }
  uint64_t seen = 0;
  std::thread observer([&] {
    while (!stop.load()) {
      const zarena_stats s = t.stats();
      seen = std::max(seen, s.used_bytes);
      EXPECT_GE(s.used_peak_bytes, seen);
      EXPECT_LE(s.used_peak_bytes, s.high_water_bytes);
      EXPECT_GE(s.used_peak_bytes, s.used_bytes);
    }
  });
  for (auto& th : workers) th.join();
  stop = true;
  observer.join();
  zarena_stats s = t.stats();
  EXPECT_EQ(s.used_bytes, 0u);
  EXPECT_GE(s.used_peak_bytes, seen);
  EXPECT_LE(s.used_peak_bytes, s.high_water_bytes);
  ASSERT_EQ(zarena_reset_peak_stats(t.a), ZARENA_OK);
  s = t.stats();
  EXPECT_EQ(s.used_peak_bytes, 0u);
}

// pinned_peak_bytes against a model: random allocations (region and, past the capacity,
// overflow), pins, unpins, frees of pinned blocks (deferred to the last unpin), resets
// (which keep pinned blocks) and peak resets. pinned_bytes and its peak are exact at
// every step.
TEST(PeakStats, PinnedPeakAgainstAModel) {
  Arena t(4 * kMiB, ZARENA_OVERFLOW_SYNC);
  std::mt19937_64 rng(7);
  struct Block {
    void* p;
    uint64_t bytes;
    uint32_t pins;
    bool freed;  // freed while pinned: goes at its last unpin
  };
  std::vector<Block> live;
  uint64_t pinned = 0, peak = 0, overflowed = 0;
  auto drop = [&](size_t k) {
    live[k] = live.back();
    live.pop_back();
  };
  for (int step = 0; step < 4000; ++step) {
    const int what = static_cast<int>(rng() % 100);
    if (what < 30 || live.empty()) {
      zarena_block b;
      ASSERT_EQ(zarena_alloc_ex(t.a, 1 + rng() % (256 * kKiB), 0, &b), ZARENA_OK)
          << zarena_last_error();
      if (b.flags & ZARENA_BLOCK_OVERFLOW) ++overflowed;
      live.push_back({b.ptr, b.size, 0, false});
    } else if (what < 55) {
      Block& b = live[rng() % live.size()];
      if (b.freed) continue;
      ASSERT_EQ(zarena_pin(t.a, b.p), ZARENA_OK) << zarena_last_error();
      if (b.pins++ == 0) pinned += b.bytes;
    } else if (what < 80) {
      const size_t k = rng() % live.size();
      Block& b = live[k];
      if (b.pins == 0) continue;
      ASSERT_EQ(zarena_unpin(t.a, b.p), ZARENA_OK) << zarena_last_error();
      if (--b.pins == 0) {
        pinned -= b.bytes;
        if (b.freed) drop(k);
      }
    } else if (what < 95) {
      const size_t k = rng() % live.size();
      if (live[k].freed) continue;
      ASSERT_EQ(zarena_free(t.a, live[k].p), ZARENA_OK) << zarena_last_error();
      if (live[k].pins > 0) {
        live[k].freed = true;
      } else {
        drop(k);
      }
    } else if (what < 98) {
      ASSERT_EQ(zarena_reset(t.a), ZARENA_OK);
      for (size_t k = live.size(); k-- > 0;) {
        if (live[k].pins == 0) drop(k);
      }
    } else {
      ASSERT_EQ(zarena_reset_peak_stats(t.a), ZARENA_OK);
      peak = pinned;
    }
    peak = std::max(peak, pinned);
    const zarena_stats s = t.stats();
    ASSERT_EQ(s.pinned_bytes, pinned) << "step " << step;
    ASSERT_EQ(s.pinned_peak_bytes, peak) << "step " << step;
  }
  EXPECT_GT(overflowed, 0u) << "the run did pin overflow blocks too";
  EXPECT_GT(t.stats().resets, 10u);
}

// Failed pins and unpins change neither figure.
TEST(PeakStats, PinnedPeakIgnoresFailedPins) {
  Arena t(4 * kMiB);
  void* p = t.alloc(1000);
  int local = 0;
  EXPECT_NE(zarena_unpin(t.a, p), ZARENA_OK);
  EXPECT_NE(zarena_pin(t.a, &local), ZARENA_OK);
  ASSERT_EQ(zarena_free(t.a, p), ZARENA_OK);
  EXPECT_NE(zarena_pin(t.a, p), ZARENA_OK);
  const zarena_stats s = t.stats();
  EXPECT_EQ(s.pinned_bytes, 0u);
  EXPECT_EQ(s.pinned_peak_bytes, 0u);
}

// Many threads pin and unpin their own blocks: the peak is never below a pinned_bytes a
// snapshot saw, never above every block pinned at once, and the tally comes back to zero
// (a peak reset with nothing pinned reads 0).
TEST(PeakStats, PinnedPeakWithManyThreads) {
  Arena t(2 * kMiB, ZARENA_OVERFLOW_SYNC);
  constexpr int kThreads = 4, kBlocks = 16;
  std::vector<std::vector<void*>> blocks(kThreads);
  uint64_t all = 0;
  for (int w = 0; w < kThreads; ++w) {
    for (int i = 0; i < kBlocks; ++i) {
      const uint64_t n = (w + 1) * kKiB + i * 256;
      blocks[w].push_back(t.alloc(n));
      all += aligned(n);
    }
  }
  void* over = t.alloc(4 * kMiB);  // an overflow block, pinned by this thread meanwhile
  all += 4 * kMiB;
  std::vector<std::thread> workers;
  for (int w = 0; w < kThreads; ++w) {
    workers.emplace_back([&, w] {
      std::mt19937_64 rng(w);
      std::vector<int> pins(kBlocks, 0);
      for (int i = 0; i < 5000; ++i) {
        const int k = static_cast<int>(rng() % kBlocks);
        if (pins[k] < 3 && rng() % 2 == 0) {
          EXPECT_EQ(zarena_pin(t.a, blocks[w][k]), ZARENA_OK);
          ++pins[k];
        } else if (pins[k] > 0) {
          EXPECT_EQ(zarena_unpin(t.a, blocks[w][k]), ZARENA_OK);
          --pins[k];
        }
      }
      for (int k = 0; k < kBlocks; ++k) {
        for (; pins[k] > 0; --pins[k]) EXPECT_EQ(zarena_unpin(t.a, blocks[w][k]), ZARENA_OK);
      }
    });
  }
  uint64_t seen = 0;
  for (int i = 0; i < 200; ++i) {
    ASSERT_EQ(zarena_pin(t.a, over), ZARENA_OK);
    const zarena_stats s = t.stats();
    seen = std::max(seen, s.pinned_bytes);
    EXPECT_GE(s.pinned_peak_bytes, seen);
    EXPECT_LE(s.pinned_peak_bytes, all);
    ASSERT_EQ(zarena_unpin(t.a, over), ZARENA_OK);
  }
  for (auto& th : workers) th.join();
  zarena_stats s = t.stats();
  EXPECT_EQ(s.pinned_bytes, 0u);
  EXPECT_GE(s.pinned_peak_bytes, seen);
  EXPECT_GE(s.pinned_peak_bytes, 4 * kMiB);
  ASSERT_EQ(zarena_reset_peak_stats(t.a), ZARENA_OK);
  EXPECT_EQ(t.stats().pinned_peak_bytes, 0u) << "the tally came back to zero";
}

}  // namespace
