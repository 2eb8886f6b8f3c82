// The arena's side of step plans (docs/PLANS.md): the planned allocation, free and pin
// paths the hot paths branch to, the boundary hook, the zone (pinned region blocks),
// and the records of what the plans did. The plans themselves live in src/plan/.
#include <fmt/format.h>

#include <algorithm>
#include <mutex>

#include "base/checks.h"
#include "base/human_bytes.h"
#include "base/last_error.h"
#include "base/test_points.h"
#include "engine/arena.h"
#include "plan/plan_protocol.h"

namespace zarena_core {

namespace {

// The abandoned-plan record's words for a reason (plan_protocol.h's table).
const char* miss_name(uint64_t reason) { return plan_protocol::miss_reason(reason).name; }
const char* miss_text(uint64_t reason) { return plan_protocol::miss_reason(reason).text; }

}  // namespace

Status Arena::alloc_under_plan(uint64_t size, uint64_t aligned, uint32_t tag,
                               zarena_block* out) noexcept {
  if (ZARENA_LIKELY(alloc_planned(aligned, tag, out))) {
    if (ZARENA_UNLIKELY(fast_path_flags_.load(std::memory_order_relaxed) & kTracing)) {
      trace_planned_alloc(size, aligned, tag, *out);  // plan_trace.cpp
    }
    return Status::kOk;
  }
  return alloc_unplanned(size, tag, out);
}

bool Arena::alloc_planned(uint64_t aligned, uint32_t tag, zarena_block* out) noexcept {
  PlanRun::Block b;
  PlanRun::Alloc r = plans_.alloc(aligned, tag, Region::thread_number(), &b);
  // Over a leftover not claimed yet: claimed for the zone (or the plan ends), then again.
  // Each round claims one more leftover or ends the plan.
  while (ZARENA_UNLIKELY(r == PlanRun::Alloc::kClaim)) {
    plans_.claim_leftovers(*this, b.ptr, b.size);
    r = plans_.alloc(aligned, tag, Region::thread_number(), &b);
  }
  if (r != PlanRun::Alloc::kServed) {
    return false;  // a deviation is recorded in the run; the boundary reports it
  }
  out->ptr = reinterpret_cast<void*>(b.ptr);
  out->epoch = b.epoch;
  out->size = b.size;
  out->flags = ZARENA_BLOCK_PLANNED;
  out->tag = tag;
  return true;
}

void Arena::note_poison_skipped(uint64_t n) noexcept {
  poison_.note_skipped(n);
  fast_path_flags_.fetch_or(kWarningsQueued, std::memory_order_relaxed);
}

// Poison goes in before the block is marked free: once it is, the plan may hand its space
// to the next instance at once. Only a block the call is about to free is filled.
void Arena::poison_planned(PlanRun& run, void* ptr, bool last_unpin, uint64_t want_epoch) noexcept {
  const uint64_t n = run.live_size(reinterpret_cast<uintptr_t>(ptr), last_unpin, want_epoch);
  if (n == 0) return;
  if (capturing()) {
    note_poison_skipped(1);
    return;
  }
  const Result r = backend_->fill32(ptr, n, poison_.word());
  if (r.is_ok()) {
    poison_.count_plan_fills(1);
  } else {
    queue_warning(QueuedWarnings::kPoisonFailed, r.message);
  }
}

void Arena::poison_reclaimed_planned_w(const StepPlans& plans, uint64_t ended_epoch) noexcept {
  const bool cap = capturing();
  const uint32_t word = poison_.word();
  uint64_t fills = 0, skips = 0;
  plans.for_each_reclaimed(ended_epoch, [&](uintptr_t p, uint64_t size) {
    if (cap) {
      ++skips;
      return;
    }
    const Result r = backend_->fill32(reinterpret_cast<void*>(p), size, word);
    if (r.is_ok()) {
      ++fills;
    } else {
      queue_warning(QueuedWarnings::kPoisonFailed, r.message);
    }
  });
  poison_.count_plan_fills(fills);
  if (skips != 0) note_poison_skipped(skips);
}

Status Arena::free_planned(PlanRun& run, void* ptr, uint64_t want_epoch) noexcept {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  // Traced: the key is taken before the free, which may hand the space to the plan's next
  // instance at once (plan_trace.cpp).
  const uint64_t key = trace_key();
  if (poison_.on()) poison_planned(run, ptr, false, want_epoch);
  uint64_t size = 0;
  const FreeOutcome o = run.free(p, want_epoch, &size);
  if (ZARENA_LIKELY(o == FreeOutcome::kOk || o == FreeOutcome::kDeferred)) {
    if (ZARENA_UNLIKELY(key != 0)) {
      trace_planned_free(key, ptr, Status::kOk, o == FreeOutcome::kOk ? size : 0, want_epoch);
    }
    if (fast_path_flags_.load(std::memory_order_relaxed) & kWarningsQueued) {
      emit_queued_warnings();
    }
    return Status::kOk;
  }
  return free_planned_refused(ptr, o, key, want_epoch);
}

Status Arena::free_planned_refused(void* ptr, FreeOutcome o, uint64_t key,
                                   uint64_t want_epoch) noexcept {
  Slot& s = region_.enter();
  const Status st =
      free_refused(s, refine_refusal(s, From::kPlan, ptr, o, want_epoch), ptr, want_epoch);
  if (key != 0) trace_planned_free(key, ptr, st, 0, want_epoch);
  return st;
}

FreeOutcome Arena::refine_refusal(Slot& s, From from, const void* ptr, FreeOutcome o,
                                  uint64_t want_epoch) noexcept {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  const uint64_t off = static_cast<uint64_t>(static_cast<const char*>(ptr) - base_);
  const uint64_t epoch = region_.epoch();
  // A free that names an earlier epoch is of a block of that epoch, whatever lies here now.
  const bool names_past = want_epoch != kAnyEpoch && want_epoch < epoch;
  PlanRun* const zone = zone_run_of(p);
  auto inside_live = [&] {
    return (zone != nullptr && zone->inside_live(p)) ||
           (zone == nullptr && region_.inside_live_block(off));
  };
  // The pointer's older owners: the run of the zone given back last, then the region's
  // records (a region block reclaimed, then covered by the zone).
  auto history = [&]() -> FreeOutcome {
    FreeOutcome retired = FreeOutcome::kNotOwned;
    for_each_plans([&](StepPlans& plans) {  // [lanes] every plans' zone given back last
      PlanRun* r = plans.retired();
      if (retired != FreeOutcome::kNotOwned || r == nullptr || r == zone) return;
      retired = r->history(p, want_epoch);
    });
    if (retired != FreeOutcome::kNotOwned) return retired;
    if (from == From::kPlan) {
      // slot s held: the zone holds still
      FreeOutcome h = plans_of_zone(p).zone_w().buried_at(p, epoch);
      if (h == FreeOutcome::kNotOwned) h = region_.history_at(s, off);
      if (h == FreeOutcome::kStale || h == FreeOutcome::kDoubleFree) return h;
    }
    return FreeOutcome::kNotOwned;
  };
  if (o == FreeOutcome::kZone) {
    // The region holds the zone's piece here, but no run answers for it now (claimed and
    // not yet published, or unpublished and not yet given back).
    o = FreeOutcome::kNotOwned;
  }
  if (o == FreeOutcome::kNotOwned && !inside_live()) {
    const FreeOutcome h = history();
    if (h != FreeOutcome::kNotOwned) return h;
  }
  if ((o == FreeOutcome::kStale || o == FreeOutcome::kDoubleFree) && !names_past && inside_live()) {
    return FreeOutcome::kNotOwned;
  }
  return o;
}

PinOutcome Arena::pin_region(Slot& s, void* ptr, bool pin, uint64_t* start_offset, uint64_t* freed,
                             bool* planned) noexcept {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  PlanRun* run = zone_run_of(p);
  PinOutcome o = PinOutcome::kZone;
  *planned = true;
  if (run == nullptr) {
    try {
      o = pin ? region_.pin(s, *start_offset, start_offset)
              : region_.unpin(s, *start_offset, freed, start_offset);
    } catch (...) {  // host memory for the pinned set
      return PinOutcome::kNotOwned;
    }
    if (o != PinOutcome::kZone) {
      *planned = false;
      return o;
    }
    // A piece of the zone: the plan answers (published since the route was read), or its
    // history does.
    run = zone_run_of(p);
  }
  if (run != nullptr) {
    PinOutcome r;
    if (pin) {
      r = run->pin(p, &pin_tally_);
    } else {
      // The last unpin of a block freed while pinned frees it: poison first, as for a free.
      if (poison_.on()) poison_planned(*run, ptr, true, kAnyEpoch);
      r = run->unpin(p, freed, &pin_tally_);
    }
    if (r != PinOutcome::kNotOwned) return r;
    // No planned block there: a region block reclaimed before the zone covered it is STALE.
    const FreeOutcome h = refine_refusal(s, From::kPlan, ptr, FreeOutcome::kNotOwned, kAnyEpoch);
    return h == FreeOutcome::kDoubleFree ? PinOutcome::kFreed
           : h == FreeOutcome::kStale    ? PinOutcome::kStale
                                         : PinOutcome::kNotOwned;
  }
  const FreeOutcome h = refine_refusal(s, From::kRegion, ptr, FreeOutcome::kZone, kAnyEpoch);
  return h == FreeOutcome::kDoubleFree ? PinOutcome::kFreed
         : h == FreeOutcome::kStale    ? PinOutcome::kStale
                                       : PinOutcome::kNotOwned;
}

void Arena::plan_boundary() {
  if (!plans_.enabled()) return;
  PlanEvents events;
  plans_.on_boundary(*this, &events);
  if (events.zone_claimed) trim_after_engage();
  graphs_.after_boundary(plans_.view());  // [graphs] counts the steps served whole
  emit_queued_warnings();                 // a poison fill of a zone given back
  log_plan_events(events);
}

void Arena::trim_after_engage() {
  // [graphs] Not at the end of a graph capture either (its boundary runs under graph_mu_).
  if (!expandable_ || graphs_.capturing() || capturing() || backend_->context_lost()) return;
  // As zarena_trim: the top comes down to the highest live block (the zone's end, or a
  // live block above it), and what lies above max(trim_keep_bytes, it) goes back.
  const Result r = drain_and_decommit(cfg_.trim_keep_bytes);
  if (!r.is_ok())
    warn_trim_failed("when a step plan engaged", "the next reset or engaging plan", r);
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
    if (e.no_room) {
      rec.message(
          fmt::format("a learned step plan needs {} in one piece and the region has "
                      "no such room; the steps stay dynamic",
                      human_bytes(e.peak_bytes)));
    } else if (e.budget) {
      rec.message(
          fmt::format("the step plans this arena made hold {} of host memory, the most "
                      "an arena keeps ({}): no new plan is learned, the ones made keep "
                      "serving the steps they fit",
                      human_bytes(e.host_bytes), human_bytes(e.host_budget)));
    } else {
      rec.message(
          fmt::format("a step could not be planned ({}); the steps stay dynamic", e.failure));
    }
    rec.add_string("reason", e.no_room ? std::string("no_room") : e.failure);
    log_emit(rec);
  }
}

