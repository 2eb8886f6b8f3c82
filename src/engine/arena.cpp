// The arena's lifetime and its per-call paths: allocate, free, pin (arena_control.cpp has
// reset, floors, stats and settings).
#include "engine/arena.h"
#include "region/region_fast.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "diagnosis/diagnostics.h"
#include "base/last_error.h"
#include "log/reporter.h"
#include "engine/tags.h"

namespace zarena_core {

namespace {

// Requests above this cannot be aligned or described; refused before any work.
constexpr uint64_t kMaxRequest = 1ull << 62;

int32_t resolve_policy(const zarena_config& c) {
  if (c.overflow_policy != ZARENA_OVERFLOW_DEFAULT) return c.overflow_policy;
  return c.stream != nullptr ? ZARENA_OVERFLOW_ASYNC : ZARENA_OVERFLOW_SYNC;
}

// Host backends are always wrapped in the fault injector (zarena_debug_inject_overflow_fault
// arms it; with nothing armed it only counts calls).
Result make_host(const BackendOptions& o, std::unique_ptr<Backend>* out) {
  std::unique_ptr<Backend> host;
  Result r = make_host_backend(o, &host);
  if (!r.is_ok()) return r;
  out->reset(new FaultInjectingBackend(std::move(host)));
  return Result::ok();
}

// AUTO takes CUDA when a device is usable; a device that is counted but fails to come
// up (driver mismatch, exclusive mode, out of memory) falls back to host, and the reason
// goes into *fallback for the arena.config record.
Result make_backend(const zarena_config& c, int32_t policy, std::string* fallback,
                    std::unique_ptr<Backend>* out) {
  BackendOptions o;
  o.device = c.device;
  o.managed = (c.flags & ZARENA_FLAG_MANAGED) != 0;
  o.managed_fallback = (c.flags & ZARENA_FLAG_MANAGED_FALLBACK) != 0;
  o.stream = c.stream;
  o.overflow_retain_bytes = c.overflow_retain_bytes;
  o.overflow_prewarm = (c.flags & ZARENA_FLAG_OVERFLOW_PREWARM) != 0;
  o.need_async_pool = policy == ZARENA_OVERFLOW_ASYNC;
  switch (c.backend) {
    case ZARENA_BACKEND_HOST:
      return make_host(o, out);
    case ZARENA_BACKEND_CUDA:
      return make_cuda_backend(o, out);
    default:
      if (cuda_device_usable(c.device)) {
        Result r = make_cuda_backend(o, out);
        if (r.is_ok() || r.status != Status::kNoDevice) return r;
        *fallback = r.message;
      }
      return make_host(o, out);
  }
}

RegionConfig region_config(const zarena_config& c) {
  RegionConfig rc;
  rc.capacity = c.capacity_bytes;
  rc.granule = c.alignment;
  return rc;
}

}  // namespace

Result Arena::create(const ResolvedConfig& rc, std::unique_ptr<Arena>* out) {
  const int32_t policy = resolve_policy(rc.cfg);
  std::unique_ptr<Backend> backend;
  std::string fallback;
  RegionInfo region;
  try {
    Result r = make_backend(rc.cfg, policy, &fallback, &backend);
    if (!r.is_ok()) return r;
    if (policy == ZARENA_OVERFLOW_ASYNC && !backend->supports_async()) {
      return Result::fail(Status::kUnsupported,
                          fmt::format("overflow policy ASYNC needs stream-ordered memory pools, "
                                      "which {} does not support",
                                      backend->describe()));
    }
    RegionRequest req;
    req.bytes = rc.cfg.capacity_bytes;
    req.alignment = rc.cfg.alignment;
    req.expandable = (rc.cfg.flags & ZARENA_FLAG_EXPANDABLE) != 0;
    r = backend->reserve_region(req, &region);
    if (!r.is_ok()) return r;
  } catch (const std::bad_alloc&) {
    return Result::fail(Status::kOutOfMemory, "out of host memory creating the backend");
  }
  try {
    out->reset(new Arena(rc, std::move(backend), region, policy));
  } catch (const std::bad_alloc&) {
    // Whoever holds the backend now (still us, or the half-built Arena's unwinding)
    // releases the region in the backend's destructor.
    return Result::fail(Status::kOutOfMemory, "out of host memory creating the arena");
  }
  Arena& a = **out;
  if ((rc.cfg.flags & ZARENA_FLAG_NO_RESETS) != 0) {
    // A general-purpose pool: nothing to guess about steps that are never reset.
    a.detector_on_.store(false, std::memory_order_relaxed);
    a.watch_end_.store(~0ull, std::memory_order_relaxed);
  }
  // An overflow that succeeds leaves its record to the reporter thread: start it now, not
  // on the first overflow's latency. (REFUSE overflows fail: their records are emitted by
  // the failing call.)
  if (policy != ZARENA_OVERFLOW_REFUSE) Reporter::start();
  if (!rc.trace_file.empty()) {
    zarena_trace::TraceHeader th;
    th.arena_name = rc.name;
    th.capacity_bytes = rc.cfg.capacity_bytes;
    th.alignment = rc.cfg.alignment;
    th.overflow_policy = policy;
    th.backend = a.backend_->kind();
    th.config_flags = rc.cfg.flags;
    th.region_base = reinterpret_cast<uintptr_t>(a.base_);
    th.overflow_limit_bytes = rc.cfg.overflow_limit_bytes;
    Result err;
    zarena_trace::TraceOptions to;
    to.slots = a.region_.slot_count();  // the hot events go into their slot's lane
    a.tracer_ = zarena_trace::Tracer::open(rc.trace_file, th, &err, to);
    if (a.tracer_) {
      a.trace_ = a.tracer_.get();
      a.region_.set_order_counter(a.trace_->order_counter());
      a.extras_.fetch_or(kExtraTrace, std::memory_order_relaxed);
      for (uint32_t id = 1; id <= tag_count(); ++id) a.trace_->on_tag(id, tag_name(id));
    } else if (log_enabled(ZARENA_LOG_WARN)) {
      LogRecord rec(ZARENA_LOG_WARN, "arena.trace_failed", rc.name);
      rec.message(fmt::format("could not open the trace file '{}' ({}); the arena runs "
                              "without a trace",
                              rc.trace_file, err.message));
      rec.add_string("trace_file", rc.trace_file);
      log_emit(rec);
    }
  }
  if (log_enabled(ZARENA_LOG_INFO)) {
    const MemoryInfo mem = a.backend_->memory_info();
    std::string backend_desc = a.backend_->describe();
    if (!region.managed_fallback.empty()) backend_desc += "; " + region.managed_fallback;
    if (a.expandable_) {
      backend_desc += fmt::format(", expandable region (commits in {} chunks)",
                                  human_bytes(a.commit_chunk_));
    }
    LogRecord rec = config_record(rc, backend_desc, a.backend_->kind(), policy, fallback,
                                  mem.free_bytes, mem.total_bytes);
    rec.add_bool("region_managed", region.managed);
    if (!region.managed_fallback.empty())
      rec.add_string("managed_fallback", region.managed_fallback);
    log_emit(rec);
  }
  return Result::ok();
}

Arena::Arena(const ResolvedConfig& rc, std::unique_ptr<Backend> backend, const RegionInfo& region,
             int32_t policy)
    : name_(rc.name),
      cfg_(rc.cfg),
      policy_(policy),
      backend_(std::move(backend)),
      base_(static_cast<char*>(region.base)),
      capacity_(rc.cfg.capacity_bytes),
      granule_(rc.cfg.alignment),
      managed_(region.managed),
      expandable_((rc.cfg.flags & ZARENA_FLAG_EXPANDABLE) != 0),
      region_(region_config(rc.cfg), this),
      overflow_(*backend_, policy, rc.cfg.alignment, rc.cfg.overflow_limit_bytes,
                rc.cfg.overflow_slow_ns),
      poison_on_((rc.cfg.flags & ZARENA_FLAG_POISON) != 0),
      poison_word_(rc.cfg.poison_word != 0 ? rc.cfg.poison_word : kDefaultPoisonWord),
      commit_granularity_(region.commit_granularity),
      commit_chunk_([&] {
        const uint64_t g = region.commit_granularity != 0 ? region.commit_granularity : 1;
        const uint64_t want = rc.cfg.commit_chunk_bytes != 0 ? rc.cfg.commit_chunk_bytes
                                                             : kDefaultCommitChunk;
        return (want + g - 1) / g * g;
      }()),
      cadence_(rc.cfg.capacity_bytes) {
  committed_bytes_.store(expandable_ ? 0 : capacity_);
  region_.set_fill_enabled(poison_on_.load());
}

Arena::~Arena() = default;

FaultInjectingBackend* Arena::fault_injector() {
  return dynamic_cast<FaultInjectingBackend*>(backend_.get());
}

// --- hooks the region calls under its locks ------------------------------------------

RegionHooks::Fill Arena::fill_policy() noexcept {
  if (!poison_on_.load(std::memory_order_relaxed)) return Fill::kOff;
  // A fill now would be recorded into the user's graph (or break its capture): skip it.
  if (capturing()) {
    poison_skip_note_.store(true, std::memory_order_relaxed);
    extras_.fetch_or(kExtraNote, std::memory_order_relaxed);
    return Fill::kSkip;
  }
  return Fill::kNow;
}

void Arena::fill(uint64_t offset, uint64_t bytes) noexcept {
  const Result r =
      backend_->fill32(base_ + offset, bytes, poison_word_.load(std::memory_order_relaxed));
  if (!r.is_ok()) note(PendingNotes::kPoisonFailed, r.message);
}

bool Arena::ensure_committed(uint64_t end) noexcept {
  if (!expandable_ || end <= committed_) return true;
  const uint64_t g = commit_granularity_;
  const uint64_t limit = (capacity_ + g - 1) / g * g;
  uint64_t want = std::min(limit, (end + commit_chunk_ - 1) / commit_chunk_ * commit_chunk_);
  Result r = backend_->commit(committed_, want - committed_);
  if (!r.is_ok()) {
    // Less than a whole chunk may still be there.
    const uint64_t exact = std::min(limit, (end + g - 1) / g * g);
    if (exact < want) {
      want = exact;
      r = backend_->commit(committed_, want - committed_);
    }
  }
  if (!r.is_ok()) {
    commit_failures_.fetch_add(1, std::memory_order_relaxed);
    try {
      commit_failure_ = r.message;
    } catch (...) {
    }
    commit_failure_note_.store(true, std::memory_order_release);
    extras_.fetch_or(kExtraNote, std::memory_order_relaxed);
    return false;
  }
  try {
    commits_.emplace_back(committed_, want - committed_);
  } catch (...) {
    (void)backend_->decommit(committed_, want - committed_);
    return false;
  }
  committed_ = want;
  committed_bytes_.store(want, std::memory_order_relaxed);
  commit_events_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool Arena::capturing() {
  if (capture_flag_.load(std::memory_order_relaxed)) return true;
  bool c = false;
  const Result r = backend_->capture_status(&c);
  if (!r.is_ok()) {
    // When the backend cannot tell, act as if it were capturing (and say why, later).
    note(PendingNotes::kCaptureQueryFailed, r.message);
    return true;
  }
  return c;
}

Result Arena::fill_overflow(void* ctx, void* ptr, uint64_t bytes) {
  Arena* a = static_cast<Arena*>(ctx);
  a->overflow_fills_.fetch_add(1, std::memory_order_relaxed);
  Result r = a->backend_->fill32(ptr, bytes & ~uint64_t{3}, a->poison_word_.load());
  if (!r.is_ok()) a->note(PendingNotes::kPoisonFailed, r.message);
  return r;
}

// No lock held. Blocks waiting from before (a capture, or a give-back that failed) go
// first, so a block that fails now waits for the next give-back point instead of being
// retried at once.
void Arena::give_back(std::vector<OverflowBlock>& blocks) {
  const bool cap = capturing();
  const bool poison = poison_on_.load(std::memory_order_relaxed) && !cap;
  OverflowPool::FillFn fill = poison ? &Arena::fill_overflow : nullptr;
  Result r;
  if (!cap && overflow_.has_deferred()) r = overflow_.flush_deferred(fill, this);
  const Result now = overflow_.give_back(blocks, cap, fill, this);
  if (r.is_ok()) r = now;
  if (!r.is_ok() && log_enabled(ZARENA_LOG_WARN)) {
    LogRecord rec(ZARENA_LOG_WARN, "overflow.give_failed", name_);
    rec.message(
        fmt::format("could not give an overflow block back to the backend ({}); it is "
                    "kept and tried again at the next overflow call, free, reset or "
                    "destroy",
                    r.message));
    rec.add_string("reason", r.message);
    rec.rate_limited();
    log_emit(rec);
  }
  if (notes_.any()) emit_notes();
}

void Arena::emit_notes() {
  for (auto& [kind, why] : notes_.take()) {
    if (!log_enabled(ZARENA_LOG_WARN)) continue;
    const char* event = "";
    std::string message;
    switch (kind) {
      case PendingNotes::kPoisonFailed:
        event = "poison.failed";
        message = fmt::format("a poison fill failed ({}); that block was not poisoned", why);
        break;
      case PendingNotes::kCaptureQueryFailed:
        event = "arena.capture_query_failed";
        message = fmt::format(
            "could not ask the backend whether a capture is active ({}); the "
            "arena acts as if one were (poison skipped, overflow gives "
            "deferred, SYNC overflow refused)",
            why);
        break;
      case PendingNotes::kTrimFailed:
        event = "arena.trim_failed";
        message = fmt::format(
            "could not decommit memory of the expandable arena at a reset "
            "({}); it stays committed and the next reset tries again",
            why);
        break;
      default:
        continue;
    }
    LogRecord rec(ZARENA_LOG_WARN, event, name_);
    rec.message(std::move(message));
    rec.add_string("reason", why);
    rec.rate_limited();
    log_emit(rec);
  }
}

void Arena::after_op() {
  if (extras_.load(std::memory_order_relaxed) & kExtraNote) {
    extras_.fetch_and(~kExtraNote, std::memory_order_relaxed);
  }
  if (notes_.any()) emit_notes();
  if (poison_skip_note_.load(std::memory_order_relaxed) &&
      poison_skip_note_.exchange(false, std::memory_order_relaxed) &&
      !poison_skip_warned_.exchange(true, std::memory_order_relaxed)) {
    if (log_enabled(ZARENA_LOG_WARN)) {
      LogRecord rec(ZARENA_LOG_WARN, "poison.skipped", name_);
      rec.message(
          "a poison fill was skipped because a CUDA graph capture is active (a fill would be "
          "recorded into the graph); freed blocks are not poisoned until the capture ends");
      log_emit(rec);
    }
  }
  if (commit_failure_note_.load(std::memory_order_acquire) &&
      commit_failure_note_.exchange(false, std::memory_order_acq_rel)) {
    if (log_enabled(ZARENA_LOG_WARN)) {
      std::string why;
      {
        Region::WriterLock w(region_);
        why = commit_failure_;
      }
      LogRecord rec(ZARENA_LOG_WARN, "arena.commit_failed", name_);
      rec.message(fmt::format("could not commit more memory for the expandable arena ({}); "
                              "allocations beyond {} go to overflow",
                              why, human_bytes(committed_bytes_.load())));
      rec.add_uint("committed_bytes", committed_bytes_.load());
      rec.add_string("reason", why);
      // Every request past the committed end tries again while the device stays full.
      rec.rate_limited();
      log_emit(rec);
    }
  }
}

// --- allocation -----------------------------------------------------------------------

Status Arena::alloc(uint64_t size, uint32_t tag, zarena_block* out) noexcept {
  if (__builtin_expect(size - 1 >= kMaxRequest, 0)) return alloc_odd(size, tag, out);
  const uint64_t aligned = (size + granule_ - 1) & ~(granule_ - 1);
  // Expandable: whether a commit fails during this request decides the verdict.
  const uint64_t commit_failures0 =
      expandable_ ? commit_failures_.load(std::memory_order_relaxed) : 0;
  Slot& s = region_.enter();
  ++s.c.epoch_allocs;
  Placement p;
  bool ok;
  try {
    ok = region_.alloc(s, aligned, tag, &p);
  } catch (...) {  // host memory for block records
    ++s.c.misses;
    region_.leave(s);
    return fail_with(Status::kOutOfMemory,
                     fmt::format("out of host memory for the block records of arena '{}'", name_));
  }
  if (__builtin_expect(ok, 1)) {
    const uint64_t nth = s.c.epoch_allocs;
    ++s.c.hits;
    if (p.reused) ++s.c.reuses;
    if (size > s.c.epoch_max_alloc) s.c.epoch_max_alloc = size;
    if (size > s.c.step_max_alloc) s.c.step_max_alloc = size;
    const uint64_t epoch = region_.epoch();
    const uint32_t extras = extras_.load(std::memory_order_relaxed);
    if (__builtin_expect(extras & kExtraTrace, 0)) {
      trace_->slot_alloc(s.id, size, p.offset, p.reused, tag);
    }
    region_.leave(s);
    out->ptr = base_ + p.offset;
    out->epoch = epoch;
    out->size = p.size;
    out->flags = p.reused ? ZARENA_BLOCK_REUSED : 0;
    out->tag = tag;
    // One load and two compares: the diagnosis sees the opening of each epoch, every request
    // while the cadence detector runs, and the ones that carry an epoch past earlier peaks.
    const uint64_t end = p.offset + p.size;
    if (__builtin_expect(end > watch_end_.load(std::memory_order_relaxed) ||
                             nth <= static_cast<uint64_t>(CadenceDetector::kAnchorLen),
                         0)) {
      diag_on_alloc(aligned, end, nth, s.id);
    }
    return Status::kOk;
  }
  ++s.c.misses;
  region_.leave(s);
  try {
    after_op();
    const bool commit_failed =
        expandable_ && commit_failures_.load(std::memory_order_relaxed) != commit_failures0;
    return overflow_alloc(size, aligned, tag, commit_failed, out);
  } catch (...) {
    return fail_with(Status::kOutOfMemory,
                     fmt::format("out of host memory on the overflow path of arena '{}'", name_));
  }
}

// size 0 (nothing to allocate) and sizes no arena can describe: off the common path.
Status Arena::alloc_odd(uint64_t size, uint32_t tag, zarena_block* out) noexcept {
  if (size == 0) {
    out->ptr = nullptr;
    out->epoch = region_.epoch();
    out->size = 0;
    out->flags = 0;
    out->tag = tag;
    return Status::kOk;
  }
  Slot& s = region_.enter();
  ++s.c.epoch_allocs;
  ++s.c.misses;
  if (trace_ != nullptr) {
    trace_->on_alloc(size, size, zarena_trace::TraceAddr{}, zarena_trace::AllocOutcome::kRefused,
                     ZARENA_E_OUT_OF_MEMORY, region_.epoch(), tag);
  }
  region_.leave(s);
  try {
    return fail_with(Status::kOutOfMemory,
                     fmt::format("request of {} bytes is larger than any arena can serve "
                                 "(arena '{}', capacity {} bytes). verdict=runaway_buffer; "
                                 "fix: check the tensor shape behind that request (a wrong "
                                 "dimension or a missing batch split)",
                                 size, name_, capacity_));
  } catch (...) {
    return Status::kOutOfMemory;
  }
}

Status Arena::overflow_alloc(uint64_t size, uint64_t aligned, uint32_t tag, bool commit_failed,
                             zarena_block* out) {
  if (overflow_.has_deferred()) {
    std::vector<OverflowBlock> none;
    give_back(none);  // a capture that deferred frees may be over: give them back first
  }
  const OverflowAttempt a = overflow_.allocate(aligned, capture_flag_.load());
  uint64_t epoch = 0;
  if (a.result.is_ok()) {
    Slot& s = region_.enter();
    epoch = region_.epoch();
    try {
      overflow_.track(a, aligned, epoch, tag);
    } catch (...) {
      region_.leave(s);
      overflow_.untrack_failed(a, aligned);
      return fail_with(Status::kOutOfMemory,
                       "out of host memory tracking an overflow block (it was given back)");
    }
    if (size > s.c.epoch_max_alloc) s.c.epoch_max_alloc = size;
    if (size > s.c.step_max_alloc) s.c.step_max_alloc = size;
    if (trace_ != nullptr) {
      trace_->on_alloc(size, aligned, zarena_trace::TraceAddr::pointer(a.block.ptr),
                       zarena_trace::AllocOutcome::kOverflow, ZARENA_OK, epoch, tag);
    }
    region_.leave(s);
  } else {
    epoch = region_.epoch();
    if (trace_ != nullptr) {
      trace_->on_alloc(size, aligned, zarena_trace::TraceAddr{},
                       zarena_trace::AllocOutcome::kRefused,
                       static_cast<int32_t>(a.result.status), epoch, tag);
    }
  }
  if (!a.result.is_ok()) {
    zarena_stats st;
    stats(&st);
    // The diagnosis travels with the error (and its record, when due, is out before the
    // call returns): bindings parse the suffix, see zarena.h.
    const Verdict v = report_failure(a, size, aligned, epoch, commit_failed);
    if (a.slow && log_enabled(ZARENA_LOG_WARN)) {
      log_emit(overflow_slow_record(a.latency_ns, cfg_.overflow_slow_ns, aligned, a.path, name_));
    }
    return fail_with(
        a.result.status,
        fmt::format("arena '{}' is full and overflow failed ({}): requested {} bytes ({} aligned), "
                    "region used {} of {} bytes (top {}, floor {}), overflow live {} bytes: {}. {}",
                    name_, a.path, size, aligned, st.used_bytes, st.capacity_bytes, st.top_bytes,
                    st.floor_bytes, st.overflow_live_bytes, a.result.message, verdict_suffix(v)));
  }
  out->ptr = a.block.ptr;
  out->epoch = epoch;
  // The call succeeded: its diagnosis (if this is the epoch's first overflow) is built
  // and logged off it, by the reporter (with the overflow.slow record after it).
  report_success(a, size, aligned, epoch, commit_failed);
  out->size = aligned;
  out->flags = ZARENA_BLOCK_OVERFLOW;
  out->tag = tag;
  return Status::kOk;
}

// --- frees and pins ---------------------------------------------------------------------

Status Arena::free(void* ptr, uint64_t want_epoch) noexcept {
  const char* p = static_cast<const char*>(ptr);
  if (__builtin_expect(p >= base_ && p < base_ + capacity_, 1)) {
    const uint64_t off = static_cast<uint64_t>(p - base_);
    Slot& s = region_.enter();
    // The key is taken before the free, which may hand the space to other slots.
    const uint64_t key =
        __builtin_expect(extras_.load(std::memory_order_relaxed) & kExtraTrace, 0)
            ? trace_->slot_free_key(s.id, off)
            : 0;
    uint64_t size = 0;
    FreeOutcome o;
    try {
      o = region_.free(s, off, want_epoch, &size);
    } catch (...) {  // host memory for a record (a span given back below the floor)
      region_.leave(s);
      return fail_with(Status::kOutOfMemory, "out of host memory freeing a block");
    }
    // Loaded after the free: the free may have queued a note (a poison fill skipped).
    const uint32_t extras = extras_.load(std::memory_order_relaxed);
    if (__builtin_expect(extras & kExtraTrace, 0)) {
      trace_->slot_free(s.id, key, off,
                        o == FreeOutcome::kOk || o == FreeOutcome::kDeferred
                            ? ZARENA_OK
                            : static_cast<int32_t>(status_of(o, want_epoch, region_.epoch())),
                        o == FreeOutcome::kOk ? size : 0, want_epoch != kAnyEpoch,
                        want_epoch == kAnyEpoch ? 0 : want_epoch);
    }
    if (__builtin_expect(o == FreeOutcome::kOk || o == FreeOutcome::kDeferred, 1)) {
      region_.leave(s);
      if (__builtin_expect(extras & ~kExtraTrace, 0)) after_free_extras(extras);
      if (__builtin_expect(detector_on_.load(std::memory_order_relaxed), 0)) diag_on_free(size, s.id);
      return Status::kOk;
    }
    const uint64_t epoch = region_.epoch();
    // A free naming a past epoch whose history is gone: that epoch's block was reclaimed
    // (a block kept past its epoch, pinned or below the floor, keeps its record).
    if (o == FreeOutcome::kNotOwned && want_epoch < epoch) o = FreeOutcome::kStale;
    if (o == FreeOutcome::kStale) {
      ++s.c.stale_frees;
    } else {
      ++s.c.invalid_frees;
    }
    region_.leave(s);
    return free_error(o, ptr, true, epoch);
  }
  if (ptr == nullptr) return Status::kOk;
  try {
    return free_slow(ptr, want_epoch);
  } catch (...) {
    return fail_with(Status::kOutOfMemory, "out of host memory freeing an overflow block");
  }
}

void Arena::after_free_extras(uint32_t extras) {
  if (extras & kExtraNote) after_op();
}

Status Arena::free_slow(void* ptr, uint64_t want_epoch) {
  Slot& s = region_.enter();
  const uint64_t epoch = region_.epoch();
  OverflowBlock block;
  uint64_t size = 0;
  FreeOutcome o = overflow_.free(ptr, want_epoch, epoch, &block, &size);
  if (o == FreeOutcome::kNotOwned && want_epoch < epoch) o = FreeOutcome::kStale;
  if (trace_ != nullptr) {
    trace_->on_free(zarena_trace::TraceAddr::pointer(ptr),
                    o == FreeOutcome::kOk || o == FreeOutcome::kDeferred
                        ? ZARENA_OK
                        : static_cast<int32_t>(status_of(o, want_epoch, epoch)),
                    o == FreeOutcome::kOk ? size : 0, want_epoch != kAnyEpoch,
                    want_epoch == kAnyEpoch ? 0 : want_epoch);
  }
  if (o == FreeOutcome::kStale) {
    ++s.c.stale_frees;
  } else if (o != FreeOutcome::kOk && o != FreeOutcome::kDeferred) {
    ++s.c.invalid_frees;
  }
  region_.leave(s);
  if (o == FreeOutcome::kOk) {
    std::vector<OverflowBlock> blocks{block};
    give_back(blocks);
    after_op();
    return Status::kOk;
  }
  if (o == FreeOutcome::kDeferred) return Status::kOk;
  return free_error(o, ptr, false, epoch);
}

Status Arena::status_of(FreeOutcome o, uint64_t want_epoch, uint64_t epoch) {
  if (o == FreeOutcome::kNotOwned && want_epoch < epoch) return Status::kStale;
  switch (o) {
    case FreeOutcome::kOk:
    case FreeOutcome::kDeferred:
      return Status::kOk;
    case FreeOutcome::kStale:
      return Status::kStale;
    case FreeOutcome::kDoubleFree:
      return Status::kDoubleFree;
    default:
      return Status::kNotOwned;
  }
}

Status Arena::free_error(FreeOutcome o, void* ptr, bool in_region, uint64_t epoch) noexcept {
  try {
    return free_error_text(o, ptr, in_region, epoch);
  } catch (...) {
    return status_of(o, kAnyEpoch, epoch);
  }
}

Status Arena::free_error_text(FreeOutcome o, void* ptr, bool in_region, uint64_t epoch) {
  switch (o) {
    case FreeOutcome::kStale:
      return fail_with(Status::kStale,
                          fmt::format("free({}): the block was reclaimed by a reset, or the "
                                      "address was handed out again since the epoch named "
                                      "(arena '{}' is in epoch {}); the call was dropped",
                                      ptr, name_, epoch));
    case FreeOutcome::kDoubleFree:
      return fail_with(
          Status::kDoubleFree,
          fmt::format("free({}): the block was already freed (arena '{}')", ptr, name_));
    default:
      return fail_with(
          Status::kNotOwned,
          in_region
              ? fmt::format("free({}): not the start of a block of arena '{}' (offset {} "
                            "inside the region)",
                            ptr, name_, static_cast<uint64_t>(static_cast<char*>(ptr) - base_))
              : fmt::format("free({}): pointer was not allocated by arena '{}'", ptr, name_));
  }
}

Result Arena::pin_error(PinOutcome o, void* ptr, const char* what) {
  switch (o) {
    case PinOutcome::kOk:
      return Result::ok();
    case PinOutcome::kNotOwned:
      return Result::fail(Status::kNotOwned,
                          fmt::format("{}({}): not the start of a live block of arena '{}'", what,
                                      ptr, name_));
    case PinOutcome::kFreed:
      return Result::fail(Status::kDoubleFree,
                          fmt::format("{}({}): the block was already freed (arena '{}')", what,
                                      ptr, name_));
    case PinOutcome::kStale:
      return Result::fail(Status::kStale,
                          fmt::format("{}({}): the block was reclaimed by a reset (arena '{}' is "
                                      "in epoch {})",
                                      what, ptr, name_, epoch()));
    case PinOutcome::kNotPinned:
      return Result::fail(
          Status::kInvalidArgument,
          fmt::format("{}({}): the block is not pinned (arena '{}')", what, ptr, name_));
    case PinOutcome::kTooMany:
      return Result::fail(Status::kInvalidArgument,
                          fmt::format("{}({}): the block already has {} pins, the most one block "
                                      "can hold (arena '{}')",
                                      what, ptr, Word::kMaxPins, name_));
  }
  return Result::fail(Status::kInternal, "unknown pin outcome");
}

Result Arena::pin(void* ptr) {
  if (ptr == nullptr) return Result::fail(Status::kInvalidArgument, "zarena_pin: ptr is NULL");
  const char* p = static_cast<const char*>(ptr);
  Slot& s = region_.enter();
  PinOutcome o;
  try {
    o = contains(p) ? region_.pin(s, static_cast<uint64_t>(p - base_))
                    : overflow_.pin(ptr, region_.epoch());
  } catch (...) {
    region_.leave(s);
    throw;
  }
  Result r = pin_error(o, ptr, "zarena_pin");
  if (trace_ != nullptr) {
    trace_->on_pin(contains(p) ? zarena_trace::TraceAddr::region(static_cast<uint64_t>(p - base_))
                               : zarena_trace::TraceAddr::pointer(ptr),
                   static_cast<int32_t>(r.status));
  }
  region_.leave(s);
  return r;
}

Result Arena::unpin(void* ptr) {
  if (ptr == nullptr) return Result::fail(Status::kInvalidArgument, "zarena_unpin: ptr is NULL");
  const char* p = static_cast<const char*>(ptr);
  Slot& s = region_.enter();
  // Before the unpin: the last one completes a deferred free (space to other slots).
  const uint64_t key = trace_ != nullptr ? trace_->take_key() : 0;
  PinOutcome o;
  OverflowBlock block;
  uint64_t freed = 0;
  try {
    o = contains(p) ? region_.unpin(s, static_cast<uint64_t>(p - base_), &freed)
                    : overflow_.unpin(ptr, region_.epoch(), &block, &freed);
  } catch (...) {
    region_.leave(s);
    throw;
  }
  if (trace_ != nullptr) {
    trace_->on_unpin(contains(p) ? zarena_trace::TraceAddr::region(static_cast<uint64_t>(p - base_))
                                 : zarena_trace::TraceAddr::pointer(ptr),
                     static_cast<int32_t>(pin_error(o, ptr, "zarena_unpin").status), key);
  }
  region_.leave(s);
  if (o == PinOutcome::kOk && freed != 0 && !contains(p)) {
    std::vector<OverflowBlock> blocks{block};
    give_back(blocks);
  }
  after_op();
  return pin_error(o, ptr, "zarena_unpin");
}

}  // namespace zarena_core
