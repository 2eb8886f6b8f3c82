// Per-thread paths of the region: allocate, free, pin, unpin (region.h explains the
// design; region_whole.cpp has the whole-region operations).
#include "region/region.h"

#include <algorithm>
#include <mutex>

namespace zarena_core {

namespace {
constexpr uint64_t kMaxSpanBytes = 1ull << 20;
constexpr uint64_t kMinSlotBudget = 64ull << 10;
constexpr uint32_t kGoneChainHops = 8;

using Guard = std::lock_guard<CentralLock>;

// A pin or unpin of a block that is no longer live, from what a free would have found.
PinOutcome pin_outcome_of_dead(FreeOutcome o) {
  return o == FreeOutcome::kDoubleFree ? PinOutcome::kFreed
         : o == FreeOutcome::kStale    ? PinOutcome::kStale
                                       : PinOutcome::kNotOwned;
}

// Whether record b (word w) describes a block of the current layout, epoch e being the
// region's (the caller's slot lock keeps it): a live block valid in this epoch (or
// persistent), or a free block in an index now. Records of earlier epochs, absorbed or
// moved ones, are history.
bool in_layout(const Block& b, uint64_t w, uint64_t e) {
  const BlockState st = Word::state(w);
  if (st == BlockState::kLive || st == BlockState::kDeferred) {
    return (Word::flags(w) & kFlagPersistent) != 0 ||
           b.layout_epoch.load(std::memory_order_relaxed) == e;
  }
  if (st == BlockState::kFree) {
    return Word::owner(w) == kOwnerFloor || b.layout_epoch.load(std::memory_order_relaxed) == e;
  }
  return false;
}

bool cas(Block& b, uint64_t& expected, uint64_t desired) {
  return b.word.compare_exchange_weak(expected, desired, std::memory_order_acq_rel,
                                      std::memory_order_acquire);
}
}  // namespace

Region::Region(const RegionConfig& cfg, RegionHooks* hooks)
    : cfg_(cfg),
      hooks_(hooks),
      map_(cfg.capacity, cfg.granule),
      slots_(cfg.slots != 0 ? cfg.slots : SlotSet::default_count(), cfg.lane_slots, cfg.granule),
      ceiling_(std::min(cfg.ceiling, cfg.capacity)),
      central_index_(cfg.granule, FreeIndex::Fit::kLowestAddress),
      floor_index_(cfg.granule, FreeIndex::Fit::kLowestAddress) {
  const uint64_t g = cfg_.granule;
  if (cfg_.span_bytes == 0) {
    uint64_t span = cfg_.capacity / (uint64_t{8} * slots_.thread_slots());
    span = std::min(span, kMaxSpanBytes);
    cfg_.span_bytes = std::max(g, span - span % g);
  }
  if (cfg_.slot_budget == 0) {
    cfg_.slot_budget =
        std::max(kMinSlotBudget, cfg_.capacity / (uint64_t{8} * slots_.thread_slots()));
  }
  bump_space_record_ = store_.take_long_lived();
  store_[bump_space_record_].word.store(
      Word::make(BlockState::kFree, kFlagLongLived, kOwnerNone, 0, 1));
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    const uint32_t r = store_.take_long_lived();
    store_[r].word.store(Word::make(BlockState::kFree, kFlagLongLived, kOwnerNone, 0, 1));
    slots_[i].slack_record = r;
  }
}

Region::~Region() = default;

// Every active slot, in index order, then the central lock. A slot activated while we were
// taking them (activation needs the central lock, so it happened before we got it) is
// taken as well before we proceed: drop the central lock, take the new slots (they come
// after every slot we hold, so the order holds), take it again.
void Region::lock_all() {
  uint32_t n = 0;
  for (;;) {
    const uint32_t want = slots_.active();
    for (; n < want; ++n) slots_[n].lock.lock();
    central_.lock();
    if (slots_.active() == n) break;
    central_.unlock();
  }
  locked_ = n;
}

void Region::unlock_all() {
  const uint32_t n = locked_;
  central_.unlock();
  for (uint32_t i = n; i-- > 0;) slots_[i].lock.unlock();
}

void Region::activate(Slot& s) {
  Guard g(central_);
  if (s.id >= slots_.active()) slots_.set_active(s.id + 1u);
}

void Region::raise_ceiling(uint64_t end) {
  Guard g(central_);
  ceiling_ = std::max(ceiling_, std::min(end, cfg_.capacity));
}

uint64_t Region::lower_ceiling(uint64_t keep) {
  Guard g(central_);
  const uint64_t k = std::max(keep, top_);
  ceiling_ = std::min(ceiling_, k);
  return k;
}

