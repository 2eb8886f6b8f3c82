#include "base/spin_lock.h"

#include <sched.h>

namespace zarena_core {

void spin_wait(uint32_t round) noexcept {
  if (round < 64) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  } else {
    sched_yield();
  }
}

void SpinLock::lock_slow() noexcept {
  for (uint32_t round = 0;; ++round) {
    if (!held_.load(std::memory_order_relaxed) &&
        !held_.exchange(true, std::memory_order_acquire)) {
      return;
    }
    spin_wait(round);
  }
}

}  // namespace zarena_core
