#include "region/block_store.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>
#include <type_traits>

namespace zarena_core {

BlockStore::BlockStore()
    : segments_(static_cast<std::atomic<Segment*>*>(
          std::calloc(kMaxSegments, sizeof(std::atomic<Segment*>)))) {
  static_assert(sizeof(std::atomic<Segment*>) == sizeof(Segment*) &&
                    std::is_trivially_destructible_v<std::atomic<Segment*>>,
                "all-zero bytes are a table of null pointers");
  if (!segments_) throw std::bad_alloc();
}

void BlockStore::FreeTable::operator()(std::atomic<Segment*>* p) const noexcept { std::free(p); }

BlockStore::~BlockStore() {
  for (uint32_t i = 0; i < segment_count_; ++i) delete segments_[i].load(std::memory_order_relaxed);
}

uint32_t BlockStore::new_segment() {
  if (segment_count_ >= kMaxSegments) throw std::bad_alloc();
  auto* s = new Segment();
  for (uint32_t& n : s->page_next) n = kNoRecord;
  segments_[segment_count_].store(s, std::memory_order_release);
  return segment_count_++ << kSegmentShift;
}

uint32_t BlockStore::take_page() {
  if (pages_free_head_ != kNoRecord) {
    const uint32_t p = pages_free_head_;
    pages_free_head_ = page_next(p);
    if (pages_free_head_ == kNoRecord) pages_free_tail_ = kNoRecord;
    page_next(p) = kNoRecord;
    return p;
  }
  if (next_fresh_page_ == kNoRecord) next_fresh_page_ = new_segment();
  const uint32_t p = next_fresh_page_;
  next_fresh_page_ += kPageRecords;
  if ((next_fresh_page_ & (kSegmentRecords - 1)) == 0) next_fresh_page_ = kNoRecord;
  page_next(p) = kNoRecord;
  return p;
}

void BlockStore::recycle_pages(uint32_t head, uint32_t tail) {
  if (head == kNoRecord) return;
  if (pages_free_tail_ == kNoRecord) {
    pages_free_head_ = head;
  } else {
    page_next(pages_free_tail_) = head;
  }
  pages_free_tail_ = tail;
  page_next(tail) = kNoRecord;
}

void BlockStore::reserve_long_lived(uint32_t n) {
  while (long_free_count_ < n) {
    // Long-lived records are few (weights, holes below the floor): a page at a time.
    const uint32_t p = take_page();
    for (uint32_t i = kPageRecords; i-- > 0;) give_long_lived(p + i);
  }
}

uint32_t BlockStore::take_long_lived() {
  reserve_long_lived(1);
  const uint32_t r = long_free_;
  long_free_ = (*this)[r].next;
  --long_free_count_;
  reinit(r, kFlagLongLived);
  return r;
}

void BlockStore::give_long_lived(uint32_t record) {
  (*this)[record].next = long_free_;
  long_free_ = record;
  ++long_free_count_;
}

void BlockStore::reinit(uint32_t record, uint8_t flags) {
  Block& b = (*this)[record];
  const uint64_t w = b.word.load(std::memory_order_relaxed);
  b.word.store(Word::make(BlockState::kUnused, flags, kOwnerNone, 0, Word::gen(w) + 1),
               std::memory_order_release);
  b.absorbed_into.store(kNoRecord, std::memory_order_relaxed);
  b.prev = b.next = kNoRecord;
  b.tag = 0;
  b.pin_pos = kNotPinned;
}

BlockMap::BlockMap(uint64_t capacity, uint64_t granule)
    : granule_(granule), shift_(63 - __builtin_clzll(granule)) {
  entries_ = (capacity >> shift_) + 1;
  const uint64_t bytes = 2 * entries_ * sizeof(std::atomic<uint32_t>);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  // Anonymous pages read as zero: every entry starts as "no record".
  starts_ = static_cast<std::atomic<uint32_t>*>(p);
  ends_ = starts_ + entries_;
}

BlockMap::~BlockMap() {
  if (starts_ != nullptr) munmap(starts_, 2 * entries_ * sizeof(std::atomic<uint32_t>));
}

}  // namespace zarena_core
