// A plan being served: the plan's arrays and its per-instance state in one block of host
// memory that bindings read too (zarena/zarena_plan.h is the protocol; this class is its
// reference implementation). The arena owns the zone (pinned region blocks) and calls
// these paths; every rule that keeps a planned block from overlapping a live one is here:
// an instance is handed out only after every instance of its check list is seen dead.
//
// Threads. alloc() takes the plan's lock (one compare-and-swap, uncontended when one
// thread allocates at a time, which is when a step repeats at all); free(), pin() and
// unpin() take no lock: a compare-and-swap on the instance's word decides every race.
// The control calls (engage, end_step, disengage, set_epoch, the scans) are the library's
// and run under the arena's whole-arena lock.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/outcomes.h"
#include "plan/plan.h"
#include "zarena/zarena_plan.h"

namespace zarena_core {

// What a plan is, as a run needs it: the planner's offsets and check lists, and the
// learned items' sizes and tags.
struct PlanLayout {
  uint32_t n = 0;
  uint32_t period = 1;
  std::vector<uint64_t> item_size;    // [n], the rounded size
  std::vector<uint32_t> item_tag;     // [n]
  std::vector<uint8_t> item_planned;  // [n]: 0 = served by the dynamic engine
  std::vector<uint64_t> offset;       // [period*n] (ignored for unplanned items)
  std::vector<uint32_t> check_begin;  // [period*n + 1]
  std::vector<uint32_t> check_list;   // instance ids
  uint64_t peak_bytes = 0;            // the zone's size
  uint64_t lower_bound_bytes = 0;
  // Where it was laid out: from region offset `window`, around the live blocks there
  // (offsets from the window's start). kAnywhere: no obstacles, any free block will do.
  static constexpr uint64_t kAnywhere = ~uint64_t{0};
  uint64_t window = kAnywhere;
  std::vector<plan::ByteRange> obstacles;
};

namespace plan_word {
inline constexpr uint64_t kState = ZARENA_PLAN_W_STATE;
inline constexpr uint64_t kLive = ZARENA_PLAN_W_LIVE;
inline constexpr uint64_t kFreed = ZARENA_PLAN_W_FREED;
inline constexpr uint64_t kDeferred = ZARENA_PLAN_W_DEFERRED;
inline constexpr uint64_t kPersistent = ZARENA_PLAN_W_PERSISTENT;
inline constexpr uint64_t kPinOne = 1ull << ZARENA_PLAN_W_PIN_SHIFT;
inline constexpr uint64_t kPinMask = ZARENA_PLAN_W_PIN_MASK;
inline constexpr uint64_t kMaxPins = kPinMask >> ZARENA_PLAN_W_PIN_SHIFT;
inline constexpr uint64_t kEpochMask = ZARENA_PLAN_EPOCH_MASK;

inline uint64_t state(uint64_t w) { return w & kState; }
inline uint64_t pins(uint64_t w) { return (w & kPinMask) >> ZARENA_PLAN_W_PIN_SHIFT; }
inline uint64_t epoch(uint64_t w) { return w >> ZARENA_PLAN_W_EPOCH_SHIFT; }
inline uint64_t with_epoch(uint64_t w, uint64_t e) {
  return (w & ((1ull << ZARENA_PLAN_W_EPOCH_SHIFT) - 1)) |
         ((e & kEpochMask) << ZARENA_PLAN_W_EPOCH_SHIFT);
}
inline uint64_t live_word(uint64_t e) {
  return kLive | ((e & kEpochMask) << ZARENA_PLAN_W_EPOCH_SHIFT);
}
// Handed out and not freed (maybe reclaimed by a reset since).
inline bool held(uint64_t w) { return state(w) == kLive || state(w) == kDeferred; }
inline bool is_live(uint64_t w, uint64_t cur_epoch) {
  return held(w) && ((w & (kPersistent | kPinMask)) != 0 || epoch(w) == (cur_epoch & kEpochMask));
}
}  // namespace plan_word

class PlanRun {
 public:
  // Lays out the plan's memory with its zone at `zone` (not engaged). Throws std::bad_alloc.
  PlanRun(const PlanLayout& layout, uintptr_t zone);
  ~PlanRun();
  PlanRun(const PlanRun&) = delete;
  PlanRun& operator=(const PlanRun&) = delete;

