// The region allocator: offsets into one contiguous region, safe for many threads at
// once, no memory touched (except through the hooks). docs/CONCURRENCY.md is the one-page
// design; the essentials:
//
// Layout. [0, top) holds blocks (live or free) and the unused part of slot spans;
// [top, capacity) is untouched bump space. The floor splits the region: blocks below it
// survive resets ("persistent": weights), blocks above it belong to the current epoch.
//
// Who owns what. Each thread works in its slot (slots.h) under the slot's lock: it bumps
// blocks out of its span and keeps the blocks it frees in its own free index, coalescing
// them among themselves. Everything shared sits behind the central lock: the bump space
// (spans are carved from it), a central index of epoch-side free blocks (blocks a slot
// gave up: big ones, a slot over its budget, span leftovers, holes between pinned
// survivors of a reset), the floor index (holes below the floor), pins, and the record
// stores. Allocation order: the slot's index, the central index (when its bitmap hint
// says a fit may be there), the slot's span, a new span from the bump space, a hole below
// the floor (a "borrowed" block, reclaimed by the next reset); and only then, having
// drained every slot into the central index, are the region's free bytes declared
// exhausted. Records and the block map (block_store.h) let any thread validate a free in
// O(1) without a shared lock; the state word's compare-and-swap decides races.
//
// Whole-arena operations (reset, floors, drain, snapshots, walks) run under every slot
// lock plus the central lock (the caller takes them with WriterLock); they are O(slots)
// plus what they touch: a reset is O(slots + pins + borrowed blocks), not O(blocks).
//
// Commits (expandable regions): the region hands out nothing at or above its ceiling, and
// never waits for memory itself. An allocation that needs bump space above the ceiling
// fails with Placement::commit_to set; the arena commits outside the region's locks,
// raises the ceiling and tries again (engine/expandable.h). A trim lowers the ceiling
// before it decommits, so no block ever lies in memory that is not committed.
//
// Pins: a pinned block survives resets (the top after the reset is the end of the highest
// pinned block above the floor; the unpinned space below it becomes free holes); a free
// of a pinned block is deferred to its last unpin. Epochs: every live block remembers the
// epoch it was handed out in, so a free that names an epoch frees only that incarnation.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/checks.h"
#include "base/live_block.h"
#include "base/outcomes.h"
#include "base/pin_tally.h"
#include "base/spin_lock.h"
#include "base/status.h"
#include "region/block_store.h"
#include "region/central_lock.h"
#include "region/central_parts.h"
#include "region/free_index.h"
#include "region/slots.h"

