// Out-of-band block records. Device memory cannot hold headers, so every block of the
// region (live or free) is described by a record in this pool, addressed by a 32-bit
// index. Records are recycled through a free stack; the pool grows geometrically, so
// the hot path allocates on the host heap only when the block count reaches a new high.
#pragma once

#include <cstdint>
#include <vector>

namespace zarena_core {

inline constexpr uint32_t kNil = 0xFFFFFFFFu;

enum class BlockState : uint8_t { kUnused = 0, kLive = 1, kFree = 2 };

struct Block {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t epoch = 0;         // epoch in which the block was handed out (live blocks)
  uint32_t stamp = 0;         // incarnation id, matched against the offset table
  uint32_t prev_phys = kNil;  // neighbour just below in the region
  uint32_t next_phys = kNil;  // neighbour just above
  uint32_t prev_link = kNil;  // free-index bin list, or the borrowed list
  uint32_t next_link = kNil;
  uint32_t ep_prev = kNil;  // epoch list (blocks above the floor);
  uint32_t ep_next = kNil;  // ep_next also links the pool's free stack
  BlockState state = BlockState::kUnused;
  bool persistent = false;  // survived a step boundary: resets do not reclaim it
  bool borrowed = false;    // live epoch block placed in a hole below the floor
  bool in_epoch_list = false;
};

class BlockPool {
 public:
  Block& operator[](uint32_t i) { return blocks_[i]; }
  const Block& operator[](uint32_t i) const { return blocks_[i]; }
  uint32_t size() const { return static_cast<uint32_t>(blocks_.size()); }

  // A fresh record with a new stamp, every link kNil.
  uint32_t acquire() {
    uint32_t i;
    if (free_head_ != kNil) {
      i = free_head_;
      free_head_ = blocks_[i].ep_next;
    } else {
      i = static_cast<uint32_t>(blocks_.size());
      blocks_.emplace_back();
    }
    Block& b = blocks_[i];
    b = Block{};
    b.stamp = ++stamp_counter_;
    return i;
  }

  void release(uint32_t i) {
    Block& b = blocks_[i];
    b.state = BlockState::kUnused;
    b.ep_next = free_head_;
    free_head_ = i;
  }

  // Pushes a whole chain (linked through ep_next, from head to tail) onto the free
  // stack in O(1). The records keep their stale contents; validation rejects them
  // because they are neither persistent nor of the current epoch.
  void release_chain(uint32_t head, uint32_t tail) {
    if (head == kNil) return;
    blocks_[tail].ep_next = free_head_;
    free_head_ = head;
  }

  void clear() {
    blocks_.clear();
    free_head_ = kNil;
  }

 private:
  std::vector<Block> blocks_;
  uint32_t free_head_ = kNil;
  uint32_t stamp_counter_ = 0;
};

}  // namespace zarena_core
