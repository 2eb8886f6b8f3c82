// The parts of the region's central side (region.h: what sits behind the central lock),
// each a type with its own small methods: the records of the central blocks, the set of
// pinned blocks, the list of borrowed blocks, and the totals the statistics carry across
// slots and resets. Every method runs under the region's central lock (or the writer
// lock, which includes it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "region/block_store.h"
#include "region/slots.h"

namespace zarena_core {

// Records for the central side's blocks (free space it holds, blocks it hands out, the
// holes and survivors of a reset): pages taken in this epoch, the page being handed out,
// recycled records and the quarantine in front of them, as a slot keeps its own
// (slots.h). A reset retires the epoch's pages at once; they are recycled at the reset
// after, so that a pointer of the previous epoch still finds its record. Long-lived
// records replaced by a move (floor changes) wait two resets likewise.
class CentralRecords {
 public:
  explicit CentralRecords(BlockStore& store) : store_(store) {}
  CentralRecords(const CentralRecords&) = delete;
  CentralRecords& operator=(const CentralRecords&) = delete;

  // A fresh epoch record. Takes a page when none is at hand: may throw std::bad_alloc.
  uint32_t acquire();
  // Makes sure the next acquire() needs no host memory (may throw; call before a change
  // that must not fail half-way).
  void keep_one_at_hand();
  // Puts at least n records on the free list (may throw; before changes).
  void reserve(uint64_t n);
  // A record absorbed or moved away: reused after the quarantine (long-lived ones go
  // back to the store then).
  void retire(uint32_t record);
  // A record replaced by a move (floor changes): epoch records go with their page;
  // long-lived ones wait until the reset after next.
  void retire_moved(uint32_t record);
  // A slot's pages of the ending epoch (a reset): retired with the central ones.
  void retire_pages(uint32_t head, uint32_t tail);

  // A reset, in three steps. First: the pages retired by the previous reset are free from
  // now on (whatever happens next), so that the pages taken below come from them.
  void recycle_retired();
  // Then (may throw, before any change): pages for at least `records` records of the new
  // epoch.
  struct Pages {
    uint32_t head = kNoRecord, tail = kNoRecord;
  };
  Pages take_pages(uint64_t records);
  // Last: the epoch's pages and records retire, and `fresh` serves the new epoch.
  void start_epoch(Pages fresh);

 private:
  void push_free(uint32_t record) {
    store_[record].next = free_;
    free_ = record;
  }

  BlockStore& store_;
  uint32_t page_head_ = kNoRecord, page_tail_ = kNoRecord;  // pages taken in this epoch
  uint32_t cursor_ = kNoRecord, left_ = 0;                  // the page being handed out
  uint32_t free_ = kNoRecord;                               // recycled records
  Quarantine quarantine_;
  uint32_t retiring_head_ = kNoRecord,
           retiring_tail_ = kNoRecord;  // pages retired by the last reset
  // Long-lived records replaced by a move in this epoch, and in the one before.
  uint32_t moved_long_ = kNoRecord, moved_long_prev_ = kNoRecord;
};

// The region records with pins > 0 (a user's pins or a plan zone's): Block::pin_pos is
// each one's position, so that adding and removing are O(1).
class PinnedSet {
 public:
  explicit PinnedSet(BlockStore& store) : store_(store) {}
  // May throw std::bad_alloc: call before the change it records.
  void add(uint32_t record) {
    records_.push_back(record);
    store_[record].pin_pos = static_cast<uint32_t>(records_.size() - 1);
  }
  void remove(uint32_t record) {
    const uint32_t pos = store_[record].pin_pos;
    const uint32_t last = records_.back();
    records_[pos] = last;
    store_[last].pin_pos = pos;
    records_.pop_back();
    store_[record].pin_pos = kNotPinned;
  }
  // from's block now lives in record `into` (Region::move_record): its place follows.
  void moved(uint32_t from, uint32_t into) {
    Block& a = store_[from];
    store_[into].pin_pos = a.pin_pos;
    if (a.pin_pos != kNotPinned) records_[a.pin_pos] = into;
    a.pin_pos = kNotPinned;
  }
  // Room for n more (may throw; before changes).
  void reserve_more(size_t n) { records_.reserve(records_.size() + n); }
  size_t size() const { return records_.size(); }
  std::vector<uint32_t>::const_iterator begin() const { return records_.begin(); }
  std::vector<uint32_t>::const_iterator end() const { return records_.end(); }

 private:
  BlockStore& store_;
  std::vector<uint32_t> records_;
};

// The borrowed blocks: epoch blocks handed out from holes below the floor, which the next
// reset reclaims unless pinned. A list linked through Block::prev and next.
class BorrowedList {
 public:
  explicit BorrowedList(BlockStore& store) : store_(store) {}
  void push(uint32_t record) {
    Block& b = store_[record];
    b.prev = kNoRecord;
    b.next = head_;
    if (head_ != kNoRecord) store_[head_].prev = record;
    head_ = record;
  }
  void remove(uint32_t record) {
    Block& b = store_[record];
    if (b.prev != kNoRecord) {
      store_[b.prev].next = b.next;
    } else {
      head_ = b.next;
    }
    if (b.next != kNoRecord) store_[b.next].prev = b.prev;
    b.prev = b.next = kNoRecord;
  }
  // fn(record) for each; fn may remove the record it is given (and only that one).
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (uint32_t r = head_; r != kNoRecord;) {
      const uint32_t next = store_[r].next;
      fn(r);
      r = next;
    }
  }

 private:
  BlockStore& store_;
  uint32_t head_ = kNoRecord;
};

// What the region's statistics carry across slots and resets (the slots' counters hold
// the rest; Region::snapshot_w adds them up).
struct RegionTotals {
  uint64_t floor_live_bytes = 0, floor_live_count = 0;  // persistent live blocks
  uint64_t live_base_bytes = 0, live_base_count = 0;    // live at the last reset
  uint64_t pin_retained_bytes = 0;  // at the last reset: unpinned bytes under the raised top
  uint64_t epoch_hw_base = 0;       // the top right after the last reset
  uint64_t hw_base = 0;             // the top at the last peak reset
  uint64_t used_peak = 0;           // used-bytes peak folded in at resets and peak resets
  SlotCounters writer;              // counters of writer operations (poison at reset)
};

}  // namespace zarena_core
