// A plan being served: the plan's arrays and its per-instance state in one block of host
// memory that bindings read too (zarena/zarena_plan.h is the protocol; this class is its
// reference implementation). The arena owns the zone (pinned region blocks) and calls
// these paths; every rule that keeps a planned block from overlapping a live one is here:
// an instance is handed out only after every instance of its check list is seen dead.
//
// Threads. alloc() takes the plan's lock (one compare-and-swap, uncontended when one
// thread allocates at a time, which is when a step repeats at all); free(), pin() and
// unpin() take no lock: a compare-and-swap on the instance's word decides every race.
// alloc() and free() are inline fast paths for the plain case; the rest is out of line.
// The control calls (engage, end_step, disengage, set_epoch, the scans) are the library's
// and run under the arena's whole-arena lock.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/checks.h"
#include "base/outcomes.h"
#include "base/pin_tally.h"
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
  // Blocks of the learned step live in the window when it was laid out, freed early in the
  // next step (plan.h, Leftover): the planned instances over them are handed out only once
  // the zone claimed their bytes (PlanRun, "Leftovers").
  std::vector<plan::Leftover> leftovers;
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
    // While a leftover is pending, an offset inside one is the region's; once none is,
    // every leftover is the zone's (a planned block's start is found first, as before).
    if (ZARENA_UNLIKELY(leftover_count_ != 0) && leftovers_pending()) {
      return in_zone_leftovers(off);
    }
    return pieces_.empty() || instance_at(off) != ~0u || in_pieces(off) ||
           (leftover_count_ != 0 && leftover_at(off) != nullptr);
  }
  // The zone is these pieces of [zone, zone + zone_bytes) (offsets from zone(), sorted),
  // not the whole of it; set before the run is published.
  void set_pieces(std::vector<plan::ByteRange> pieces) { pieces_ = std::move(pieces); }
  // Where the zone is, once known (a reserved zone's block): before the run is published.
  void set_zone(uintptr_t zone) { view_.zone = zone; }

  // --- the planned paths -----------------------------------------------------------------
  enum class Alloc : uint8_t {
    kServed,     // *out is the block
    kLibrary,    // not served here, and no deviation (not engaged, or an unplanned item)
    kDeviation,  // the step just stopped being planned (miss_reason / miss_index say why)
    kClaim,      // the instance's bytes (*out: ptr, size) overlap a leftover the zone has not
                 // claimed yet: nothing was handed out; the caller claims the leftovers
                 // there (StepPlans::claim_leftovers) or ends the plan, then asks again
  };
  struct Block {
    uintptr_t ptr;
    uint64_t size;
    uint64_t epoch;  // the epoch it was handed out in
  };
  // The fast path (inline): the lock, one record read, the check list, the stores; every
  // other case (not engaged, a deviation, an item left to the library, a busy lock) is
  // one unlikely branch to alloc_slow.
  Alloc alloc(uint64_t size, uint32_t tag, Block* out) noexcept {
    if ((load(view_.state) & ZARENA_PLAN_ENGAGED) == 0) return Alloc::kLibrary;
    uint32_t expected = 0;
    if (ZARENA_UNLIKELY(!__atomic_compare_exchange_n(lock_, &expected, 1u, false, __ATOMIC_ACQUIRE,
                                                     __ATOMIC_RELAXED))) {
      return alloc_slow(size, tag, out, false);
    }
    const uint64_t st = load(view_.state);
    const uint32_t i = *view_.cursor;
    const uint64_t e = cur_epoch();
    if (ZARENA_LIKELY((st & ZARENA_PLAN_ENGAGED) != 0 && i < view_.n)) {
      const uint64_t id = ((st >> 1) & 1) * view_.n + i;
      const InstanceInfo& x = instance_info_[id];
      if (ZARENA_LIKELY(x.size == size && x.tag == tag && x.dindex != kNoInstance &&
                        (x.leftover == 0 || !leftovers_pending()) && clear(id, x, e))) {
        return hand_out_and_unlock(id, i, e, out);
      }
    }
    return alloc_slow(size, tag, out, true);
  }

  // p inside the zone. want_epoch: ZARENA_ANY_EPOCH or the epoch it was handed out in.
  // The fast path (inline) is a plain free of a live, unpinned block of this epoch: one
  // compare-and-swap; everything else goes to free_slow.
  FreeOutcome free(uintptr_t p, uint64_t want_epoch, uint64_t* size) noexcept {
    const uint32_t id = hinted_instance(p - view_.zone);
    if (ZARENA_LIKELY(id != kNoInstance && want_epoch == ZARENA_ANY_EPOCH)) {
      uint64_t w = load(&view_.words[id]);
      if (ZARENA_LIKELY((w & (plan_word::kState | plan_word::kPersistent | plan_word::kPinMask)) ==
                            plan_word::kLive &&
                        plan_word::epoch(w) == (cur_epoch() & plan_word::kEpochMask) &&
                        __atomic_compare_exchange_n(&view_.words[id], &w,
                                                    (w & ~plan_word::kState) | plan_word::kFreed,
                                                    false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))) {
        *size = instance_info_[id].size;
        return FreeOutcome::kOk;
      }
    }
    return free_slow(instance_at(p - view_.zone), want_epoch, size);
  }
  // The size of the instance starting at p if a free (last_unpin: its last unpin) would
  // free it now, else 0. For a poison fill before the free marks it: only a free that
  // races another free or unpin of the same block can fill a block already dead.
  // want_epoch: as free()'s (a free naming another epoch is refused: 0).
  uint64_t live_size(uintptr_t p, bool last_unpin,
                     uint64_t want_epoch = ZARENA_ANY_EPOCH) const noexcept;
  // tally (may be null): told of the instance's first pin and last unpin, as the region's
  // pins tell it (pinned_peak_bytes). A first pin adds its bytes before its
  // compare-and-swap and takes them back if that fails, so that a last unpin never takes
  // bytes away before they were added; only a pin racing another pin or a free of the same
  // block can leave its bytes in the peak.
  // Pins the instance that starts at p, or else the live one p points into (a view), as
  // zarena_pin does for region blocks. The caller holds a region slot lock: pins and
  // unpins never race a reset's re-stamp of the pinned instances (set_epoch runs under
  // every slot lock), so a pin that answers OK keeps its block across that reset.
  PinOutcome pin(uintptr_t p, PinTally* tally = nullptr) noexcept;
  // *freed_size: the size of a block whose deferred free the last unpin completed, else 0.
  // The caller holds a region slot lock (as for pin).
  PinOutcome unpin(uintptr_t p, uint64_t* freed_size, PinTally* tally = nullptr) noexcept;
  // Whether p lies strictly inside a live instance (its start below p): for the error
  // paths, where a free found a dead instance starting at p (an interior pointer then).
  bool inside_live(uintptr_t p) const noexcept;
  // What a free of p answers from this run's words alone (for a run whose zone was given
  // back: every instance dead): kDoubleFree for an instance freed in the current epoch,
  // kStale for one reclaimed or of an earlier epoch (or not of want_epoch), kNotOwned
  // when no instance starts at p.
  FreeOutcome history(uintptr_t p, uint64_t want_epoch) const noexcept;
  // Leftovers (plan.h, docs/PLANS.md "Leftovers"): blocks of the learned step live when the
  // run was laid out, in the zone's window, whose bytes some instances reuse once the block
  // was freed. The zone does not hold them at first: an instance over one is handed out only
  // after the zone claimed its bytes (the region refuses a claim of live bytes, so a claim
  // is the check that the block is dead), and until then a pointer into one is the region's.
  // Only the leftovers some planned instance overlaps are kept; their count is fixed once
  // the run is published.
  // Whether some leftover is not claimed yet.
  bool leftovers_pending() const noexcept {
    return __atomic_load_n(&leftovers_pending_, __ATOMIC_ACQUIRE) != 0;
  }
  // Whether bindings are not given the view (StepPlans::view): from the run's publication,
  // when it has leftovers, to the first boundary (end_step, engage) at which none is
  // pending. Changed at boundaries only, so a binding that fetches the view at each
  // boundary sees the library serve whole steps; never set again.
  bool view_withheld() const noexcept {
    return __atomic_load_n(&view_withheld_, __ATOMIC_ACQUIRE) != 0;
  }
  // The first leftover not claimed yet that [off, off + size) overlaps (offsets from zone()).
  bool unclaimed_leftover(uint64_t off, uint64_t size, plan::ByteRange* out) const noexcept;
  // Under the region's writer lock, in the section that claimed it: the leftover at `off`
  // is the zone's from now on.
  void leftover_claimed(uint64_t off) noexcept;
  // Before the run is published, for a zone that is one free block: no leftover lies in it.
  void drop_leftovers() noexcept;
  // Whether (size, tag) is the engaged plan's next request, read without the lock (a hint:
  // alloc decides under it).
  bool expects(uint64_t size, uint32_t tag) const noexcept {
    const uint32_t i = cursor();
    return (load(view_.state) & ZARENA_PLAN_ENGAGED) != 0 && i < view_.n &&
           view_.item_size[i] == size && view_.item_tag[i] == tag;
  }
  // The step's next allocation (for a deviation's index).
  uint32_t cursor() const noexcept { return __atomic_load_n(view_.cursor, __ATOMIC_RELAXED); }
  // Pinned instances now: their bytes and count.
  uint64_t pinned_bytes() const { return __atomic_load_n(&pinned_bytes_, __ATOMIC_RELAXED); }
  uint64_t pinned_count() const { return __atomic_load_n(&pinned_, __ATOMIC_RELAXED); }

  // --- control: the library's, under the arena's whole-arena lock ------------------------
  bool engaged() const { return (load(view_.state) & ZARENA_PLAN_ENGAGED) != 0; }
  // Starts serving with the next allocation. Call only when no instance is live.
  void engage();
  // The step ended (a boundary, or a reset). A boundary with no allocation since the last
  // one is not a step (a loop may call zarena_step_begin and zarena_reset both). A step cut short
  // ends the plan's engagement (ZARENA_PLAN_MISS_SHORT); returns whether the plan stays engaged for
  // the next step. *was_step (when given): false for such a boundary, which ends no step.
  bool end_step(bool* was_step = nullptr);
  void disengage(uint64_t reason, uint64_t index);
  // A reset began epoch e: unpinned instances of earlier epochs are dead from now on.
  void set_epoch(uint64_t e);
  // The plan's lock, held by a reset while the epoch moves (StepPlans::EpochGate): no
  // planned allocation (C's or a binding's: both take this lock) runs meanwhile.
  void hold() noexcept { lock(); }
  void release() noexcept { unlock(); }
  // Live instances now: any, their bytes and count (deferred: those freed while pinned).
  bool any_live() const;
  struct Totals {
    uint64_t hits = 0, live_bytes = 0, live_count = 0, deferred = 0;
  };
  // Under the plan's lock, so that hits and the live instances see the same allocations
  // (a planned allocation stamps its word and counts its hit under it).
  void totals(Totals* out) noexcept;
  // The floor moved to address `floor` (over some of the zone, or off it again), as a
  // region block would: every live instance wholly under it survives resets from now on;
  // a persistent instance at or above it belongs to epoch e (the current one) again, and
  // the next reset reclaims it. Only instances under the floor are kept (zarena.h, FLOORS:
  // a floor between two pieces of the zone kept the instances above it too).
  void apply_floor(uintptr_t floor, uint64_t e);
  // Calls fn(ptr, size) for every instance the reset that ended `ended` reclaimed (held,
  // unpinned, not persistent, of that epoch): for poison. Call after set_epoch.
  template <typename Fn>
  void for_each_reclaimed(uint64_t ended, Fn&& fn) const {
    const uint64_t inst = uint64_t{view_.period} * view_.n;
    for (uint64_t id = 0; id < inst; ++id) {
      const uint64_t w = load(&view_.words[id]);
      if (plan_word::held(w) && (w & (plan_word::kPersistent | plan_word::kPinMask)) == 0 &&
          plan_word::epoch(w) == (ended & plan_word::kEpochMask)) {
        fn(view_.zone + instance_info_[id].offset, instance_info_[id].size);
      }
    }
  }
  // Host memory this run holds (its arrays, records and hints).
  uint64_t host_bytes() const { return host_bytes_; }
  uint64_t hits() const { return load(view_.hits); }
  uint64_t miss_reason() const { return load(view_.miss_reason); }
  uint64_t miss_index() const { return load(view_.miss_index); }
  uint64_t steps() const { return load(view_.state) >> 2; }

  // One live instance (for live-block walks): address, size, handed-out epoch, pins.
  struct LiveInstance {
    uintptr_t ptr;
    uint64_t size, epoch;
    uint32_t pins, tag;
    bool persistent, deferred;
  };
  // Under the plan's lock: no instance is handed out during the walk, so two listed never
  // overlap (a free during it only ends one).
  void live_instances(std::vector<LiveInstance>* out) noexcept;

 private:
  static constexpr uint32_t kNoInstance = ~0u;
  // What the serve paths read of one instance, in one record (the view's arrays, which
  // bindings read, say the same).
  struct InstanceInfo {
    uint64_t offset;
    uint64_t size;  // its item's rounded size
    uint32_t tag;
    uint32_t check_begin, check_end;  // its check list: check_list[begin, end)
    uint32_t dindex;                  // its offset's index in doffset; kNoInstance: not planned
    uint32_t offset_hint;             // its offset's slot in offset_hints_
    uint32_t leftover;                // 1: its bytes overlap a leftover
  };
  struct LeftoverState {
    uint64_t offset, size;
    uint32_t claimed;  // atomic: 1 once the zone holds its bytes
  };

  // The free's way from an offset to an instance: an open-addressed table of the distinct
  // offsets, each with the instance this library last handed out there. Only a hint (a
  // binding's allocations do not update it): the free trusts it only when that instance
  // is live, and then it is the block at the offset (two live instances never share a
  // start); otherwise instance_at (the view's buckets and dlast) decides.
  struct OffsetHint {
    uint64_t off = kNoOffset;
    uint32_t id = kNoInstance;
  };
  static constexpr uint64_t kNoOffset = ~0ull;
  uint64_t hint_slot(uint64_t off) const {
    return ((off >> 8) * 0x9E3779B97F4A7C15ull) >> hint_shift_;
  }
  uint32_t hinted_instance(uint64_t off) const noexcept {
    for (uint64_t h = hint_slot(off);; h = (h + 1) & hint_mask_) {
      const OffsetHint& x = offset_hints_[h];
      if (x.off == off) return __atomic_load_n(&x.id, __ATOMIC_RELAXED);
      if (x.off == kNoOffset) return kNoInstance;
    }
  }
  static uint64_t load(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  static uint32_t load(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  void lock() noexcept;
  void unlock() noexcept { __atomic_store_n(lock_, 0u, __ATOMIC_RELEASE); }
  // Every instance sharing id's space (its check list, and id's own word) is dead.
  bool clear(uint64_t id, const InstanceInfo& x, uint64_t e) const noexcept {
    if (plan_word::is_live(load(&view_.words[id]), e)) return false;
    for (uint32_t k = x.check_begin; k < x.check_end; ++k) {
      if (plan_word::is_live(load(&view_.words[view_.check_list[k]]), e)) return false;
    }
    return true;
  }
  // Instance id (allocation i) found clear under the lock: stamps it live in epoch e,
  // moves the cursor, counts the hit, releases the lock.
  Alloc hand_out_and_unlock(uint64_t id, uint32_t i, uint64_t e, Block* out) noexcept {
    const InstanceInfo& x = instance_info_[id];
    __atomic_store_n(&view_.born[id], e, __ATOMIC_RELAXED);
    __atomic_store_n(&view_.words[id], plan_word::live_word(e), __ATOMIC_RELEASE);
    __atomic_store_n(&view_.dlast[x.dindex], static_cast<uint32_t>(id), __ATOMIC_RELEASE);
    __atomic_store_n(&offset_hints_[x.offset_hint].id, static_cast<uint32_t>(id), __ATOMIC_RELAXED);
    __atomic_store_n(view_.cursor, i + 1, __ATOMIC_RELAXED);
    __atomic_store_n(view_.hits, *view_.hits + 1, __ATOMIC_RELAXED);
    unlock();
    out->ptr = view_.zone + x.offset;
    out->size = x.size;
    out->epoch = e;
    return Alloc::kServed;
  }
  // alloc's every other case. locked: the caller holds the lock (else it was busy).
  Alloc alloc_slow(uint64_t size, uint32_t tag, Block* out, bool locked) noexcept;
  // free's every other case (id: instance_at's answer).
  FreeOutcome free_slow(uint32_t id, uint64_t want_epoch, uint64_t* size) noexcept;
  // The instance whose block starts at zone offset `off` now, or kNoInstance when none can.
  uint32_t instance_at(uint64_t off) const noexcept {
    const uint64_t b = off >> view_.bucket_shift;
    if (ZARENA_UNLIKELY(b >= view_.buckets)) return kNoInstance;
    for (uint32_t d = view_.bucket[b], end = view_.bucket[b + 1]; d < end; ++d) {
      const uint64_t o = view_.doffset[d];
      if (o == off) return __atomic_load_n(&view_.dlast[d], __ATOMIC_ACQUIRE);
      if (o > off) break;
    }
    return kNoInstance;
  }
  bool in_pieces(uint64_t off) const noexcept;
  // in_zone with leftovers: an offset inside one is the zone's once it is claimed.
  bool in_zone_leftovers(uint64_t off) const noexcept;
  // The leftover holding off, or null.
  const LeftoverState* leftover_at(uint64_t off) const noexcept;
  // The live instance p's offset lies strictly inside, or kNoInstance.
  uint32_t live_containing(uint64_t off) const noexcept;
  // The instance a pin or unpin of offset acts on: the one starting there if live, else
  // the live one it points into; else the one starting there (dead: its outcome), or none.
  uint32_t pin_target(uint64_t off) const noexcept;
  uint64_t cur_epoch() const { return load(view_.epoch); }
  void deviate_locked(uint64_t reason, uint64_t index) noexcept;

  zarena_plan_view view_{};
  std::unique_ptr<uint64_t[]> mem_;                // every array, 8-byte aligned
  std::unique_ptr<InstanceInfo[]> instance_info_;  // [period*n]
  std::unique_ptr<OffsetHint[]>
      offset_hints_;  // [hint_mask_ + 1], a power of two, at most half full
  uint64_t hint_mask_ = 0;
  uint32_t hint_shift_ = 64;
  uint32_t* lock_ = nullptr;
  uint64_t lower_bound_ = 0;
  uint64_t max_size_ = 0;  // the largest instance's size (interior lookups look this far down)
  uint64_t host_bytes_ = 0;
  std::vector<plan::ByteRange> pieces_;         // empty: the zone is one piece
  std::unique_ptr<LeftoverState[]> leftovers_;  // sorted by offset
  uint32_t leftover_count_ = 0;
  uint32_t leftovers_pending_ = 0;  // atomic: those not claimed
  uint32_t view_withheld_ = 0;      // atomic: view_withheld()
  // At a boundary: the view is given once no leftover is pending.
  void give_view_if_claimed() noexcept {
    if (view_withheld_ != 0 && !leftovers_pending()) {
      __atomic_store_n(&view_withheld_, 0u, __ATOMIC_RELEASE);
    }
  }
  // Instances with pins now (pin and unpin keep it): a reset re-stamps them, and skips
  // the scan when there are none.
  uint64_t pinned_ = 0;
  uint64_t pinned_bytes_ = 0;
};

}  // namespace zarena_core
