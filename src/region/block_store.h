// Out-of-band block records and the map that finds them. Device memory cannot hold
// headers, so every block of the region (live or free) is described by a 64-byte record
// addressed by a 32-bit index, and a map from granule to record index finds the record of
// the block that starts (start tag) or ends (end tag) at a granule in O(1), with no lock.
//
// Records are read by threads that do not own them (a free arriving from another thread,
// a neighbour check while coalescing), so every field such a reader looks at is an atomic
// accessed with relaxed ordering, and the record's `word` (state, flags, owner, pins and a
// generation count) is the one field that is changed with compare-and-swap when two
// threads may race for the same block (two frees, a free and a pin). A reader validates
// what it found (the record's offset must be the one it looked up, its state must say
// live, ...) instead of trusting the map: map entries inside blocks are never cleaned.
//
// Storage classes. Records of blocks above the floor come from *pages* (runs of
// kPageRecords records) that a slot or the central part takes for the current epoch; a
// reset retires every page of the epoch at once (O(1) per slot) and recycles the pages
// retired by the reset before it, so a pointer of the previous epoch still finds its
// record and reads "stale". Records of blocks below the floor (weights, the holes between
// them, and epoch blocks "borrowed" from those holes) are "long-lived": taken from and
// given back to a free stack one by one, through a quarantine. A pinned block that
// survives a reset is copied into a record of the new epoch (O(pins) per reset).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace zarena_core {

// A record index that names no record (an empty list, no neighbour, nothing absorbed
// into); pages are named by their first record's index, so it also means "no page".
inline constexpr uint32_t kNoRecord = 0xFFFFFFFFu;
// Block::pin_pos of a block in no pinned set.
inline constexpr uint32_t kNotPinned = 0xFFFFFFFFu;

enum class BlockState : uint8_t {
  kUnused = 0,    // describes no block
  kLive = 1,      // handed out
  kFree = 2,      // in a free index; the owner byte says whose
  kDeferred = 3,  // freed by the user while pinned: given back at the last unpin
  kAbsorbed = 4,  // merged into a neighbour (absorbed_into at absorbed_gen): history only
  kMoved = 5,     // replaced by a copy in another record (boundary, reset): history only
};

// Owner byte of a free block: a slot index, or one of these. A live block's is kOwnerNone,
// or kOwnerCentral for one a reset kept above the floor (Region::kept).
inline constexpr uint8_t kOwnerCentral = 0xFE;  // the central index of the epoch side
inline constexpr uint8_t kOwnerFloor = 0xFF;    // the central index below the floor
inline constexpr uint8_t kOwnerNone = 0xFD;
// A live block that is a piece of a step plan's zone (claim_w, pin_zone): the plan, not the
// region, answers for the addresses inside it. The user's free, pin and unpin of it are
// refused with kZone (the arena asks the plan); only unclaim gives it back. Kept by
// resets like a pinned block (Region::kept), keeping this owner byte.
inline constexpr uint8_t kOwnerZone = 0xFC;

// Flag bits of the word.
inline constexpr uint8_t kFlagPersistent = 0x1;  // below the floor: survives resets
inline constexpr uint8_t kFlagBorrowed = 0x2;    // epoch block placed in a hole below the floor
inline constexpr uint8_t kFlagLongLived = 0x4;   // record storage: long-lived, not a page
// A free block (or absorbed record) whose last live incarnation was reclaimed by a reset
// rather than freed by its user: a later free of that pointer is "stale", not "double".
inline constexpr uint8_t kFlagReclaimed = 0x8;

// word: gen (32) | pins (16) | owner (8) | flags (4) | state (4)
struct Word {
  static constexpr uint64_t make(BlockState s, uint8_t flags, uint8_t owner, uint32_t pins,
                                 uint32_t gen) {
    return static_cast<uint64_t>(s) | (static_cast<uint64_t>(flags & 0xF) << 4) |
           (static_cast<uint64_t>(owner) << 8) | (static_cast<uint64_t>(pins & 0xFFFF) << 16) |
           (static_cast<uint64_t>(gen) << 32);
  }
  static constexpr BlockState state(uint64_t w) { return static_cast<BlockState>(w & 0xF); }
  static constexpr uint8_t flags(uint64_t w) { return static_cast<uint8_t>((w >> 4) & 0xF); }
  static constexpr uint8_t owner(uint64_t w) { return static_cast<uint8_t>(w >> 8); }
  static constexpr uint32_t pins(uint64_t w) { return static_cast<uint32_t>((w >> 16) & 0xFFFF); }
  static constexpr uint32_t gen(uint64_t w) { return static_cast<uint32_t>(w >> 32); }
  static constexpr uint32_t kMaxPins = 0xFFFF;

