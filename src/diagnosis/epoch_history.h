// What the arena remembers of the epochs before the current one, for the diagnoses that
// compare epochs: "reset_stopped" (an epoch far beyond the ones before it, made of their
// step repeated because the loop no longer resets) and the capacity a workload needed.
// Plain data; the arena guards it with its diagnosis lock.
#pragma once

#include <cstddef>
#include <cstdint>

#include "diagnosis/cadence.h"

namespace zarena_core {

class EpochHistory {
 public:
  static constexpr size_t kEpochs = 8;  // the most recent ones are compared
  static constexpr int kOpeningLen = CadenceDetector::kAnchorLen;

  struct Epoch {
    uint64_t allocs = 0;                 // allocation requests served or refused in it
    uint64_t peak_bytes = 0;             // its highest top above the floor
    uint64_t opening[kOpeningLen] = {};  // its first request sizes (aligned)
    int opening_len = 0;
  };

  // An epoch that ended. Epoch 0 is not kept: it holds the program's set-up.
  void add(const Epoch& e);
  size_t size() const { return count_; }
  uint64_t epochs_seen() const { return seen_; }  // added since create (not only kept)
  uint64_t max_peak() const;
  uint64_t max_allocs() const;
  // At least two epochs kept, and their allocation counts agree within 25 %: the loop
  // ran the same step in each.
  bool consistent() const;
  // The opening every kept epoch shared (at least two, and not one size repeated), or
  // nullptr: the steps open differently (shapes vary) or there is no history yet.
  const uint64_t* shared_opening() const;

 private:
  const Epoch& at(size_t i) const {
    return ring_[(head_ + kEpochs - 1 - i) % kEpochs];
  }  // 0 = newest

  Epoch ring_[kEpochs];
  size_t head_ = 0;  // next slot to write
  size_t count_ = 0;
  uint64_t seen_ = 0;
};

}  // namespace zarena_core
