// The central side's records (central_parts.h).
#include "region/central_parts.h"

namespace zarena_core {

namespace {
constexpr uint32_t pages_for(uint64_t records) {
  return static_cast<uint32_t>((records + BlockStore::kPageRecords - 1) / BlockStore::kPageRecords);
}
bool long_lived(const Block& b) { return (Word::flags(b.load_word()) & kFlagLongLived) != 0; }
}  // namespace

uint32_t CentralRecords::acquire() {
  if (free_ != kNoRecord) {
    const uint32_t r = free_;
    free_ = store_[r].next;
    store_.reinit(r, 0);
    return r;
  }
  if (left_ == 0) {
    const uint32_t p = store_.take_page();
    store_.append_pages(&page_head_, &page_tail_, p, p);
    cursor_ = p;
    left_ = BlockStore::kPageRecords;
  }
  const uint32_t r = cursor_++;
  --left_;
  store_.reinit(r, 0);
  return r;
}

void CentralRecords::keep_one_at_hand() {
  if (free_ == kNoRecord && left_ == 0) push_free(acquire());
}

void CentralRecords::reserve(uint64_t n) {
  for (uint32_t i = pages_for(n); i > 0; --i) {
    const uint32_t p = store_.take_page();
    store_.append_pages(&page_head_, &page_tail_, p, p);
    for (uint32_t k = 0; k < BlockStore::kPageRecords; ++k) push_free(p + k);
  }
}

void CentralRecords::retire(uint32_t record) {
  const uint32_t out = quarantine_.push(record);
  if (out == kNoRecord) return;
  if (long_lived(store_[out])) {
    store_.give_long_lived(out);
  } else {
    push_free(out);
  }
}

void CentralRecords::retire_moved(uint32_t record) {
  if (!long_lived(store_[record])) return;
  store_[record].next = moved_long_;
  moved_long_ = record;
}

void CentralRecords::retire_pages(uint32_t head, uint32_t tail) {
  if (head != kNoRecord) store_.append_pages(&retiring_head_, &retiring_tail_, head, tail);
}

void CentralRecords::recycle_retired() {
  store_.recycle_pages(retiring_head_, retiring_tail_);
  retiring_head_ = retiring_tail_ = kNoRecord;
}

CentralRecords::Pages CentralRecords::take_pages(uint64_t records) {
  Pages fresh;
  for (uint32_t i = pages_for(records); i > 0; --i) {
    const uint32_t p = store_.take_page();
    store_.append_pages(&fresh.head, &fresh.tail, p, p);
  }
  return fresh;
}

void CentralRecords::start_epoch(Pages fresh) {
  retire_pages(page_head_, page_tail_);
  free_ = kNoRecord;
  quarantine_.drain([&](uint32_t r) {
    if (long_lived(store_[r])) store_.give_long_lived(r);
  });
  for (uint32_t r = moved_long_prev_; r != kNoRecord;) {
    const uint32_t next = store_[r].next;
    store_.give_long_lived(r);
    r = next;
  }
  moved_long_prev_ = moved_long_;
  moved_long_ = kNoRecord;
  page_head_ = cursor_ = fresh.head;
  page_tail_ = fresh.tail;
  left_ = fresh.head == kNoRecord ? 0 : BlockStore::kPageRecords;
  // The pages are linked; the cursor walks only the first, so hand the rest out as free
  // records.
  for (uint32_t p = fresh.head == kNoRecord ? kNoRecord : store_.page_next(fresh.head);
       p != kNoRecord; p = store_.page_next(p)) {
    for (uint32_t k = 0; k < BlockStore::kPageRecords; ++k) push_free(p + k);
  }
}

}  // namespace zarena_core