// --- records --------------------------------------------------------------------------

uint32_t Region::acquire_slot_record(Slot& s) {
  if (s.free_records != kNoRecord) {
    const uint32_t r = s.free_records;
    s.free_records = store_[r].next;
    store_.reinit(r, 0);
    return r;
  }
  if (s.page_left == 0) {
    uint32_t p;
    {
      Guard g(central_);
      p = store_.take_page();
    }
    store_.append_pages(&s.page_head, &s.page_tail, p, p);
    s.page_cursor = p;
    s.page_left = BlockStore::kPageRecords;
  }
  const uint32_t r = s.page_cursor++;
  --s.page_left;
  store_.reinit(r, 0);
  return r;
}

uint32_t Region::acquire_record_like(Slot* s, uint32_t model) {
  if (Word::flags(store_[model].load_word()) & kFlagLongLived) return store_.take_long_lived();
  return s != nullptr ? acquire_slot_record(*s) : central_records_.acquire();
}

void Region::retire_record(Slot* s, uint32_t record) {
  if (s == nullptr) {
    central_records_.retire(record);
    return;
  }
  const uint32_t out = s->quarantine.push(record);
  if (out != kNoRecord) {
    store_[out].next = s->free_records;
    s->free_records = out;
  }
}

// --- blocks ---------------------------------------------------------------------------

// A free of a pointer whose block is no longer live. A free block (still in an index)
// was freed before: a double free (or stale, when a reset reclaimed it rather than its
// user). An absorbed record was merged into a neighbour: follow where its bytes went. If
// they are still free, it is a double free; if they now lie inside a live block, the
// pointer is not the start of a block. Where that cannot be proven cheaply (the bytes went
// back to bump space that has since been bumped into again), the answer is "not owned":
// never an error that would be wrong to act on, and no state changes either way.
FreeOutcome Region::classify_dead(const Slot& s, uint32_t record, uint64_t w,
                                  bool central_held) const {
  const uint64_t target = store_[record].off();
  const uint64_t e = epoch();
  // A block a reset reclaimed, or any record of an earlier epoch: a reset emptied every
  // index since, so its bytes may lie inside a block handed out later, and its history
  // proves nothing now. The caller's pointer is from an earlier epoch.
  const bool long_lived = (Word::flags(w) & kFlagPersistent) != 0 || Word::owner(w) == kOwnerFloor;
  if ((Word::flags(w) & kFlagReclaimed) ||
      (!long_lived && store_[record].layout_epoch.load(std::memory_order_relaxed) != e)) {
    return FreeOutcome::kStale;
  }
  // Free space that was never a block here (a reset's hole, a split's remainder): still
  // free, the pointer is from an earlier epoch; merged into a block live now, it is that
  // block's interior (not owned).
  const bool never_live = store_[record].alloc_epoch.load(std::memory_order_relaxed) == kNeverLive;
  const FreeOutcome freed = never_live ? FreeOutcome::kStale : FreeOutcome::kDoubleFree;
  if (Word::state(w) == BlockState::kFree) return freed;
  auto covering = [&](uint32_t r, uint64_t rw) -> int {  // 1 free, 0 live, -1 unknown
    const Block& b = store_[r];
    if (target < b.off() || target >= b.end()) return -1;
    const BlockState st = Word::state(rw);
    if (st == BlockState::kFree) return 1;
    if (st == BlockState::kLive || st == BlockState::kDeferred) return 0;
    return -1;
  };
  uint32_t r = record;
  uint64_t cw = w;
  for (uint32_t hop = 0;; ++hop) {
    const BlockState cs = Word::state(cw);
    if (cs != BlockState::kAbsorbed && cs != BlockState::kMoved) break;
    if (hop == kGoneChainHops) return FreeOutcome::kNotOwned;
    const Block& b = store_[r];
    const uint32_t into = b.absorbed_into.load(std::memory_order_relaxed);
    const uint32_t gen = b.absorbed_gen.load(std::memory_order_relaxed);
    if (into == kNoRecord) return FreeOutcome::kNotOwned;
    const uint64_t iw = store_[into].load_word();
    if (into == s.slack_record) {
      // This slot's span (we hold its lock): free while the target is still unused.
      return target >= s.span_cur && target < s.span_end ? freed : FreeOutcome::kNotOwned;
    }
    bool pseudo = into == bump_space_record_;
    for (uint32_t i = 0; !pseudo && i < slots_.size(); ++i) pseudo = slots_[i].slack_record == into;
    if (pseudo) {
      // The bump space: free while the target lies above the top or in the unused part
      // of a span taken from it since (this slot's, or any slot's under the writer lock),
      // bumped over since or not: no live block lies there, and one handed out over the
      // target and freed since started elsewhere, or its record would be the one found.
      // Another slot's span: free as long as nothing was bumped from it since.
      bool unused = Word::gen(iw) == gen;
      if (into == bump_space_record_) {
        auto in_unused_span = [&](const Slot& t) {
          return target >= t.span_cur && target < t.span_end;
        };
        if (central_held) {
          unused = target >= top_;
          for (uint32_t i = 0; !unused && i < locked_; ++i) unused = in_unused_span(slots_[i]);
        } else {
          {
            std::lock_guard<CentralLock> lock(central_);
            unused = target >= top_;
          }
          if (!unused) unused = in_unused_span(s);  // this slot's span (we hold its lock)
        }
      }
      return unused ? freed : FreeOutcome::kNotOwned;
    }
    r = into;
    cw = iw;
  }
  // r is a record that describes a block now (or nothing): find what covers the target.
  const uint64_t rw = store_[r].load_word();
  const BlockState rs = Word::state(rw);
  if (rs != BlockState::kFree && rs != BlockState::kLive && rs != BlockState::kDeferred) {
    return FreeOutcome::kNotOwned;
  }
  // A record of an earlier epoch (the chain left the floor's history): no proof either way.
  if (!in_layout(store_[r], rw, e)) return FreeOutcome::kNotOwned;
  const int c = covering(r, rw);
  if (c >= 0) return c == 1 ? freed : FreeOutcome::kNotOwned;
  // The record shrank (it was carved): the target is in one of the blocks after it.
  uint64_t o = store_[r].end();
  for (uint32_t step = 0; step < 64 && o <= target; ++step) {
    const uint32_t q = map_.at(o);
    if (q == kNoRecord || store_[q].off() != o) return FreeOutcome::kNotOwned;
    const uint64_t qw = store_[q].load_word();
    const BlockState qs = Word::state(qw);
    const bool current = qs == BlockState::kFree
                             ? (Word::owner(qw) == kOwnerFloor ||
                                store_[q].layout_epoch.load(std::memory_order_relaxed) == e)
                             : is_current(qw, store_[q]);
    if (!current) return FreeOutcome::kNotOwned;
    const int cq = covering(q, qw);
    if (cq >= 0) return cq == 1 ? freed : FreeOutcome::kNotOwned;
    o = store_[q].end();
  }
  return FreeOutcome::kNotOwned;
}

