#include "region.h"

#include <algorithm>

namespace zarena_core {

Region::Region(uint64_t capacity, uint64_t granule)
    : capacity_(capacity),
      granule_(granule),
      epoch_index_(granule),
      floor_index_(granule),
      table_(granule, [this](const OffsetEntry& e) {
        // Keep live blocks and the recent past (current and previous epoch), so double
        // and stale frees of recent blocks stay recognisable; older history is dropped.
        return valid_live(e) || e.epoch + 1 >= epoch_;
      }) {}

bool Region::valid_live(const OffsetEntry& e) const {
  if (e.rec >= pool_.size()) return false;
  const Block& b = pool_[e.rec];
  return b.state == BlockState::kLive && b.offset + 1 == e.key && b.stamp == e.stamp &&
         (b.persistent || b.epoch == epoch_);
}

bool Region::alloc(uint64_t size, uint64_t* offset, bool* reused) {
  uint32_t r = epoch_index_.find(pool_, size);
  bool below_floor = false;
  if (r != kNil) {
    epoch_index_.remove(pool_, r);
    carve(r, size, false);
    *reused = true;
  } else if (capacity_ - top_ >= size) {
    r = pool_.acquire();
    Block& b = pool_[r];
    b.offset = top_;
    b.size = size;
    b.prev_phys = tail_;
    if (tail_ != kNil) pool_[tail_].next_phys = r;
    tail_ = r;
    epoch_list_push(r);
    top_ += size;
    high_water_ = std::max(high_water_, top_);
    epoch_high_water_ = std::max(epoch_high_water_, top_);
    *reused = false;
  } else if ((r = floor_index_.find(pool_, size)) != kNil) {
    floor_index_.remove(pool_, r);
    carve(r, size, true);
    borrowed_push(r);
    below_floor = true;
    *reused = true;
  } else {
    return false;
  }
  Block& b = pool_[r];
  b.state = BlockState::kLive;
  b.epoch = epoch_;
  b.persistent = false;
  if (below_floor) {
    floor_live_bytes_ += size;
    ++floor_live_count_;
  } else {
    epoch_live_bytes_ += size;
    ++epoch_live_count_;
  }
  table_.upsert(b.offset, r, b.stamp, epoch_);
  *offset = b.offset;
  return true;
}

// Shrinks free block `rec` to `size`, returning the remainder to its side's index.
void Region::carve(uint32_t rec, uint64_t size, bool below_floor) {
  if (pool_[rec].size == size) return;
  const uint32_t q = pool_.acquire();  // may grow the pool: take references after
  Block& b = pool_[rec];
  Block& rest = pool_[q];
  rest.offset = b.offset + size;
  rest.size = b.size - size;
  rest.state = BlockState::kFree;
  rest.prev_phys = rec;
  rest.next_phys = b.next_phys;
  if (b.next_phys != kNil) pool_[b.next_phys].prev_phys = q;
  b.next_phys = q;
  b.size = size;
  if (tail_ == rec) tail_ = q;
  if (floor_tail_ == rec) floor_tail_ = q;
  if (below_floor) {
    rest.persistent = true;
    floor_index_.insert(pool_, q);
  } else {
    epoch_list_push(q);
    epoch_index_.insert(pool_, q);
  }
}

FreeOutcome Region::free(uint64_t offset, uint64_t* size) {
  OffsetEntry* e = table_.find(offset);
  if (e == nullptr) return FreeOutcome::kNotOwned;
  if (!valid_live(*e)) return e->freed ? FreeOutcome::kDoubleFree : FreeOutcome::kStale;
  e->freed = true;
  e->epoch = epoch_;  // history is kept by recency of the last event, see table_'s keep rule
  *size = pool_[e->rec].size;
  release_block(e->rec);
  return FreeOutcome::kOk;
}

void Region::release_block(uint32_t r) {
  Block& b = pool_[r];
  const bool above = b.in_epoch_list;
  if (above) {
    epoch_live_bytes_ -= b.size;
    --epoch_live_count_;
  } else {
    floor_live_bytes_ -= b.size;
    --floor_live_count_;
  }
  if (b.borrowed) borrowed_remove(r);
  b.state = BlockState::kFree;

  FreeIndex& index = above ? epoch_index_ : floor_index_;
  const auto same_side_free = [&](uint32_t n) {
    return n != kNil && pool_[n].state == BlockState::kFree && pool_[n].in_epoch_list == above;
  };
  const uint32_t prev = pool_[r].prev_phys;
  if (same_side_free(prev)) {
    index.remove(pool_, prev);
    absorb(prev, r);
    r = prev;
  }
  const uint32_t next = pool_[r].next_phys;
  if (same_side_free(next)) {
    index.remove(pool_, next);
    absorb(r, next);
  }
  if (above && r == tail_) {
    // The top block is free: give it back to the bump space.
    Block& t = pool_[r];
    top_ = t.offset;
    tail_ = t.prev_phys;
    if (tail_ != kNil) pool_[tail_].next_phys = kNil;
    epoch_list_remove(r);
    pool_.release(r);
    maybe_lower_floor();
    return;
  }
  if (!above) pool_[r].persistent = true;
  index.insert(pool_, r);
  maybe_lower_floor();
}

// Merges physical neighbour `gone` (just above `keep`) into `keep`.
void Region::absorb(uint32_t keep, uint32_t gone) {
  Block& k = pool_[keep];
  Block& g = pool_[gone];
  k.size += g.size;
  k.next_phys = g.next_phys;
  if (g.next_phys != kNil) pool_[g.next_phys].prev_phys = keep;
  if (tail_ == gone) tail_ = keep;
  if (floor_tail_ == gone) floor_tail_ = keep;
  if (g.in_epoch_list) epoch_list_remove(gone);
  pool_.release(gone);
}

// When nothing lies above the floor and the block under it is free, the floor and the
// top come down together: freeing the last "weights" returns them to the bump space.
void Region::maybe_lower_floor() {
  while (top_ == floor_ && floor_tail_ != kNil && pool_[floor_tail_].state == BlockState::kFree) {
    const uint32_t q = floor_tail_;
    floor_index_.remove(pool_, q);
    top_ = floor_ = pool_[q].offset;
    floor_tail_ = tail_ = pool_[q].prev_phys;
    if (tail_ != kNil) pool_[tail_].next_phys = kNil;
    pool_.release(q);
  }
  if (epoch_high_water_ < top_) epoch_high_water_ = top_;
}

void Region::reclaim_borrowed() {
  while (borrowed_head_ != kNil) release_block(borrowed_head_);
}

void Region::drop_epoch_blocks() {
  pool_.release_chain(ep_head_, ep_tail_);
  ep_head_ = ep_tail_ = kNil;
  epoch_index_.clear();
  epoch_live_bytes_ = 0;
  epoch_live_count_ = 0;
  top_ = floor_;
  tail_ = floor_tail_;
  if (tail_ != kNil) pool_[tail_].next_phys = kNil;
  ++epoch_;
  epoch_high_water_ = top_;
  maybe_lower_floor();
}

void Region::mark_step_boundary() {
  const uint32_t old_floor_tail = floor_tail_;
  for (uint32_t r = ep_head_; r != kNil;) {
    Block& b = pool_[r];
    const uint32_t next = b.ep_next;
    if (b.state == BlockState::kFree) {
      epoch_index_.remove(pool_, r);
      b.in_epoch_list = false;
      floor_index_.insert(pool_, r);
    }
    b.in_epoch_list = false;
    b.persistent = true;
    b.ep_prev = b.ep_next = kNil;
    r = next;
  }
  ep_head_ = ep_tail_ = kNil;
  while (borrowed_head_ != kNil) {
    const uint32_t r = borrowed_head_;
    borrowed_remove(r);
    pool_[r].persistent = true;
  }
  // Free blocks on both sides of the old floor may now touch: merge that one pair.
  if (old_floor_tail != kNil && pool_[old_floor_tail].state == BlockState::kFree) {
    const uint32_t next = pool_[old_floor_tail].next_phys;
    if (next != kNil && pool_[next].state == BlockState::kFree) {
      floor_index_.remove(pool_, old_floor_tail);
      floor_index_.remove(pool_, next);
      absorb(old_floor_tail, next);
      floor_index_.insert(pool_, old_floor_tail);
    }
  }
  floor_ = top_;
  floor_tail_ = tail_;
  floor_live_bytes_ += epoch_live_bytes_;
  floor_live_count_ += epoch_live_count_;
  epoch_live_bytes_ = 0;
  epoch_live_count_ = 0;
}

void Region::epoch_list_push(uint32_t r) {
  Block& b = pool_[r];
  b.in_epoch_list = true;
  b.ep_prev = ep_tail_;
  b.ep_next = kNil;
  if (ep_tail_ != kNil) {
    pool_[ep_tail_].ep_next = r;
  } else {
    ep_head_ = r;
  }
  ep_tail_ = r;
}

void Region::epoch_list_remove(uint32_t r) {
  Block& b = pool_[r];
  if (b.ep_prev != kNil) {
    pool_[b.ep_prev].ep_next = b.ep_next;
  } else {
    ep_head_ = b.ep_next;
  }
  if (b.ep_next != kNil) {
    pool_[b.ep_next].ep_prev = b.ep_prev;
  } else {
    ep_tail_ = b.ep_prev;
  }
  b.ep_prev = b.ep_next = kNil;
  b.in_epoch_list = false;
}

void Region::borrowed_push(uint32_t r) {
  Block& b = pool_[r];
  b.borrowed = true;
  b.prev_link = kNil;
  b.next_link = borrowed_head_;
  if (borrowed_head_ != kNil) pool_[borrowed_head_].prev_link = r;
  borrowed_head_ = r;
}

void Region::borrowed_remove(uint32_t r) {
  Block& b = pool_[r];
  if (b.prev_link != kNil) {
    pool_[b.prev_link].next_link = b.next_link;
  } else {
    borrowed_head_ = b.next_link;
  }
  if (b.next_link != kNil) pool_[b.next_link].prev_link = b.prev_link;
  b.prev_link = b.next_link = kNil;
  b.borrowed = false;
}

uint64_t Region::largest_free() const {
  return std::max(epoch_index_.largest(pool_), floor_index_.largest(pool_));
}

std::string Region::check_invariants() const {
  uint64_t expect_end = top_;
  uint64_t free_n = 0, free_b = 0, live_b = 0, live_n = 0, epoch_free_n = 0;
  bool saw_floor = (floor_ == top_);
  uint32_t next = kNil;
  for (uint32_t r = tail_; r != kNil; r = pool_[r].prev_phys) {
    const Block& b = pool_[r];
    if (b.next_phys != next) return "broken next_phys link at offset " + std::to_string(b.offset);
    if (b.offset + b.size != expect_end) return "gap or overlap at " + std::to_string(b.offset);
    if (b.size == 0 || b.size % granule_ != 0 || b.offset % granule_ != 0)
      return "misaligned block at " + std::to_string(b.offset);
    const bool above = b.offset >= floor_;
    if (above != b.in_epoch_list)
      return "epoch-list membership wrong at " + std::to_string(b.offset);
    if (b.offset + b.size == floor_) {
      saw_floor = true;
      if (floor_tail_ != r) return "floor_tail does not end at the floor";
    }
    if (b.offset < floor_ && b.offset + b.size > floor_) return "block straddles the floor";
    if (b.state == BlockState::kFree) {
      ++free_n;
      free_b += b.size;
      if (above) ++epoch_free_n;
      if (next != kNil && pool_[next].state == BlockState::kFree &&
          pool_[next].in_epoch_list == b.in_epoch_list)
        return "uncoalesced free neighbours at " + std::to_string(b.offset);
      if (r == tail_) return "free block at the top";
    } else if (b.state == BlockState::kLive) {
      ++live_n;
      live_b += b.size;
    } else {
      return "unused record in the chain";
    }
    expect_end = b.offset;
    next = r;
  }
  if (expect_end != 0) return "chain does not start at offset 0";
  if (!saw_floor && floor_ != 0) return "floor is not a block boundary";
  if (free_n != free_count() || free_b != free_bytes()) return "free index counts disagree";
  if (epoch_free_n != epoch_index_.count()) return "epoch index count disagrees";
  if (live_b != live_bytes() || live_n != live_count()) return "live counters disagree";
  if (top_ > capacity_ || floor_ > top_) return "top/floor out of range";
  return "";
}

}  // namespace zarena_core
