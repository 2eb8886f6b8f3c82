#include "base/spin_lock.h"

#include <sched.h>

namespace zarena_core {

void SpinLock::lock_slow() noexcept {
  for (uint32_t spins = 0;; ++spins) {
    if (!held_.load(std::memory_order_relaxed) &&
        !held_.exchange(true, std::memory_order_acquire)) {
      return;
    }
    if (spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#elif defined(__aarch64__)
      asm volatile("yield");
#endif
    } else {
      sched_yield();
    }
  }
}

}  // namespace zarena_core