void Region::fill(uint64_t offset, uint64_t bytes, Slot* s) {
  switch (hooks_->fill_policy()) {
    case RegionHooks::Fill::kOff:
      return;
    case RegionHooks::Fill::kNow:
      hooks_->fill(offset, bytes);
      ++(s != nullptr ? s->c : totals_.writer).poison_fills;
      return;
    case RegionHooks::Fill::kSkip:
      ++(s != nullptr ? s->c : totals_.writer).poison_skipped;
      return;
  }
}

// --- allocation ----------------------------------------------------------------------

bool Region::alloc_slow(Slot& s, uint64_t aligned, uint32_t tag, Placement* out,
                        bool may_ask_commit) {
  if (aligned > cfg_.capacity) return false;
  // A record for a bump, taken before any change (it may need host memory).
  uint32_t fresh = acquire_slot_record(s);
  bool drained = false;
  for (;;) {
    // The slot's own index first (a thread sharing the slot may have freed into it).
    const uint32_t r = s.index.find(store_, aligned);
    if (r != kNoRecord) {
      keep_spare(s, fresh);  // carve() takes the spare record from here
      s.index.remove(store_, r);
      carve(&s, r, aligned, s.id);
      hand_out(s, r, aligned, tag, 0, true, out);
      return true;
    }
    // Decided once, under the central lock: another thread's drain may clear the slots'
    // hints before the drain below, and a second look would then call the region full.
    bool drain_now = false;
    {
      Guard g(central_);
      if (take_from_central_index(s, aligned, tag, out)) {
        keep_spare(s, fresh);
        return true;
      }
      const bool fits_span = s.span_end - s.span_cur >= aligned;
      if (!fits_span && !drained && drain_may_spare_top(aligned)) {
        // An expandable region's top is its footprint: before a new span raises it, the
        // slots' cached blocks join the central ones (once), as before a commit. Another
        // thread's cache (PyTorch's autograd thread keeps the activations it freed) and
        // the central holes, coalesced, often hold the request.
        drain_now = true;
      } else if (fits_span || take_span(s, aligned, may_ask_commit, out)) {
        bump_with(s, fresh, aligned, tag, out);
        return true;
      } else if (out->commit_to != 0) {
        // An expandable region would commit more memory. The free blocks the slots hold go
        // to the central side first (once): a thread that frees what another allocated
        // (PyTorch's autograd thread frees the forward's activations) keeps them in its own
        // slot, up to a budget derived from the capacity (a device's memory for
        // zarena.torch), while the allocating thread grows the region step after step.
        if (drained || !slots_may_cache()) {
          keep_spare(s, fresh);
          return false;
        }
        out->commit_to = 0;
        out->commit_least = 0;
        drain_now = true;
      } else if (borrow_from_floor(s, aligned, tag, out)) {
        keep_spare(s, fresh);
        return true;
      }
    }
    // Before declaring the region full, let every slot give back what it holds (its
    // cached free blocks coalesce with the central ones), when that can help at all.
    if (!drain_now && (drained || !slots_may_cache())) break;
    drained = true;
    keep_spare(s, fresh);
    drain_from(s);
    fresh = acquire_slot_record(s);
  }
  keep_spare(s, fresh);
  return false;
}

