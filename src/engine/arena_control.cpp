// The arena's whole-arena operations: reset, floors, stats, region facts, live blocks,
// settings that change at run time (capture, stream, poison), and destroy. Each takes
// the region's writer lock (every slot, then the central lock) for as long as it reads or
// changes shared state, and calls the backend and the log only after releasing it
// (except poison fills, which must happen before any thread can use the memory again).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "base/test_points.h"
#include "diagnosis/diagnostics.h"
#include "engine/arena.h"
#include "engine/capture_scope.h"
#include "engine/deferred_release.h"
#include "log/reporter.h"

namespace zarena_core {

Result Arena::reset() {
  std::vector<OverflowBlock> doomed;
  EpochEnd end;
  StepLearner::ResetSurvivors kept;
  // Which plans learn (the arena's, then each lane's: bit 1 + i), as the reset begins.
  uint64_t learners = plans_.learning() ? 1 : 0;
  const uint32_t lanes = lanes_made_.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < lanes; ++i) {
    if (lanes_[i]->plans.learning()) learners |= uint64_t{2} << i;
  }
  const bool learning = learners != 0;
  {
    Region::WriterLock w(region_);
    // The epoch that ends, for the diagnosis (O(slots), like the reset itself).
    ArenaSnapshot s;
    epoch_snapshot_w(&s);
    end = epoch_end(s);
    // The planned step's opening (its requests never reached the diagnosis).
    if (const zarena_plan_view* v = plans_.view()) {
      end.plan_opening_len = static_cast<int>(
          std::min<uint64_t>(v->n, static_cast<uint64_t>(EpochHistory::kOpeningLen)));
      for (int i = 0; i < end.plan_opening_len; ++i) end.plan_opening[i] = v->item_size[i];
    }
    // Host memory first (it may throw), then the changes, which cannot fail.
    doomed.reserve(s.overflow.live_count);
    if (learning) reset_survivors_w(&kept);
    const uint64_t ended = region_.epoch();
    uint64_t reclaimed = 0;
    {
      // No planned allocation while the epoch moves (the region's, then the plans': the
      // arena's and every lane's, under one gate).
      StepPlans::EpochGates<1 + Lane::kMax> gates;
      for_each_plans([&](StepPlans& p) { gates.hold(p); });
      region_.reset_w(&reclaimed);
      test_points::hit(test_points::Point::kResetEpochMoved);
      // Planned blocks of the ended epoch are dead from here on, with the region's, and
      // poisoned with them.
      for_each_plans([&](StepPlans& p) {
        p.on_reset_locked(region_.epoch());
        if (poison_.on()) poison_reclaimed_planned_w(p, ended);
      });
    }
    overflow_.reclaim(region_.epoch(), &doomed);
    if (trace_ != nullptr) trace_->on_reset(region_.epoch());
    // Under the locks, so a stats snapshot sees the epoch and the count move together.
    resets_.fetch_add(1, std::memory_order_relaxed);
  }
  // After a device reset nothing goes back (the reset took it): no trim, no give-back.
  const bool lost = device_lost("zarena_reset");
  // Expandable: what lies above max(trim_keep_bytes, the top) goes back, with no region
  // lock held (a decommit waits for the stream), never during a capture (waiting would
  // break it).
  if (!lost && expandable_ && cfg_.trim_keep_bytes != 0 && !capturing()) {
    const Result r = commits_.trim(cfg_.trim_keep_bytes);
    if (!r.is_ok()) warn_trim_failed("at a reset", "the next reset", r);
  }
  const StepRecordFacts step = diag_.on_reset(end);
  const bool given = !lost && give_back(doomed);
  if (lost) (void)overflow_.abandon(doomed);
  // What the reset reclaimed ends with the learned step (learner.h); the learner leaves
  // alone what was handed out since.
  if (learners & 1) plans_.learn_reset(kept);
  for (uint32_t i = 0; i < lanes; ++i) {
    if (learners & (uint64_t{2} << i)) lanes_[i]->plans.learn_reset(kept);
  }
  plan_boundary();  // a reset ends a step: the arena's, and every lane's
  lanes_boundary();
  emit_queued_warnings();
  if ((cfg_.flags & ZARENA_FLAG_STEP_RECORDS) != 0) diag_.log_step(step);
  if (!given) return Result::fail(Status::kBackend, device_lost_text("zarena_reset"));
  return Result::ok();
}

