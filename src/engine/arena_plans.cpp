// The arena's side of step plans (docs/PLANS.md): the planned allocation, free and pin
// paths the hot paths branch to, the boundary hook, the zone (pinned region blocks),
// and the records of what the plans did. The plans themselves live in src/plan/.
#include <fmt/format.h>

#include <algorithm>
#include <mutex>

#include "base/human_bytes.h"
#include "base/last_error.h"
#include "engine/arena.h"
#include "plan/plan_protocol.h"

namespace zarena_core {

namespace {

const char* miss_name(uint64_t reason) { return plan_protocol::miss_reason(reason).word; }
const char* miss_text(uint64_t reason) { return plan_protocol::miss_reason(reason).text; }

}  // namespace

Status Arena::alloc_under_plan(uint64_t size, uint64_t aligned, uint32_t tag,
                               zarena_block* out) noexcept {
  if (__builtin_expect(alloc_planned(aligned, tag, out), 1)) return Status::kOk;
  return alloc_unplanned(size, tag, out);
}

bool Arena::alloc_planned(uint64_t aligned, uint32_t tag, zarena_block* out) noexcept {
  PlanRun::Block b;
  if (plans_.alloc(aligned, tag, Region::thread_number(), &b) != PlanRun::Alloc::kServed) {
    return false;  // a deviation is recorded in the run; the boundary reports it
  }
  out->ptr = reinterpret_cast<void*>(b.ptr);
  out->epoch = b.epoch;
  out->size = b.size;
  out->flags = ZARENA_BLOCK_PLANNED;
  out->tag = tag;
  return true;
}

// Poison goes in before the block is marked free: once it is, the plan may hand its space
// to the next instance at once. Only a block the call is about to free is filled.
void Arena::poison_planned(PlanRun& run, void* ptr, bool last_unpin, uint64_t want_epoch) noexcept {
  const uint64_t n = run.live_size(reinterpret_cast<uintptr_t>(ptr), last_unpin, want_epoch);
  if (n == 0 || capturing()) return;
  const Result r = backend_->fill32(ptr, n, poison_word_.load(std::memory_order_relaxed));
  if (r.is_ok()) {
    plan_fills_.fetch_add(1, std::memory_order_relaxed);
  } else {
    queue_warning(QueuedWarnings::kPoisonFailed, r.message);
  }
}

Status Arena::free_planned(PlanRun& run, void* ptr, uint64_t want_epoch) noexcept {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  if (poison_on_.load(std::memory_order_relaxed)) poison_planned(run, ptr, false, want_epoch);
  uint64_t size = 0;
  const FreeOutcome o = run.free(p, want_epoch, &size);
  if (__builtin_expect(o == FreeOutcome::kOk || o == FreeOutcome::kDeferred, 1)) {
    if (fast_path_flags_.load(std::memory_order_relaxed) & kWarningsQueued) {
      emit_queued_warnings();
    }
    return Status::kOk;
  }
  return free_refused(region_.enter(), o, ptr, want_epoch);
}

Result Arena::pin_planned(PlanRun& run, void* ptr, bool pin) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  if (pin) return pin_error(run.pin(p, &pin_tally_), ptr, "zarena_pin");
  // The last unpin of a block freed while pinned frees it: poison first, as for a free.
  if (poison_on_.load(std::memory_order_relaxed)) poison_planned(run, ptr, true, kAnyEpoch);
  uint64_t freed = 0;
  const Result r = pin_error(run.unpin(p, &freed, &pin_tally_), ptr, "zarena_unpin");
  emit_queued_warnings();
  return r;
}

void Arena::sync_plan_flags() {
  uint32_t set = 0;
  if (plans_.learning()) set |= kLearning;
  if (plans_.has_zone()) set |= kPlanZone;
  if (plans_.engaged()) set |= kPlanEngaged;
  const uint32_t mask = kLearning | kPlanZone | kPlanEngaged;
  fast_path_flags_.fetch_and(~(mask & ~set), std::memory_order_relaxed);
  fast_path_flags_.fetch_or(set, std::memory_order_relaxed);
}

