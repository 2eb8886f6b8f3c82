// The region's central lock (spin_lock.h), which also advances a trace's order counter
// each time it is taken. Every block that passes from one slot to another passes through
// the central part under this lock (a slot gives blocks up to the central index, another
// takes them from there), so a trace whose keys read that counter orders the giving
// slot's events before the taking slot's (trace.h, docs/TRACE.md). Untraced: one
// predictable branch per acquisition, on the slow path only.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/spin_lock.h"

namespace zarena_core {

class CentralLock {
 public:
  void lock() noexcept {
    lock_.lock();
    if (order_ != nullptr) order_->fetch_add(1, std::memory_order_relaxed);
  }
  void unlock() noexcept { lock_.unlock(); }
  // Set while no thread uses the region (at creation, at destroy).
  void set_order_counter(std::atomic<uint64_t>* c) noexcept { order_ = c; }

 private:
  SpinLock lock_;
  std::atomic<uint64_t>* order_ = nullptr;
};

}  // namespace zarena_core