  static constexpr uint64_t with_state(uint64_t w, BlockState s) {
    return (w & ~uint64_t{0xF}) | static_cast<uint64_t>(s);
  }
  static constexpr uint64_t with_owner(uint64_t w, uint8_t owner) {
    return (w & ~(uint64_t{0xFF} << 8)) | (static_cast<uint64_t>(owner) << 8);
  }
  static constexpr uint64_t with_flags(uint64_t w, uint8_t flags) {
    return (w & ~(uint64_t{0xF} << 4)) | (static_cast<uint64_t>(flags & 0xF) << 4);
  }
  static constexpr uint64_t with_pins(uint64_t w, uint32_t pins) {
    return (w & ~(uint64_t{0xFFFF} << 16)) | (static_cast<uint64_t>(pins & 0xFFFF) << 16);
  }
  static constexpr uint64_t next_gen(uint64_t w) {
    return (w & 0xFFFFFFFFull) | (static_cast<uint64_t>(gen(w) + 1) << 32);
  }
};

struct Block {
  std::atomic<uint64_t> word{0};
  std::atomic<uint64_t> offset{0};
  std::atomic<uint64_t> size{0};
  std::atomic<uint64_t> alloc_epoch{0};  // live: the epoch it was handed out in
  // The epoch whose layout the record describes: live, the last epoch in which it is valid
  // (its alloc_epoch, raised by a reset that kept it); free on the epoch side, the epoch
  // in which it entered its index. A record whose layout_epoch is not the region's epoch
  // (and that is not persistent or below the floor) is history.
  std::atomic<uint64_t> layout_epoch{0};
  std::atomic<uint32_t> absorbed_into{kNoRecord};  // kAbsorbed / kMoved: where it went
  std::atomic<uint32_t> absorbed_gen{0};           // that record's gen right after
  // Owner-guarded (the lock of whoever owns the block's current list or index):
  uint32_t prev = kNoRecord;  // free-index bin or list links
  uint32_t next = kNoRecord;  // also the free stacks of unused records
  uint32_t tag = 0;
  uint32_t pin_pos = kNotPinned;  // index in the region's pinned list (central lock)

  uint64_t load_word() const { return word.load(std::memory_order_acquire); }
  uint64_t off() const { return offset.load(std::memory_order_relaxed); }
  uint64_t len() const { return size.load(std::memory_order_relaxed); }
  uint64_t end() const { return off() + len(); }
};
static_assert(sizeof(Block) == 64, "a block record is one cache line");

// Segmented, never-moving record storage (so lock-free readers can hold references), with
// pages for epoch records and a free stack for long-lived ones. Growth and the stacks are
// guarded by the caller's central lock; indexing is lock-free.
class BlockStore {
 public:
  static constexpr uint32_t kSegmentShift = 12;  // 4096 records (256 KiB) per segment
  static constexpr uint32_t kSegmentRecords = 1u << kSegmentShift;
  static constexpr uint32_t kPageRecords = 64;
  static constexpr uint32_t kPagesPerSegment = kSegmentRecords / kPageRecords;
  static constexpr uint32_t kMaxSegments = 1u << 20;

  BlockStore();
  ~BlockStore();
  BlockStore(const BlockStore&) = delete;
  BlockStore& operator=(const BlockStore&) = delete;

  // Relaxed: a segment is published (release) before any record in it can be reached
  // (through a map entry or a list written after it), and it never moves or goes away.
  __attribute__((always_inline)) Block& operator[](uint32_t i) const {
    return segments_[i >> kSegmentShift]
        .load(std::memory_order_relaxed)
        ->records[i & (kSegmentRecords - 1)];
  }