void Arena::reset_survivors_w(StepLearner::ResetSurvivors* out) {
  // What the reset keeps: pinned blocks (region, overflow), and the region below the floor
  // but for the borrowed blocks there it reclaims. O(pins + borrowed + overflow blocks).
  try {
    out->ended_epoch = region_.epoch();
    std::vector<uint64_t> offsets;
    region_.pinned_offsets_w(&offsets);
    for (uint64_t o : offsets) out->pinned.push_back(reinterpret_cast<uintptr_t>(base_ + o));
    std::vector<LiveBlock> over;
    overflow_.live_blocks(&over);
    for (const LiveBlock& b : over) {
      if (b.pins > 0 || b.persistent) out->pinned.push_back(reinterpret_cast<uintptr_t>(b.ptr));
    }
    std::sort(out->pinned.begin(), out->pinned.end());
    out->floor_lo = reinterpret_cast<uintptr_t>(base_);
    out->floor_hi = reinterpret_cast<uintptr_t>(base_ + region_.floor_w());
    offsets.clear();
    region_.borrowed_unpinned_offsets_w(&offsets);
    for (uint64_t o : offsets) {
      out->reclaimed_below.push_back(reinterpret_cast<uintptr_t>(base_ + o));
    }
    std::sort(out->reclaimed_below.begin(), out->reclaimed_below.end());
  } catch (...) {  // host memory: the learner keeps them open (outliving the step)
    *out = StepLearner::ResetSurvivors{};
    out->ended_epoch = 0;
    out->floor_lo = ~uintptr_t{0};
  }
}

Result Arena::mark_step_boundary() {
  {
    Region::WriterLock w(region_);
    Result refused = graph_floor_check_w(region_.frontier_w());  // [graphs]
    if (!refused.is_ok()) {
      refused.message =
          fmt::format("zarena_mark_step_boundary (arena '{}'): {}", source_.name, refused.message);
      return refused;
    }
    if (trace_ != nullptr) trace_->on_boundary(region_.frontier_w());
    region_.mark_step_boundary_w();
    overflow_.mark_step_boundary();
    for (uint32_t i = 0; i < region_.locked_slots_w(); ++i) {
      region_.slot_counters_w(i).step_max_alloc = 0;
    }
  }
  for_each_plans([&](StepPlans& p) {
    if (p.has_zone()) p.on_floor_changed(*this);
  });
  diag_.on_boundary();
  return Result::ok();
}

Result Arena::set_floor(uint64_t offset) {
  Result r;
  // A floor at a planned block's start inside a zone piece: the piece is cut there first
  // (the region takes a floor only at a block boundary of its own).
  if (offset < capacity_) {
    const auto p = reinterpret_cast<uintptr_t>(base_ + offset);
    for_each_plans([&](StepPlans& plans) {
      if (plans.has_zone()) plans.split_zone_for_floor(*this, p);
    });
  }
  {
    Region::WriterLock w(region_);
    r = graph_floor_check_w(offset);  // [graphs]
    if (r.is_ok()) r = region_.set_floor_w(offset);
    if (trace_ != nullptr) trace_->on_set_floor(offset, static_cast<int32_t>(r.status));
  }
  if (!r.is_ok())
    r.message = fmt::format("zarena_set_floor (arena '{}'): {}", source_.name, r.message);
  if (r.is_ok()) {
    for_each_plans([&](StepPlans& p) {
      if (p.has_zone()) p.on_floor_changed(*this);
    });
  }
  return r;
}