// Under the central lock: a fit from the central index, carved to size.
bool Region::take_from_central_index(Slot& s, uint64_t aligned, uint32_t tag, Placement* out) {
  const uint32_t r = central_index_.find(store_, aligned);
  if (r == kNoRecord) return false;
  if (store_[r].len() > aligned) central_records_.keep_one_at_hand();  // carve's
  central_index_.remove(store_, r);
  carve(nullptr, r, aligned, kOwnerCentral);
  hand_out(s, r, aligned, tag, 0, true, out);
  return true;
}

// Under the central lock: a fit from a hole below the floor, handed out as a borrowed
// block (the next reset reclaims it).
bool Region::borrow_from_floor(Slot& s, uint64_t aligned, uint32_t tag, Placement* out) {
  const uint32_t r = floor_index_.find(store_, aligned);
  if (r == kNoRecord) return false;
  store_.reserve_long_lived(1);  // carve's record, before the block leaves the index
  floor_index_.remove(store_, r);
  carve(nullptr, r, aligned, kOwnerFloor);
  hand_out(s, r, aligned, tag, kFlagBorrowed, true, out);
  borrowed_.push(r);
  return true;
}

// Record `fresh` (s's) describes a block bumped at s.span_cur, which becomes live.
void Region::bump_with(Slot& s, uint32_t fresh, uint64_t aligned, uint32_t tag, Placement* out) {
  Block& b = store_[fresh];
  b.offset.store(s.span_cur, std::memory_order_relaxed);
  b.size.store(aligned, std::memory_order_relaxed);
  map_.tag(s.span_cur, aligned, fresh);
  s.note_cached();
  bump_span(s, fresh, aligned, tag, out);
}

bool Region::slots_may_cache() const {
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].cached_hint.load(std::memory_order_relaxed) != 0) return true;
  }
  return false;
}

bool Region::drain_may_spare_top(uint64_t aligned) const {
  if (!cfg_.expandable) return false;  // the top costs no memory
  uint64_t cached = 0;
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].cached_hint.load(std::memory_order_relaxed) != 0) {
      cached += slots_[i].index.bytes_hint();
    }
  }
  return cached != 0 && cached + central_index_.bytes() >= aligned;
}

void Region::drain_from(Slot& s) {
  leave(s);
  {
    WriterLock w(*this);
    drain_w();
  }
  s.lock.lock();
}

// Under the central lock: gives the slot room for `need` more bytes at the top of the bump
// space (extending its span in place when it is the topmost one). The span's end is
// planned as if everything were committed; when the plan reaches above the ceiling, the
// least the request needs may still fit below it (a commit failed: may_ask_commit false),
// else the caller is asked to commit (out->commit_to) or told the region is full.
bool Region::take_span(Slot& s, uint64_t need, bool may_ask_commit, Placement* out) {
  const uint64_t cap = cfg_.capacity;
  Block& top = store_[bump_space_record_];
  auto below_ceiling = [&](uint64_t* end, uint64_t least) {
    if (*end <= ceiling_) return true;
    if (may_ask_commit) {
      out->commit_to = *end;
      out->commit_least = least;
      return false;
    }
    *end = least;
    return least <= ceiling_;
  };
  if (top_slot_ == static_cast<int32_t>(s.id) && s.span_end == top_) {
    const uint64_t have = s.span_end - s.span_cur;
    const uint64_t missing = need - have;
    if (cap - top_ < missing) return false;
    uint64_t end = top_ + std::min(cap - top_, std::max(missing, cfg_.span_bytes));
    if (!below_ceiling(&end, top_ + missing)) return false;
    s.span_end = top_ = end;
    top.word.store(Word::next_gen(top.word.load(std::memory_order_relaxed)),
                   std::memory_order_release);
    s.note_cached();
    return true;
  }
  if (cap - top_ < need) return false;
  uint64_t end = top_ + std::min(cap - top_, std::max(need, cfg_.span_bytes));
  if (!below_ceiling(&end, top_ + need)) return false;
  close_span(s);
  s.span_cur = top_;
  s.span_end = end;
  top_ = end;
  top_slot_ = static_cast<int32_t>(s.id);
  top.word.store(Word::next_gen(top.word.load(std::memory_order_relaxed)),
                 std::memory_order_release);
  s.note_cached();
  return true;
}

