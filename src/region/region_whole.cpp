// Whole-region operations of the region: reset, floors, drain, snapshots and walks. Each
// runs under every slot lock plus the central lock (Region::WriterLock), so it sees and
// changes the region at one instant; none makes a backend call other than the poison
// fill hook.
#include <algorithm>
#include <utility>

#include "base/test_points.h"
#include "region/region.h"

namespace zarena_core {

uint64_t Region::frontier_w() const {
  return top_slot_ >= 0 ? slots_[static_cast<uint32_t>(top_slot_)].span_cur : top_;
}

template <typename Fn>
void Region::walk_w(uint64_t from, uint64_t to, Fn&& fn) const {
  // Unused parts of slot spans hold no blocks: skip them.
  std::pair<uint64_t, uint64_t> spans[SlotSet::kMaxAllSlots];
  uint32_t n = 0;
  for (uint32_t i = 0; i < locked_; ++i) {
    const Slot& s = slots_[i];
    if (s.span_cur < s.span_end) spans[n++] = {s.span_cur, s.span_end};
  }
  std::sort(spans, spans + n);
  uint32_t k = 0;
  uint64_t o = from;
  while (o < to) {
    while (k < n && spans[k].first < o) ++k;
    if (k < n && spans[k].first == o) {
      o = spans[k].second;
      continue;
    }
    const uint32_t r = map_.at(o);
    if (r == kNoRecord || store_[r].off() != o || store_[r].len() == 0) {
      fn(kNoRecord, o);
      return;
    }
    const uint64_t next = store_[r].end();
    fn(r, o);
    o = next;
  }
}

void Region::move_record(uint32_t record, uint32_t into) {
  Block& a = store_[record];
  Block& n = store_[into];
  n.offset.store(a.off(), std::memory_order_relaxed);
  n.size.store(a.len(), std::memory_order_relaxed);
  n.alloc_epoch.store(a.alloc_epoch.load(std::memory_order_relaxed), std::memory_order_relaxed);
  n.layout_epoch.store(a.layout_epoch.load(std::memory_order_relaxed), std::memory_order_relaxed);
  n.tag = a.tag;
  pinned_.moved(record, into);
  const uint64_t aw = a.word.load(std::memory_order_relaxed);
  const uint64_t nw = n.word.load(std::memory_order_relaxed);
  const uint64_t w = Word::make(Word::state(aw),
                                static_cast<uint8_t>((Word::flags(aw) & ~kFlagLongLived) |
                                                     (Word::flags(nw) & kFlagLongLived)),
                                Word::owner(aw), Word::pins(aw), Word::gen(nw) + 1);
  n.word.store(w, std::memory_order_release);
  map_.tag(n.off(), n.len(), into);
  a.absorbed_into.store(into, std::memory_order_relaxed);
  a.absorbed_gen.store(Word::gen(w), std::memory_order_relaxed);
  a.word.store(Word::with_state(aw, BlockState::kMoved), std::memory_order_release);
}

void Region::retire_slot_pages(Slot& s) {
  central_records_.retire_pages(s.page_head, s.page_tail);
  s.page_head = s.page_tail = s.page_cursor = kNoRecord;
  s.page_left = 0;
  s.free_records = kNoRecord;
  s.quarantine.clear();
}

void Region::reset_w(uint64_t* reclaimed_bytes) {
  const uint64_t neu = epoch() + 1;
  const uint64_t old_frontier = frontier_w();
  const int64_t live_before = live_bytes_w();
  // The slots' live counters restart below: what they say about the peak is kept first.
  totals_.used_peak = std::max(totals_.used_peak, window_used_peak_w());

  // Everything that needs host memory first, so that nothing fails half-way.
  const std::vector<uint32_t> survivors = pinned_epoch_blocks_w();
  // Pages retired by the previous reset are free from now on (whatever happens next):
  // recycle them first, so that the pages taken below come from them, not from a new
  // segment.
  central_records_.recycle_retired();
  const CentralRecords::Pages fresh =
      central_records_.take_pages(survivors.empty() ? 0 : 2 * survivors.size() + 1);

  // Retire the epoch's records: they wait one epoch (so its pointers still read "stale").
  for (uint32_t i = 0; i < locked_; ++i) start_slot_epoch_w(slots_[i]);
  central_records_.start_epoch(fresh);
  central_index_.clear();

  epoch_.store(neu, std::memory_order_relaxed);
  const bool fill_on = fill_on_.load(std::memory_order_relaxed);
  const Kept pinned = keep_pinned_w(survivors, fill_on);
  if (fill_on && old_frontier > top_) fill(top_, old_frontier - top_, nullptr);
  const Kept borrowed = reclaim_borrowed_w(fill_on);

  totals_.live_base_bytes = totals_.floor_live_bytes + pinned.bytes + borrowed.bytes;
  totals_.live_base_count = totals_.floor_live_count + pinned.count + borrowed.count;
  *reclaimed_bytes = live_before > static_cast<int64_t>(totals_.live_base_bytes)
                         ? static_cast<uint64_t>(live_before) - totals_.live_base_bytes
                         : 0;
  totals_.pin_retained_bytes = (top_ - floor_) - pinned.bytes;
  totals_.epoch_hw_base = top_;
  maybe_lower_floor();
  assert_sound_w("reset_w");
}

int64_t Region::live_bytes_w() const {
  int64_t live = static_cast<int64_t>(totals_.live_base_bytes);
  for (uint32_t i = 0; i < locked_; ++i) live += slots_[i].c.live_bytes;
  return live;
}

std::vector<uint32_t> Region::pinned_epoch_blocks_w() const {
  std::vector<uint32_t> survivors;
  survivors.reserve(pinned_.size());
  for (uint32_t r : pinned_) {
    if (!(Word::flags(store_[r].load_word()) & (kFlagPersistent | kFlagBorrowed))) {
      survivors.push_back(r);
    }
  }
  std::sort(survivors.begin(), survivors.end(),
            [&](uint32_t a, uint32_t b) { return store_[a].off() < store_[b].off(); });
  return survivors;
}

void Region::start_slot_epoch_w(Slot& s) {
  s.index.clear();
  s.span_cur = s.span_end = 0;
  Block& slack = store_[s.slack_record];
  slack.word.store(Word::next_gen(slack.word.load(std::memory_order_relaxed)),
                   std::memory_order_release);
  retire_slot_pages(s);
  s.c.live_bytes = 0;
  s.c.live_peak = 0;
  s.c.live_count = 0;
  s.c.epoch_allocs = 0;
  s.c.epoch_max_alloc = 0;
  s.c.step_max_alloc = 0;
  s.c.high_water = std::max(s.c.high_water, s.c.epoch_high_water);
  s.c.epoch_high_water = 0;
  s.span_top_record = kNoRecord;  // its page retires with the others
  s.cached_hint.store(0, std::memory_order_relaxed);
}

// Pinned blocks above the floor survive: copied into records of the new epoch. The top
// comes down to the end of the highest one; the unpinned space under it becomes holes.
Region::Kept Region::keep_pinned_w(const std::vector<uint32_t>& survivors, bool fill_on) {
  const uint64_t e = epoch();
  top_slot_ = -1;
  uint64_t prev_end = floor_;
  Kept kept;
  for (uint32_t r : survivors) {
    const uint32_t n = central_records_.acquire();
    move_record(r, n);
    Block& b = store_[n];
    b.layout_epoch.store(e, std::memory_order_relaxed);
    const uint64_t bw = b.load_word();
    b.word.store(Word::with_owner(bw, Word::owner(bw) == kOwnerZone ? kOwnerZone : kOwnerCentral),
                 std::memory_order_release);  // kept
    if (b.off() > prev_end) {
      if (fill_on) fill(prev_end, b.off() - prev_end, nullptr);
      central_index_.insert(store_, central_free_record(prev_end, b.off() - prev_end));
    }
    prev_end = b.end();
    kept.bytes += b.len();
    ++kept.count;
  }
  top_ = prev_end;
  Block& top = store_[bump_space_record_];
  top.word.store(Word::next_gen(top.word.load(std::memory_order_relaxed)),
                 std::memory_order_release);
  return kept;
}

// Borrowed blocks (epoch blocks in holes below the floor) go back to the floor index,
// unless pinned.
Region::Kept Region::reclaim_borrowed_w(bool fill_on) {
  const uint64_t e = epoch();
  Kept kept;
  borrowed_.for_each([&](uint32_t r) {
    Block& b = store_[r];
    const uint64_t w = b.load_word();
    if (Word::pins(w) > 0) {
      b.layout_epoch.store(e, std::memory_order_relaxed);
      kept.bytes += b.len();
      ++kept.count;
      return;
    }
    if (fill_on) fill(b.off(), b.len(), nullptr);
    borrowed_.remove(r);
    const uint64_t fw = free_word(w, kOwnerFloor);
    b.word.store(Word::with_flags(fw, Word::flags(fw) | kFlagReclaimed), std::memory_order_release);
    release_central(r);
  });
  return kept;
}

Result Region::set_floor_w(uint64_t offset) {
  Result valid = check_floor_offset_w(offset);
  if (!valid.is_ok()) return valid;
  if (offset >= floor_) {
    raise_floor_w(offset);
  } else {
    lower_floor_w(offset);
  }
  keep_borrowed_below_floor();
  assert_sound_w("set_floor_w");
  return Result::ok();
}

Result Region::check_floor_offset_w(uint64_t offset) const {
  const uint64_t g = cfg_.granule;
  const uint64_t frontier = frontier_w();
  if (offset % g != 0 || offset > frontier) {
    return Result::fail(Status::kInvalidArgument,
                        "floor offset " + std::to_string(offset) +
                            " must be a multiple of the alignment (" + std::to_string(g) +
                            ") between 0 and the top (" + std::to_string(frontier) + ")");
  }
  auto valid = [&](uint32_t r) {
    if (r == kNoRecord) return false;
    const uint64_t w = store_[r].load_word();
    const BlockState st = Word::state(w);
    if (st == BlockState::kLive || st == BlockState::kDeferred) return is_current(w, store_[r]);
    if (st == BlockState::kFree) {
      return Word::owner(w) == kOwnerFloor ||
             store_[r].layout_epoch.load(std::memory_order_relaxed) == epoch();
    }
    return false;
  };
  const bool boundary =
      offset == 0 || offset == frontier ||
      (valid(map_.at(offset)) && store_[map_.at(offset)].off() == offset) ||
      (valid(map_.ending_at(offset)) && store_[map_.ending_at(offset)].end() == offset);
  if (!boundary) {
    return Result::fail(Status::kInvalidArgument,
                        "floor offset " + std::to_string(offset) +
                            " is not a block boundary (it lies inside a block or unused span)");
  }
  return Result::ok();
}

std::vector<uint32_t> Region::blocks_between_w(uint64_t from, uint64_t to) const {
  uint64_t count = 0;
  walk_w(from, to, [&](uint32_t, uint64_t) { ++count; });
  std::vector<uint32_t> records;
  records.reserve(count);
  walk_w(from, to, [&](uint32_t r, uint64_t) {
    if (r != kNoRecord) records.push_back(r);
  });
  return records;
}

// Raising: every block in [floor, offset) becomes persistent, in a long-lived record.
void Region::raise_floor_w(uint64_t offset) {
  // Spans entirely below the new floor give their leftovers up first, so that
  // [floor, offset) holds only blocks.
  central_records_.reserve(locked_);
  for (uint32_t i = 0; i < locked_; ++i) {
    Slot& s = slots_[i];
    if (s.span_cur < s.span_end && s.span_end <= offset) close_span(s);
  }
  const std::vector<uint32_t> records = blocks_between_w(floor_, offset);
  store_.reserve_long_lived(static_cast<uint32_t>(records.size() + 1));
  for (uint32_t r : records) make_persistent_w(r);
  floor_ = offset;
}

void Region::make_persistent_w(uint32_t record) {
  const uint64_t w = store_[record].load_word();
  const uint32_t n = store_.take_long_lived();
  if (Word::state(w) == BlockState::kFree) {
    const uint8_t owner = Word::owner(w);
    if (owner == kOwnerCentral) {
      central_index_.remove(store_, record);
    } else if (owner < slots_.size()) {
      slots_[owner].index.remove(store_, record);
    }
    move_record(record, n);
    Block& b = store_[n];
    const uint64_t bw = b.load_word();
    b.word.store(
        Word::with_flags(Word::with_owner(bw, kOwnerFloor), Word::flags(bw) | kFlagPersistent),
        std::memory_order_release);
    central_records_.retire_moved(record);
    release_central(n);
    return;
  }
  move_record(record, n);
  Block& b = store_[n];
  b.word.store(Word::with_flags(b.load_word(), Word::flags(b.load_word()) | kFlagPersistent),
               std::memory_order_release);
  // Live totals do not change; the floor's share does (the next reset keeps it).
  totals_.floor_live_bytes += b.len();
  ++totals_.floor_live_count;
  central_records_.retire_moved(record);
}

// Lowering: the blocks in [offset, floor) join the current epoch.
void Region::lower_floor_w(uint64_t offset) {
  const std::vector<uint32_t> records = blocks_between_w(offset, floor_);
  central_records_.reserve(records.size() + 1);
  floor_ = offset;
  for (uint32_t r : records) join_epoch_w(r);
}

void Region::join_epoch_w(uint32_t record) {
  const uint64_t e = epoch();
  const uint64_t w = store_[record].load_word();
  const uint8_t flags = Word::flags(w);
  const uint32_t n = central_records_.acquire();
  if (Word::state(w) == BlockState::kFree) {
    floor_index_.remove(store_, record);
    move_record(record, n);
    Block& b = store_[n];
    b.layout_epoch.store(e, std::memory_order_relaxed);
    const uint64_t bw = b.load_word();
    b.word.store(Word::with_flags(Word::with_owner(bw, kOwnerCentral),
                                  Word::flags(bw) & (kFlagLongLived | kFlagReclaimed)),
                 std::memory_order_release);
    central_records_.retire_moved(record);
    release_central(n);
    return;
  }
  if (flags & kFlagBorrowed) borrowed_.remove(record);
  move_record(record, n);
  Block& b = store_[n];
  b.layout_epoch.store(e, std::memory_order_relaxed);
  b.word.store(Word::with_flags(b.load_word(), 0), std::memory_order_release);
  if (flags & kFlagPersistent) {
    totals_.floor_live_bytes -= b.len();
    --totals_.floor_live_count;
  }
  central_records_.retire_moved(record);
}

// After a floor change every live block below the floor survives resets, the epoch blocks
// borrowed from holes there included.
void Region::keep_borrowed_below_floor() {
  borrowed_.for_each([&](uint32_t r) {
    Block& b = store_[r];
    if (b.off() < floor_) {
      borrowed_.remove(r);
      const uint64_t w = b.load_word();
      b.word.store(Word::with_flags(w, (Word::flags(w) & ~kFlagBorrowed) | kFlagPersistent),
                   std::memory_order_release);
      totals_.floor_live_bytes += b.len();
      ++totals_.floor_live_count;
    }
  });
}

void Region::drain_w() {
  central_records_.reserve(locked_);
  std::vector<uint32_t> records;
  for (uint32_t i = 0; i < locked_; ++i) {
    Slot& s = slots_[i];
    records.clear();
    s.index.for_each(store_, [&](uint32_t r) { records.push_back(r); });
    for (uint32_t r : records) {
      s.index.remove(store_, r);
      Block& b = store_[r];
      b.word.store(Word::with_owner(b.load_word(), kOwnerCentral), std::memory_order_release);
      release_central(r);
    }
    close_span(s);
    s.cached_hint.store(0, std::memory_order_relaxed);
  }
  assert_sound_w("drain_w");
}

Region::Claim Region::claim_w(const std::vector<OffsetRange>& ranges, uint64_t* commit_to,
                              std::vector<BuriedStart>* buried) {
  const Claim valid = check_claim_ranges(ranges);
  if (valid != Claim::kOk) return valid;
  const uint64_t hi = ranges.back().offset + ranges.back().size;
  if (hi > ceiling_) {
    *commit_to = hi;
    return Claim::kNeedsCommit;
  }
  // What the dead blocks' starts in the ranges meant before (drain_w and the cuts below
  // may put new records there, and the zone's blocks hide the rest).
  std::vector<BuriedStart> before;
  if (buried != nullptr) {
    const uint64_t g = cfg_.granule;
    for (const OffsetRange& r : ranges) {
      for (uint64_t o = r.offset; o < r.offset + r.size; o += g) {
        const uint32_t rec = map_.at(o);
        if (rec == kNoRecord || store_[rec].off() != o) continue;
        const FreeOutcome h = history_at(slots_[0], o, true);
        if (h == FreeOutcome::kStale || h == FreeOutcome::kDoubleFree) before.push_back({o, h});
      }
    }
  }
  drain_w();  // slots' free blocks and span leftovers join the central side
  std::vector<uint32_t> hits;
  if (!free_central_blocks_under_w(ranges, hi, &hits)) return Claim::kChanged;

  // Host memory first: records for every cut, the pinned set's room.
  uint32_t long_lived = 0;
  for (uint32_t record : hits)
    long_lived += (Word::flags(store_[record].load_word()) & kFlagLongLived) != 0;
  central_records_.reserve(2 * ranges.size() + 2);
  store_.reserve_long_lived(2 * long_lived + 2);
  pinned_.reserve_more(ranges.size());

  if (hi > top_) {  // the bump space above the top becomes one more free block to cut
    const uint32_t r = central_free_record(top_, hi - top_);
    central_index_.insert(store_, r);
    top_ = hi;
    Block& top = store_[bump_space_record_];
    top.word.store(Word::next_gen(top.word.load(std::memory_order_relaxed)),
                   std::memory_order_release);
    hits.push_back(r);
  }
  make_zone_blocks_w(cut_at_range_ends_w(hits, ranges), ranges);
  if (buried != nullptr) buried->swap(before);
  assert_sound_w("claim_w");
  return Claim::kOk;
}

// A free block of the central side laid out in epoch e (the slots drained): what a claim
// may take.
bool Region::claimable_w(const Block& b, uint64_t e) const {
  const uint64_t w = b.load_word();
  return Word::state(w) == BlockState::kFree && Word::owner(w) == kOwnerCentral &&
         b.layout_epoch.load(std::memory_order_relaxed) == e;
}

bool Region::fit_w(uint64_t aligned, uint64_t* offset) {
  if (aligned == 0 || locked_ == 0) return false;
  drain_w();
  const uint64_t e = epoch();
  uint64_t run_at = 0, run_len = 0;  // the run of free blocks being walked
  bool in_run = false;
  uint64_t best_at = 0, best_len = ~uint64_t{0};
  auto close_run = [&] {
    if (in_run && run_len >= aligned && run_len < best_len) {
      best_at = run_at;
      best_len = run_len;
    }
    in_run = false;
  };
  bool unknown = false;
  walk_w(floor_, top_, [&](uint32_t record, uint64_t o) {
    if (unknown) return;
    if (record == kNoRecord) {
      unknown = true;
      return;
    }
    const Block& b = store_[record];
    if (!claimable_w(b, e)) {
      close_run();
      return;
    }
    if (!in_run) {
      in_run = true;
      run_at = o;
      run_len = 0;
    }
    run_len += b.len();
  });
  if (unknown) return false;
  // The run that reaches the top goes on into the bump space.
  const uint64_t tail_at = in_run ? run_at : top_;
  close_run();
  if (best_len != ~uint64_t{0}) {
    *offset = best_at;
    return true;
  }
  if (tail_at > cfg_.capacity || cfg_.capacity - tail_at < aligned) return false;
  *offset = tail_at;
  return true;
}

Region::Claim Region::check_claim_ranges(const std::vector<OffsetRange>& ranges) const {
  const uint64_t g = cfg_.granule;
  uint64_t prev = floor_;
  for (const OffsetRange& r : ranges) {
    if (r.size == 0 || r.offset % g != 0 || r.size % g != 0 || r.offset < prev ||
        r.size > cfg_.capacity - std::min(r.offset, cfg_.capacity)) {
      return r.offset < prev && r.offset < floor_ ? Claim::kChanged : Claim::kInvalid;
    }
    prev = r.offset + r.size;
  }
  if (ranges.empty() || locked_ == 0) return Claim::kInvalid;
  return Claim::kOk;
}

// Every range byte below the top must lie in a free central block of this epoch (the
// slots were drained): *hits gets those blocks in address order; false when a range byte
// is live or the layout there is not what it should be.
bool Region::free_central_blocks_under_w(const std::vector<OffsetRange>& ranges, uint64_t hi,
                                         std::vector<uint32_t>* hits) const {
  bool changed = false;
  size_t k = 0;
  const uint64_t e = epoch();
  walk_w(floor_, std::min(top_, hi), [&](uint32_t record, uint64_t o) {
    if (changed) return;
    if (record == kNoRecord) {
      changed = true;
      return;
    }
    const Block& b = store_[record];
    const uint64_t end = b.end();
    while (k < ranges.size() && ranges[k].offset + ranges[k].size <= o) ++k;
    if (k == ranges.size() || ranges[k].offset >= end) return;  // no range touches it
    if (!claimable_w(b, e)) {
      changed = true;
      return;
    }
    hits->push_back(record);
  });
  return !changed;
}

// Cuts the hits (out of the central index now) at the ranges' ends: pieces in address
// order, each wholly inside one range or between ranges.
std::vector<uint32_t> Region::cut_at_range_ends_w(const std::vector<uint32_t>& hits,
                                                  const std::vector<OffsetRange>& ranges) {
  std::vector<uint32_t> pieces;
  pieces.reserve(hits.size() + 2 * ranges.size());
  for (uint32_t record : hits) {
    central_index_.remove(store_, record);
    uint32_t cur = record;
    for (const OffsetRange& r : ranges) {
      if (r.offset >= store_[cur].end()) break;
      for (uint64_t cut : {r.offset, r.offset + r.size}) {
        const Block& b = store_[cur];
        if (cut <= b.off() || cut >= b.end()) continue;
        carve(nullptr, cur, cut - b.off(), kOwnerCentral);
        const uint32_t rest = map_.at(cut);
        central_index_.remove(store_, rest);
        pieces.push_back(cur);
        cur = rest;
      }
    }
    pieces.push_back(cur);
  }
  return pieces;
}

// Each range becomes one live block (its pieces merged: free space below the top and the
// bump space above it are separate blocks until now), pinned once by the zone; the pieces
// between ranges go back to the central index.
void Region::make_zone_blocks_w(const std::vector<uint32_t>& pieces,
                                const std::vector<OffsetRange>& ranges) {
  Slot& counted = slots_[0];  // claimed bytes count as live in some slot's counters
  size_t j = 0;
  uint32_t block = kNoRecord;  // the block of range j, while its pieces come
  auto settle = [&]() {
    if (block == kNoRecord) return;
    make_live(&counted, block, store_[block].len(), 0, 0);
    pinned_.add(block);
    Block& lb = store_[block];
    // The zone's pin is no user pin: it stays out of cfg_.pin_tally (unclaim undoes it).
    lb.word.store(Word::with_owner(Word::with_pins(lb.load_word(), 1), kOwnerZone),
                  std::memory_order_release);
    block = kNoRecord;
  };
  for (uint32_t record : pieces) {
    const uint64_t off = store_[record].off();
    while (j < ranges.size() && ranges[j].offset + ranges[j].size <= off) {
      settle();
      ++j;
    }
    if (j == ranges.size() || ranges[j].offset > off) {
      central_index_.insert(store_, record);  // between ranges: stays free
      continue;
    }
    if (block == kNoRecord) {
      block = record;
    } else {
      absorb(block, record);
      central_records_.retire(record);
    }
  }
  settle();
}

bool Region::split_zone_w(uint64_t offset) {
  if (locked_ == 0 || offset == 0 || offset % cfg_.granule != 0 || offset >= top_) return false;
  uint32_t hit = kNoRecord;
  walk_w(0, offset, [&](uint32_t record, uint64_t o) {
    if (record != kNoRecord && o < offset && store_[record].end() > offset) hit = record;
  });
  if (hit == kNoRecord) return false;
  const uint64_t w = store_[hit].load_word();
  const BlockState st = Word::state(w);
  if (Word::owner(w) != kOwnerZone || (st != BlockState::kLive && st != BlockState::kDeferred)) {
    return false;
  }
  pinned_.reserve_more(1);
  const uint32_t n = acquire_record_like(nullptr, hit);  // may throw: nothing changed yet
  Block& r = store_[hit];
  Block& b = store_[n];
  const uint64_t end = r.end();
  b.offset.store(offset, std::memory_order_relaxed);
  b.size.store(end - offset, std::memory_order_relaxed);
  b.alloc_epoch.store(r.alloc_epoch.load(std::memory_order_relaxed), std::memory_order_relaxed);
  b.layout_epoch.store(r.layout_epoch.load(std::memory_order_relaxed), std::memory_order_relaxed);
  b.tag = r.tag;
  const uint64_t bw = b.word.load(std::memory_order_relaxed);
  const uint8_t flags =
      static_cast<uint8_t>((Word::flags(w) & ~kFlagLongLived) | (Word::flags(bw) & kFlagLongLived));
  b.word.store(Word::make(st, flags, kOwnerZone, Word::pins(w), Word::gen(bw) + 1),
               std::memory_order_release);
  r.size.store(offset - r.off(), std::memory_order_relaxed);
  map_.set_end(offset, hit);
  map_.tag(offset, end - offset, n);
  pinned_.add(n);
  // One more live block, no more bytes (unclaim frees both); under the floor, the floor's
  // share counts it too (the next reset's base).
  ++slots_[0].c.live_count;
  if (flags & kFlagPersistent) ++totals_.floor_live_count;
  assert_sound_w("split_zone_w");
  return true;
}

void Region::unclaim(Slot& s, const std::vector<OffsetRange>& ranges) {
  for (const OffsetRange& r : ranges) {
    const uint32_t record = map_.at(r.offset);
    if (record == kNoRecord) continue;
    Block& b = store_[record];
    uint64_t w = b.load_word();
    // Only the zone's own block (one a range: claim_w, pin_zone) goes back.
    for (;;) {
      if (b.off() != r.offset || Word::owner(w) != kOwnerZone ||
          (Word::state(w) != BlockState::kLive && Word::state(w) != BlockState::kDeferred)) {
        w = 0;
        break;
      }
      // A kept block from now on, that no user block ever was: a free of its start later
      // finds a record "never live" (stale), not a block its user freed twice.
      if (b.word.compare_exchange_weak(w, Word::with_owner(w, kOwnerCentral),
                                       std::memory_order_acq_rel, std::memory_order_acquire)) {
        break;
      }
    }
    if (w == 0) continue;
    b.alloc_epoch.store(kNeverLive, std::memory_order_relaxed);
    uint64_t freed = 0, size = 0;
    // Freed while pinned, then unpinned: the free takes effect at the unpin.
    (void)free(s, r.offset, kAnyEpoch, &size);
    // The zone's own pin (claim_w, pin_zone): not in the pin tally.
    (void)unpin_at(s, r.offset, r.offset, &freed, /*tally=*/false);
  }
}

// The slots the writer holds are every slot ever used ([0, active)); the others' counters
// are still zero, so the scans below (a reset makes two) stop at them.
uint64_t Region::window_high_water_w() const {
  uint64_t hw = totals_.hw_base;
  for (uint32_t i = 0; i < locked_; ++i) {
    hw = std::max({hw, slots_[i].c.high_water, slots_[i].c.epoch_high_water});
  }
  return hw;
}

// Each slot's maximum of its own live counter: live bytes at any instant are the base plus
// the slots' counters, each at most its maximum, so base + the sum of the maxima bounds
// the peak (the maxima may come from different instants when threads free each other's
// blocks). Live blocks also lie below the top, so the high water bounds it too.
uint64_t Region::window_used_peak_w() const {
  int64_t bound = static_cast<int64_t>(totals_.live_base_bytes);
  for (uint32_t i = 0; i < locked_; ++i) bound += slots_[i].c.live_peak;
  if (bound < 0) return 0;
  return std::min(static_cast<uint64_t>(bound), window_high_water_w());
}

void Region::reset_peak_w() {
  int64_t live = static_cast<int64_t>(totals_.live_base_bytes);
  for (uint32_t i = 0; i < locked_; ++i) {
    SlotCounters& c = slots_[i].c;
    live += c.live_bytes;
    c.live_peak = c.live_bytes;
    // The epoch's high water stays exact through totals_.epoch_hw_base; the window restarts.
    totals_.epoch_hw_base = std::max(totals_.epoch_hw_base, c.epoch_high_water);
    c.high_water = c.epoch_high_water = 0;
  }
  totals_.used_peak = live > 0 ? static_cast<uint64_t>(live) : 0;
  totals_.hw_base = frontier_w();
}

void Region::snapshot_w(RegionSnapshot* out) const {
  RegionSnapshot s;
  s.capacity = cfg_.capacity;
  s.top = frontier_w();
  s.floor = floor_;
  s.epoch = epoch();
  int64_t live_bytes = static_cast<int64_t>(totals_.live_base_bytes);
  int64_t live_count = static_cast<int64_t>(totals_.live_base_count);
  int64_t deferred = 0;
  SlotCounters& t = s.sum;
  t = totals_.writer;
  for (uint32_t i = 0; i < locked_; ++i) {
    const Slot& sl = slots_[i];
    const SlotCounters& c = sl.c;
    live_bytes += c.live_bytes;
    live_count += c.live_count;
    deferred += c.deferred_frees;
    t.hits += c.hits;
    t.misses += c.misses;
    t.reuses += c.reuses;
    t.epoch_allocs += c.epoch_allocs;
    t.epoch_max_alloc = std::max(t.epoch_max_alloc, c.epoch_max_alloc);
    t.step_max_alloc = std::max(t.step_max_alloc, c.step_max_alloc);
    t.stale_frees += c.stale_frees;
    t.invalid_frees += c.invalid_frees;
    t.high_water = std::max({t.high_water, c.high_water, c.epoch_high_water});
    t.epoch_high_water = std::max(t.epoch_high_water, c.epoch_high_water);
    t.poison_fills += c.poison_fills;
    t.poison_skipped += c.poison_skipped;
    s.free_count += sl.index.count();
    s.free_bytes += sl.index.bytes();
    s.largest_free = std::max(s.largest_free, sl.index.largest(store_));
    if (static_cast<int32_t>(i) != top_slot_) s.slack_bytes += sl.span_end - sl.span_cur;
  }
  t.epoch_high_water = std::max(t.epoch_high_water, totals_.epoch_hw_base);
  t.high_water = std::max(t.high_water, totals_.hw_base);
  s.live_bytes = static_cast<uint64_t>(live_bytes);
  s.used_peak = std::max({totals_.used_peak, window_used_peak_w(), s.live_bytes});
  s.live_count = static_cast<uint64_t>(live_count);
  s.deferred_frees = static_cast<uint64_t>(deferred);
  s.sum.deferred_frees = deferred;
  s.floor_live_bytes = totals_.floor_live_bytes;
  s.free_count += central_index_.count() + floor_index_.count();
  s.free_bytes += central_index_.bytes() + floor_index_.bytes();
  s.largest_free =
      std::max({s.largest_free, central_index_.largest(store_), floor_index_.largest(store_)});
  for (uint32_t r : pinned_) {
    s.pinned_bytes += store_[r].len();
    ++s.pinned_blocks;
  }
  s.pin_retained_bytes = totals_.pin_retained_bytes;
  *out = s;
}

void Region::step_counts_w(RegionSnapshot* out) const {
  // As snapshot_w computes them.
  int64_t live_bytes = static_cast<int64_t>(totals_.live_base_bytes);
  int64_t live_count = static_cast<int64_t>(totals_.live_base_count);
  uint64_t allocs = totals_.writer.epoch_allocs;
  uint64_t reuses = totals_.writer.reuses;
  uint64_t epoch_hw = totals_.writer.epoch_high_water;
  for (uint32_t i = 0; i < locked_; ++i) {
    const SlotCounters& c = slots_[i].c;
    live_bytes += c.live_bytes;
    live_count += c.live_count;
    allocs += c.epoch_allocs;
    reuses += c.reuses;
    epoch_hw = std::max(epoch_hw, c.epoch_high_water);
  }
  out->epoch = epoch();
  out->floor = floor_;
  out->sum.reuses = reuses;
  out->live_bytes = static_cast<uint64_t>(live_bytes);
  out->live_count = static_cast<uint64_t>(live_count);
  out->sum.epoch_allocs = allocs;
  out->sum.epoch_high_water = std::max(epoch_hw, totals_.epoch_hw_base);
}

void Region::live_blocks_w(char* base, std::vector<LiveBlock>* out) const {
  test_points::hit(test_points::Point::kRegionWalk);
  walk_w(0, frontier_w(), [&](uint32_t r, uint64_t) {
    if (r == kNoRecord) return;
    const Block& b = store_[r];
    const uint64_t w = b.load_word();
    const BlockState st = Word::state(w);
    if (st != BlockState::kLive && st != BlockState::kDeferred) return;
    LiveBlock v;
    v.ptr = base + b.off();
    v.size = b.len();
    v.epoch = b.alloc_epoch.load(std::memory_order_relaxed);
    v.pins = Word::pins(w);
    v.tag = b.tag;
    v.persistent = (Word::flags(w) & kFlagPersistent) != 0;
    v.borrowed = (Word::flags(w) & kFlagBorrowed) != 0;
    v.deferred = st == BlockState::kDeferred;
    out->push_back(v);
  });
}

void Region::tag_bytes_w(uint64_t epoch, std::unordered_map<uint32_t, uint64_t>* bytes) const {
  walk_w(0, frontier_w(), [&](uint32_t r, uint64_t) {
    if (r == kNoRecord) return;
    const Block& b = store_[r];
    if (b.tag == 0 || b.alloc_epoch.load(std::memory_order_relaxed) != epoch) return;
    const BlockState st = Word::state(b.load_word());
    if (st == BlockState::kLive || st == BlockState::kDeferred) (*bytes)[b.tag] += b.len();
  });
}

std::string Region::check_invariants_w() const {
  const uint64_t g = cfg_.granule;
  const uint64_t frontier = frontier_w();
  std::string err;
  uint64_t live_bytes = 0, live_count = 0;
  uint64_t free_central = 0, free_floor = 0;
  std::vector<uint64_t> free_slot(slots_.size(), 0);
  uint32_t prev = kNoRecord;
  uint64_t prev_end = 0;
  auto fail = [&](const std::string& what, uint64_t at) {
    if (err.empty()) err = what + " at offset " + std::to_string(at);
  };
  walk_w(0, frontier, [&](uint32_t r, uint64_t o) {
    if (!err.empty()) return;
    if (r == kNoRecord) return fail("no block record (gap or broken tag)", o);
    const Block& b = store_[r];
    const uint64_t w = b.load_word();
    const uint64_t size = b.len();
    if (size == 0 || size % g != 0 || o % g != 0 || o + size > cfg_.capacity)
      return fail("misaligned or oversized block", o);
    if (map_.ending_at(o + size) != r) return fail("end tag does not name the block", o);
    if (o < floor_ && o + size > floor_) return fail("block straddles the floor", o);
    const BlockState st = Word::state(w);
    const uint8_t flags = Word::flags(w);
    const bool below = o < floor_;
    if (st == BlockState::kLive || st == BlockState::kDeferred) {
      if (below && !(flags & (kFlagPersistent | kFlagBorrowed)))
        return fail("live block below the floor is neither persistent nor borrowed", o);
      if (!below && (flags & (kFlagPersistent | kFlagBorrowed)))
        return fail("persistent or borrowed block above the floor", o);
      if (!is_current(w, b)) return fail("live block of a past epoch in the layout", o);
      if ((st == BlockState::kDeferred) != (Word::pins(w) > 0 && st == BlockState::kDeferred))
        return fail("deferred block without a pin", o);
      live_bytes += size;
      ++live_count;
    } else if (st == BlockState::kFree) {
      const uint8_t owner = Word::owner(w);
      if (below != (owner == kOwnerFloor)) return fail("free block on the wrong side", o);
      if (below != ((flags & kFlagPersistent) != 0) || (flags & kFlagBorrowed))
        return fail("free block with the wrong side flags", o);
      if (owner == kOwnerFloor) {
        ++free_floor;
      } else {
        if (b.layout_epoch.load(std::memory_order_relaxed) != epoch())
          return fail("free block of a past epoch in the layout", o);
        if (owner == kOwnerCentral) {
          ++free_central;
        } else if (owner < slots_.size()) {
          ++free_slot[owner];
        } else {
          return fail("free block with no owner", o);
        }
      }
      if (prev != kNoRecord && prev_end == o) {
        const uint64_t pw = store_[prev].load_word();
        if (Word::state(pw) == BlockState::kFree && Word::owner(pw) == owner)
          return fail("uncoalesced free neighbours", o);
      }
    } else {
      return fail("record in the layout is neither live nor free", o);
    }
    prev = r;
    prev_end = o + size;
  });
  if (!err.empty()) return err;
  if (floor_index_.count() != free_floor) return "floor index count disagrees with the layout";
  if (central_index_.count() != free_central) return "central index count disagrees";
  for (uint32_t i = 0; i < locked_; ++i) {
    if (slots_[i].index.count() != free_slot[i]) {
      return "slot " + std::to_string(i) + " index count disagrees";
    }
  }
  RegionSnapshot snap;
  snapshot_w(&snap);
  if (snap.live_bytes != live_bytes || snap.live_count != live_count)
    return "live counters disagree with the layout (" + std::to_string(snap.live_bytes) + " vs " +
           std::to_string(live_bytes) + ")";
  if (top_ > cfg_.capacity || floor_ > frontier || frontier > top_) return "top/floor out of range";
  return "";
}

void Region::assert_sound_w(const char* after) {
  if constexpr (kDebugChecks) {
    if (!debug_checks_.take()) return;
    const std::string err = check_invariants_w();
    ZARENA_ASSERT_MSG(err.empty(), (std::string(after) + ": " + err).c_str());
  } else {
    (void)after;
  }
}

std::string Region::describe_w(uint64_t offset) const {
  auto record = [&](uint32_t r) {
    if (r == kNoRecord) return std::string("none");
    const Block& b = store_[r];
    const uint64_t w = b.load_word();
    return "#" + std::to_string(r) + "{off " + std::to_string(b.off()) + " len " +
           std::to_string(b.len()) + " state " + std::to_string(static_cast<int>(Word::state(w))) +
           " flags " + std::to_string(Word::flags(w)) + " owner " + std::to_string(Word::owner(w)) +
           " pins " + std::to_string(Word::pins(w)) + " gen " + std::to_string(Word::gen(w)) +
           " alloc_epoch " + std::to_string(static_cast<int64_t>(b.alloc_epoch.load())) +
           " layout_epoch " + std::to_string(b.layout_epoch.load()) + " into " +
           std::to_string(static_cast<int32_t>(b.absorbed_into.load())) + "@" +
           std::to_string(b.absorbed_gen.load()) + "}";
  };
  std::string out = "start " + record(map_.at(offset)) + " end " + record(map_.ending_at(offset));
  const uint32_t r = map_.at(offset);
  if (r != kNoRecord) {
    uint32_t x = r;
    for (int i = 0; i < 8; ++i) {
      const uint32_t into = store_[x].absorbed_into.load();
      if (into == kNoRecord) break;
      out += " -> " + record(into);
      x = into;
    }
  }
  out += " epoch " + std::to_string(epoch()) + " floor " + std::to_string(floor_) + " top " +
         std::to_string(top_);
  return out;
}

}  // namespace zarena_core
