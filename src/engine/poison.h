// The arena's poison (ZARENA_FLAG_POISON, zarena_set_poison): whether freed and reclaimed
// memory is filled and with which word, what was filled or skipped (stats), and the state
// of the warning that a fill was skipped because a capture runs (once per capture). All
// atomics: any path reads them with no lock held. The fills themselves are the arena's
// (it owns the backend and knows whether a capture runs).
#pragma once

#include <atomic>
#include <cstdint>

#include "config/config_fields.h"

namespace zarena_core {

class Poison {
 public:
  Poison(bool on, uint32_t word) : on_(on), word_(word != 0 ? word : kDefaultPoisonWord) {}

  bool on() const { return on_.load(std::memory_order_relaxed); }
  uint32_t word() const { return word_.load(std::memory_order_relaxed); }
  // zarena_set_poison: word 0 is the default word.
  void set(bool on, uint32_t word) {
    word_.store(word != 0 ? word : kDefaultPoisonWord, std::memory_order_relaxed);
    on_.store(on, std::memory_order_relaxed);
  }

  // Stats: fills made (overflow blocks before they go back, planned blocks at their free
  // or reset) and fills skipped during a capture (the region counts its own).
  void count_overflow_fill() { overflow_fills_.fetch_add(1, std::memory_order_relaxed); }
  void count_plan_fills(uint64_t n) { plan_fills_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t overflow_fills() const { return overflow_fills_.load(std::memory_order_relaxed); }
  uint64_t plan_fills() const { return plan_fills_.load(std::memory_order_relaxed); }
  uint64_t skips() const { return skips_.load(std::memory_order_relaxed); }

  // A fill was skipped because a capture runs: n counted here (0: the region counted it),
  // and a warning queued (the arena emits it with no lock held).
  void note_skipped(uint64_t n) {
    if (n != 0) skips_.fetch_add(n, std::memory_order_relaxed);
    skip_queued_.store(true, std::memory_order_relaxed);
  }
  // Whether the queued warning is to be logged now: one was queued, and none was logged
  // for this capture yet (scope: capture_scope_generation(); a capture scope begun since
  // the last warning is another capture).
  bool take_skip_warning(uint64_t scope) {
    if (!skip_queued_.load(std::memory_order_relaxed) ||
        !skip_queued_.exchange(false, std::memory_order_relaxed)) {
      return false;
    }
    if (warned_scope_.exchange(scope, std::memory_order_relaxed) != scope) {
      skip_warned_.store(false, std::memory_order_relaxed);
    }
    return !skip_warned_.exchange(true, std::memory_order_relaxed);
  }
  // A capture ended: a skip in the next one warns again.
  void rearm_skip_warning() { skip_warned_.store(false, std::memory_order_relaxed); }

 private:
  std::atomic<bool> on_;
  std::atomic<uint32_t> word_;
  std::atomic<bool> skip_queued_{false};     // a fill was skipped: warn (once per capture)
  std::atomic<bool> skip_warned_{false};     // once per capture (rearm_skip_warning re-arms)
  std::atomic<uint64_t> warned_scope_{0};    // capture_scope_generation() at that warning
  std::atomic<uint64_t> overflow_fills_{0};  // overflow blocks poisoned before going back
  std::atomic<uint64_t> plan_fills_{0};      // planned blocks poisoned at their free or reset
  std::atomic<uint64_t> skips_{0};           // fills the arena skipped during a capture
};

}  // namespace zarena_core
