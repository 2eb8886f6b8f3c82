// Segregated-fit index of free blocks (two-level, TLSF-like): 64 power-of-two classes,
// each split into 16 linear sub-bins, with bitmaps to find the first non-empty bin in
// O(1). Insert, remove and find are O(1) whatever the number of free blocks; clear() is
// O(1) too (it drops the bitmaps), which is what makes a reset cheap.
#pragma once

#include <cstdint>

#include "block_pool.h"

namespace zarena_core {

class FreeIndex {
 public:
  // granule: every block size is a multiple of it (the arena's alignment).
  explicit FreeIndex(uint64_t granule);

  void insert(BlockPool& pool, uint32_t rec);
  void remove(BlockPool& pool, uint32_t rec);
  // A free block of at least `size` bytes (a multiple of the granule), or kNil. Tries
  // the head of the exact size class first, then the first class that guarantees a
  // fit. Does not remove it.
  uint32_t find(const BlockPool& pool, uint64_t size) const;
  // Forgets every block in O(1); the records stay with the caller.
  void clear();

  uint64_t count() const { return count_; }
  uint64_t bytes() const { return bytes_; }
  // Largest block: scans the highest non-empty bin (not for the hot path).
  uint64_t largest(const BlockPool& pool) const;

 private:
  static constexpr int kFirstLevels = 64;
  static constexpr int kSecondLevelLog2 = 4;
  static constexpr int kSecondLevels = 1 << kSecondLevelLog2;

  void mapping(uint64_t units, int* fl, int* sl) const;

  int granule_shift_;
  uint64_t fl_bitmap_ = 0;
  uint32_t sl_bitmap_[kFirstLevels] = {};
  uint32_t heads_[kFirstLevels][kSecondLevels];
  uint64_t count_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace zarena_core