// Under the central lock: the slot's span leftovers go back (to the bump space when the
// span is the topmost one, else to the central index).
void Region::close_span(Slot& s) {
  if (s.span_top_record != kNoRecord) {
    retire_record(&s, s.span_top_record);
    s.span_top_record = kNoRecord;
  }
  Block& slack = store_[s.slack_record];
  slack.word.store(Word::next_gen(slack.word.load(std::memory_order_relaxed)),
                   std::memory_order_release);
  if (s.span_cur < s.span_end) {
    if (top_slot_ == static_cast<int32_t>(s.id) && s.span_end == top_) {
      top_ = s.span_cur;
      top_slot_ = -1;
      // A central block may now end at the top: give it back too.
      if (top_ > 0) {
        const uint32_t p = map_.ending_at(top_);
        if (p != kNoRecord) {
          const Block& pb = store_[p];
          const uint64_t pw = pb.load_word();
          if (Word::state(pw) == BlockState::kFree && Word::owner(pw) == kOwnerCentral &&
              pb.end() == top_ && pb.layout_epoch.load(std::memory_order_relaxed) == epoch()) {
            central_index_.remove(store_, p);
            give_back_top(p);
          }
        }
      }
      maybe_lower_floor();
    } else {
      release_central(central_free_record(s.span_cur, s.span_end - s.span_cur));
    }
  } else if (top_slot_ == static_cast<int32_t>(s.id)) {
    top_slot_ = -1;
  }
  s.span_cur = s.span_end = 0;
}

uint32_t Region::central_free_record(uint64_t offset, uint64_t size) {
  const uint32_t r = central_records_.acquire();
  Block& b = store_[r];
  b.offset.store(offset, std::memory_order_relaxed);
  b.size.store(size, std::memory_order_relaxed);
  b.layout_epoch.store(epoch(), std::memory_order_relaxed);
  b.alloc_epoch.store(kNeverLive, std::memory_order_relaxed);
  const uint64_t w = b.word.load(std::memory_order_relaxed);
  b.word.store(Word::make(BlockState::kFree, Word::flags(w) & kFlagLongLived, kOwnerCentral, 0,
                          Word::gen(w) + 1),
               std::memory_order_release);
  map_.tag(offset, size, r);
  return r;
}

// Under the central lock: record (kFree, ending at top_, nothing above) becomes bump space.
void Region::give_back_top(uint32_t record) {
  Block& b = store_[record];
  top_ = b.off();
  const uint64_t tw = store_[bump_space_record_].load_word();
  b.absorbed_into.store(bump_space_record_, std::memory_order_relaxed);
  b.absorbed_gen.store(Word::gen(tw), std::memory_order_relaxed);
  b.word.store(Word::with_state(b.word.load(std::memory_order_relaxed), BlockState::kAbsorbed),
               std::memory_order_release);
  central_records_.retire(record);
  maybe_lower_floor();
}

// Under the central lock: when nothing lies above the floor and the block just under it is
// free, the floor and the top come down together (freeing the last weights returns them
// to the bump space).
void Region::maybe_lower_floor() {
  while (top_slot_ < 0 && top_ == floor_ && floor_ > 0) {
    const uint32_t p = map_.ending_at(floor_);
    if (p == kNoRecord) return;
    Block& b = store_[p];
    const uint64_t w = b.load_word();
    if (Word::state(w) != BlockState::kFree || Word::owner(w) != kOwnerFloor || b.end() != floor_) {
      return;
    }
    floor_index_.remove(store_, p);
    floor_ = b.off();
    give_back_top(p);
  }
}

// --- frees -------------------------------------------------------------------------------

void Region::flush_slot(Slot& s, uint64_t target_bytes) {
  Guard g(central_);
  while (s.index.bytes() > target_bytes) {
    const uint32_t r = s.index.any_largest();
    s.index.remove(store_, r);
    Block& b = store_[r];
    b.word.store(Word::with_owner(b.word.load(std::memory_order_relaxed), kOwnerCentral),
                 std::memory_order_release);
    release_central(r);
  }
}