void Arena::plan_boundary() {
  if (!plans_.enabled()) return;
  PlanEvents events;
  plans_.on_boundary(*this, &events);
  sync_plan_flags();
  emit_queued_warnings();  // a poison fill of a zone given back
  log_plan_events(events);
}

void Arena::check_floor_over_zone() {
  if (!plans_.has_zone() || zone_size_.load(std::memory_order_relaxed) == 0) return;
  uint64_t floor = 0;
  {
    Region::WriterLock w(region_);
    floor = region_.floor_w();
  }
  if (floor > zone_offset_.load(std::memory_order_relaxed)) {
    plans_.on_floor_over_zone();
    sync_plan_flags();
  }
}

void Arena::log_plan_events(const PlanEvents& e) {
  if (e.learned && log_enabled(ZARENA_LOG_INFO)) {
    LogRecord rec(log_events::kPlanLearned, source_);
    rec.message(fmt::format(
        "step plan learned: {} allocations per step ({} planned) fit in {} (lower bound {}), "
        "laid out in {:.2f} ms; it serves the next steps while they repeat",
        e.items, e.planned, human_bytes(e.peak_bytes), human_bytes(e.lower_bound_bytes),
        static_cast<double>(e.plan_ns) / 1e6));
    rec.add_uint("items", e.items);
    rec.add_uint("planned", e.planned);
    rec.add_uint("period", e.period);
    rec.add_uint("plan_bytes", e.peak_bytes);
    rec.add_uint("lower_bound_bytes", e.lower_bound_bytes);
    rec.add_uint("plan_ns", e.plan_ns);
    log_emit(rec);
  }
  if (e.abandoned && log_enabled(ZARENA_LOG_INFO)) {
    LogRecord rec(log_events::kPlanAbandoned, source_);
    rec.message(fmt::format(
        "step plan left at allocation {} ({}; the plan expected {} bytes, tag {}); the rest of "
        "the step went to the dynamic engine and the next steps are learned again",
        e.miss_index, miss_text(e.miss_reason), e.expected_size, e.expected_tag));
    rec.add_string("reason", miss_name(e.miss_reason));
    rec.add_uint("index", e.miss_index);
    rec.add_uint("expected_bytes", e.expected_size);
    rec.add_uint("expected_tag", e.expected_tag);
    log_emit(rec);
  }
  if ((e.no_room || !e.failure.empty()) && log_enabled(ZARENA_LOG_WARN)) {
    LogRecord rec(log_events::kPlanFailed, source_);
    rec.message(e.no_room ? fmt::format("a learned step plan needs {} in one piece and the region "
                                        "has no such room; the steps stay dynamic",
                                        human_bytes(e.peak_bytes))
                          : fmt::format("a step could not be planned ({}); the steps stay dynamic",
                                        e.failure));
    rec.add_string("reason", e.no_room ? std::string("no_room") : e.failure);
    log_emit(rec);
  }
}

bool Arena::zone_window(PlanWindow* where) noexcept {
  try {
    std::vector<LiveBlock> live;
    std::vector<OffsetRange> zone;
    uint64_t window = 0;
    {
      Region::WriterLock w(region_);
      window = region_.floor_w();
      region_.live_blocks_w(base_, &live);
    }
    {
      std::lock_guard<SpinLock> g(zone_mu_);
      zone = zone_ranges_;
    }
    where->window = window;
    where->obstacles.clear();
    for (const LiveBlock& b : live) {
      const uint64_t off = static_cast<uint64_t>(static_cast<char*>(b.ptr) - base_);
      if (off < window) continue;
      // The zone's own blocks: given back before the plan laid out now claims its own.
      const auto z =
          std::lower_bound(zone.begin(), zone.end(), off,
                           [](const OffsetRange& r, uint64_t v) { return r.offset < v; });
      if (z != zone.end() && z->offset == off) continue;
      where->obstacles.push_back({off - window, b.size});
    }
    return true;
  } catch (...) {  // host memory: lay it out with no obstacles
    return false;
  }
}