  // A page of kPageRecords fresh records (index of its first record); pages retired two
  // resets ago come back first. Throws std::bad_alloc when host memory runs out.
  uint32_t take_page();
  // Page lists: pages are linked through their first record's page_next.
  uint32_t& page_next(uint32_t first) {
    return segment_of(first)->page_next[(first & (kSegmentRecords - 1)) / kPageRecords];
  }
  // Appends the pages first..last (linked) to the list *head..*tail (kNoRecord: empty).
  void append_pages(uint32_t* head, uint32_t* tail, uint32_t first, uint32_t last) {
    if (*tail == kNoRecord) {
      *head = first;
    } else {
      page_next(*tail) = first;
    }
    *tail = last;
  }
  // Appends a list of pages to the recycling list (pages become reusable at once).
  void recycle_pages(uint32_t head, uint32_t tail);

  // Long-lived records: one at a time. reserve_long_lived(n) makes sure the next n takes
  // need no host memory (call it before a change that must not fail half-way).
  uint32_t take_long_lived();
  void reserve_long_lived(uint32_t n);
  void give_long_lived(uint32_t record);

  // Marks a record as describing nothing new: state unused, gen advanced, links cleared.
  void reinit(uint32_t record, uint8_t flags);

  uint64_t records_allocated() const {
    return static_cast<uint64_t>(segment_count_) << kSegmentShift;
  }

 private:
  struct Segment {
    Block records[kSegmentRecords];
    uint32_t page_next[kPagesPerSegment];
  };
  Segment* segment_of(uint32_t i) const {
    return segments_[i >> kSegmentShift].load(std::memory_order_relaxed);
  }
  uint32_t new_segment();  // first record index of a fresh segment

  // calloc'ed: the 8 MiB table is zero (null) without being touched, so a create does not
  // fault in 2048 pages it will mostly never use.
  struct FreeTable {
    void operator()(std::atomic<Segment*>* p) const noexcept;
  };
  std::unique_ptr<std::atomic<Segment*>[], FreeTable> segments_;
  uint32_t segment_count_ = 0;
  uint32_t next_fresh_page_ = kNoRecord;  // next unused page of the newest segment
  uint32_t pages_free_head_ = kNoRecord, pages_free_tail_ = kNoRecord;
  uint32_t long_free_ = kNoRecord;
  uint32_t long_free_count_ = 0;
};

// Granule -> record index: one map for the blocks that start at a granule, one for the
// blocks that end there (two maps, so that a block's end tag never overwrites the start
// tag of an older block at that granule: that one still answers "stale" for a late free).
// Lazily committed: untouched parts cost only address space.
class BlockMap {
 public:
  BlockMap(uint64_t capacity, uint64_t granule);
  ~BlockMap();
  BlockMap(const BlockMap&) = delete;
  BlockMap& operator=(const BlockMap&) = delete;

  // The record tagged as starting at `offset`, or kNoRecord.
  uint32_t at(uint64_t offset) const {
    return starts_[offset >> shift_].load(std::memory_order_relaxed) - 1;
  }
  // The record tagged as ending at `offset` (its end == offset), or kNoRecord.
  uint32_t ending_at(uint64_t offset) const {
    return ends_[offset >> shift_].load(std::memory_order_relaxed) - 1;
  }
  void set_start(uint64_t offset, uint32_t record) {
    starts_[offset >> shift_].store(record + 1, std::memory_order_relaxed);
  }
  void set_end(uint64_t end, uint32_t record) {
    ends_[end >> shift_].store(record + 1, std::memory_order_relaxed);
  }
  // Both tags of the block [offset, offset + size).
  void tag(uint64_t offset, uint64_t size, uint32_t record) {
    set_start(offset, record);
    set_end(offset + size, record);
  }
  uint64_t granule() const { return granule_; }

 private:
  std::atomic<uint32_t>* starts_ = nullptr;
  std::atomic<uint32_t>* ends_ = nullptr;
  uint64_t entries_ = 0;
  uint64_t granule_;
  int shift_;
};

}  // namespace zarena_core