void Region::release_central(uint32_t record) {
  const uint64_t e = epoch();
  const uint8_t owner = Word::owner(store_[record].load_word());
  FreeIndex& index = owner == kOwnerFloor ? floor_index_ : central_index_;
  auto same = [&](uint32_t n) {
    if (n == kNoRecord) return false;
    const Block& nb = store_[n];
    const uint64_t w = nb.load_word();
    return Word::state(w) == BlockState::kFree && Word::owner(w) == owner &&
           (owner == kOwnerFloor || nb.layout_epoch.load(std::memory_order_relaxed) == e);
  };
  const uint64_t off = store_[record].off();
  if (off > 0) {
    const uint32_t p = map_.ending_at(off);
    if (p != record && same(p) && store_[p].end() == off) {
      index.remove(store_, p);
      absorb(p, record);
      central_records_.retire(record);
      record = p;
    }
  }
  Block& b = store_[record];
  const uint64_t end = b.end();
  if (owner == kOwnerCentral && end == top_ && top_slot_ < 0) {
    give_back_top(record);
    return;
  }
  if (end < cfg_.capacity) {
    const uint32_t n = map_.at(end);
    if (n != record && same(n) && store_[n].off() == end) {
      index.remove(store_, n);
      absorb(record, n);
      central_records_.retire(n);
    }
  }
  b.layout_epoch.store(e, std::memory_order_relaxed);
  index.insert(store_, record);
  if (owner == kOwnerFloor) maybe_lower_floor();
}

void Region::release_to_central(Slot& s, uint32_t record) {
  Block& b = store_[record];
  // s's span starting right above it is empty (the block is no part of it): closed, so
  // that the top comes down to the block's end first.
  if (top_slot_ == static_cast<int32_t>(s.id) && s.span_cur == b.end()) close_span(s);
  b.word.store(Word::with_owner(b.load_word(), kOwnerCentral), std::memory_order_release);
  release_central(record);
  while (top_slot_ < 0 && top_ > floor_) {
    const uint32_t p = map_.ending_at(top_);
    if (p == kNoRecord) return;
    Block& pb = store_[p];
    const uint64_t pw = pb.load_word();
    if (Word::state(pw) != BlockState::kFree || Word::owner(pw) != s.id || pb.end() != top_ ||
        pb.layout_epoch.load(std::memory_order_relaxed) != epoch()) {
      return;
    }
    s.index.remove(store_, p);
    pb.word.store(Word::with_owner(pw, kOwnerCentral), std::memory_order_release);
    release_central(p);
  }
}

// Under the central lock: a block below the floor (weights, or a borrowed epoch block) was
// freed; it is kFree with no owner yet ("in transit", so no neighbour merges it early).
void Region::finish_floor_free(Slot& s, uint32_t record, uint8_t flags, uint64_t size) {
  if (flags & kFlagBorrowed) {
    borrowed_.remove(record);
  } else {
    totals_.floor_live_bytes -= size;
    --totals_.floor_live_count;
    // Freeing weights with nothing above the floor but this slot's empty span: give the
    // span back so that the floor can come down.
    if (top_slot_ == static_cast<int32_t>(s.id) && s.span_cur == floor_) close_span(s);
  }
  Block& b = store_[record];
  b.word.store(Word::with_owner(b.word.load(std::memory_order_relaxed), kOwnerFloor),
               std::memory_order_release);
  release_central(record);
}

// --- pins --------------------------------------------------------------------------------

PinOutcome Region::pin(Slot& s, uint64_t offset, uint64_t* start) {
  uint64_t at = offset;
  PinOutcome o = pin_at(s, offset, offset);
  if (o != PinOutcome::kOk && o != PinOutcome::kTooMany &&
      live_block_containing(offset, kWholeScan, &at) == Within::kLiveBlock) {
    o = pin_at(s, at, offset);
    // Anything else: the block went away under the look.
    if (o != PinOutcome::kOk && o != PinOutcome::kTooMany && o != PinOutcome::kFreed) {
      o = PinOutcome::kNotOwned;
    }
  }
  if (o == PinOutcome::kOk && start != nullptr) *start = at;
  return o;
}