void Arena::snapshot_w(ArenaSnapshot* out, uint64_t tags_epoch) {
  region_.snapshot_w(&out->region);
  out->overflow = overflow_.stats();  // its lock nests inside the writer lock
  out->capacity = capacity_;
  out->alignment = granule_;
  out->resets = resets_.load(std::memory_order_relaxed);
  out->committed_bytes = commits_.committed_bytes();
  out->commit_events = commits_.commit_events();
  out->trim_events = commits_.trim_events();
  out->commit_failures = commits_.commit_failures();
  out->steps = diag_.steps();
  out->epoch_steps = diag_.epoch_steps();
  out->overflow_fills = poison_.overflow_fills();
  plans_.stats(&out->plan);
  out->plan.steps += graphs_.counts().replays;     // [graphs] a replay is a step served whole
  out->plan_zone_block = plans_.zone_w().bytes();  // zone changes take the writer lock too
  out->plan_zone_blocks = plans_.zone_w().pieces.size();
  add_lane_plans_w(out);  // [lanes] every lane's, summed in
  out->plan_fills = poison_.plan_fills();
  out->poison_skips = poison_.skips();
  out->pinned_peak = pin_tally_.peak();  // no pin is in flight under the writer lock
  out->tag_bytes.clear();
  if (tags_epoch == kNoTags) return;
  if (tags_epoch == kCurrentEpochTags) tags_epoch = out->region.epoch;
  std::unordered_map<uint32_t, uint64_t> bytes;
  region_.tag_bytes_w(tags_epoch, &bytes);
  std::vector<LiveBlock> over;
  overflow_.live_blocks(&over);
  for (const LiveBlock& b : over) {
    if (b.tag != 0 && b.epoch == tags_epoch) bytes[b.tag] += b.size;
  }
  out->tag_bytes.assign(bytes.begin(), bytes.end());
}

void Arena::snapshot(ArenaSnapshot* out, uint64_t tags_epoch) {
  Region::WriterLock w(region_);
  snapshot_w(out, tags_epoch);
}

void Arena::epoch_snapshot_w(ArenaSnapshot* out) {
  region_.step_counts_w(&out->region);
  out->overflow = overflow_.stats();  // its lock nests inside the writer lock
  out->resets = resets_.load(std::memory_order_relaxed);
  out->epoch_steps = diag_.epoch_steps();
  uint64_t hits = 0;
  for_each_plans([&](StepPlans& p) { hits += p.hits(); });  // [lanes] every lane's too
  out->plan.hits = hits;
  if constexpr (kDebugChecks) {
    // What epoch_end reads of the region is what a full snapshot says. Only the region's
    // fields: the writer lock holds them still, while planned allocations, overflow and
    // step counts may move between the two reads (a racing allocation, as in
    // PlanPromises.AllocationsRacingAResetNeverCarryTheEndedEpoch).
    ArenaSnapshot full;
    snapshot_w(&full, kNoTags);
    const EpochEnd a = epoch_end(*out), b = epoch_end(full);
    ZARENA_ASSERT(a.epoch == b.epoch && a.allocs == b.allocs && a.high_water == b.high_water &&
                  a.floor == b.floor && a.reuses_total == b.reuses_total);
  }
}

StepCounters Arena::step_counters_now() {
  ArenaSnapshot s;
  {
    Region::WriterLock w(region_);
    region_.step_counts_w(&s.region);
    s.overflow = overflow_.stats();  // its lock nests inside the writer lock
    s.resets = resets_.load(std::memory_order_relaxed);
    plans_.stats(&s.plan);
    s.plan_zone_block = plans_.zone_w().bytes();
    s.plan_zone_blocks = plans_.zone_w().pieces.size();
    add_lane_plans_w(&s);          // [lanes]
    if constexpr (kDebugChecks) {  // as in epoch_snapshot_w: the region's fields alone
      ArenaSnapshot full;
      snapshot_w(&full, kNoTags);
      const StepCounters a = step_counters(s), b = step_counters(full);
      ZARENA_ASSERT(a.epoch == b.epoch && a.epoch_allocs == b.epoch_allocs && a.top == b.top &&
                    s.region.live_bytes == full.region.live_bytes &&
                    s.region.live_count == full.region.live_count);
    }
  }
  return step_counters(s);
}

void Arena::stats(zarena_stats* out) {
  ArenaSnapshot s;
  snapshot(&s);
  fill_stats(s, diag_.counters(), out);
}

Result Arena::trim(uint64_t keep) {
  if (!expandable_) return Result::ok();
  // As a reset's trim: with no region lock held (a decommit waits for the stream), never
  // during a capture (waiting would break it).
  if (capturing()) {
    return Result::fail(Status::kCaptureUnsafe,
                        "zarena_trim: a CUDA graph capture may be running (a decommit would wait "
                        "for the stream); nothing was given back");
  }
  const Result r = drain_and_decommit(keep);
  if (!r.is_ok()) return Result::fail(r.status, "zarena_trim: " + r.message);
  return r;
}

Result Arena::drain_and_decommit(uint64_t keep) {
  {
    // The slots' cached free blocks and span leftovers go to the central index, which gives
    // the free blocks at the top back to it: the top comes down to the highest live block.
    Region::WriterLock w(region_);
    region_.drain_w();
  }
  return commits_.trim(keep);
}

