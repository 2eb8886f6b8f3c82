// Warnings the arena finds where it must not log: inside region hooks and under its
// locks (a poison fill that failed, a capture query that failed). They are queued here,
// one reason per kind (the first one since the last emission), and
// Arena::emit_queued_warnings emits them once the locks are released. Never allocates on
// the way in except to copy the reason; never throws.
#pragma once

#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/spin_lock.h"

namespace zarena_core {

class QueuedWarnings {
 public:
  enum Kind { kPoisonFailed = 0, kCaptureQueryFailed, kKindCount };

  // Keeps `why` unless a reason of that kind is already waiting.
  void add(Kind kind, const std::string& why) noexcept {
    std::lock_guard<SpinLock> lock(mu_);
    if (set_[kind]) return;
    try {
      why_[kind] = why;
    } catch (...) {
      why_[kind].clear();
    }
    set_[kind] = true;
    any_.store(true, std::memory_order_release);
  }
  // Cheap: one relaxed load (checked on the free fast path).
  bool any() const noexcept { return any_.load(std::memory_order_relaxed); }
  // Everything waiting, in kind order; empties the queue.
  std::vector<std::pair<Kind, std::string>> take() {
    std::vector<std::pair<Kind, std::string>> out;
    std::lock_guard<SpinLock> lock(mu_);
    for (int k = 0; k < kKindCount; ++k) {
      if (!set_[k]) continue;
      out.emplace_back(static_cast<Kind>(k), std::move(why_[k]));
      why_[k].clear();
      set_[k] = false;
    }
    any_.store(false, std::memory_order_relaxed);
    return out;
  }

 private:
  SpinLock mu_;
  std::array<std::string, kKindCount> why_{};
  std::array<bool, kKindCount> set_{};
  std::atomic<bool> any_{false};
};

}  // namespace zarena_core
