// The concurrency model through the C API: allocating, freeing (own, cross-thread and
// epoch-checked), pinning, stats and live-block threads against a thread that resets the
// arena all the time, with overflow in play (a small region, SYNC overflow, an explicit
// cap) and poison on. Run under TSan too (scripts/test.sh).
//
// The contract under test (zarena.h THREADS, EPOCH-CHECKED FREES, PINS): the caller keeps
// every block it still uses from being reclaimed; the arena guarantees that a block
// allocated after the epoch it belongs to became visible is never reclaimed by the reset
// that opened it, that no block is handed out twice, and that pinned and below-floor
// blocks survive every reset untouched.
//
// How the test honours its side without hiding the race: allocations, epoch-checked frees,
// unpins and every stats call run with no coordination at all, racing the resets. Only
// touching a block's memory (writing or checking its stamp) and plain frees happen under a
// test-level shared lock that the resetter takes exclusively around zarena_reset, and only
// for blocks of the epoch current then (so they are live by contract). Pinned blocks and
// the blocks below the floor are checked with no lock at all, while resets run.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "support.h"
#include "zarena/zarena.h"

namespace {

constexpr uint64_t kCapacity = 96 * 1024;  // a few blocks per thread: overflow is certain
constexpr uint64_t kOverflowLimit = 2 * 1024 * 1024;
constexpr uint64_t kMaxBlock = 6 * 1024;
constexpr int kWorkers = 3;
constexpr int kItersPerWorker = 12000 / zarena_test::kSanitizerSlowdown;
constexpr uint64_t kMinResets = 25;

struct Held {
  char* ptr;
  uint64_t size;
  uint64_t epoch;
  uint64_t stamp;  // written over the whole block, 8 bytes at a time
  bool pinned;
};

void write_stamp(const Held& h) {
  for (uint64_t i = 0; i + 8 <= h.size; i += 8) std::memcpy(h.ptr + i, &h.stamp, 8);
}
bool stamp_intact(const Held& h) {
  for (uint64_t i = 0; i + 8 <= h.size; i += 8) {
    uint64_t v;
    std::memcpy(&v, h.ptr + i, 8);
    if (v != h.stamp) return false;
  }
  return true;
}

// Everything the threads report; any nonzero violation fails the test with its story.
struct Tally {
  std::atomic<uint64_t> allocs{0}, overflow_allocs{0}, oom{0}, checked_live{0};
  std::atomic<uint64_t> frees_ok{0}, frees_stale{0}, cross_frees{0}, pins{0};
  std::atomic<uint64_t> resets{0}, stats_reads{0}, walks{0}, pinned_checks{0};
  std::atomic<uint64_t> violations{0};
  std::mutex mu;
  std::vector<std::string> stories;
  void violation(std::string s) {
    ++violations;
    std::lock_guard<std::mutex> lock(mu);
    if (stories.size() < 20) stories.push_back(std::move(s));
  }
};

// Blocks handed from one worker to another (freed there, epoch-checked).
class Mailbox {
 public:
  void put(const Held& h) {
    std::lock_guard<std::mutex> lock(mu_);
    q_.push_back(h);
  }
  bool take(Held* out) {
    std::lock_guard<std::mutex> lock(mu_);
    if (q_.empty()) return false;
    *out = q_.front();
    q_.pop_front();
    return true;
  }
  std::deque<Held> drain() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(q_);
  }

 private:
  std::mutex mu_;
  std::deque<Held> q_;
};

class ArenaThreads : public ::testing::Test {
 protected:
  void SetUp() override {
    zarena_config c;
    zarena_config_init(&c);
    c.backend = ZARENA_BACKEND_HOST;
    c.capacity_bytes = kCapacity;
    c.alignment = 256;
    c.overflow_policy = ZARENA_OVERFLOW_SYNC;
    c.overflow_limit_bytes = kOverflowLimit;
    c.flags = ZARENA_FLAG_POISON;
    c.name = "arena-threads";
    ASSERT_EQ(zarena_create(&c, &a_), ZARENA_OK) << zarena_last_error();
  }
  void TearDown() override { EXPECT_EQ(zarena_destroy(a_), ZARENA_OK) << zarena_last_error(); }

  zarena* a_ = nullptr;
  zarena_test::LogCapture quiet_{ZARENA_LOG_OFF};
};

// An epoch-checked free that may race a reset: OK, or STALE once the epoch has moved past
// the block's (never NOT_OWNED or DOUBLE_FREE: the block was ours).
void free_racing(zarena* a, const Held& h, Tally& t, const char* who) {
  const zarena_status s = zarena_free_at(a, h.ptr, h.epoch);
  const uint64_t now = zarena_epoch(a);
  if (s == ZARENA_OK) {
    ++t.frees_ok;
  } else if (s == ZARENA_E_STALE && now > h.epoch) {
    ++t.frees_stale;
  } else {
    t.violation(std::string(who) + ": free_at(epoch " + std::to_string(h.epoch) + ") -> " +
                zarena_status_string(s) + " in epoch " + std::to_string(now) + ": " +
                zarena_last_error());
  }
}