namespace zarena_core {

// A freed block at least this large (after merging with its slot's neighbours) joins the
// central side at once instead of its slot's cache (docs/CONCURRENCY.md, "Big blocks are
// shared"). A slot's cache is for the hot path's small blocks; a big block cached by the
// thread that freed it is memory no other thread can use until a drain, and it cannot merge
// with the free blocks of other slots around it. PyTorch's autograd thread frees the
// activations the main thread allocated: cached there, they raised a traced training run's
// top from 493 to 573 MiB once the capacity (and with it the slots' budget) was the device's.
inline constexpr uint64_t kSharedFreeBytes = uint64_t{512} << 10;

// Block::alloc_epoch of a record that was never handed out at its offset (free space that a
// reset, a split or a span leftover created): a free of that address predates it.
inline constexpr uint64_t kNeverLive = ~0ull;

struct RegionConfig {
  uint64_t capacity = 0;  // bytes, a multiple of granule
  uint64_t granule = 256;
  uint32_t slots = 0;             // 0 = SlotSet::default_count()
  uint32_t lane_slots = 0;        // slots after the threads' for lanes (SlotSet)
  uint64_t span_bytes = 0;        // 0 = derived from the capacity and the slot count
  uint64_t slot_budget = 0;       // free bytes a slot keeps before giving some back; 0 = derived
  uint64_t ceiling = ~0ull;       // bump space at or above this is not committed (see above)
  bool expandable = false;        // memory is committed as the top rises: the top is the footprint
  PinTally* pin_tally = nullptr;  // told of every pin transition (null: none)
};

// What the region asks of the arena: poison fills. Called with region locks held: must
// not call back into the region, must not wait, and must be quick.
class RegionHooks {
 public:
  enum class Fill { kOff, kNow, kSkip };  // kSkip: poison wanted, but not now (capture)
  virtual ~RegionHooks() = default;
  virtual Fill fill_policy() noexcept = 0;
  virtual void fill(uint64_t offset, uint64_t bytes) noexcept = 0;
};

struct Placement {
  uint64_t offset = 0;
  uint64_t size = 0;
  bool reused = false;
  // Set when an allocation failed only because it needs bump space above the ceiling:
  // committing [0, commit_to) serves it as planned, [0, commit_least) at the least.
  uint64_t commit_to = 0, commit_least = 0;
};

// Bytes [offset, offset + size) of the region.
struct OffsetRange {
  uint64_t offset = 0;
  uint64_t size = 0;
};

// A dead block's start that a claim covers, and what a free of it answered before the
// claim hid it (kStale or kDoubleFree).
struct BuriedStart {
  uint64_t offset = 0;
  FreeOutcome what = FreeOutcome::kNotOwned;
};

struct RegionSnapshot {
  uint64_t capacity = 0, top = 0, floor = 0, epoch = 0;
  uint64_t live_bytes = 0, live_count = 0;
  uint64_t floor_live_bytes = 0;
  uint64_t free_count = 0, free_bytes = 0, largest_free = 0;
  uint64_t slack_bytes = 0;  // unused parts of slot spans below the top
  uint64_t pinned_bytes = 0, pinned_blocks = 0;
  uint64_t pin_retained_bytes = 0;  // at the last reset: unpinned bytes under the raised top
  uint64_t deferred_frees = 0;
  // Highest live_bytes since create or the last peak reset: exact while one slot makes
  // every allocation and free; with several it may exceed the true peak (never below it),
  // and it never exceeds sum.high_water (live blocks lie below the top).
  uint64_t used_peak = 0;
  SlotCounters sum;  // slot counters added up (maxima: the max)
};

// Names: a method whose name ends in _w ("writer") may be called only with WriterLock
// held (every slot lock plus the central lock); floor_locked() and the other per-thread
// methods need only the caller's slot lock (enter / leave).
class Region {
 public:
  Region(const RegionConfig& cfg, RegionHooks* hooks);
  ~Region();
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  // --- per-thread operations: between enter() and leave() ------------------------------
  Slot& enter() {
    Slot& s = slots_.mine();
    s.lock.lock();
    if (ZARENA_UNLIKELY(s.id >= slots_.active())) activate(s);
    return s;
  }
  void leave(Slot& s) { s.lock.unlock(); }
  static uint32_t thread_number() { return SlotSet::thread_number(); }
  // Slot i instead of the calling thread's (tests drive several slots from one thread).
  Slot& enter_slot(uint32_t i) {
    Slot& s = slots_[i % slots_.size()];
    s.lock.lock();
    if (s.id >= slots_.active()) activate(s);
    return s;
  }

