#include "cadence.h"

namespace zarena_core {

void CadenceDetector::Anchor::start() {
  recorded = 0;
  match = 0;
  armed = true;
}

bool CadenceDetector::Anchor::record(uint64_t size) {
  sizes[recorded++] = size;
  if (recorded < kAnchorLen) return false;
  bool varied = false;
  for (int i = 1; i < kAnchorLen; ++i) varied |= sizes[i] != sizes[0];
  if (!varied) {
    // One size only: says nothing about steps; try the next requests instead.
    recorded = 0;
    return false;
  }
  fail[0] = 0;
  int k = 0;
  for (int i = 1; i < kAnchorLen; ++i) {
    while (k > 0 && sizes[i] != sizes[k]) k = fail[k - 1];
    if (sizes[i] == sizes[k]) ++k;
    fail[i] = static_cast<uint8_t>(k);
  }
  match = 0;
  return true;
}

bool CadenceDetector::Anchor::feed(uint64_t size) {
  while (match > 0 && size != sizes[match]) match = fail[match - 1];
  if (size == sizes[match]) ++match;
  if (match < kAnchorLen) return false;
  match = fail[kAnchorLen - 1];
  return true;
}

void CadenceDetector::begin(uint64_t top) {
  base_top_ = top;
  mark_top_ = top;
  mark_alloc_ = allocs_;
}

bool CadenceDetector::on_alloc(uint64_t size, uint64_t top, uint64_t resets) {
  ++allocs_;
  bool restart = false;
  bool early = false;  // a restart of an anchor other than the late one
  for (int i = 0; i < 3; ++i) {
    Anchor& a = anchors_[i];
    if (!a.armed) continue;
    if (a.recorded < kAnchorLen) {
      a.record(size);
    } else if (a.feed(size)) {
      restart = true;
      early |= i != 2;
    }
  }
  if (!restart) return false;
  if (early) late_only_ = false;
  ++restarts_;
  step_allocs_ = allocs_ - mark_alloc_;
  step_growth_ = top > mark_top_ ? top - mark_top_ : 0;
  growing_ = step_growth_ > 0 ? growing_ + 1 : 0;
  mark_top_ = top;
  mark_alloc_ = allocs_;
  if (warned_ || resets != 0) return false;
  const bool enough = late_only_ ? growing_ >= kLateGrowingRestartsToWarn &&
                                       grown_bytes(top) >= capacity_ / kLateShareDivisor
                                 : growing_ >= kGrowingRestartsToWarn &&
                                       grown_bytes(top) >= capacity_ / kMinShareDivisor;
  if (enough) {
    warned_ = true;
    return true;
  }
  return false;
}

void CadenceDetector::on_free(uint64_t top, uint64_t resets) {
  if (late_tried_ || resets != 0 || restarts_ != 0) return;
  late_tried_ = true;
  anchors_[2].start();
  begin(top);
}

void CadenceDetector::on_reset(uint64_t top) {
  anchors_[0].start();
  anchors_[1].armed = false;
  anchors_[2].armed = false;
  late_tried_ = false;
  late_only_ = true;
  restarts_ = 0;
  growing_ = 0;
  step_allocs_ = 0;
  step_growth_ = 0;
  warned_ = false;
  begin(top);
}

void CadenceDetector::on_step_boundary(uint64_t top) {
  if (restarts_ != 0) return;  // steps already recognised: keep matching them
  anchors_[1] = anchors_[0];
  if (anchors_[1].recorded < kAnchorLen) anchors_[1].armed = false;
  anchors_[0].start();
  anchors_[2].armed = false;  // the boundary says where steps start: no need to guess
  late_tried_ = true;
  begin(top);
}

}  // namespace zarena_core