TEST_F(ArenaThreads, ResetsRacingEveryCallKeepTheEpochContract) {
  zarena* const a = a_;
  // Weights: below the floor, checked by the stats thread while everything else runs.
  std::vector<Held> weights;
  for (uint64_t i = 0; i < 4; ++i) {
    zarena_block b;
    ASSERT_EQ(zarena_alloc_ex(a, 1024 * (i + 1), 0, &b), ZARENA_OK) << zarena_last_error();
    weights.push_back({static_cast<char*>(b.ptr), b.size, b.epoch, 0xC0FFEE00u + i, false});
    write_stamp(weights.back());
  }
  ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
  uint32_t tag = 0;
  ASSERT_EQ(zarena_tag_register("arena-threads", &tag), ZARENA_OK);

  std::shared_mutex gate;  // shared: touching memory of current blocks; exclusive: reset
  std::atomic<int> running{kWorkers};
  Tally t;
  Mailbox mailbox;

  std::thread resetter([&] {
    std::mt19937_64 rng(7);
    while (running.load() > 0) {
      {
        std::unique_lock<std::shared_mutex> lock(gate);
        if (zarena_reset(a) != ZARENA_OK) t.violation("reset failed");
      }
      ++t.resets;
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
    }
  });

  std::thread observer([&] {
    // Until the workers are done, and at least a few walks in any case (a loaded machine
    // may give this thread little time while they run).
    while (running.load() > 0 || t.walks.load() < 4) {
      zarena_stats s;
      std::memset(&s, 0, sizeof s);
      s.struct_size = sizeof s;
      if (zarena_get_stats(a, &s) != ZARENA_OK) {
        t.violation("stats failed");
        continue;
      }
      ++t.stats_reads;
      if (s.used_bytes > s.capacity_bytes || s.top_bytes > s.capacity_bytes ||
          s.floor_bytes > s.top_bytes || s.overflow_live_bytes > kOverflowLimit ||
          s.epoch != s.resets || s.pinned_blocks > s.live_allocs ||
          s.used_bytes + s.free_list_bytes > s.top_bytes) {
        t.violation("inconsistent stats snapshot: used " + std::to_string(s.used_bytes) + " free " +
                    std::to_string(s.free_list_bytes) + " top " + std::to_string(s.top_bytes) +
                    " floor " + std::to_string(s.floor_bytes) + " epoch " +
                    std::to_string(s.epoch) + " resets " + std::to_string(s.resets));
      }
      zarena_region r;
      r.struct_size = sizeof r;
      if (zarena_region_info(a, &r) != ZARENA_OK || r.floor_bytes > r.top_bytes ||
          r.top_bytes > r.capacity_bytes) {
        t.violation("inconsistent region info");
      }
      for (const Held& w : weights) {
        ++t.pinned_checks;
        if (!stamp_intact(w)) t.violation("a block below the floor was overwritten");
      }
      if (t.stats_reads % 16 == 1) {
        // One snapshot: region blocks in address order must not overlap, and no block is
        // from an epoch that has not begun.
        struct Walk {
          const char* last_end = nullptr;
          uint64_t epoch_bound;
          bool overlap = false, future = false;
          uint64_t n = 0;
        } w{nullptr, zarena_epoch(a) + 1};
        const zarena_status ws = zarena_for_each_live_block(
            a,
            [](void* u, const zarena_live_block* b) {
              auto* w = static_cast<Walk*>(u);
              ++w->n;
              if (b->epoch > w->epoch_bound + 1000000) w->future = true;
              if ((b->flags & ZARENA_LIVE_OVERFLOW) == 0) {
                const char* p = static_cast<const char*>(b->ptr);
                if (w->last_end != nullptr && p < w->last_end) w->overlap = true;
                w->last_end = p + b->size;
              }
              return 0;
            },
            &w);
        ++t.walks;
        if (ws != ZARENA_OK || w.overlap || w.future) {
          t.violation(std::string("live-block walk: ") + zarena_status_string(ws) +
                      (w.overlap ? ", overlapping region blocks" : "") +
                      (w.future ? ", a block from the future" : ""));
        }
      }
      std::this_thread::yield();
    }
  });

  std::vector<std::thread> workers;
  for (int id = 0; id < kWorkers; ++id) {
    workers.emplace_back([&, id] {
      std::mt19937_64 rng(1000 + id);
      std::vector<Held> mine;  // blocks of this thread (maybe reclaimed since: see epoch)
      uint64_t serial = 0;
      const std::string who = "worker " + std::to_string(id);
      // At least kItersPerWorker operations, and on until the resetter has had its turns
      // (a loaded machine may starve it while the workers run).
      for (int i = 0; i < kItersPerWorker || t.resets.load() < kMinResets; ++i) {
        const unsigned op = rng() % 16;
        if (op < 7 || mine.empty()) {
          // Allocate, racing the resets; the block's epoch is at least the one seen before.
          const uint64_t seen = zarena_epoch(a);
          zarena_block b;
          const uint64_t size = 8 + rng() % kMaxBlock;
          const zarena_status s = zarena_alloc_ex(a, size, (rng() & 1) ? tag : 0, &b);
          if (s == ZARENA_E_OUT_OF_MEMORY) {
            ++t.oom;  // the overflow cap: legitimate under this load
            continue;
          }
          if (s != ZARENA_OK) {
            t.violation(who + ": alloc -> " + zarena_status_string(s) + ": " + zarena_last_error());
            continue;
          }
          ++t.allocs;
          if (b.flags & ZARENA_BLOCK_OVERFLOW) ++t.overflow_allocs;
          if (b.epoch < seen) {
            t.violation(who + ": block of epoch " + std::to_string(b.epoch) +
                        " handed out after epoch " + std::to_string(seen) + " was visible");
          }
          Held h{static_cast<char*>(b.ptr), b.size, b.epoch,
                 (uint64_t{static_cast<uint32_t>(id) + 1} << 48) | ++serial, false};
          {
            std::shared_lock<std::shared_mutex> lock(gate);
            if (zarena_epoch(a) != h.epoch) {
              // A reset ran since: the block may be gone; it must not be touched. Its
              // epoch-checked free must say stale.
              free_racing(a, h, t, who.c_str());
              continue;
            }
            // Live by contract: the reset that opened its epoch cannot have taken it.
            const zarena_status ps = zarena_pin(a, h.ptr);
            if (ps != ZARENA_OK) {
              t.violation(who + ": block of the current epoch " + std::to_string(h.epoch) +
                          " is not live: pin -> " + zarena_status_string(ps) + ": " +
                          zarena_last_error());
              continue;
            }
            write_stamp(h);
            ++t.checked_live;
            if (rng() % 8 == 0) {
              h.pinned = true;  // keeps it across resets; checked with no lock later
              ++t.pins;
            } else if (zarena_unpin(a, h.ptr) != ZARENA_OK) {
              t.violation(who + ": unpin of a block just pinned: " + zarena_last_error());
            }
          }
          mine.push_back(h);
        } else if (op < 10) {
          // Free one of mine under the gate when it is current (stamp checked first), or
          // epoch-checked with no gate at all.
          const size_t k = rng() % mine.size();
          const Held h = mine[k];
          mine[k] = mine.back();
          mine.pop_back();
          if (h.pinned) {
            if (!stamp_intact(h)) t.violation(who + ": a pinned block was overwritten");
            // Free while pinned (deferred), then the last unpin frees it.
            if (zarena_free_at(a, h.ptr, h.epoch) != ZARENA_OK)
              t.violation(who + ": free of a pinned block: " + zarena_last_error());
            if (zarena_unpin(a, h.ptr) != ZARENA_OK)
              t.violation(who + ": last unpin: " + zarena_last_error());
            ++t.frees_ok;
            continue;
          }
          if (op == 7) {
            free_racing(a, h, t, who.c_str());
            continue;
          }
          std::shared_lock<std::shared_mutex> lock(gate);
          if (zarena_epoch(a) != h.epoch) {
            free_racing(a, h, t, who.c_str());
            continue;
          }
          if (!stamp_intact(h)) {
            t.violation(who + ": block of epoch " + std::to_string(h.epoch) +
                        " was overwritten (handed out twice, or poisoned while live)");
          }
          const zarena_status s =
              (op == 8) ? zarena_free(a, h.ptr) : zarena_free_at(a, h.ptr, h.epoch);
          if (s != ZARENA_OK) {
            t.violation(who + ": free of a live block of the current epoch -> " +
                        zarena_status_string(s) + ": " + zarena_last_error());
          } else {
            ++t.frees_ok;
          }
        } else if (op < 12) {
          // Hand a block to another thread, which frees it epoch-checked.
          const size_t k = rng() % mine.size();
          if (!mine[k].pinned) {
            mailbox.put(mine[k]);
            mine[k] = mine.back();
            mine.pop_back();
          }
        } else if (op < 14) {
          Held h;
          if (mailbox.take(&h)) {
            if (rng() & 1) {
              free_racing(a, h, t, who.c_str());
            } else {
              zarena_free_item item{h.ptr, h.epoch};
              zarena_status st = ZARENA_OK;
              const zarena_status s = zarena_free_batch(a, &item, 1, &st);
              const uint64_t now = zarena_epoch(a);
              if (s != st || !(s == ZARENA_OK || (s == ZARENA_E_STALE && now > h.epoch))) {
                t.violation(who + ": free_batch -> " + zarena_status_string(s));
              }
            }
            ++t.cross_frees;
          }
        } else {
          // Check every pinned block of mine, with resets running: they must be intact.
          for (const Held& h : mine) {
            if (h.pinned && !stamp_intact(h)) {
              t.violation(who + ": a pinned block was overwritten by a reset");
            }
          }
          // Blocks of past epochs are forgotten (their epoch-checked free says stale).
          const uint64_t now = zarena_epoch(a);
          for (size_t k = 0; k < mine.size();) {
            if (!mine[k].pinned && mine[k].epoch + 2 < now) {
              free_racing(a, mine[k], t, who.c_str());
              mine[k] = mine.back();
              mine.pop_back();
            } else {
              ++k;
            }
          }
        }
      }
      for (const Held& h : mine) {
        if (h.pinned) {
          if (!stamp_intact(h)) t.violation(who + ": a pinned block was overwritten");
          if (zarena_unpin(a, h.ptr) != ZARENA_OK) t.violation(who + ": final unpin");
        }
        free_racing(a, h, t, who.c_str());
      }
      --running;
    });
  }
  for (auto& w : workers) w.join();
  resetter.join();
  observer.join();
  for (const Held& h : mailbox.drain()) free_racing(a, h, t, "main");

  for (const std::string& s : t.stories) ADD_FAILURE() << s;
  EXPECT_EQ(t.violations.load(), 0u);
  // The race really happened, in every direction the test looks at.
  EXPECT_GE(t.resets.load(), kMinResets);
  EXPECT_GT(t.overflow_allocs.load(), 0u) << "overflow was never in play";
  EXPECT_GT(t.checked_live.load(), 100u);
  EXPECT_GT(t.frees_stale.load(), 0u) << "no free ever raced a reset";
  EXPECT_GT(t.frees_ok.load(), 100u);
  EXPECT_GT(t.pins.load(), 0u);
  EXPECT_GT(t.cross_frees.load(), 0u);
  EXPECT_GT(t.walks.load(), 0u);
  for (const Held& w : weights) EXPECT_TRUE(stamp_intact(w));

  // Quiet now: after one more reset only the weights are live, and nothing overflowed.
  ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  const zarena_stats s = zarena_test::stats_of(a);
  EXPECT_EQ(s.live_allocs, weights.size());
  EXPECT_EQ(s.overflow_live_bytes, 0u);
  EXPECT_EQ(s.pinned_blocks, 0u);
  EXPECT_EQ(s.deferred_frees, 0u);
  EXPECT_EQ(s.invalid_frees, 0u) << "no free named a block that was not the caller's";
  std::printf(
      "[ info ] %llu allocs (%llu overflow, %llu refused by the cap), %llu resets, "
      "%llu checked live, %llu frees ok, %llu stale, %llu cross-thread, %llu pins, "
      "%llu stats reads, %llu walks\n",
      static_cast<unsigned long long>(t.allocs.load()),
      static_cast<unsigned long long>(t.overflow_allocs.load()),
      static_cast<unsigned long long>(t.oom.load()),
      static_cast<unsigned long long>(t.resets.load()),
      static_cast<unsigned long long>(t.checked_live.load()),
      static_cast<unsigned long long>(t.frees_ok.load()),
      static_cast<unsigned long long>(t.frees_stale.load()),
      static_cast<unsigned long long>(t.cross_frees.load()),
      static_cast<unsigned long long>(t.pins.load()),
      static_cast<unsigned long long>(t.stats_reads.load()),
      static_cast<unsigned long long>(t.walks.load()));
}

}  // namespace

namespace {

// A stats snapshot is one instant: the epoch and the reset count move together (they did
// not: the count was bumped after the reset released its locks, so a reader in between saw
// epoch = resets + 1).
TEST_F(ArenaThreads, StatsSeeEpochAndResetsMoveTogether) {
  zarena* const a = a_;
  constexpr int kResets = 60000 / zarena_test::kSanitizerSlowdown;
  std::atomic<bool> done{false};
  std::atomic<uint64_t> reads{0}, torn{0};
  std::thread reader([&] {
    while (!done.load()) {
      zarena_stats s;
      s.struct_size = sizeof s;
      if (zarena_get_stats(a, &s) == ZARENA_OK && s.epoch != s.resets) ++torn;
      ++reads;
    }
  });
  // At least kResets resets, and on until the reader has taken its snapshots.
  for (int i = 0; i < kResets || reads.load() < 2000; ++i) ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  done = true;
  reader.join();
  EXPECT_EQ(torn.load(), 0u) << "of " << reads.load() << " snapshots";
}

}  // namespace