  // aligned: > 0, a multiple of the granule. false: the region cannot serve it (every
  // slot was drained first), nothing changed but counters. May release and retake the
  // slot's lock (to drain). Throws std::bad_alloc (host memory for records), with no
  // state changed.
  // When it needs bump space above the ceiling, it fails with out->commit_to set (and
  // nothing changed but counters): the caller commits, outside the locks, and tries again.
  bool alloc(Slot& s, uint64_t aligned, uint32_t tag, Placement* out);
  // The same, but space above the ceiling counts as missing (a commit failed): the
  // region serves what it can below the ceiling, else fails as full.
  bool alloc_below_ceiling(Slot& s, uint64_t aligned, uint32_t tag, Placement* out) {
    return alloc_slow(s, aligned, tag, out, /*may_ask_commit=*/false);
  }
  // want_epoch: kAnyEpoch, or the epoch the block must have been handed out in.
  FreeOutcome free(Slot& s, uint64_t offset, uint64_t want_epoch, uint64_t* size);
  // Pins: of the block that starts at offset, or else of the live block offset lies inside
  // (engines pin views; also where an older block once started); *start (may be null)
  // gets the pinned block's offset on kOk.
  PinOutcome pin(Slot& s, uint64_t offset, uint64_t* start = nullptr);
  // Whether `offset` lies strictly inside a live block (its start below offset, its end
  // above), or that cannot be told cheaply (no boundary within 1M granules below it): for
  // error paths, where a free found no live block starting at offset and an older record
  // there said "stale" or "freed". The caller holds a slot lock; takes the central lock
  // briefly.
  bool inside_live_block(uint64_t offset) const;
  // A last unpin of a block freed while pinned frees it: *freed_size then gets its size.
  PinOutcome unpin(Slot& s, uint64_t offset, uint64_t* freed_size, uint64_t* start = nullptr);
  // Pins the block that starts at offset for a plan's zone: as pin(), but the pin is no
  // user pin and stays out of cfg_.pin_tally (pinned_peak_bytes); unclaim() undoes it.
  PinOutcome pin_zone(Slot& s, uint64_t offset);
  // What a free of `offset` would answer from the records alone, changing nothing: kOk when
  // a live block (or a zone piece) starts there, else kStale, kDoubleFree or kNotOwned as
  // free() would say for a dead block there. For the arena's error paths: a pointer the
  // plan's zone covers now may name a region block reclaimed before the zone was claimed.
  // The caller holds a slot lock (s), or the writer lock (central_held).
  FreeOutcome history_at(const Slot& s, uint64_t offset, bool central_held = false) const;
  // Offsets of the blocks pinned now (zone pieces left out): O(pins). Under WriterLock.
  void pinned_offsets_w(std::vector<uint64_t>* out) const;
  // Offsets of the borrowed blocks (epoch blocks in holes below the floor) not pinned: a
  // reset reclaims them. O(borrowed). Under WriterLock.
  void borrowed_unpinned_offsets_w(std::vector<uint64_t>* out) const;
  // Where offset lies: strictly inside a live block (kLiveBlock, *start gets its start), in
  // none, or not known (no boundary of the current layout within max_granules below it).
  // The answer may be out of date at once: pin_at and unpin_at check it again. The caller
  // holds a slot lock; takes the central lock briefly. O(min(offset - start, max_granules)).
  enum class Within { kNone, kLiveBlock, kUnknown };
  static constexpr uint64_t kWholeScan = ~0ull;
  Within live_block_containing(uint64_t offset, uint64_t max_granules, uint64_t* start) const;
  // The ceiling (central lock taken inside; no other region lock may be held). raise:
  // [0, end) is committed now (the ceiling never goes down through it). lower: a trim is
  // about to decommit above `keep`: the ceiling comes down to max(keep, the top: every
  // span and block lies below it), which is returned (decommit nothing below it).
  void raise_ceiling(uint64_t end);
  uint64_t lower_ceiling(uint64_t keep);
  // The epoch and floor as the caller's slot lock guarantees them.
  uint64_t epoch() const { return epoch_.load(std::memory_order_relaxed); }
  uint64_t floor_locked() const { return floor_; }

  // --- whole-region operations: under WriterLock (the _w methods) ------------------------
  class WriterLock {
   public:
    explicit WriterLock(Region& r) : r_(r) { r_.lock_all(); }
    ~WriterLock() { r_.unlock_all(); }
    WriterLock(const WriterLock&) = delete;
    WriterLock& operator=(const WriterLock&) = delete;

