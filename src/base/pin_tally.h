// The bytes in pinned blocks, region and overflow together, and their peak
// (zarena_stats.pinned_peak_bytes). Each block store adds or takes a block's bytes inside
// the lock that orders that block's pin transitions (0 -> 1 pins, and the last unpin), so
// the tally's history is one order of those transitions and its peak is exact.
#pragma once

#include <atomic>
#include <cstdint>

namespace zarena_core {

class PinTally {
 public:
  void add(uint64_t bytes) {
    const uint64_t now = now_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    uint64_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }
  void sub(uint64_t bytes) { now_.fetch_sub(bytes, std::memory_order_relaxed); }
  uint64_t peak() const { return peak_.load(std::memory_order_relaxed); }
  // With no pin transition in flight (the arena's writer lock held).
  void restart_peak() {
    peak_.store(now_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }

 private:
  std::atomic<uint64_t> now_{0};
  std::atomic<uint64_t> peak_{0};
};

}  // namespace zarena_core
