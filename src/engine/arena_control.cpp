// The arena's whole-arena operations: reset, floors, stats, region facts, live blocks,
// settings that change at run time (capture, stream, poison), and destroy. Each takes
// the region's writer lock (every slot, then the central lock) for as long as it reads or
// changes shared state, and calls the backend and the log only after releasing it
// (except poison fills and expandable trims, which must happen before any thread can use
// the memory again).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "engine/arena.h"
#include "engine/deferred_release.h"
#include "diagnosis/diagnostics.h"
#include "log/reporter.h"

namespace zarena_core {

void Arena::reset() {
  std::vector<OverflowBlock> doomed;
  EpochEnd end;
  {
    Region::WriterLock w(region_);
    // Host memory first (it may throw), then the changes, which cannot fail.
    doomed.reserve(overflow_.stats().live_count);
    // The epoch that ends, for the diagnosis (O(slots), like the reset itself).
    RegionSnapshot r;
    region_.snapshot_w(&r);
    const OverflowStats o = overflow_.stats();
    end.epoch = r.epoch;
    end.allocs = r.sum.epoch_allocs;
    end.high_water = r.sum.epoch_high_water;
    end.floor = r.floor;
    end.reuses_total = r.sum.reuses;
    end.overflow_allocs_total = o.allocs;
    end.overflow_peak = o.epoch_peak_bytes;
    end.steps = epoch_steps_.load(std::memory_order_relaxed);
    uint64_t reclaimed = 0;
    region_.reset_w(&reclaimed);
    overflow_.reclaim(region_.epoch(), &doomed);
    if (trace_ != nullptr) trace_->on_reset(region_.epoch());
    if (expandable_ && cfg_.trim_keep_bytes != 0) trim_w();
    // Under the locks, so a stats snapshot sees the epoch and the count move together.
    resets_.fetch_add(1, std::memory_order_relaxed);
  }
  epoch_steps_.store(0, std::memory_order_relaxed);
  diag_on_reset(end);
  give_back(doomed);
  after_op();
  if ((cfg_.flags & ZARENA_FLAG_STEP_RECORDS) != 0) emit_step_record(end);
}

// Under the writer lock: decommits what lies above max(trim_keep_bytes, the top), whole
// commits at a time (the backend unmaps only whole mappings), never during a capture.
void Arena::trim_w() {
  const uint64_t keep = std::max(cfg_.trim_keep_bytes, region_.frontier_w());
  if (commits_.empty() || committed_ <= keep || capturing()) return;
  bool trimmed = false;
  while (!commits_.empty() && commits_.back().first >= keep) {
    const auto range = commits_.back();
    const Result r = backend_->decommit(range.first, range.second);
    if (!r.is_ok()) {
      note(PendingNotes::kTrimFailed, r.message);
      break;
    }
    commits_.pop_back();
    committed_ = range.first;
    trimmed = true;
  }
  if (trimmed) {
    committed_bytes_.store(committed_, std::memory_order_relaxed);
    trim_events_.fetch_add(1, std::memory_order_relaxed);
  }
}

void Arena::mark_step_boundary() {
  {
    Region::WriterLock w(region_);
    if (trace_ != nullptr) trace_->on_boundary(region_.frontier_w());
    region_.mark_step_boundary_w();
    overflow_.mark_step_boundary();
    for (uint32_t i = 0; i < region_.locked_slots_w(); ++i) {
      region_.slot_counters_w(i).step_max_alloc = 0;
    }
  }
  diag_on_boundary();
}

Result Arena::set_floor(uint64_t offset) {
  Result r;
  {
    Region::WriterLock w(region_);
    r = region_.set_floor_w(offset);
    if (trace_ != nullptr) trace_->on_set_floor(offset, static_cast<int32_t>(r.status));
  }
  if (!r.is_ok()) r.message = fmt::format("zarena_set_floor (arena '{}'): {}", name_, r.message);
  return r;
}

void Arena::fill_snapshot(zarena_stats* s, const RegionSnapshot& r, const OverflowStats& o) const {
  std::memset(s, 0, sizeof *s);
  s->struct_size = sizeof(zarena_stats);
  s->capacity_bytes = capacity_;
  s->used_bytes = r.live_bytes;
  s->floor_bytes = r.floor;
  s->high_water_bytes = r.sum.high_water;
  s->epoch = r.epoch;
  s->epoch_allocs = r.sum.epoch_allocs;
  s->epoch_max_alloc_bytes = r.sum.epoch_max_alloc;
  s->epoch_high_water_bytes = r.sum.epoch_high_water;
  s->hits = r.sum.hits;
  s->misses = r.sum.misses;
  s->reuses = r.sum.reuses;
  s->resets = resets_.load(std::memory_order_relaxed);
  s->free_list_len = r.free_count;
  s->free_list_bytes = r.free_bytes;
  s->largest_free_block_bytes = r.largest_free;
  s->live_allocs = r.live_count + o.live_count;
  s->stale_frees = r.sum.stale_frees;
  s->invalid_frees = r.sum.invalid_frees;
  s->overflow_allocs = o.allocs;
  s->overflow_live_bytes = o.live_bytes;
  s->overflow_peak_bytes = o.peak_bytes;
  s->overflow_max_latency_ns = o.max_latency_ns;
  s->overflow_reclaimed = o.reclaimed;
  s->overflow_failures = o.failures;
  s->pinned_bytes = r.pinned_bytes + o.pinned_bytes;
  s->pinned_blocks = r.pinned_blocks + o.pinned_blocks;
  s->pin_retained_bytes = r.pin_retained_bytes;
  s->deferred_frees = r.deferred_frees + o.deferred_frees;
  s->overflow_deferred_gives = o.deferred_gives;
  s->poison_fills = r.sum.poison_fills + overflow_fills_.load(std::memory_order_relaxed);
  s->poison_skipped = r.sum.poison_skipped;
  s->top_bytes = r.top;
  s->committed_bytes = committed_bytes_.load(std::memory_order_relaxed);
  s->commit_events = commit_events_.load(std::memory_order_relaxed);
  s->trim_events = trim_events_.load(std::memory_order_relaxed);
  s->commit_failures = commit_failures_.load(std::memory_order_relaxed);
  s->steps = steps_.load(std::memory_order_relaxed);
  s->epoch_steps = epoch_steps_.load(std::memory_order_relaxed);
  s->needed_bytes =
      r.sum.epoch_high_water + o.epoch_peak_bytes;  // this epoch; stats() adds earlier ones
  s->used_peak_bytes = r.used_peak;
}

void Arena::stats(zarena_stats* out) {
  {
    Region::WriterLock w(region_);
    RegionSnapshot r;
    region_.snapshot_w(&r);
    fill_snapshot(out, r, overflow_.stats());
  }
  std::lock_guard<SpinLock> lock(diag_mu_);
  out->overflow_epochs = overflow_epochs_;
  out->overflow_records = overflow_records_;
  out->overflow_summaries = overflow_summaries_;
  out->needed_bytes = std::max(out->needed_bytes, needed_bytes_);
}

void Arena::reset_peak_stats() {
  Region::WriterLock w(region_);
  region_.reset_peak_w();
  overflow_.reset_peak();  // its lock nests inside the writer lock, as in stats()
}

void Arena::region_info(zarena_region* out) {
  Region::WriterLock w(region_);
  std::memset(out, 0, sizeof *out);
  out->struct_size = sizeof(zarena_region);
  out->base = base_;
  out->capacity_bytes = capacity_;
  out->top_bytes = region_.frontier_w();
  out->floor_bytes = region_.floor_w();
  out->committed_bytes = committed_bytes_.load(std::memory_order_relaxed);
  out->managed = managed_ ? 1 : 0;
  out->expandable = expandable_ ? 1 : 0;
}

void Arena::set_capture_active(bool active) {
  capture_flag_.store(active, std::memory_order_relaxed);
  if (trace_ != nullptr) trace_->on_capture(active);
  if (!active) {
    poison_skip_warned_.store(false, std::memory_order_relaxed);
    std::vector<OverflowBlock> none;
    give_back(none);  // frees deferred during the capture go back now
    release_deferred();  // and arenas destroyed during it
  }
  after_op();
}

Result Arena::set_stream(void* stream) {
  Result r;
  {
    // No give-back is in flight while the stream changes (each one's poison fill and
    // free go to one stream), and no region fill or trim (the slot locks).
    std::unique_lock<std::shared_mutex> g(stream_mu_);
    Region::WriterLock w(region_);
    r = backend_->set_stream(stream);
  }
  if (!r.is_ok()) r.message = fmt::format("zarena_set_stream (arena '{}'): {}", name_, r.message);
  return r;
}

void Arena::set_poison(bool enabled, uint32_t word) {
  poison_word_.store(word != 0 ? word : kDefaultPoisonWord, std::memory_order_relaxed);
  poison_on_.store(enabled, std::memory_order_relaxed);
  region_.set_fill_enabled(enabled);
}

void Arena::live_blocks(std::vector<LiveBlock>* out, uint64_t* epoch) {
  std::vector<BlockView> region;
  std::vector<OverflowBlockView> over;
  {
    Region::WriterLock w(region_);
    if (epoch != nullptr) *epoch = region_.epoch();
    region_.live_blocks_w(&region);
    overflow_.live_blocks(&over);
  }
  out->reserve(out->size() + region.size() + over.size());
  for (const BlockView& b : region) {
    out->push_back(LiveBlock{base_ + b.offset, b.size, b.epoch, b.pins, b.tag,
                             b.persistent, false, b.deferred});
  }
  std::sort(over.begin(), over.end(),
            [](const OverflowBlockView& a, const OverflowBlockView& b) { return a.ptr < b.ptr; });
  for (const OverflowBlockView& b : over) {
    out->push_back(
        LiveBlock{b.ptr, b.size, b.epoch, b.pins, b.tag, b.persistent, true, b.deferred});
  }
}

Result Arena::destroy() {
  // No diagnosis job may outlive the arena; overflow epochs not reported yet get their
  // summary before the lifetime summary.
  Reporter::flush(this);
  flush_summary();
  zarena_stats s;
  stats(&s);
  Result rt;
  if (tracer_) {
    rt = tracer_->close();
    extras_.fetch_and(~kExtraTrace, std::memory_order_relaxed);
    trace_ = nullptr;
    region_.set_order_counter(nullptr);
    tracer_.reset();
  }
  if (!rt.is_ok()) rt.message = "the trace file is incomplete: " + rt.message;
  // During a capture no CUDA call may be made (a free or a wait on the captured stream
  // would be recorded into the graph, or break it): the device memory waits for a safe
  // point (deferred_release.h) and the arena is gone now.
  const bool capture = capturing();  // a query that fails counts as a capture
  if (notes_.any()) emit_notes();
  if (capture) return destroy_later(s, rt);
  std::string recovered;
  Result r1 = overflow_.release_all(&recovered);
  if (!recovered.empty() && log_enabled(ZARENA_LOG_WARN)) {
    LogRecord rec(ZARENA_LOG_WARN, "overflow.give_failed", name_);
    rec.message(
        fmt::format("could not give an overflow block back to the backend at destroy "
                    "({}); the second try did",
                    recovered));
    rec.add_string("reason", recovered);
    rec.rate_limited();
    log_emit(rec);
  }
  Result r2 = backend_->release_region();
  if (log_enabled(ZARENA_LOG_INFO)) {
    log_emit(destroy_record(s, LifetimeFacts{s.hits + s.misses, s.overflow_epochs, s.needed_bytes},
                            name_));
  }
  if (!r1.is_ok()) return r1;
  if (!r2.is_ok()) return r2;
  return rt;
}

Result Arena::destroy_later(const zarena_stats& s, const Result& trace_result) {
  DeferredRelease d;
  d.blocks = overflow_.take_all();
  d.name = name_;
  d.region_bytes = committed_bytes_.load(std::memory_order_relaxed);
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
                                    name_));
  }
  if (log_enabled(ZARENA_LOG_WARN)) {
    LogRecord rec(ZARENA_LOG_WARN, "arena.destroy_deferred", name_);
    rec.message(fmt::format("zarena_destroy ran while a CUDA graph capture was active: {} of "
                            "region and {} overflow blocks go back to the device at the next "
                            "zarena_create, zarena_destroy or zarena_set_capture_active(a, 0) "
                            "made when the arena's stream is no longer captured (keep its "
                            "stream alive until then)",
                            human_bytes(region_bytes), blocks));
    rec.add_uint("region_bytes", region_bytes);
    rec.add_uint("overflow_blocks", blocks);
    log_emit(rec);
  }
  if (log_enabled(ZARENA_LOG_INFO)) {
    log_emit(destroy_record(s, LifetimeFacts{s.hits + s.misses, s.overflow_epochs, s.needed_bytes},
                            name_));
  }
  return trace_result;
}

std::string Arena::check_invariants() {
  Region::WriterLock w(region_);
  return region_.check_invariants_w();
}

}  // namespace zarena_core