   private:
    Region& r_;
  };
  // Starts a new epoch: every block above the floor that is not pinned is reclaimed; the
  // slots' caches are emptied. *reclaimed_bytes: live bytes reclaimed.
  void reset_w(uint64_t* reclaimed_bytes);
  // Moves the floor to `offset`: a block boundary between 0 and the top (granule
  // multiple). Raising makes every block below it persistent; lowering makes the blocks
  // between the new and the old floor belong to the current epoch.
  Result set_floor_w(uint64_t offset);
  void mark_step_boundary_w() { (void)set_floor_w(frontier_w()); }
  // Gives every slot's cached free blocks and span leftovers to the central index.
  void drain_w();
  void snapshot_w(RegionSnapshot* out) const;
  // The part of snapshot_w a step boundary or a reset reads (epoch, floor, live bytes and
  // blocks, the epoch's requests, reuses and high water), the same values, without the
  // free indexes, the pinned list and the peaks' scans; the other fields are left alone.
  void step_counts_w(RegionSnapshot* out) const;
  // Restarts the epoch-independent peaks (high water, used peak) from the state now.
  void reset_peak_w();
  uint64_t frontier_w() const;
  uint64_t floor_w() const { return floor_; }
  SlotCounters& slot_counters_w(uint32_t i) { return slots_[i].c; }
  uint32_t locked_slots_w() const { return locked_; }  // slots [0, this) are held
  // Appends the live blocks in address order; ptr = base + offset.
  void live_blocks_w(char* base, std::vector<LiveBlock>* out) const;
  // Adds the bytes of every live, tagged block handed out in `epoch` to (*bytes)[tag]
  // (the diagnosis's "top tags"; nothing is copied per block). O(blocks).
  void tag_bytes_w(uint64_t epoch, std::unordered_map<uint32_t, uint64_t>* bytes) const;
  // Claims every range (sorted, disjoint, granule multiples, at or above the floor) as a
  // live block pinned once, all or nothing: a step plan's zone laid out around the live
  // blocks of a window. Each range must be free space now (free blocks, span leftovers,
  // bump space); kChanged if any of its bytes is live or below the floor (a block was
  // handed out there since the caller looked: nothing claimed, only the slots' caches
  // drained), kNeedsCommit with *commit_to set when the last range ends above the ceiling
  // (commit [0, *commit_to) with no lock held and try again), kInvalid for bad ranges or
  // ranges beyond the capacity. Throws std::bad_alloc (records) before any change.
  // O(blocks above the floor + ranges).
  enum class Claim { kOk, kChanged, kNeedsCommit, kInvalid };
  // buried (may be null): on kOk, every granule of the ranges where a dead block started
  // and a free would have answered kStale or kDoubleFree before the claim (history_at: a
  // block reclaimed there, say), in address order: the zone's blocks hide those records
  // now. O(granules of the ranges) more.
  Claim claim_w(const std::vector<OffsetRange>& ranges, uint64_t* commit_to,
                std::vector<BuriedStart>* buried = nullptr);
  // Where `aligned` bytes of free space at or above the floor lie now, for claim_w: the
  // smallest run of free blocks below the top that holds them, else the run that ends at
  // the top (or the top itself) extended into the bump space; false when the capacity
  // has no such room. Drains the slots' caches (as claim_w does). O(blocks above the
  // floor). Under WriterLock.
  bool fit_w(uint64_t aligned, uint64_t* offset);
  // Splits the zone's block that holds `offset` strictly inside it into two zone blocks at
  // offset, each pinned once, so that a floor may lie there (a planned block's start inside
  // a zone piece). false: no zone block holds offset inside it (nothing changed). Throws
  // std::bad_alloc (a record, the pinned set's room) before any change. O(blocks below
  // offset). Under WriterLock.
  bool split_zone_w(uint64_t offset);
  // Gives claimed ranges back: each block is unpinned and freed, as zarena_unpin and
  // zarena_free would (under the caller's slot lock).
  void unclaim(Slot& s, const std::vector<OffsetRange>& ranges);
  // Layout invariants ("" when sound). O(blocks): for tests, and in debug builds after
  // every writer operation that changes the layout (assert_sound_w).
  std::string check_invariants_w() const;
  // What the maps and records say about an offset (for test failure messages).
  std::string describe_w(uint64_t offset) const;

  // Poison: whether frees and resets ask the hooks to fill at all (the arena switches it).
  void set_fill_enabled(bool on) { fill_on_.store(on, std::memory_order_relaxed); }

  uint64_t capacity() const { return cfg_.capacity; }
  uint64_t granule() const { return cfg_.granule; }
  uint32_t slot_count() const { return slots_.size(); }
  // Lane slot i (0 <= i < lane_slots): the slot id lanes enter with enter_slot.
  uint32_t lane_slot(uint32_t i) const { return slots_.thread_slots() + i; }
  uint32_t lane_slots() const { return slots_.lane_slots(); }
  uint64_t span_bytes() const { return cfg_.span_bytes; }
  // A trace's order counter, advanced at every central-lock acquisition (central_lock.h);
  // null: none. Set while no thread uses the region.
  void set_order_counter(std::atomic<uint64_t>* c) { central_.set_order_counter(c); }

 private:
  friend class WriterLock;
  void lock_all();
  void unlock_all();
  void activate(Slot& s);  // first use of s (its lock held): make writers see it

  // Records.
  uint32_t acquire_slot_record(Slot& s);                  // an epoch record for a block owned by s
  uint32_t acquire_record_like(Slot* s, uint32_t model);  // same storage class as model
  // Absorbed/moved: through s's quarantine (null: the central side's, central lock held).
  void retire_record(Slot* s, uint32_t record);