PinOutcome Region::unpin(Slot& s, uint64_t offset, uint64_t* freed_size, uint64_t* start) {
  uint64_t at = offset;
  PinOutcome o = unpin_at(s, offset, offset, freed_size);
  if (o != PinOutcome::kOk && o != PinOutcome::kNotPinned &&
      live_block_containing(offset, kWholeScan, &at) == Within::kLiveBlock) {
    o = unpin_at(s, at, offset, freed_size);
    if (o != PinOutcome::kOk && o != PinOutcome::kNotPinned) o = PinOutcome::kNotOwned;
  }
  if (o == PinOutcome::kOk && start != nullptr) *start = at;
  return o;
}

// The block covering offset starts at the nearest boundary of the current layout at or
// below it (blocks tile [0, top): live, free, or a span's unused part). So the start tags
// are read downward from the last granule below offset until one names a record of the
// current layout (a live block of this epoch or kept across resets, or a free block in an
// index now): its start decides (a live block reaching past offset: inside); records of
// earlier epochs, absorbed or moved ones, are history and are passed over. A record of the
// current layout ending at a granule on the way means nothing live covers offset.
Region::Within Region::live_block_containing(uint64_t offset, uint64_t max_granules,
                                             uint64_t* start) const {
  {
    std::lock_guard<CentralLock> g(central_);
    if (offset >= top_) return Within::kNone;  // bump space
  }
  const uint64_t g = map_.granule();
  const uint64_t e = epoch();
  auto current = [&](const Block& b, uint64_t w) { return in_layout(b, w, e); };
  auto ends_at = [&](uint64_t o) {
    const uint32_t r = map_.ending_at(o);
    if (r == kNoRecord) return false;
    const Block& b = store_[r];
    return b.end() == o && current(b, b.load_word());
  };
  if (offset == 0 || ends_at(offset)) return Within::kNone;
  // Block starts are granule multiples: the first candidate is the last one below offset.
  uint64_t o = (offset - 1) / g * g;
  for (uint64_t step = 0; step < max_granules; ++step, o -= g) {
    const uint32_t r = map_.at(o);
    if (r != kNoRecord) {
      const Block& b = store_[r];
      const uint64_t w = b.load_word();
      if (b.off() == o && current(b, w)) {
        const BlockState st = Word::state(w);
        if (b.end() <= offset || (st != BlockState::kLive && st != BlockState::kDeferred)) {
          return Within::kNone;
        }
        *start = o;
        return Within::kLiveBlock;
      }
    }
    if (o == 0 || ends_at(o)) return Within::kNone;
  }
  return Within::kUnknown;
}

bool Region::inside_live_block(uint64_t offset) const {
  constexpr uint64_t kInteriorScan = 1u << 20;  // 256 MiB at the default alignment
  uint64_t start;
  return live_block_containing(offset, kInteriorScan, &start) != Within::kNone;
}

PinOutcome Region::pin_at(Slot& s, uint64_t offset, uint64_t inside, bool tally) {
  const uint32_t r = map_.at(offset);
  if (r == kNoRecord) return PinOutcome::kNotOwned;
  Block& b = store_[r];
  uint64_t w = b.load_word();
  for (;;) {
    if (b.off() != offset || b.end() <= inside) return PinOutcome::kNotOwned;
    const BlockState st = Word::state(w);
    if (st == BlockState::kFree || st == BlockState::kDeferred) return PinOutcome::kFreed;
    if (st == BlockState::kAbsorbed || st == BlockState::kMoved) {
      return pin_outcome_of_dead(classify_dead(s, r, w));
    }
    if (st != BlockState::kLive) return PinOutcome::kNotOwned;
    if (tally && Word::owner(w) == kOwnerZone) return PinOutcome::kZone;
    if (!is_current(w, b)) return PinOutcome::kStale;
    const uint32_t pins = Word::pins(w);
    if (pins == Word::kMaxPins) return PinOutcome::kTooMany;
    if (pins > 0) {
      if (cas(b, w, Word::with_pins(w, pins + 1))) return PinOutcome::kOk;
      continue;
    }
    // 0 -> 1 under the central lock, where the set of pinned blocks lives.
    Guard g(central_);
    w = b.load_word();
    if (Word::state(w) != BlockState::kLive || Word::pins(w) != 0) continue;
    pinned_.add(r);  // may throw: nothing changed yet
    if (!b.word.compare_exchange_strong(w, Word::with_pins(w, 1), std::memory_order_acq_rel)) {
      pinned_.remove(r);
      continue;
    }
    if (tally && cfg_.pin_tally != nullptr) cfg_.pin_tally->add(b.len());
    return PinOutcome::kOk;
  }
}

