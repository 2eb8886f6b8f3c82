// Segregated-fit index of free blocks (two-level, TLSF-like): 64 power-of-two classes,
// each split into 16 linear sub-bins, with bitmaps to find the first non-empty bin in
// O(1). Insert, remove and find are O(1) whatever the number of free blocks; clear() is
// O(classes in use) (it drops the bitmaps), which is what makes a reset cheap.
#pragma once

#include <atomic>
#include <cstdint>

#include "region/block_store.h"

namespace zarena_core {

class FreeIndex {
 public:
  // How find chooses among the blocks of the class it settles on.
  enum class Fit {
    // The head (O(1)): a slot's index, on the hot path.
    kHead,
    // The lowest address of the fitting blocks among the class's first kFitScan: the
    // central and floor indexes, where the big blocks are (docs/CONCURRENCY.md, "Big
    // blocks are shared"). Filling holes from the bottom keeps free space together at the
    // top, where a request may extend it instead of raising the top by its whole size.
    kLowestAddress,
  };
  static constexpr int kFitScan = 64;

  // granule: every block size is a multiple of it (the arena's alignment).
  explicit FreeIndex(uint64_t granule, Fit fit = Fit::kHead);

  void insert(BlockStore& store, uint32_t record);
  void remove(BlockStore& store, uint32_t record);
  // A free block of at least `size` bytes (a multiple of the granule), or kNoRecord. Tries
  // the exact size class first, then the first class that guarantees a fit; within the
  // class, the head or the lowest fitting address (Fit). Does not remove it.
  uint32_t find(const BlockStore& store, uint64_t size) const;
  // True when a block of `size` may be here: a hint readable without the owner's lock
  // (the first-level bitmap is mirrored into an atomic), used to skip taking a lock.
  bool may_fit(uint64_t size) const;
  // The bytes held, readable without the owner's lock (a hint, mirrored like the bitmap).
  uint64_t bytes_hint() const { return bytes_hint_.load(std::memory_order_relaxed); }
  // Any block of the highest non-empty class (for flushing the largest first), or kNoRecord.
  uint32_t any_largest() const;
  // Forgets every block in O(1); the records stay with the caller.
  void clear();

  uint64_t count() const { return count_; }
  uint64_t bytes() const { return bytes_; }
  // Largest block: scans the highest non-empty bin (not for the hot path).
  uint64_t largest(const BlockStore& store) const;
  // Calls fn(record) for every block (not for the hot path; fn must not change the index).
  template <typename Fn>
  void for_each(const BlockStore& store, Fn&& fn) const {
    uint64_t map = fl_bitmap_;
    while (map != 0) {
      const int fl = __builtin_ctzll(map);
      map &= map - 1;
      uint32_t sm = sl_bitmap_[fl];
      while (sm != 0) {
        const int sl = __builtin_ctz(sm);
        sm &= sm - 1;
        for (uint32_t r = heads_[fl][sl]; r != kNoRecord;) {
          const uint32_t next = store[r].next;
          fn(r);
          r = next;
        }
      }
    }
  }

 private:
  static constexpr int kFirstLevels = 64;
  static constexpr int kSecondLevelLog2 = 4;
  static constexpr int kSecondLevels = 1 << kSecondLevelLog2;

  void mapping(uint64_t units, int* fl, int* sl) const;
  // The block of the class list at head that find returns for size (Fit), or kNoRecord.
  uint32_t pick(const BlockStore& store, uint32_t head, uint64_t size) const;

  int granule_shift_;
  Fit fit_;
  void publish() {
    fl_hint_.store(fl_bitmap_, std::memory_order_relaxed);
    bytes_hint_.store(bytes_, std::memory_order_relaxed);
  }

  uint64_t fl_bitmap_ = 0;
  std::atomic<uint64_t> fl_hint_{0};
  std::atomic<uint64_t> bytes_hint_{0};
  uint32_t sl_bitmap_[kFirstLevels] = {};
  uint32_t heads_[kFirstLevels][kSecondLevels];
  uint64_t count_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace zarena_core