bool Arena::claim_zone(const PlanWindow& where, uint64_t bytes, Zone* out) noexcept {
  try {
    const uint64_t aligned = (bytes + granule_ - 1) & ~(granule_ - 1);
    // The window's first `aligned` bytes less the obstacles.
    std::vector<OffsetRange> ranges;
    uint64_t at = 0;
    for (const plan::ByteRange& o : where.obstacles) {
      if (o.offset >= aligned) break;
      if (o.offset > at) ranges.push_back({where.window + at, o.offset - at});
      at = std::max(at, o.offset + o.size);
    }
    if (at < aligned) ranges.push_back({where.window + at, aligned - at});
    if (ranges.empty()) return false;
    std::string failure;
    for (int round = 0;; ++round) {
      uint64_t commit_to = 0;
      Region::Claim c;
      {
        Region::WriterLock w(region_);
        c = region_.claim_w(ranges, &commit_to);
        if (c == Region::Claim::kOk) {
          // Under the writer lock: a stats snapshot sees the blocks and the zone together.
          std::lock_guard<SpinLock> g(zone_mu_);
          zone_ranges_ = ranges;
          zone_offset_.store(ranges.front().offset, std::memory_order_relaxed);
          uint64_t claimed = 0;
          for (const OffsetRange& r : ranges) claimed += r.size;
          zone_size_.store(claimed, std::memory_order_relaxed);
          zone_blocks_.store(ranges.size(), std::memory_order_relaxed);
        }
      }
      if (c == Region::Claim::kOk) break;
      if (c != Region::Claim::kNeedsCommit ||
          !commit_round(round, commit_to, commit_to, &failure)) {
        return false;
      }
    }
    out->base = reinterpret_cast<uintptr_t>(base_ + where.window);
    out->pieces.clear();
    for (const OffsetRange& r : ranges) out->pieces.push_back({r.offset - where.window, r.size});
    return true;
  } catch (...) {  // host memory for records or the lists
    return false;
  }
}

bool Arena::reserve_zone(uint64_t bytes, Zone* out) noexcept {
  const uint64_t aligned = (bytes + granule_ - 1) & ~(granule_ - 1);
  // Tries the region; a miss that needs memory committed (expandable) commits it with no
  // lock held and tries again.
  std::string failure;
  for (int round = 0;; ++round) {
    Slot& s = region_.enter();
    Placement p;
    bool ok = false;
    PinOutcome o = PinOutcome::kNotOwned;
    try {
      ok = region_.alloc(s, aligned, 0, &p);
      // Pinned: resets leave it where it is; the plan decides what in it is live. A zone
      // pin, not a user pin: pinned_peak_bytes does not count it.
      if (ok) o = region_.pin_zone(s, p.offset);
      if (ok && o == PinOutcome::kOk) {
        // Under the slot lock: a stats snapshot sees the block and the zone together.
        std::lock_guard<SpinLock> g(zone_mu_);
        zone_ranges_.assign(1, OffsetRange{p.offset, p.size});
        zone_offset_.store(p.offset, std::memory_order_relaxed);
        zone_size_.store(p.size, std::memory_order_relaxed);
        zone_blocks_.store(1, std::memory_order_relaxed);
      }
    } catch (...) {  // host memory for a block record
      region_.leave(s);
      return false;
    }
    region_.leave(s);
    if (ok) {
      if (o != PinOutcome::kOk) return false;
      out->base = reinterpret_cast<uintptr_t>(base_ + p.offset);
      out->pieces.assign(1, plan::ByteRange{0, p.size});
      return true;
    }
    if (p.commit_to == 0 || !commit_round(round, p.commit_to, p.commit_least, &failure)) {
      return false;
    }
  }
}

void Arena::release_zone(const Zone&) noexcept {
  std::vector<OffsetRange> ranges;
  Slot& s = region_.enter();
  {
    std::lock_guard<SpinLock> g(zone_mu_);
    ranges.swap(zone_ranges_);
    zone_size_.store(0, std::memory_order_relaxed);
    zone_blocks_.store(0, std::memory_order_relaxed);
  }
  try {
    region_.unclaim(s, ranges);
  } catch (...) {  // host memory for a record: the rest stay pinned blocks
  }
  region_.leave(s);
}

}  // namespace zarena_core
