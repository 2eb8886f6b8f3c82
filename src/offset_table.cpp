#include "offset_table.h"

namespace zarena_core {

namespace {
constexpr uint64_t kInitialSlots = 1024;
}

OffsetTable::OffsetTable(uint64_t granule, KeepFn keep)
    : granule_shift_(63 - __builtin_clzll(granule)), keep_(std::move(keep)) {
  slots_.resize(kInitialSlots);
  mask_ = kInitialSlots - 1;
}

uint64_t OffsetTable::slot_of(uint64_t offset) const {
  // Fibonacci hashing of the granule index; the high bits are the well-mixed ones.
  const uint64_t h = (offset >> granule_shift_) * 0x9E3779B97F4A7C15ull;
  return (h >> 32 ^ h) & mask_;
}

OffsetEntry* OffsetTable::find(uint64_t offset) {
  const uint64_t key = offset + 1;
  for (uint64_t i = slot_of(offset);; i = (i + 1) & mask_) {
    OffsetEntry& e = slots_[i];
    if (e.key == key) return &e;
    if (e.key == 0) return nullptr;
  }
}

void OffsetTable::upsert(uint64_t offset, uint32_t rec, uint32_t stamp, uint64_t epoch) {
  if ((count_ + 1) * 10 > slots_.size() * 7) grow();
  const uint64_t key = offset + 1;
  for (uint64_t i = slot_of(offset);; i = (i + 1) & mask_) {
    OffsetEntry& e = slots_[i];
    if (e.key == key || e.key == 0) {
      if (e.key == 0) ++count_;
      e.key = key;
      e.rec = rec;
      e.stamp = stamp;
      e.epoch = epoch;
      e.freed = false;
      return;
    }
  }
}

void OffsetTable::grow() {
  std::vector<OffsetEntry> old;
  old.swap(slots_);
  uint64_t kept = 0;
  for (const OffsetEntry& e : old) {
    if (e.key != 0 && keep_(e)) ++kept;
  }
  uint64_t cap = kInitialSlots;
  while (kept * 10 > cap * 4) cap *= 2;  // leave room: rebuild at <= 40% load
  slots_.assign(cap, OffsetEntry{});
  mask_ = cap - 1;
  count_ = 0;
  for (const OffsetEntry& e : old) {
    if (e.key == 0 || !keep_(e)) continue;
    for (uint64_t i = slot_of(e.key - 1);; i = (i + 1) & mask_) {
      if (slots_[i].key == 0) {
        slots_[i] = e;
        ++count_;
        break;
      }
    }
  }
}

void OffsetTable::clear() {
  slots_.assign(kInitialSlots, OffsetEntry{});
  mask_ = kInitialSlots - 1;
  count_ = 0;
}

}  // namespace zarena_core