RegionNow Arena::region_now_w() const {
  return RegionNow{region_.epoch(), reinterpret_cast<uintptr_t>(base_ + region_.floor_w())};
}

void Arena::under_lock(UnderLock fn) noexcept {
  Region::WriterLock w(region_);
  fn(region_now_w());
}

bool Arena::split_zone_block_w(uintptr_t p) noexcept {
  try {
    return region_.split_zone_w(static_cast<uint64_t>(reinterpret_cast<char*>(p) - base_));
  } catch (...) {  // host memory for the record: nothing changed
    return false;
  }
}

bool Arena::zone_window(const Zone& own, PlanWindow* where) noexcept {
  try {
    std::vector<LiveBlock> live;
    uint64_t window = 0;
    {
      Region::WriterLock w(region_);
      window = region_.floor_w();
      region_.live_blocks_w(base_, &live);
    }
    where->window = window;
    where->address = reinterpret_cast<uintptr_t>(base_ + window);
    where->obstacles.clear();
    for (const LiveBlock& b : live) {
      const uint64_t off = static_cast<uint64_t>(static_cast<char*>(b.ptr) - base_);
      if (off < window) continue;
      // The zone's own blocks: given back before the plan laid out now claims its own.
      const uintptr_t p = reinterpret_cast<uintptr_t>(b.ptr);
      const bool own_piece = std::any_of(
          own.pieces.begin(), own.pieces.end(),
          [&](const plan::ByteRange& r) { return own.base + r.offset == p && r.size == b.size; });
      if (own_piece) continue;
      where->obstacles.push_back({off - window, b.size});
    }
    return true;
  } catch (...) {  // host memory: lay it out with no obstacles
    return false;
  }
}

