// A Region with its hooks, driven one operation at a time from the calling thread (each
// call enters and leaves the thread's slot, as the arena does), plus snapshot helpers.
// Shared by the region suites (single-threaded model tests and the concurrency tests).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include "region/region.h"

namespace zarena_test {

using zarena_core::FreeOutcome;
using zarena_core::kAnyEpoch;
using zarena_core::PinOutcome;
using zarena_core::Placement;
using zarena_core::Region;
using zarena_core::RegionConfig;
using zarena_core::RegionHooks;
using zarena_core::RegionSnapshot;

class RegionHarness : public RegionHooks {
 public:
  explicit RegionHarness(uint64_t capacity, uint64_t granule = 256, uint32_t slots = 0)
      : region_(config(capacity, granule, slots), this) {}

  Region& region() { return region_; }
  // Operations use slot i (as if made by another thread) until reset to -1.
  void use_slot(int i) { slot_ = i; }

  // Offset of a block of `size` (a multiple of the granule), or ~0 when it fails. When the
  // region asks for memory above its ceiling, the harness plays the arena: it "commits"
  // up to its commit limit (set_commit_limit) with no lock held and tries again.
  uint64_t alloc(uint64_t size, bool* reused = nullptr, uint32_t tag = 0) {
    zarena_core::Slot& s = enter();
    Placement p;
    bool ok = region_.alloc(s, size, tag, &p);
    if (!ok && p.commit_to != 0) {
      region_.leave(s);
      const uint64_t limit = commit_limit_.load();
      const bool fits = p.commit_to <= limit;
      region_.raise_ceiling(fits ? p.commit_to : limit);
      enter();
      p = Placement{};
      ok = fits ? region_.alloc(s, size, tag, &p) : region_.alloc_below_ceiling(s, size, tag, &p);
    }
    region_.leave(s);
    if (reused != nullptr) *reused = p.reused;
    return ok ? p.offset : ~0ull;
  }
  FreeOutcome free(uint64_t off, uint64_t want_epoch = kAnyEpoch, uint64_t* size = nullptr) {
    zarena_core::Slot& s = enter();
    uint64_t sz = 0;
    const FreeOutcome o = region_.free(s, off, want_epoch, &sz);
    region_.leave(s);
    if (size != nullptr) *size = sz;
    return o;
  }
  PinOutcome pin(uint64_t off) {
    zarena_core::Slot& s = enter();
    const PinOutcome o = region_.pin(s, off);
    region_.leave(s);
    return o;
  }
  PinOutcome unpin(uint64_t off, uint64_t* freed = nullptr) {
    zarena_core::Slot& s = enter();
    uint64_t f = 0;
    const PinOutcome o = region_.unpin(s, off, &f);
    region_.leave(s);
    if (freed != nullptr) *freed = f;
    return o;
  }
  uint64_t reset() {
    Region::WriterLock w(region_);
    uint64_t reclaimed = 0;
    region_.reset_w(&reclaimed);
    return reclaimed;
  }
  void mark_step_boundary() {
    Region::WriterLock w(region_);
    region_.mark_step_boundary_w();
  }
  zarena_core::Status set_floor(uint64_t off) {
    Region::WriterLock w(region_);
    return region_.set_floor_w(off).status;
  }
  void drain() {
    Region::WriterLock w(region_);
    region_.drain_w();
  }
  Region::Claim claim(const std::vector<zarena_core::OffsetRange>& ranges,
                      uint64_t* commit_to = nullptr) {
    Region::WriterLock w(region_);
    uint64_t c = 0;
    const Region::Claim o = region_.claim_w(ranges, &c);
    if (commit_to != nullptr) *commit_to = c;
    return o;
  }
  void unclaim(const std::vector<zarena_core::OffsetRange>& ranges) {
    zarena_core::Slot& s = enter();
    region_.unclaim(s, ranges);
    region_.leave(s);
  }
  RegionSnapshot snap() {
    Region::WriterLock w(region_);
    RegionSnapshot s;
    region_.snapshot_w(&s);
    return s;
  }
  std::string describe(uint64_t off) {
    Region::WriterLock w(region_);
    return region_.describe_w(off);
  }
  std::string invariants() {
    Region::WriterLock w(region_);
    return region_.check_invariants_w();
  }
  uint64_t top() { return snap().top; }
  uint64_t floor() { return snap().floor; }
  uint64_t epoch() { return region_.epoch(); }

  // Poison ranges the region asked to fill (when fill_now is set).
  std::vector<std::pair<uint64_t, uint64_t>> fills() {
    std::lock_guard<std::mutex> lock(mu_);
    return fills_;
  }
  void set_fill(Fill f) {
    fill_mode_.store(f);
    region_.set_fill_enabled(f != Fill::kOff);
  }
  // What the harness's "backend" can commit: [0, end). Lowering it lowers the region's
  // ceiling (as a trim does: never below the top).
  void set_commit_limit(uint64_t end) {
    commit_limit_.store(end);
    region_.lower_ceiling(end);
  }

  Fill fill_policy() noexcept override { return fill_mode_.load(); }
  void fill(uint64_t offset, uint64_t bytes) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    fills_.emplace_back(offset, bytes);
  }

 private:
  zarena_core::Slot& enter() {
    return slot_ < 0 ? region_.enter() : region_.enter_slot(static_cast<uint32_t>(slot_));
  }
  static RegionConfig config(uint64_t capacity, uint64_t granule, uint32_t slots) {
    RegionConfig c;
    c.capacity = capacity;
    c.granule = granule;
    c.slots = slots;
    return c;
  }

  int slot_ = -1;
  std::atomic<Fill> fill_mode_{Fill::kOff};
  std::atomic<uint64_t> commit_limit_{~0ull};
  std::mutex mu_;
  std::vector<std::pair<uint64_t, uint64_t>> fills_;
  Region region_;
};

}  // namespace zarena_test
