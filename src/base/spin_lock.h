// A test-and-test-and-set lock for the arena's per-slot and central locks: one atomic
// exchange to take it when it is free (the common case: each slot is used by one thread),
// a plain release store to give it back. Waiters spin briefly, then yield, so a holder
// that was preempted is not starved by spinners on a loaded machine.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/checks.h"

namespace zarena_core {

// One round of a waiter's backoff: a pause instruction for the first 64 rounds, then a
// yield (a holder that was preempted gets the core back). SpinLock and the step plan's
// shared lock word (plan_run.cpp) wait with it.
void spin_wait(uint32_t round) noexcept;

class SpinLock {
 public:
  void lock() noexcept {
    if (ZARENA_LIKELY(!held_.exchange(true, std::memory_order_acquire))) return;
    lock_slow();
  }
  bool try_lock() noexcept {
    return !held_.load(std::memory_order_relaxed) &&
           !held_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  void lock_slow() noexcept;
  std::atomic<bool> held_{false};
};

}  // namespace zarena_core