  // Blocks.
  // alloc's every other case, in order: the slot's index, then under the central lock the
  // central index, the slot's span (or a new one), a hole below the floor; once more after
  // draining every slot; else full.
  bool alloc_slow(Slot& s, uint64_t aligned, uint32_t tag, Placement* out, bool may_ask_commit);
  bool take_from_central_index(Slot& s, uint64_t aligned, uint32_t tag, Placement* out);
  // A free central block of epoch e (the slots drained): what claim_w and fit_w may take.
  bool claimable_w(const Block& b, uint64_t e) const;
  bool borrow_from_floor(Slot& s, uint64_t aligned, uint32_t tag, Placement* out);
  void bump_with(Slot& s, uint32_t fresh, uint64_t aligned, uint32_t tag, Placement* out);
  // Whether any slot may hold free blocks or span leftovers (a drain could help).
  bool slots_may_cache() const;
  // Under the central lock, in an expandable region, before a new span raises the top:
  // whether the slots' cached free blocks, coalesced with the central ones by a drain,
  // might hold `aligned` bytes instead (a hint: the slots' byte counts are read unlocked).
  bool drain_may_spare_top(uint64_t aligned) const;
  // Leaves s, drains every slot under the writer lock, takes s again.
  void drain_from(Slot& s);
  // record (s's, unused) waits on s's free records: the next acquire_slot_record takes it.
  void keep_spare(Slot& s, uint32_t record);
  uint32_t bump_record(Slot& s, uint64_t aligned);
  // Makes record a live block of s's thread and describes it in *out.
  void hand_out(Slot& s, uint32_t record, uint64_t aligned, uint32_t tag, uint8_t flags,
                bool reused, Placement* out);
  // record (at s.span_cur, tagged) becomes live: the span moves past it.
  void bump_span(Slot& s, uint32_t record, uint64_t aligned, uint32_t tag, Placement* out);
  void make_live(Slot* s, uint32_t record, uint64_t aligned, uint32_t tag, uint8_t flags);
  // Shrinks free block record (already out of its index) to `size`; the rest goes back to
  // record's side, owned as `owner`.
  void carve(Slot* s, uint32_t record, uint64_t size, uint8_t owner);
  void absorb(uint32_t keep, uint32_t gone);  // gone (just above keep) merges into keep
  void release_to_slot(Slot& s, uint32_t record);
  void release_central(
      uint32_t record);  // under the central lock; record is kFree with its owner set
  void flush_slot(Slot& s, uint64_t target_bytes);  // central lock taken inside
  // Under the central lock. false: no room, or (out->commit_to set, when may_ask_commit)
  // no room below the ceiling.
  bool take_span(Slot& s, uint64_t need, bool may_ask_commit, Placement* out);
  void close_span(Slot& s);  // under the central lock: leftovers to central
  // Under the central lock: a fresh central record for free space [offset, offset + size)
  // of this epoch, in the block map, in no index yet.
  uint32_t central_free_record(uint64_t offset, uint64_t size);
  void give_back_top(uint32_t record);  // record ends at top_, nothing above: top_ comes down
  void maybe_lower_floor();
  void fill(uint64_t offset, uint64_t bytes, Slot* s);
  bool is_current(uint64_t w, const Block& b) const;
  // A free of a block that is no longer live: double, stale or not a block start.
  // central_held: the caller holds the central lock (a writer).
  FreeOutcome classify_dead(const Slot& s, uint32_t record, uint64_t w,
                            bool central_held = false) const;
  // The peaks of the current window: the highest block end since the last peak reset,
  // and the used-bytes peak the slots' maxima allow (clamped by that high water).
  uint64_t window_high_water_w() const;
  uint64_t window_used_peak_w() const;