  const zarena_plan_view* view() const { return &view_; }
  uint32_t n() const { return view_.n; }
  uint32_t period() const { return view_.period; }
  uintptr_t zone() const { return view_.zone; }
  uint64_t zone_bytes() const { return view_.zone_bytes; }
  uint64_t lower_bound_bytes() const { return lower_bound_; }
  // Whether p belongs to the zone (its planned blocks and the space claimed for them),
  // not to a block of the region's the zone was laid out around.
  bool in_zone(uintptr_t p) const {
    const uint64_t off = p - view_.zone;
    if (off >= view_.zone_bytes) return false;
    return pieces_.empty() || instance_at(off) != ~0u || in_pieces(off);
  }
  // The zone is these pieces of [zone, zone + zone_bytes) (offsets from zone(), sorted),
  // not the whole of it; set before the run is published.
  void set_pieces(std::vector<plan::ByteRange> pieces) { pieces_ = std::move(pieces); }

  // --- the planned paths -----------------------------------------------------------------
  enum class Alloc : uint8_t {
    kServed,     // *out is the block
    kLibrary,    // not served here, and no deviation (not engaged, or an unplanned item)
    kDeviation,  // the step just stopped being planned (miss_reason / miss_index say why)
  };
  struct Block {
    uintptr_t ptr;
    uint64_t size;
    uint64_t epoch;  // the epoch it was handed out in
  };
  Alloc alloc(uint64_t size, uint32_t tag, Block* out) noexcept;

  // p inside the zone. want_epoch: ZARENA_ANY_EPOCH or the epoch it was handed out in.
  FreeOutcome free(uintptr_t p, uint64_t want_epoch, uint64_t* size) noexcept;
  // The size of the instance starting at p if a free (last_unpin: its last unpin) would
  // free it now, else 0. For a poison fill before the free marks it: only a free that
  // races another free or unpin of the same block can fill a block already dead.
  // want_epoch: as free()'s (a free naming another epoch is refused: 0).
  uint64_t live_size(uintptr_t p, bool last_unpin,
                     uint64_t want_epoch = ZARENA_ANY_EPOCH) const noexcept;
  PinOutcome pin(uintptr_t p) noexcept;
  // *freed_size: the size of a block whose deferred free the last unpin completed, else 0.
  PinOutcome unpin(uintptr_t p, uint64_t* freed_size) noexcept;

  // --- control: the library's, under the arena's whole-arena lock ------------------------
  bool engaged() const { return (load(view_.state) & ZARENA_PLAN_ENGAGED) != 0; }
  // Starts serving with the next allocation. Call only when no instance is live.
  void engage();
  // The step ended (a boundary, or a reset). A boundary with no allocation since the last
  // one is not a step (a loop may call zarena_step_begin and zarena_reset both). A step cut short
  // ends the plan's engagement (ZARENA_PLAN_MISS_SHORT); returns whether the plan stays engaged for
  // the next step.
  bool end_step();
  void disengage(uint64_t reason, uint64_t index);
  // A reset began epoch e: unpinned instances of earlier epochs are dead from now on.
  void set_epoch(uint64_t e);
  // Live instances now: any, their bytes and count.
  bool any_live() const;
  void live_totals(uint64_t* bytes, uint64_t* count) const;
  // The floor was raised over the zone: every live instance survives resets from now on.
  void make_live_persistent();
  uint64_t hits() const { return load(view_.hits); }
  uint64_t miss_reason() const { return load(view_.miss_reason); }
  uint64_t miss_index() const { return load(view_.miss_index); }
  uint64_t steps() const { return load(view_.state) >> 2; }

  // One live instance (for live-block walks): address, size, handed-out epoch, pins.
  struct LiveInstance {
    uintptr_t ptr;
    uint64_t size, epoch;
    uint32_t pins, tag;
  };
  void live_instances(std::vector<LiveInstance>* out) const;

 private:
  static uint64_t load(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  static uint32_t load(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  void lock() noexcept;
  void unlock() noexcept { __atomic_store_n(lock_, 0u, __ATOMIC_RELEASE); }
  // The instance whose block starts at zone offset `off` now, or ~0u when none can.
  uint32_t instance_at(uint64_t off) const noexcept;
  bool in_pieces(uint64_t off) const noexcept;
  uint64_t cur_epoch() const { return load(view_.epoch); }
  void deviate_locked(uint64_t reason, uint64_t index) noexcept;

  zarena_plan_view view_{};
  std::unique_ptr<uint64_t[]> mem_;  // every array, 8-byte aligned
  uint32_t* lock_ = nullptr;
  uint64_t lower_bound_ = 0;
  std::vector<plan::ByteRange> pieces_;  // empty: the zone is one piece
  // Instances with pins now (pin and unpin keep it): a reset re-stamps them, and skips
  // the scan when there are none.
  uint64_t pinned_ = 0;
};

}  // namespace zarena_core
