// Reset-cadence detector: notices a program running step after step without resetting,
// before the arena overflows. Training steps (and per-sample passes) issue the same
// sequence of request sizes again and again, so when the sequence that opened the epoch
// starts over while no reset has ever happened, a new step began without a reset.
// Repetition alone is not enough (a steady loop that frees everything it allocates is
// fine), so the warning also needs growth: the top must have risen across the repeats
// and the epoch must hold a noticeable share of the capacity. A stream of one constant
// size never counts as a repeated step. O(1) per allocation, no heap use.
#pragma once

#include <cstdint>

namespace zarena_core {

class CadenceDetector {
 public:
  static constexpr int kSignatureLen = 8;
  static constexpr uint64_t kMinShareDivisor = 64;  // epoch >= capacity/64
  static constexpr uint64_t kRepeatsToWarn = 2;

  explicit CadenceDetector(uint64_t capacity) : capacity_(capacity) {}

  // One allocation request of the current epoch; epoch_bytes = top - floor after it.
  // Returns true exactly once per epoch, when the warning should be emitted.
  bool on_alloc(uint64_t size, uint64_t epoch_bytes, uint64_t resets);
  void on_reset();

  uint64_t repeats() const { return repeats_; }
  uint64_t step_bytes() const { return last_repeat_bytes_; }

 private:
  uint64_t capacity_;
  uint64_t signature_[kSignatureLen] = {};
  int recorded_ = 0;
  bool varied_ = false;  // the signature holds at least two distinct sizes
  int match_ = 0;
  uint64_t repeats_ = 0;
  uint64_t growing_repeats_ = 0;
  uint64_t last_repeat_bytes_ = 0;
  bool warned_ = false;
};

}  // namespace zarena_core