PinOutcome Region::unpin_at(Slot& s, uint64_t offset, uint64_t inside, uint64_t* freed_size,
                            bool tally) {
  *freed_size = 0;
  const uint32_t r = map_.at(offset);
  if (r == kNoRecord) return PinOutcome::kNotOwned;
  Block& b = store_[r];
  uint64_t w = b.load_word();
  for (;;) {
    if (b.off() != offset || b.end() <= inside) return PinOutcome::kNotOwned;
    const BlockState st = Word::state(w);
    if (st == BlockState::kAbsorbed || st == BlockState::kMoved || st == BlockState::kFree) {
      return pin_outcome_of_dead(classify_dead(s, r, w));
    }
    if (st != BlockState::kLive && st != BlockState::kDeferred) return PinOutcome::kNotOwned;
    if (tally && Word::owner(w) == kOwnerZone) return PinOutcome::kZone;
    if (!is_current(w, b)) return PinOutcome::kStale;
    const uint32_t pins = Word::pins(w);
    if (pins == 0) return PinOutcome::kNotPinned;
    if (pins > 1) {
      if (cas(b, w, Word::with_pins(w, pins - 1))) return PinOutcome::kOk;
      continue;
    }
    // The last pin: under the central lock (the pinned set), and a deferred free completes.
    std::unique_lock<CentralLock> g(central_);
    w = b.load_word();
    if (Word::pins(w) != 1 ||
        (Word::state(w) != BlockState::kLive && Word::state(w) != BlockState::kDeferred)) {
      continue;
    }
    if (Word::state(w) == BlockState::kLive) {
      if (!b.word.compare_exchange_strong(w, Word::with_pins(w, 0), std::memory_order_acq_rel)) {
        continue;
      }
      pinned_.remove(r);
      if (tally && cfg_.pin_tally != nullptr) cfg_.pin_tally->sub(b.len());
      return PinOutcome::kOk;
    }
    // Deferred: the free happens now, exactly as zarena_free would have done it.
    const uint8_t flags = Word::flags(w);
    const bool floor_side = goes_to_floor(flags);
    const bool central_side = goes_central(w);
    const uint64_t nw = Word::with_pins(free_word(w, central_side ? kOwnerNone : s.id), 0);
    if (!b.word.compare_exchange_strong(w, nw, std::memory_order_acq_rel)) continue;
    pinned_.remove(r);
    const uint64_t size = b.len();
    if (tally && cfg_.pin_tally != nullptr) cfg_.pin_tally->sub(size);
    *freed_size = size;
    s.c.live_bytes -= static_cast<int64_t>(size);
    --s.c.live_count;
    --s.c.deferred_frees;
    if (fill_on_.load(std::memory_order_relaxed)) fill(offset, size, &s);
    if (!central_side) {
      g.unlock();
      release_to_slot(s, r);
      return PinOutcome::kOk;
    }
    if (floor_side) {
      finish_floor_free(s, r, flags, size);
    } else {
      release_to_central(s, r);
    }
    g.unlock();
    return PinOutcome::kOk;
  }
}

PinOutcome Region::pin_zone(Slot& s, uint64_t offset) {
  const PinOutcome o = pin_at(s, offset, offset, /*tally=*/false);
  if (o != PinOutcome::kOk) return o;
  Block& b = store_[map_.at(offset)];
  uint64_t w = b.load_word();
  while (!cas(b, w, Word::with_owner(w, kOwnerZone))) {
  }
  return o;
}

FreeOutcome Region::history_at(const Slot& s, uint64_t offset, bool central_held) const {
  const uint32_t r = map_.at(offset);
  if (r == kNoRecord) return FreeOutcome::kNotOwned;
  const Block& b = store_[r];
  const uint64_t w = b.load_word();
  if (b.off() != offset) return FreeOutcome::kNotOwned;
  switch (Word::state(w)) {
    case BlockState::kLive:
    case BlockState::kDeferred:
      // A record a reset left as it was: its block was reclaimed.
      return is_current(w, b) ? FreeOutcome::kOk : FreeOutcome::kStale;
    case BlockState::kFree:
    case BlockState::kAbsorbed:
    case BlockState::kMoved:
      return classify_dead(s, r, w, central_held);
    default:
      return FreeOutcome::kNotOwned;
  }
}

void Region::pinned_offsets_w(std::vector<uint64_t>* out) const {
  out->reserve(out->size() + pinned_.size());
  for (uint32_t r : pinned_) {
    if (Word::owner(store_[r].load_word()) != kOwnerZone) out->push_back(store_[r].off());
  }
}

void Region::borrowed_unpinned_offsets_w(std::vector<uint64_t>* out) const {
  borrowed_.for_each([&](uint32_t r) {
    if (Word::pins(store_[r].load_word()) == 0) out->push_back(store_[r].off());
  });
}

}  // namespace zarena_core
