// Reset-cadence detector: notices a program running step after step without resetting,
// before the arena overflows.
//
// Signal: training steps (and per-sample passes) issue the same sequence of request sizes
// every time. The detector records the first kAnchorLen request sizes of the epoch (the
// "anchor": the opening of the first step) and watches the stream for that sequence
// again (KMP matching, O(1) amortised per request, fixed memory). Each time it recurs a
// new step has started ("restart"). A restart alone is harmless when the loop frees what
// it allocated, so the warning also needs growth:
//   - the top rose across each of the last kGrowingRestartsToWarn restarts, and
//   - the bytes added since the anchor reach capacity / kMinShareDivisor,
// and no reset may ever have happened on the arena. Consequences, by design:
//   - one big first step never repeats its opening, so it stays quiet however large;
//   - a constant-size stream gives an anchor of one size, which is discarded and
//     re-recorded: it never counts as a step;
//   - a loop that resets every step is quiet after its first reset (the gate), and in
//     its first step the opening has not recurred yet;
//   - per-sample passes without reset warn 8 requests into the third pass, once the
//     passes have added capacity/64 (1.6 %): e.g. a 64 GiB arena hears about it once 1
//     GiB has piled up, long before it is full.
// Anchoring: zarena_mark_step_boundary says "steps start here", so a boundary marked
// before any restart re-anchors (weights uploaded before it never recur).
// The previous anchor stays armed as well, so a program that marks a boundary after
// every step (and never resets) is still recognised.
// A program that uploads persistent data (weights) without a boundary anchors on that
// upload, which never recurs. An upload frees nothing and a step does, so the first free
// of an arena that was never reset, while no restart has been seen, arms a late anchor:
// the requests after it lie inside the first step and recur in every later one. Repeats
// after a free can also be layers inside one step's backward pass, so a warning that
// rests on the late anchor alone needs more evidence (kLateGrowingRestartsToWarn
// growing restarts, capacity / kLateShareDivisor grown); its restarts still count for
// the first-overflow verdict.
// Threads: requests from several threads interleave in no fixed order, so the detector
// sees fewer exact repeats and may warn later or not at all; a loop that resets still
// never warns (the reset gate does not depend on the order).
// Known blind spot: a step whose opening requests belong to a block that repeats inside
// the step (e.g. a model whose very first allocations are layer 1's) looks like repeated
// steps; real steps usually open with the input upload, which breaks the pattern.
//
// Why these numbers: 8 sizes make an accidental match among varied sizes negligible yet
// fit steps of only a few requests (shorter steps still match across their repeats).
// Two growing restarts, not one, so a single coincidence never warns, while the warning
// still comes in the third pass. capacity/64: a pile smaller than that is no threat yet
// (a program that adds little per step is told later, with over 98 % of the space above
// the floor still free), and no program fills more than that plus two steps unwarned.
#pragma once

#include <cstdint>

namespace zarena_core {

class CadenceDetector {
 public:
  static constexpr int kAnchorLen = 8;
  static constexpr uint64_t kMinShareDivisor = 64;
  static constexpr uint64_t kGrowingRestartsToWarn = 2;
  static constexpr uint64_t kLateGrowingRestartsToWarn = 3;
  static constexpr uint64_t kLateShareDivisor = 16;

  explicit CadenceDetector(uint64_t capacity) : capacity_(capacity) { anchors_[0].start(); }

  // One request of the current epoch that the region served: size is the aligned size,
  // top the region's top after it, resets the arena's resets since create. Returns true
  // exactly once per epoch, when the warning should be emitted.
  bool on_alloc(uint64_t size, uint64_t top, uint64_t resets);
  // A reset: top is the floor the region rewound to.
  void on_reset(uint64_t top);
  // zarena_mark_step_boundary at this top.
  void on_step_boundary(uint64_t top);
  // A block of the region was freed; top after it.
  void on_free(uint64_t top, uint64_t resets);

  uint64_t restarts() const { return restarts_; }        // in this epoch
  uint64_t step_allocs() const { return step_allocs_; }  // requests per step (last one)
  uint64_t step_growth() const { return step_growth_; }  // top growth per step (last one)
  uint64_t grown_bytes(uint64_t top) const { return top > base_top_ ? top - base_top_ : 0; }

 private:
  struct Anchor {
    uint64_t sizes[kAnchorLen];
    uint8_t fail[kAnchorLen];  // KMP failure function over sizes
    int recorded = 0;
    int match = 0;
    bool armed = false;  // recording or matching
    void start();
    // Returns true when the anchor just became complete and usable.
    bool record(uint64_t size);
    // Returns true when the stream just completed another occurrence of the anchor.
    bool feed(uint64_t size);
  };

  void begin(uint64_t top);

  uint64_t capacity_;
  // [0] the current anchor, [1] the one before the last boundary, [2] the late anchor
  Anchor anchors_[3];
  bool late_tried_ = false;  // the late anchor was armed in this epoch already
  bool late_only_ = true;    // every restart so far came from the late anchor
  uint64_t allocs_ = 0;
  uint64_t restarts_ = 0;
  uint64_t growing_ = 0;  // consecutive restarts with growth
  uint64_t base_top_ = 0;
  uint64_t mark_top_ = 0;  // top at the previous restart (or anchor start)
  uint64_t mark_alloc_ = 0;
  uint64_t step_allocs_ = 0;
  uint64_t step_growth_ = 0;
  bool warned_ = false;
};

}  // namespace zarena_core
