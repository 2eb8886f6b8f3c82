#include "region/free_index.h"

namespace zarena_core {

namespace {
int log2_floor(uint64_t v) { return 63 - __builtin_clzll(v); }
}  // namespace

FreeIndex::FreeIndex(uint64_t granule, Fit fit) : granule_shift_(log2_floor(granule)), fit_(fit) {
  for (auto& row : heads_) {
    for (auto& h : row) h = kNoRecord;
  }
}

// Class of a block of `units` granules: sizes below 16 units map one-to-one into class
// 0; above, class fl covers [2^(fl+3), 2^(fl+4)) split into 16 equal sub-bins.
void FreeIndex::mapping(uint64_t units, int* fl, int* sl) const {
  if (units < static_cast<uint64_t>(kSecondLevels)) {
    *fl = 0;
    *sl = static_cast<int>(units);
    return;
  }
  const int lg = log2_floor(units);
  *fl = lg - (kSecondLevelLog2 - 1);
  *sl = static_cast<int>((units >> (lg - kSecondLevelLog2)) - kSecondLevels);
}

void FreeIndex::insert(BlockStore& store, uint32_t record) {
  Block& b = store[record];
  int fl, sl;
  mapping(b.len() >> granule_shift_, &fl, &sl);
  // A bin whose bitmap bit is clear is empty whatever its (stale) head says: clear()
  // drops only the bitmaps.
  const uint32_t head = (sl_bitmap_[fl] >> sl) & 1u ? heads_[fl][sl] : kNoRecord;
  b.prev = kNoRecord;
  b.next = head;
  if (head != kNoRecord) store[head].prev = record;
  heads_[fl][sl] = record;
  fl_bitmap_ |= (1ull << fl);
  sl_bitmap_[fl] |= (1u << sl);
  ++count_;
  bytes_ += b.len();
  publish();
}

void FreeIndex::remove(BlockStore& store, uint32_t record) {
  Block& b = store[record];
  int fl, sl;
  mapping(b.len() >> granule_shift_, &fl, &sl);
  if (b.prev != kNoRecord) {
    store[b.prev].next = b.next;
  } else {
    heads_[fl][sl] = b.next;
  }
  if (b.next != kNoRecord) store[b.next].prev = b.prev;
  if (heads_[fl][sl] == kNoRecord) {
    sl_bitmap_[fl] &= ~(1u << sl);
    if (sl_bitmap_[fl] == 0) fl_bitmap_ &= ~(1ull << fl);
  }
  b.prev = b.next = kNoRecord;
  --count_;
  bytes_ -= b.len();
  publish();
}

uint32_t FreeIndex::find(const BlockStore& store, uint64_t size) const {
  if (count_ == 0) return kNoRecord;
  uint64_t units = size >> granule_shift_;
  int fl, sl;
  mapping(units, &fl, &sl);
  // Exact class first: training steps repeat the same sizes, so this usually fits.
  if ((sl_bitmap_[fl] >> sl) & 1u) {
    const uint32_t r = pick(store, heads_[fl][sl], size);
    if (r != kNoRecord) return r;
  }
  // Round up to the next class boundary: every block there fits.
  if (units >= static_cast<uint64_t>(kSecondLevels)) {
    const int lg = log2_floor(units);
    const uint64_t step = 1ull << (lg - kSecondLevelLog2);
    if (units > ~0ull - step) return kNoRecord;
    units += step - 1;
    mapping(units, &fl, &sl);
    if (fl >= kFirstLevels) return kNoRecord;
  } else {
    // Class 0 is exact; the next sub-bin is the first guaranteed fit.
    sl += 1;
    if (sl >= kSecondLevels) {
      fl = 1;
      sl = 0;
    }
  }
  uint32_t sl_map = (sl < kSecondLevels) ? (sl_bitmap_[fl] & (~0u << sl)) : 0;
  if (sl_map == 0) {
    if (fl + 1 >= kFirstLevels) return kNoRecord;
    const uint64_t fl_map = fl_bitmap_ & (~0ull << (fl + 1));
    if (fl_map == 0) return kNoRecord;
    fl = __builtin_ctzll(fl_map);
    sl_map = sl_bitmap_[fl];
  }
  sl = __builtin_ctz(sl_map);
  return fit_ == Fit::kHead ? heads_[fl][sl] : pick(store, heads_[fl][sl], size);
}

uint32_t FreeIndex::pick(const BlockStore& store, uint32_t head, uint64_t size) const {
  if (fit_ == Fit::kHead) return store[head].len() >= size ? head : kNoRecord;
  uint32_t best = kNoRecord;
  uint64_t best_off = ~0ull;
  int n = 0;
  for (uint32_t r = head; r != kNoRecord && n < kFitScan; r = store[r].next, ++n) {
    const Block& b = store[r];
    if (b.len() >= size && b.off() < best_off) {
      best = r;
      best_off = b.off();
    }
  }
  return best;
}

void FreeIndex::clear() {
  // O(first-level classes): insert() ignores the heads of bins whose bit is clear.
  while (fl_bitmap_ != 0) {
    sl_bitmap_[__builtin_ctzll(fl_bitmap_)] = 0;
    fl_bitmap_ &= fl_bitmap_ - 1;
  }
  count_ = 0;
  bytes_ = 0;
  publish();
}

bool FreeIndex::may_fit(uint64_t size) const {
  const uint64_t map = fl_hint_.load(std::memory_order_relaxed);
  if (map == 0) return false;
  int fl, sl;
  mapping(size >> granule_shift_, &fl, &sl);
  return (map >> fl) != 0;
}

uint32_t FreeIndex::any_largest() const {
  if (fl_bitmap_ == 0) return kNoRecord;
  const int fl = log2_floor(fl_bitmap_);
  const int sl = 31 - __builtin_clz(sl_bitmap_[fl]);
  return heads_[fl][sl];
}

uint64_t FreeIndex::largest(const BlockStore& store) const {
  if (fl_bitmap_ == 0) return 0;
  const int fl = log2_floor(fl_bitmap_);
  const int sl = 31 - __builtin_clz(sl_bitmap_[fl]);
  uint64_t best = 0;
  for (uint32_t r = heads_[fl][sl]; r != kNoRecord; r = store[r].next) {
    if (store[r].len() > best) best = store[r].len();
  }
  return best;
}

}  // namespace zarena_core
