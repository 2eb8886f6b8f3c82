#include "diagnosis/cadence.h"

#include <algorithm>

namespace zarena_core {

void CadenceDetector::Anchor::start(uint64_t at) {
  recorded = 0;
  match = 0;
  armed = true;
  begin_at = at;
}

void CadenceDetector::Anchor::prepare() {
  fail[0] = 0;
  int k = 0;
  for (int i = 1; i < kAnchorLen; ++i) {
    while (k > 0 && sizes[i] != sizes[k]) k = fail[k - 1];
    if (sizes[i] == sizes[k]) ++k;
    fail[i] = static_cast<uint8_t>(k);
  }
  match = 0;
}

bool CadenceDetector::Anchor::record(uint64_t size, uint64_t index) {
  if (recorded == 0) begin_at = index;
  sizes[recorded++] = size;
  if (recorded < kAnchorLen) return false;
  bool varied = false;
  for (int i = 1; i < kAnchorLen; ++i) varied |= sizes[i] != sizes[0];
  if (!varied) {
    // One size only: says nothing about steps; try the next requests instead.
    recorded = 0;
    return false;
  }
  prepare();
  // The anchor's own occurrence counts as one: an occurrence overlapping it (steps shorter
  // than the anchor) is found as soon as it completes.
  match = fail[kAnchorLen - 1];
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
  restarts_ = 0;
  window_frees_ = 0;
  begun_at_ = allocs_;
  growing_ = 0;
  step_allocs_ = 0;
  mark_alloc_ = allocs_;
  window_min_ = live_;
  window_min_at_ = first_trough_at_ = last_trough_at_ = allocs_;
  first_trough_ = last_trough_ = live_;
  start_top_ = first_restart_top_ = last_restart_top_ = top;
}

// The first recurrence fixes the step's length and, by matching the requests before the
// anchor with those one step later, where the first step began.
void CadenceDetector::first_restart(const Anchor& a) {
  if (resumed_) {
    step_allocs_ = 0;  // the anchor's own occurrence lies before resume(): length unknown
    origin_ = allocs_;
    return;
  }
  const uint64_t anchor_end = a.begin_at + kAnchorLen;
  step_allocs_ = allocs_ > anchor_end ? allocs_ - anchor_end : 1;
  const uint64_t p = step_allocs_;
  const uint64_t oldest =
      std::max(history_from_, allocs_ > kHistoryLen ? allocs_ - kHistoryLen : 0);
  uint64_t n = a.begin_at;
  while (n > oldest && history_[(n - 1) % kHistoryLen] == history_[(n - 1 + p) % kHistoryLen]) --n;
  origin_ = n;
}

bool CadenceDetector::on_alloc(uint64_t size, uint64_t top) {
  const uint64_t index = allocs_++;
  history_[index % kHistoryLen] = size;
  if (top > top_) top_ = top;
  live_ += static_cast<int64_t>(size);
  if (run_uniform_) {
    if (run_count_ == 0) run_size_ = size;
    if (size == run_size_) {
      ++run_count_;
    } else {
      run_uniform_ = false;
    }
  }
  int by = -1;  // the anchor that recurred
  for (int i = 0; i < 3; ++i) {
    Anchor& a = anchors_[i];
    if (!a.armed) continue;
    if (a.recorded < kAnchorLen) {
      // A late step's frees are counted from its opening on.
      if (i == 2 && a.recorded == 0 && restarts_ == 0) window_frees_ = 0;
      a.record(size, index);
    } else if (a.feed(size) && by < 0) {
      by = i;
    }
  }
  if (by < 0) {
    if (run_uniform_ && run_marked_ && !warned_ && restarts_ == 0 && run_count_ >= kUniformRunMin &&
        top_ > run_start_top_ && top_ - run_start_top_ >= (capacity_ - run_start_top_) / 2) {
      warned_ = true;
      return true;
    }
    return false;
  }
  // The late anchor stands for a step that frees something (it was armed by a free, at
  // the same point of the step each time): a recurrence with no free since the last one
  // is a block repeating inside a step (layers), not a step. Look again from the next free.
  if (by == 2 && !resumed_ && (restarts_ == 0 || late_only_) && window_frees_ == 0) {
    anchors_[2].armed = false;
    late_tried_ = false;
    if (restarts_ != 0) begin(top_);
    return false;
  }
  if (restarts_ == 0) {
    // The first anchor to recur sets where steps begin; the others would count each step
    // again at another phase.
    for (int i = 0; i < 3; ++i) anchors_[i].armed = i == by;
    late_only_ = by == 2;
  }
  ++restarts_;
  // The step that just ended (with the first requests of the next one): its trough.
  const int64_t trough = window_min_;
  if (restarts_ == 1) {
    first_restart(anchors_[by]);
    first_trough_ = trough;
    first_trough_at_ = window_min_at_;
    first_restart_top_ = top;
    growing_ = 0;
  } else {
    step_allocs_ = allocs_ - mark_alloc_;
    growing_ = trough > last_trough_ ? growing_ + 1 : 0;
  }
  last_trough_ = trough;
  last_trough_at_ = window_min_at_;
  last_restart_top_ = top;
  mark_alloc_ = allocs_;
  window_min_ = live_;
  window_min_at_ = allocs_;
  window_frees_ = 0;
  if (warned_) return false;
  const bool late = late_only_ && !resumed_;
  const bool enough =
      late
          ? growing_ >= kLateGrowingRestartsToWarn && grown_bytes() >= capacity_ / kLateShareDivisor
          : growing_ >= kGrowingRestartsToWarn && grown_bytes() >= capacity_ / kMinShareDivisor;
  if (enough) {
    warned_ = true;
    return true;
  }
  return false;
}

void CadenceDetector::on_free(uint64_t size) {
  live_ -= static_cast<int64_t>(size);
  if (live_ < window_min_) {
    window_min_ = live_;
    window_min_at_ = allocs_;
  }
  ++window_frees_;
  run_uniform_ = false;
  if (restarts_ != 0 && late_only_ && !resumed_ && live_ < first_trough_) {
    // What the late steps "kept" was given back (below where the first of them began):
    // they were parts of a larger step that frees what it allocates (a general-purpose
    // workload, PyTorch). Nothing piles up: the guess stops for this epoch.
    anchors_[2].armed = false;
    late_tried_ = true;
    withdrawn_ = true;
    begin(top_);
    return;
  }
  if (late_tried_ || restarts_ != 0 || resumed_) return;
  late_tried_ = true;
  anchors_[2].start(allocs_);
  begin(top_);
}

bool CadenceDetector::gave_up() const {
  if (withdrawn_) return true;
  return restarts_ == 0 && !resumed_ && !run_uniform_ && allocs_ - begun_at_ >= kGuessLimit;
}

void CadenceDetector::on_reset(uint64_t top) {
  withdrawn_ = false;
  run_uniform_ = false;
  run_marked_ = false;
  run_count_ = 0;
  anchors_[0].start(allocs_);
  late_tried_ = false;
  late_only_ = true;
  resumed_ = false;
  begin_epoch(top);
}

void CadenceDetector::on_step_boundary(uint64_t top) {
  run_uniform_ = !resumed_;
  run_marked_ = run_uniform_;
  run_count_ = 0;
  run_start_top_ = top;
  if (restarts_ != 0) return;  // steps already recognised: keep matching them
  anchors_[1] = anchors_[0];
  if (anchors_[1].recorded < kAnchorLen) anchors_[1].armed = false;
  anchors_[0].start(allocs_);
  anchors_[2].armed = false;  // the boundary says where steps start: no need to guess
  late_tried_ = true;
  history_from_ = allocs_;
  begin(top);
}

void CadenceDetector::resume(const uint64_t* opening, uint64_t top) {
  run_uniform_ = false;
  Anchor& a = anchors_[0];
  a.armed = true;
  a.begin_at = allocs_;
  a.recorded = kAnchorLen;
  for (int i = 0; i < kAnchorLen; ++i) a.sizes[i] = opening[i];
  a.prepare();
  late_tried_ = true;
  late_only_ = false;
  resumed_ = true;
  begin_epoch(top);
}

void CadenceDetector::begin_epoch(uint64_t top) {
  anchors_[1].armed = false;
  anchors_[2].armed = false;
  warned_ = false;
  history_from_ = allocs_;
  live_ = 0;
  top_ = top;
  begin(top);
}

uint64_t CadenceDetector::steps() const {
  if (restarts_ == 0 || resumed_ || step_allocs_ == 0) return 0;
  return 1 + (allocs_ - origin_ - 1) / step_allocs_;
}

uint64_t CadenceDetector::grown_bytes() const {
  return last_trough_ > first_trough_ ? static_cast<uint64_t>(last_trough_ - first_trough_) : 0;
}

uint64_t CadenceDetector::step_kept_bytes() const {
  const uint64_t grown = grown_bytes();
  if (grown == 0 || restarts_ < 2) return 0;
  uint64_t steps = restarts_ - 1;
  if (step_allocs_ != 0 && last_trough_at_ > first_trough_at_) {
    steps = (last_trough_at_ - first_trough_at_ + step_allocs_ / 2) / step_allocs_;
  }
  return steps == 0 ? grown : grown / steps;
}

uint64_t CadenceDetector::kept_bytes() const {
  if (restarts_ == 0) return 0;
  const int64_t now = std::min(window_min_, live_);
  return now > first_trough_ ? static_cast<uint64_t>(now - first_trough_) : 0;
}

uint64_t CadenceDetector::top_growth_per_step() const {
  if (restarts_ >= 2 && last_restart_top_ > first_restart_top_) {
    return (last_restart_top_ - first_restart_top_) / (restarts_ - 1);
  }
  if (restarts_ == 1 && !resumed_ && first_restart_top_ > start_top_) {
    return first_restart_top_ - start_top_;
  }
  return 0;
}

uint64_t CadenceDetector::steps_to_full(uint64_t top) const {
  const uint64_t g = top_growth_per_step();
  if (g == 0) return 0;
  return top >= capacity_ ? 0 : (capacity_ - top) / g;
}

}  // namespace zarena_core