bool Arena::claim_zone(const PlanWindow& where, uint64_t bytes, Zone* out,
                       UnderLock publish) noexcept {
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
    out->base = reinterpret_cast<uintptr_t>(base_ + where.window);
    out->pieces.clear();
    for (const OffsetRange& r : ranges) out->pieces.push_back({r.offset - where.window, r.size});
    return claim_ranges(
        [&](std::vector<OffsetRange>* r) {
          *r = ranges;
          return true;
        },
        out, publish);
  } catch (...) {  // host memory for the lists
    return false;
  }
}

bool Arena::reserve_zone(uint64_t bytes, Zone* out, UnderLock publish) noexcept {
  const uint64_t aligned = (bytes + granule_ - 1) & ~(granule_ - 1);
  // The best free run at or above the floor now, claimed like a window's ranges (so the
  // region's history under it stays known: a pointer reclaimed there is still STALE).
  return claim_ranges(
      [&](std::vector<OffsetRange>* ranges) {
        uint64_t at = 0;
        if (!region_.fit_w(aligned, &at)) return false;
        ranges->assign(1, OffsetRange{at, aligned});
        out->base = reinterpret_cast<uintptr_t>(base_ + at);
        out->pieces.assign(1, plan::ByteRange{0, aligned});
        return true;
      },
      out, publish);
}