void Arena::warn_trim_failed(const char* when, const char* retried_by, const Result& r) {
  if (!log_enabled(ZARENA_LOG_WARN)) return;
  LogRecord rec(log_events::kTrimFailed, source_);
  rec.message(
      fmt::format("could not decommit memory of the expandable arena {} ({}); it "
                  "stays committed and {} tries again",
                  when, r.message, retried_by));
  rec.add_string("reason", r.message);
  log_emit(rec);
}

void Arena::reset_peak_stats() {
  Region::WriterLock w(region_);
  region_.reset_peak_w();
  overflow_.reset_peak();  // its lock nests inside the writer lock, as in stats()
  pin_tally_.restart_peak();
}

void Arena::region_info(zarena_region* out) {
  Region::WriterLock w(region_);
  std::memset(out, 0, sizeof *out);
  out->struct_size = sizeof(zarena_region);
  out->base = base_;
  out->capacity_bytes = capacity_;
  out->top_bytes = region_.frontier_w();
  out->floor_bytes = region_.floor_w();
  out->committed_bytes = commits_.committed_bytes();
  out->managed = managed_ ? 1 : 0;
  out->expandable = expandable_ ? 1 : 0;
}

void Arena::set_capture_active(bool active) {
  capture_flag_.store(active, std::memory_order_relaxed);
  if (trace_ != nullptr) trace_->on_capture(active);
  if (!active) {
    poison_.rearm_skip_warning();
    std::vector<OverflowBlock> none;
    (void)give_back(none);  // frees deferred during the capture go back now
    release_deferred();     // and arenas destroyed during it
  }
  emit_queued_warnings();
}

Result Arena::set_stream(void* stream) {
  Result r;
  {
    // No give-back is in flight while the stream changes (each one's poison fill and
    // free go to one stream), and no region fill (the slot locks).
    std::unique_lock<std::shared_mutex> g(stream_mu_);
    Region::WriterLock w(region_);
    r = backend_->set_stream(stream);
    if (r.is_ok()) scope_stream_.store(stream, std::memory_order_relaxed);
  }
  if (!r.is_ok())
    r.message = fmt::format("zarena_set_stream (arena '{}'): {}", source_.name, r.message);
  return r;
}

void Arena::set_poison(bool enabled, uint32_t word) {
  poison_.set(enabled, word);
  region_.set_fill_enabled(enabled);
}

void Arena::live_blocks(std::vector<LiveBlock>* out, uint64_t* epoch) {
  const size_t first_overflow = [&] {
    Region::WriterLock w(region_);
    if (epoch != nullptr) *epoch = region_.epoch();
    region_.live_blocks_w(base_, out);
    bool zones = false;
    for_each_plans([&](StepPlans& plans) {
      const Zone& zone = plans.zone_w();
      if (zone.pieces.empty()) return;
      zones = true;
      // The zone is region blocks to the region; to the user, its live instances are.
      auto keep = out->begin();
      for (auto b = out->begin(); b != out->end(); ++b) {
        const uintptr_t p = reinterpret_cast<uintptr_t>(b->ptr);
        const bool piece =
            std::any_of(zone.pieces.begin(), zone.pieces.end(), [&](const plan::ByteRange& r) {
              return zone.base + r.offset == p && r.size == b->size;
            });
        if (!piece) *keep++ = *b;
      }
      out->erase(keep, out->end());
      std::vector<PlanRun::LiveInstance> inst;
      plans.live_instances(&inst);
      for (const PlanRun::LiveInstance& i : inst) {
        LiveBlock b;
        b.ptr = reinterpret_cast<void*>(i.ptr);
        b.size = i.size;
        b.epoch = i.epoch;
        b.pins = i.pins;
        b.tag = i.tag;
        b.persistent = i.persistent;
        b.deferred = i.deferred;
        out->push_back(b);
      }
    });
    if (zones) {
      // The zones' pieces lie between the region's blocks: address order again.
      std::sort(out->begin(), out->end(),
                [](const LiveBlock& a, const LiveBlock& b) { return a.ptr < b.ptr; });
    }
    const size_t n = out->size();
    overflow_.live_blocks(out);
    return n;
  }();
  std::sort(out->begin() + static_cast<std::ptrdiff_t>(first_overflow), out->end(),
            [](const LiveBlock& a, const LiveBlock& b) { return a.ptr < b.ptr; });
}