  // Writer helpers.
  // reset_w's steps: the live bytes now; the pinned blocks above the floor (they survive),
  // in address order (may throw); a slot's caches emptied, records retired and counters
  // restarted; the survivors kept in records of the new epoch with holes between them (the
  // top comes down to the highest end); the borrowed blocks reclaimed unless pinned.
  struct Kept {
    uint64_t bytes = 0, count = 0;
  };
  int64_t live_bytes_w() const;
  std::vector<uint32_t> pinned_epoch_blocks_w() const;
  void start_slot_epoch_w(Slot& s);
  Kept keep_pinned_w(const std::vector<uint32_t>& survivors, bool fill_on);
  Kept reclaim_borrowed_w(bool fill_on);
  // set_floor_w's steps: is the offset a boundary; the blocks in [from, to) (may throw);
  // raising the floor (each block made persistent) or lowering it (each joins the epoch).
  Result check_floor_offset_w(uint64_t offset) const;
  std::vector<uint32_t> blocks_between_w(uint64_t from, uint64_t to) const;
  void raise_floor_w(uint64_t offset);
  void make_persistent_w(uint32_t record);
  void lower_floor_w(uint64_t offset);
  void join_epoch_w(uint32_t record);
  // claim_w's steps.
  Claim check_claim_ranges(const std::vector<OffsetRange>& ranges) const;
  bool free_central_blocks_under_w(const std::vector<OffsetRange>& ranges, uint64_t hi,
                                   std::vector<uint32_t>* hits) const;
  std::vector<uint32_t> cut_at_range_ends_w(const std::vector<uint32_t>& hits,
                                            const std::vector<OffsetRange>& ranges);
  void make_zone_blocks_w(const std::vector<uint32_t>& pieces,
                          const std::vector<OffsetRange>& ranges);
  // Copies record into `into` (a fresh record), retags it and leaves record "moved" to it.
  void move_record(uint32_t record, uint32_t into);
  void retire_slot_pages(Slot& s);
  void keep_borrowed_below_floor();
  // Where a block freed by slot s goes: the slot, or (below the floor) the floor index.
  static bool goes_to_floor(uint8_t flags) {
    return (flags & (kFlagPersistent | kFlagBorrowed)) != 0;
  }
  // A live block a reset kept above the floor (pinned then) carries the owner byte
  // kOwnerCentral: freed, it goes to the central side, with the holes around it.
  static bool kept(uint64_t live_word) {
    return Word::owner(live_word) == kOwnerCentral || Word::owner(live_word) == kOwnerZone;
  }
  // Whether a live block, freed, goes through the central lock (below the floor, or kept):
  // "in transit" (kOwnerNone) until then, so no neighbour merges it early.
  static bool goes_central(uint64_t live_word) {
    return goes_to_floor(Word::flags(live_word)) || kept(live_word);
  }
  // Under the central lock: a block slot s freed joins the central side (a kept one, in
  // transit; or a big one, kSharedFreeBytes), so it merges with the holes around it and,
  // when it ends at the top, goes back to the bump space with them; s's free blocks that
  // then end at the top follow, as they would at s's span. So freeing the topmost block
  // lowers the top also after a reset that kept pinned blocks (the top then lies in no
  // span).
  void release_to_central(Slot& s, uint32_t record);
  // pin / unpin of the block that starts at offset and whose end lies above `inside`.
  // tally false: the pin transition is left out of cfg_.pin_tally (a plan's zone).
  PinOutcome pin_at(Slot& s, uint64_t offset, uint64_t inside, bool tally = true);
  PinOutcome unpin_at(Slot& s, uint64_t offset, uint64_t inside, uint64_t* freed_size,
                      bool tally = true);
  uint64_t free_word(uint64_t w, uint8_t owner) const;
  void finish_floor_free(Slot& s, uint32_t record, uint8_t flags, uint64_t size);
  template <typename Fn>
  void walk_w(uint64_t from, uint64_t to, Fn&& fn) const;  // fn(record) per block; spans skipped
  // Debug builds (checks.h): aborts, naming `after`, when check_invariants_w finds the
  // layout unsound (sampled: debug_checks_); release builds: nothing.
  void assert_sound_w(const char* after);

  RegionConfig cfg_;
  RegionHooks* hooks_;
  mutable BlockStore store_;
  BlockMap map_;
  mutable SlotSet slots_;
  mutable CentralLock central_;

  std::atomic<uint64_t> epoch_{0};
  std::atomic<bool> fill_on_{false};
  uint32_t locked_ = 0;  // slots the writer holds ([0, locked_)); writer operations visit these
  uint64_t floor_ = 0;   // changed under every lock; read under any slot lock

  // --- under the central lock ------------------------------------------------------------
  uint64_t top_ = 0;
  uint64_t ceiling_;       // RegionConfig::ceiling, then raise_ceiling / lower_ceiling
  int32_t top_slot_ = -1;  // the slot whose span ends at top_
  uint32_t bump_space_record_ =
      kNoRecord;  // stands for the bump space (absorb target of given-back blocks)
  FreeIndex central_index_;
  FreeIndex floor_index_;
  CentralRecords central_records_{store_};  // records of the central side's blocks
  PinnedSet pinned_{store_};                // blocks with pins > 0
  BorrowedList borrowed_{store_};           // epoch blocks in holes below the floor
  RegionTotals totals_;                     // what the statistics carry across resets
  DebugSampler debug_checks_;               // which writer operations assert_sound_w checks after
};

}  // namespace zarena_core

// The per-thread fast paths, inline (see region_fast.h).
#include "region/region_fast.h"  // IWYU pragma: export
