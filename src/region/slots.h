// Per-thread slots: what lets many threads allocate from one arena at once.
//
// A slot is a lock plus what one thread keeps for itself: a span of the region it bumps
// into, an index of blocks it freed (coalescing among themselves), record pages, and
// counters. A thread always uses the same slot (threads are numbered as they first come,
// slot = number mod slot count), so its slot lock is uncontended and taking it costs one
// atomic exchange. Operations that must see or change the whole arena at one instant
// (reset, floors, stats, drain, walks) take every slot lock in index order and then the
// central lock: a local/global ("big reader") lock. Lock order everywhere: slot locks in
// ascending index, then the central lock, then the overflow pool's lock. A thread never
// holds one slot lock while taking another.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "base/checks.h"
#include "base/spin_lock.h"
#include "region/block_store.h"
#include "region/free_index.h"

namespace zarena_core {

// Counters a slot keeps for the operations its thread makes (summed by a snapshot taken
// under every lock, so the sum is exact). Signed where an allocation on one slot can be
// undone by a free on another.
struct SlotCounters {
  int64_t live_bytes = 0, live_count = 0;  // region blocks
  // Highest live_bytes since the slot's peak window began (create, a reset, a peak reset).
  // The sum over slots bounds the arena's peak from above (exact while one slot is used).
  int64_t live_peak = 0;
  uint64_t hits = 0, misses = 0, reuses = 0;
  uint64_t epoch_allocs = 0;
  uint64_t epoch_max_alloc = 0, step_max_alloc = 0;
  uint64_t stale_frees = 0, invalid_frees = 0;
  // Highest block end handed out in this epoch (high_water folds it in at each reset).
  uint64_t high_water = 0, epoch_high_water = 0;
  uint64_t poison_fills = 0, poison_skipped = 0;
  int64_t deferred_frees = 0;  // frees of pinned blocks still pending (never reset)
};

// Unused-record FIFO: records of absorbed blocks wait here before reuse, so that a
// second free of a block that was just coalesced still reads "double free".
class Quarantine {
 public:
  static constexpr uint32_t kSize = 1024;
  // Pushes record; returns the record that falls out (kNoRecord while not full).
  uint32_t push(uint32_t record) {
    uint32_t out = kNoRecord;
    if (count_ == kSize) {
      out = ring_[head_];
      head_ = (head_ + 1) % kSize;
      --count_;
    }
    ring_[(head_ + count_) % kSize] = record;
    ++count_;
    return out;
  }
  template <typename Fn>
  void drain(Fn&& fn) {
    while (count_ > 0) {
      fn(ring_[head_]);
      head_ = (head_ + 1) % kSize;
      --count_;
    }
  }
  void clear() { head_ = count_ = 0; }

 private:
  uint32_t ring_[kSize];
  uint32_t head_ = 0, count_ = 0;
};

struct alignas(64) Slot {
  explicit Slot(uint64_t granule) : index(granule) {}

  SpinLock lock;
  uint8_t id = 0;
  // The span: [span_cur, span_end) is this slot's to bump into. slack_record is a record
  // that stands for the span's unused part, so that a block given back to it (freeing
  // the block just below span_cur) has something to be "absorbed into" (its gen moves
  // whenever the slack is consumed).
  uint64_t span_cur = 0, span_end = 0;
  uint32_t slack_record = kNoRecord;
  FreeIndex index;  // free blocks of the current epoch this slot owns
  // Records of the current epoch: pages taken this epoch, the page being handed out,
  // recycled records, and the quarantine in front of them.
  uint32_t page_head = kNoRecord, page_tail = kNoRecord;
  uint32_t page_cursor = kNoRecord, page_left = 0;
  uint32_t free_records = kNoRecord;
  Quarantine quarantine;
  SlotCounters c;
  // Nonzero when this slot may hold free blocks or span leftovers (note_cached); read
  // without the lock by an allocation that is about to declare the region full.
  std::atomic<uint64_t> cached_hint{0};

  // The slot may now hold free blocks or span leftovers (a drain would find something).
  // Set by the paths that give the slot space; cleared only by drains and resets.
  void note_cached() {
    if (ZARENA_UNLIKELY(cached_hint.load(std::memory_order_relaxed) == 0)) {
      cached_hint.store(1, std::memory_order_relaxed);
    }
  }
  // A record handed back to the span (the block just below span_cur was freed), kept for
  // the next bump at the same offset instead of going through the quarantine.
  uint32_t span_top_record = kNoRecord;
};

class SlotSet {
 public:
  // count: the threads' slots (rounded up to a power of two, at most kMaxSlots); lanes:
  // slots after them that no thread maps to, each owned by one lane (zarena_lane.h).
  SlotSet(uint32_t count, uint32_t lanes, uint64_t granule);
  uint32_t size() const { return count_ + lanes_; }
  uint32_t thread_slots() const { return count_; }
  uint32_t lane_slots() const { return lanes_; }
  Slot& operator[](uint32_t i) { return *slots_[i]; }
  const Slot& operator[](uint32_t i) const { return *slots_[i]; }

  // The calling thread's slot (not locked).
  Slot& mine() {
    uint32_t n = t_thread_number;
    if (ZARENA_UNLIKELY(n == kUnnumbered)) n = number_this_thread();
    return *slots_[n & mask_];
  }

  // The calling thread's number (threads are numbered as they first call in). Step plans
  // use it to tell which threads a learned step came from.
  static uint32_t thread_number() {
    const uint32_t n = t_thread_number;
    return ZARENA_UNLIKELY(n == kUnnumbered) ? number_this_thread() : n;
  }

  // Slots [0, active()) have been used; the others hold nothing. A slot becomes active
  // (activate, under the region's central lock) before its first use, so whole-arena
  // operations need to lock and visit only the active ones.
  uint32_t active() const { return active_.load(std::memory_order_acquire); }
  void set_active(uint32_t n) { active_.store(n, std::memory_order_release); }

  // Slot count for this machine: the hardware threads rounded up to a power of two, times
  // two (so that threads rarely share a slot), at most kMaxSlots.
  static uint32_t default_count();
  static constexpr uint32_t kMaxSlots = 128;
  // Lane slots an arena has (engine/lanes.h: its lanes' limit); ids stay below the
  // block records' special owners (block_store.h, 0xFC and up).
  static constexpr uint32_t kLaneSlots = 64;
  static constexpr uint32_t kMaxAllSlots = kMaxSlots + kLaneSlots;

 private:
  // Threads are numbered as they first call in (inline: the hot path reads it).
  static constexpr uint32_t kUnnumbered = ~0u;  // this thread has not called in yet
  static inline thread_local uint32_t t_thread_number = kUnnumbered;
  static uint32_t number_this_thread();

  uint32_t count_, lanes_, mask_;
  std::atomic<uint32_t> active_{0};
  std::unique_ptr<std::unique_ptr<Slot>[]> slots_;
};

}  // namespace zarena_core
