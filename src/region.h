// The region allocator: offsets into one contiguous region, no memory touched.
//
// Layout: blocks (live or free) tile [0, top) contiguously; [top, capacity) is untouched
// bump space. The floor splits the tiled part: blocks below it survive resets, blocks in
// [floor, top) belong to the current epoch. Free blocks are indexed on their side of the
// floor (floor_index_ below, epoch_index_ above) and coalesce only with neighbours on the
// same side. Allocation order: a freed block of this epoch, then the bump top, then a
// hole below the floor (a "borrowed" block, handed back to the floor side at reset).
//
// Reset is O(1) in the blocks above the floor: the epoch's records are spliced onto the
// record pool's free stack, the epoch index is cleared, the top returns to the floor.
// Records are validated on free by (state, offset, stamp, epoch/persistent), so stale
// records left in the pool can never be mistaken for live blocks.
//
// Not thread-safe: the arena serialises access.
#pragma once

#include <cstdint>
#include <string>

#include "block_pool.h"
#include "free_index.h"
#include "offset_table.h"

namespace zarena_core {

enum class FreeOutcome { kOk, kNotOwned, kDoubleFree, kStale };

class Region {
 public:
  Region(uint64_t capacity, uint64_t granule);
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  // size: > 0 and a multiple of the granule. On success writes the block's offset and
  // whether it reused a freed block. Fails (no state change) when nothing fits.
  bool alloc(uint64_t size, uint64_t* offset, bool* reused);
  // Classifies and, when valid, frees the block starting at offset; *size gets its size.
  FreeOutcome free(uint64_t offset, uint64_t* size);
  // Rewinds to the floor and starts a new epoch. on_reclaim(offset, bytes) is called for
  // every reclaimed range (for poisoning) before its records are dropped.
  template <typename OnReclaim>
  void reset(OnReclaim&& on_reclaim);
  void mark_step_boundary();

  uint64_t capacity() const { return capacity_; }
  uint64_t granule() const { return granule_; }
  uint64_t epoch() const { return epoch_; }
  uint64_t top() const { return top_; }
  uint64_t floor() const { return floor_; }
  uint64_t high_water() const { return high_water_; }
  uint64_t epoch_high_water() const { return epoch_high_water_; }
  uint64_t live_bytes() const { return floor_live_bytes_ + epoch_live_bytes_; }
  uint64_t live_count() const { return floor_live_count_ + epoch_live_count_; }
  uint64_t free_count() const { return epoch_index_.count() + floor_index_.count(); }
  uint64_t free_bytes() const { return epoch_index_.bytes() + floor_index_.bytes(); }
  uint64_t largest_free() const;

  // Walks every block and checks the layout invariants; returns "" or what is broken.
  // O(blocks): for tests.
  std::string check_invariants() const;

 private:
  bool valid_live(const OffsetEntry& e) const;
  void carve(uint32_t rec, uint64_t size, bool below_floor);
  void release_block(uint32_t rec);
  void absorb(uint32_t keep, uint32_t gone);
  void maybe_lower_floor();
  void epoch_list_push(uint32_t rec);
  void epoch_list_remove(uint32_t rec);
  void borrowed_push(uint32_t rec);
  void borrowed_remove(uint32_t rec);
  void reclaim_borrowed();
  void drop_epoch_blocks();

  uint64_t capacity_;
  uint64_t granule_;
  BlockPool pool_;
  FreeIndex epoch_index_;
  FreeIndex floor_index_;
  OffsetTable table_;

  uint64_t epoch_ = 0;
  uint64_t top_ = 0;
  uint64_t floor_ = 0;
  uint64_t high_water_ = 0;
  uint64_t epoch_high_water_ = 0;
  uint32_t tail_ = kNil;        // block ending at top_
  uint32_t floor_tail_ = kNil;  // block ending at floor_
  uint32_t ep_head_ = kNil, ep_tail_ = kNil;
  uint32_t borrowed_head_ = kNil;
  uint64_t floor_live_bytes_ = 0, floor_live_count_ = 0;
  uint64_t epoch_live_bytes_ = 0, epoch_live_count_ = 0;
};

template <typename OnReclaim>
void Region::reset(OnReclaim&& on_reclaim) {
  for (uint32_t r = borrowed_head_; r != kNil; r = pool_[r].next_link) {
    on_reclaim(pool_[r].offset, pool_[r].size);
  }
  reclaim_borrowed();
  if (top_ > floor_) on_reclaim(floor_, top_ - floor_);
  drop_epoch_blocks();
}

}  // namespace zarena_core
