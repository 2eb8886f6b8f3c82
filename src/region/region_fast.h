// The region's per-thread fast paths (allocate, free, and the helpers they call on every
// call), defined here rather than in region.cpp so that the arena's calls inline them:
// the allocation and free paths cross from the arena into the region on every call, and
// a call boundary there costs a good part of their instructions. region.h is the design
// and the only file that includes this one (at its end): include region.h.
#pragma once

#include <algorithm>
#include <mutex>

#include "base/checks.h"

namespace zarena_core {

namespace region_detail {
inline bool cas(Block& b, uint64_t& expected, uint64_t desired) {
  return b.word.compare_exchange_weak(expected, desired, std::memory_order_acq_rel,
                                      std::memory_order_acquire);
}
}  // namespace region_detail

inline bool Region::is_current(uint64_t w, const Block& b) const {
  return (Word::flags(w) & kFlagPersistent) != 0 ||
         b.layout_epoch.load(std::memory_order_relaxed) == epoch_.load(std::memory_order_relaxed);
}

__attribute__((always_inline)) inline void Region::make_live(Slot* s, uint32_t record,
                                                             uint64_t aligned, uint32_t tag,
                                                             uint8_t flags) {
  Block& b = store_[record];
  const uint64_t e = epoch_.load(std::memory_order_relaxed);
  b.alloc_epoch.store(e, std::memory_order_relaxed);
  b.layout_epoch.store(e, std::memory_order_relaxed);
  b.tag = tag;
  const uint64_t w = b.word.load(std::memory_order_relaxed);
  const uint8_t storage = Word::flags(w) & kFlagLongLived;
  b.word.store(Word::make(BlockState::kLive, storage | flags, kOwnerNone, 0, Word::gen(w) + 1),
               std::memory_order_release);
  if (s != nullptr) {
    s->c.live_bytes += static_cast<int64_t>(aligned);
    ++s->c.live_count;
    if (s->c.live_bytes > s->c.live_peak) s->c.live_peak = s->c.live_bytes;
    const uint64_t end = b.end();
    if (end > s->c.epoch_high_water) s->c.epoch_high_water = end;
  }
}

inline void Region::carve(Slot* s, uint32_t record, uint64_t size, uint8_t owner) {
  Block& b = store_[record];
  if (b.len() == size) return;
  // The caller made sure a record is at hand: acquiring may throw, so it happens before
  // the block left its index (see alloc / alloc_slow).
  const uint32_t q = acquire_record_like(s, record);
  Block& rest = store_[q];
  rest.offset.store(b.off() + size, std::memory_order_relaxed);
  rest.size.store(b.len() - size, std::memory_order_relaxed);
  rest.layout_epoch.store(epoch_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  rest.alloc_epoch.store(kNeverLive, std::memory_order_relaxed);
  const uint64_t qw = rest.word.load(std::memory_order_relaxed);
  const uint8_t side = owner == kOwnerFloor ? kFlagPersistent : 0;
  rest.word.store(Word::make(BlockState::kFree, (Word::flags(qw) & kFlagLongLived) | side, owner, 0,
                             Word::gen(qw) + 1),
                  std::memory_order_release);
  b.size.store(size, std::memory_order_relaxed);
  b.word.store(Word::next_gen(b.word.load(std::memory_order_relaxed)), std::memory_order_release);
  map_.tag(rest.off(), rest.len(), q);
  map_.set_end(b.off() + size, record);
  if (owner == kOwnerFloor) {
    floor_index_.insert(store_, q);
  } else if (owner == kOwnerCentral) {
    central_index_.insert(store_, q);
  } else {
    s->index.insert(store_, q);
    s->note_cached();
  }
}

inline void Region::absorb(uint32_t keep, uint32_t gone) {
  Block& k = store_[keep];
  Block& g = store_[gone];
  const uint64_t size = k.len() + g.len();
  k.size.store(size, std::memory_order_relaxed);
  const uint64_t kw = Word::next_gen(k.word.load(std::memory_order_relaxed));
  k.word.store(kw, std::memory_order_release);
  map_.set_end(k.off() + size, keep);
  g.absorbed_into.store(keep, std::memory_order_relaxed);
  g.absorbed_gen.store(Word::gen(kw), std::memory_order_relaxed);
  g.word.store(Word::with_state(g.word.load(std::memory_order_relaxed), BlockState::kAbsorbed),
               std::memory_order_release);
}

__attribute__((always_inline)) inline void Region::hand_out(Slot& s, uint32_t record,
                                                            uint64_t aligned, uint32_t tag,
                                                            uint8_t flags, bool reused,
                                                            Placement* out) {
  make_live(&s, record, aligned, tag, flags);
  out->offset = store_[record].off();
  out->size = aligned;
  out->reused = reused;
}

__attribute__((always_inline)) inline void Region::bump_span(Slot& s, uint32_t record,
                                                             uint64_t aligned, uint32_t tag,
                                                             Placement* out) {
  s.span_cur += aligned;
  Block& slack = store_[s.slack_record];
  slack.word.store(Word::next_gen(slack.word.load(std::memory_order_relaxed)),
                   std::memory_order_release);
  hand_out(s, record, aligned, tag, 0, false, out);
}

// The record for a block bumped at s.span_cur: the record handed back there (its start tag
// still names it), else a fresh one.
__attribute__((always_inline)) inline uint32_t Region::bump_record(Slot& s, uint64_t aligned) {
  uint32_t r = s.span_top_record;
  if (r != kNoRecord && store_[r].off() == s.span_cur) {
    s.span_top_record = kNoRecord;
    store_[r].size.store(aligned, std::memory_order_relaxed);
    map_.set_end(s.span_cur + aligned, r);
    return r;
  }
  r = acquire_slot_record(s);
  Block& b = store_[r];
  b.offset.store(s.span_cur, std::memory_order_relaxed);
  b.size.store(aligned, std::memory_order_relaxed);
  map_.tag(s.span_cur, aligned, r);
  return r;
}

__attribute__((always_inline)) inline bool Region::alloc(Slot& s, uint64_t aligned, uint32_t tag,
                                                         Placement* out) {
  uint32_t r = s.index.find(store_, aligned);
  if (ZARENA_LIKELY(r != kNoRecord)) {
    if (store_[r].len() > aligned && s.free_records == kNoRecord && s.page_left == 0) {
      // carve() needs a record; get the page now, before the block leaves the index.
      keep_spare(s, acquire_slot_record(s));
    }
    s.index.remove(store_, r);
    carve(&s, r, aligned, s.id);
    hand_out(s, r, aligned, tag, 0, true, out);
    return true;
  }
  if (!central_index_.may_fit(aligned) && s.span_end - s.span_cur >= aligned) {
    bump_span(s, bump_record(s, aligned), aligned, tag, out);
    return true;
  }
  return alloc_slow(s, aligned, tag, out, /*may_ask_commit=*/true);
}

inline void Region::keep_spare(Slot& s, uint32_t record) {
  store_[record].next = s.free_records;
  s.free_records = record;
}

__attribute__((always_inline)) inline void Region::release_to_slot(Slot& s, uint32_t record) {
  const uint64_t e = epoch();
  auto mine = [&](uint32_t n) {
    if (n == kNoRecord) return false;
    const Block& nb = store_[n];
    const uint64_t w = nb.load_word();
    return Word::state(w) == BlockState::kFree && Word::owner(w) == s.id &&
           nb.layout_epoch.load(std::memory_order_relaxed) == e;
  };
  const uint64_t off = store_[record].off();
  if (off > 0) {
    const uint32_t p = map_.ending_at(off);
    if (p != record && mine(p) && store_[p].end() == off) {
      s.index.remove(store_, p);
      absorb(p, record);
      retire_record(&s, record);
      record = p;
    }
  }
  Block& b = store_[record];
  const uint64_t end = b.end();
  if (end == s.span_cur && s.span_cur != 0) {
    // The block just below the span's unused part: hand it back to the span.
    s.span_cur = b.off();
    const uint64_t sw = store_[s.slack_record].load_word();
    b.absorbed_into.store(s.slack_record, std::memory_order_relaxed);
    b.absorbed_gen.store(Word::gen(sw), std::memory_order_relaxed);
    b.word.store(Word::with_state(b.word.load(std::memory_order_relaxed), BlockState::kAbsorbed),
                 std::memory_order_release);
    // Kept for the next bump at this offset (the common alloc/free/alloc of one size at
    // the top) rather than sent through the quarantine.
    if (s.span_top_record != kNoRecord) retire_record(&s, s.span_top_record);
    s.span_top_record = record;
    s.note_cached();
    return;
  }
  if (end < cfg_.capacity) {
    const uint32_t n = map_.at(end);
    if (n != record && mine(n) && store_[n].off() == end) {
      s.index.remove(store_, n);
      absorb(record, n);
      retire_record(&s, n);
    }
  }
  b.layout_epoch.store(e, std::memory_order_relaxed);
  if (ZARENA_UNLIKELY(b.len() >= kSharedFreeBytes)) {
    std::lock_guard<CentralLock> g(central_);
    release_to_central(s, record);
    return;
  }
  s.index.insert(store_, record);
  s.note_cached();
  if (s.index.bytes() > cfg_.slot_budget) flush_slot(s, cfg_.slot_budget / 2);
}

inline uint64_t Region::free_word(uint64_t w, uint8_t owner) const {
  uint8_t flags = Word::flags(w);
  if (goes_to_floor(flags)) flags = (flags & ~kFlagBorrowed) | kFlagPersistent;
  return Word::with_flags(Word::with_owner(Word::with_state(w, BlockState::kFree), owner), flags);
}

__attribute__((always_inline)) inline FreeOutcome Region::free(Slot& s, uint64_t offset,
                                                               uint64_t want_epoch,
                                                               uint64_t* size) {
  const uint32_t r = map_.at(offset);
  if (r == kNoRecord) return FreeOutcome::kNotOwned;
  Block& b = store_[r];
  uint64_t w = b.load_word();
  for (;;) {
    if (b.off() != offset) return FreeOutcome::kNotOwned;
    const BlockState st = Word::state(w);
    // An epoch-checked free names one incarnation: any other block at this address
    // (live, freed or merged away) is not the caller's, whatever state it is in.
    if (want_epoch != kAnyEpoch && st != BlockState::kUnused &&
        b.alloc_epoch.load(std::memory_order_relaxed) != want_epoch) {
      return FreeOutcome::kStale;
    }
    switch (st) {
      case BlockState::kLive:
        break;
      case BlockState::kDeferred:
        return FreeOutcome::kDoubleFree;
      case BlockState::kFree:
      case BlockState::kAbsorbed:
      case BlockState::kMoved:
        return classify_dead(s, r, w);
      default:
        return FreeOutcome::kNotOwned;
    }
    if (!is_current(w, b)) return FreeOutcome::kStale;
    if (Word::pins(w) > 0) {
      if (Word::owner(w) == kOwnerZone) return FreeOutcome::kZone;
      if (!region_detail::cas(b, w, Word::with_state(w, BlockState::kDeferred))) continue;
      *size = b.len();
      ++s.c.deferred_frees;
      return FreeOutcome::kDeferred;
    }
    if (region_detail::cas(b, w, free_word(w, goes_central(w) ? kOwnerNone : s.id))) break;
  }
  // The block is ours now: free, owned by this slot, or in transit to the central side.
  *size = b.len();
  s.c.live_bytes -= static_cast<int64_t>(*size);
  --s.c.live_count;
  if (ZARENA_UNLIKELY(fill_on_.load(std::memory_order_relaxed))) fill(offset, *size, &s);
  if (ZARENA_LIKELY(!goes_central(w))) {
    release_to_slot(s, r);
    return FreeOutcome::kOk;
  }
  {
    std::lock_guard<CentralLock> g(central_);
    const uint8_t flags = Word::flags(w);
    if (goes_to_floor(flags)) {
      finish_floor_free(s, r, flags, *size);
    } else {
      release_to_central(s, r);
    }
  }
  return FreeOutcome::kOk;
}

}  // namespace zarena_core