bool Arena::claim_ranges(FunctionRef<bool(std::vector<OffsetRange>*)> place, Zone* out,
                         UnderLock publish) noexcept {
  try {
    std::vector<OffsetRange> ranges;
    std::vector<BuriedStart> buried;
    std::string failure;
    for (int round = 0;; ++round) {
      uint64_t commit_to = 0;
      {
        Region::WriterLock w(region_);
        ranges.clear();
        if (!place(&ranges)) return false;
        const Region::Claim c = region_.claim_w(ranges, &commit_to, &buried);
        if (c == Region::Claim::kOk) {
          const uint64_t claimed = region_.epoch();
          out->buried.clear();
          try {
            out->buried.reserve(buried.size());
            for (const BuriedStart& b : buried) {
              out->buried.push_back(
                  {reinterpret_cast<uintptr_t>(base_ + b.offset), claimed, b.what});
            }
          } catch (...) {  // host memory: the history is dropped, never the claim
            out->buried.clear();
          }
          publish(region_now_w());
          return true;
        }
        if (c != Region::Claim::kNeedsCommit) return false;
      }
      if (!commit_round(round, commit_to, commit_to, &failure)) return false;
    }
  } catch (...) {  // host memory for records or the lists
    return false;
  }
}

void Arena::release_zone(const Zone& zone, UnderLock unpublish) noexcept {
  std::vector<OffsetRange> ranges;
  try {
    for (const plan::ByteRange& r : zone.pieces) {
      ranges.push_back(
          {static_cast<uint64_t>(reinterpret_cast<char*>(zone.base + r.offset) - base_), r.size});
    }
  } catch (...) {  // host memory: the pieces stay the zone's (refused to the user), unused
    ranges.clear();
  }
  {
    Region::WriterLock w(region_);
    unpublish(region_now_w());
  }
  // The pieces are still the zone's to the region (it refuses them to the user) until
  // unclaim gives each back.
  test_points::hit(test_points::Point::kZoneUnpublished);
  Slot& s = region_.enter();
  try {
    region_.unclaim(s, ranges);
  } catch (...) {  // host memory for a record: the rest stay pinned blocks
  }
  region_.leave(s);
}

}  // namespace zarena_core
