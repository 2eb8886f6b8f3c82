// The model the plan suites check the arena against (test_arena_plans.cpp, test_lanes.cpp):
// every block the arena handed out and has not given back. Every block handed out must lie
// in the region and overlap none of them, and keeps the bytes written into it (support.h's
// write_ends/ends_hold) until it is freed or reclaimed; stats are checked against it at
// quiet points. (Before this header test_lanes.cpp had a reduced copy of it, without the
// frees of pinned blocks, the persistent blocks and the count of planned blocks.)
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "support.h"
#include "zarena/zarena.h"

namespace zarena_test {

// Thread-safe; every check fails the test.
class BlockModel {
 public:
  struct Block {
    uint64_t size, epoch;
    uint32_t pins = 0;
    bool freed = false;  // freed while pinned: occupied until its last unpin
    bool persistent = false;
    uint8_t pattern = 0;
  };
  explicit BlockModel(zarena* a) : a_(a), region_(region_of(a)) {}

  // A block just handed out: in the region, over no other, its bytes written.
  void handed_out(const zarena_block& b, const std::string& where) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(b.ptr);
    const uintptr_t base = reinterpret_cast<uintptr_t>(region_.base);
    std::lock_guard<std::mutex> g(mu_);
    ASSERT_TRUE(p >= base && p + b.size <= base + region_.capacity_bytes)
        << where << ": block outside the region";
    auto next = blocks_.lower_bound(p);
    if (next != blocks_.end()) {
      ASSERT_GE(next->first, p + b.size)
          << where << ": overlaps a held block at +" << (next->first - base) << " (planned "
          << ((b.flags & ZARENA_BLOCK_PLANNED) != 0) << ")";
    }
    if (next != blocks_.begin()) {
      auto prev = std::prev(next);
      ASSERT_LE(prev->first + prev->second.size, p)
          << where << ": overlaps a held block at +" << (prev->first - base) << " (planned "
          << ((b.flags & ZARENA_BLOCK_PLANNED) != 0) << ")";
    }
    Block blk{b.size, b.epoch};
    blk.pattern = static_cast<uint8_t>(++counter_ | 1);
    write(p, blk);
    blocks_[p] = blk;
    if (b.flags & ZARENA_BLOCK_PLANNED) ++planned_;
  }

  // Before the free call (after it, another thread may be handed the space).
  // Returns the block's epoch; false when the model does not hold it as live.
  // pinned: says whether the block is pinned (then it stays occupied until its last unpin);
  // nullptr: the caller frees no pinned block, and a pinned one is false too.
  bool take_for_free(uintptr_t p, uint64_t* epoch, bool* pinned = nullptr) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = blocks_.find(p);
    if (it == blocks_.end() || it->second.freed) return false;
    if (pinned == nullptr && it->second.pins > 0) return false;
    check(p, it->second);
    *epoch = it->second.epoch;
    if (pinned != nullptr) *pinned = it->second.pins > 0;
    if (it->second.pins > 0) {
      it->second.freed = true;
    } else {
      blocks_.erase(it);
    }
    return true;
  }
  bool holds(uintptr_t p) {
    std::lock_guard<std::mutex> g(mu_);
    return blocks_.count(p) != 0;
  }
  bool pin(uintptr_t p) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = blocks_.find(p);
    if (it == blocks_.end() || it->second.freed) return false;
    ++it->second.pins;
    return true;
  }
  // Before the unpin call: the last unpin of a freed block gives its space back.
  void unpin(uintptr_t p) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = blocks_.find(p);
    ASSERT_NE(it, blocks_.end());
    ASSERT_GT(it->second.pins, 0u);
    if (--it->second.pins == 0 && it->second.freed) {
      check(p, it->second);
      blocks_.erase(it);
    }
  }
  // A reset: what is neither pinned nor persistent is gone (checked first).
  void reset() {
    std::lock_guard<std::mutex> g(mu_);
    for (auto it = blocks_.begin(); it != blocks_.end();) {
      check(it->first, it->second);
      if (it->second.pins == 0 && !it->second.persistent) {
        it = blocks_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // The floor was raised to the top: every block held now survives resets.
  void floor_to_top() {
    std::lock_guard<std::mutex> g(mu_);
    for (auto& [p, b] : blocks_) {
      if (!b.freed) b.persistent = true;
    }
  }
  void check_all() {
    std::lock_guard<std::mutex> g(mu_);
    for (auto& [p, b] : blocks_) check(p, b);
  }
  // Stats agree with the model (no thread may be calling).
  void check_stats(const std::string& where) {
    std::lock_guard<std::mutex> g(mu_);
    uint64_t bytes = 0, count = 0;
    for (auto& [p, b] : blocks_) {
      bytes += b.size;
      ++count;
    }
    const zarena_stats s = stats_of(a_);
    EXPECT_EQ(s.live_allocs, count) << where;
    EXPECT_EQ(s.used_bytes, bytes) << where;
  }
  uint64_t planned() const { return planned_.load(); }
  std::vector<uintptr_t> live_unpinned() {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<uintptr_t> out;
    for (auto& [p, b] : blocks_) {
      if (!b.freed && b.pins == 0) out.push_back(p);
    }
    return out;
  }

 private:
  static void write(uintptr_t p, const Block& b) { write_ends(p, b.size, b.pattern); }
  static void check(uintptr_t p, const Block& b) { ASSERT_TRUE(ends_hold(p, b.size, b.pattern)); }

  zarena* a_;
  zarena_region region_;
  std::mutex mu_;
  std::map<uintptr_t, Block> blocks_;
  uint32_t counter_ = 0;
  std::atomic<uint64_t> planned_{0};
};

}  // namespace zarena_test
