#include "diagnosis/epoch_history.h"

#include <algorithm>

namespace zarena_core {

void EpochHistory::add(const Epoch& e) {
  ring_[head_] = e;
  head_ = (head_ + 1) % kEpochs;
  if (count_ < kEpochs) ++count_;
  ++seen_;
}

uint64_t EpochHistory::max_peak() const {
  uint64_t m = 0;
  for (size_t i = 0; i < count_; ++i) m = std::max(m, at(i).peak_bytes);
  return m;
}

uint64_t EpochHistory::max_allocs() const {
  uint64_t m = 0;
  for (size_t i = 0; i < count_; ++i) m = std::max(m, at(i).allocs);
  return m;
}

bool EpochHistory::consistent() const {
  if (count_ < 2) return false;
  uint64_t lo = ~0ull, hi = 0;
  for (size_t i = 0; i < count_; ++i) {
    lo = std::min(lo, at(i).allocs);
    hi = std::max(hi, at(i).allocs);
  }
  return lo > 0 && hi * 4 <= lo * 5;
}

const uint64_t* EpochHistory::shared_opening() const {
  if (count_ < 2) return nullptr;
  const Epoch& first = at(0);
  if (first.opening_len < kOpeningLen) return nullptr;
  bool varied = false;
  for (int k = 1; k < kOpeningLen; ++k) varied |= first.opening[k] != first.opening[0];
  if (!varied) return nullptr;
  for (size_t i = 1; i < count_; ++i) {
    const Epoch& e = at(i);
    if (e.opening_len < kOpeningLen) return nullptr;
    for (int k = 0; k < kOpeningLen; ++k) {
      if (e.opening[k] != first.opening[k]) return nullptr;
    }
  }
  return first.opening;
}

}  // namespace zarena_core
