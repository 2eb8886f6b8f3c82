#include "cadence.h"

namespace zarena_core {

bool CadenceDetector::on_alloc(uint64_t size, uint64_t epoch_bytes, uint64_t resets) {
  if (recorded_ < kSignatureLen) {
    if (recorded_ > 0 && size != signature_[0]) varied_ = true;
    signature_[recorded_++] = size;
    return false;
  }
  if (!varied_) return false;
  if (size == signature_[match_]) {
    ++match_;
  } else {
    match_ = (size == signature_[0]) ? 1 : 0;
  }
  if (match_ < kSignatureLen) return false;
  match_ = 0;
  ++repeats_;
  if (epoch_bytes > last_repeat_bytes_) ++growing_repeats_;
  last_repeat_bytes_ = epoch_bytes;
  if (warned_ || resets != 0) return false;
  if (growing_repeats_ >= kRepeatsToWarn && epoch_bytes >= capacity_ / kMinShareDivisor) {
    warned_ = true;
    return true;
  }
  return false;
}

void CadenceDetector::on_reset() {
  recorded_ = 0;
  varied_ = false;
  match_ = 0;
  repeats_ = 0;
  growing_repeats_ = 0;
  last_repeat_bytes_ = 0;
  warned_ = false;
}

}  // namespace zarena_core