Result Arena::destroy() {
  // No diagnosis job may outlive the arena; overflow epochs not reported yet get their
  // summary before the lifetime summary.
  Reporter::flush(this);
  diag_.flush_summary();
  zarena_stats s;
  stats(&s);
  Result rt;
  if (tracer_) {
    rt = tracer_->close();
    fast_path_flags_.fetch_and(~kTracing, std::memory_order_relaxed);
    trace_ = nullptr;
    region_.set_order_counter(nullptr);
    tracer_.reset();
  }
  if (!rt.is_ok()) rt.message = "the trace file is incomplete: " + rt.message;
  // After a device reset the memory went with the context, and its addresses may be the
  // program's new allocations: nothing is freed (the backend's destructor frees nothing
  // either). First, since a capture query then is about streams that are gone.
  if (device_lost("zarena_destroy")) {
    std::vector<OverflowBlock> live = overflow_.take_all();  // the program's went back
    (void)overflow_.abandon(live);
    if (log_enabled(ZARENA_LOG_INFO)) {
      log_emit(destroy_record(
          s, LifetimeFacts{s.hits + s.misses, s.overflow_epochs, s.needed_bytes}, source_));
    }
    return rt;
  }
  // During a capture no CUDA call may be made (a free or a wait on the captured stream
  // would be recorded into the graph, or break it): the device memory waits for a safe
  // point (deferred_release.h) and the arena is gone now.
  const bool capture = capturing();  // a query that fails counts as a capture
  if (warnings_.any()) emit_backend_warnings();
  if (capture) return destroy_later(s, rt);
  std::string recovered;
  Result r1 = overflow_.release_all(&recovered);
  if (!recovered.empty() && log_enabled(ZARENA_LOG_WARN)) {
    LogRecord rec(log_events::kOverflowGiveFailed, source_);
    rec.message(
        fmt::format("could not give an overflow block back to the backend at destroy "
                    "({}); the second try did",
                    recovered));
    rec.add_string("reason", recovered);
    log_emit(rec);
  }
  Result r2 = backend_->release_region();
  if (log_enabled(ZARENA_LOG_INFO)) {
    log_emit(destroy_record(s, LifetimeFacts{s.hits + s.misses, s.overflow_epochs, s.needed_bytes},
                            source_));
  }
  if (!r1.is_ok()) return r1;
  if (!r2.is_ok()) return r2;
  return rt;
}

Result Arena::destroy_later(const zarena_stats& s, const Result& trace_result) {
  DeferredRelease d;
  d.blocks = overflow_.take_all();
  d.source = source_;
  d.region_bytes = commits_.committed_bytes();
  d.backend = std::move(backend_);
  const uint64_t region_bytes = d.region_bytes, blocks = d.blocks.size();
  if (!defer_release(d)) {
    // Host memory: the device memory stays with the process (a release now would break
    // the capture); the caller hears of it.
    (void)d.backend.release();
    return Result::fail(Status::kOutOfMemory,
                        fmt::format("zarena_destroy during a capture (arena '{}'): out of host "
                                    "memory to defer the release; its device memory stays "
                                    "with the process",
                                    source_.name));
  }
  if (log_enabled(ZARENA_LOG_WARN)) {
    LogRecord rec(log_events::kDestroyDeferred, source_);
    rec.message(
        fmt::format("zarena_destroy ran while a CUDA graph capture was active: {} of "
                    "region and {} overflow blocks go back to the device once the arena's "
                    "stream is no longer captured, from zarena's release thread (or at "
                    "an earlier zarena_create, zarena_destroy, zarena_set_capture_active(x, "
                    "0) or zarena_capture_end); keep its stream alive until then",
                    human_bytes(region_bytes), blocks));
    rec.add_uint("region_bytes", region_bytes);
    rec.add_uint("overflow_blocks", blocks);
    log_emit(rec);
  }
  if (log_enabled(ZARENA_LOG_INFO)) {
    log_emit(destroy_record(s, LifetimeFacts{s.hits + s.misses, s.overflow_epochs, s.needed_bytes},
                            source_));
  }
  return trace_result;
}

std::string Arena::check_invariants() {
  Region::WriterLock w(region_);
  return region_.check_invariants_w();
}

}  // namespace zarena_core
