// The arena's lifetime and its per-call paths: allocate, free, pin (arena_control.cpp has
// reset, floors, stats and settings).
#include "engine/arena.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "base/checks.h"
#include "base/last_error.h"
#include "config/config_records.h"
#include "diagnosis/diagnostics.h"
#include "engine/capture_scope.h"
#include "engine/tags.h"
#include "log/reporter.h"

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

RegionConfig region_config(const zarena_config& c, PinTally* pin_tally) {
  RegionConfig rc;
  rc.pin_tally = pin_tally;
  rc.capacity = c.capacity_bytes;
  rc.granule = c.alignment;
  rc.lane_slots = Lane::kMax;  // one slot a lane (engine/lanes.h)
  // Expandable: nothing is committed yet; the first allocation asks for it.
  rc.expandable = (c.flags & ZARENA_FLAG_EXPANDABLE) != 0;
  rc.ceiling = rc.expandable ? 0 : c.capacity_bytes;
  return rc;
}

// Rounds of commit-and-retry one allocation makes before it takes what lies below the
// ceiling (other threads' resets can lower the ceiling again between the rounds).
constexpr int kMaxCommitRounds = 4;

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
    to.on_failure = &Arena::trace_failed;
    to.failure_ctx = &a;
    a.tracer_ = zarena_trace::Tracer::open(rc.trace_file, th, &err, to);
    if (a.tracer_) {
      a.trace_ = a.tracer_.get();
      a.region_.set_order_counter(a.trace_->order_counter());
      a.fast_path_flags_.fetch_or(kTracing, std::memory_order_relaxed);
      for (uint32_t id = 1; id <= tag_count(); ++id) a.trace_->on_tag(id, tag_name(id));
      if (a.tracer_->path() != rc.trace_file && log_enabled(ZARENA_LOG_WARN)) {
        LogRecord rec(log_events::kTraceRenamed, rc.log_source());
        rec.message(
            fmt::format("the trace file '{}' is written by another open trace (of this "
                        "process or another); this arena traces to '{}'",
                        rc.trace_file, a.tracer_->path()));
        rec.add_string("trace_file", rc.trace_file);
        rec.add_string("trace_path", a.tracer_->path());
        log_emit(rec);
      }
    } else if (log_enabled(ZARENA_LOG_WARN)) {
      LogRecord rec(log_events::kTraceFailed, rc.log_source());
      rec.message(
          fmt::format("could not open the trace file '{}' ({}); the arena runs "
                      "without a trace",
                      rc.trace_file, err.message));
      rec.add_string("trace_file", rc.trace_file);
      rec.add_string("reason", err.message);
      log_emit(rec);
    }
  }
  if (log_enabled(ZARENA_LOG_INFO)) {
    const MemoryInfo mem = a.backend_->memory_info();
    std::string backend_desc = a.backend_->describe();
    if (!region.managed_fallback.empty()) backend_desc += "; " + region.managed_fallback;
    if (a.expandable_) {
      backend_desc += fmt::format(", expandable region (commits in {} chunks)",
                                  human_bytes(a.commits_.chunk()));
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
    : source_(rc.log_source()),
      cfg_(rc.cfg),
      backend_(std::move(backend)),
      base_(static_cast<char*>(region.base)),
      capacity_(rc.cfg.capacity_bytes),
      granule_(rc.cfg.alignment),
      managed_(region.managed),
      expandable_((rc.cfg.flags & ZARENA_FLAG_EXPANDABLE) != 0),
      region_(region_config(rc.cfg, &pin_tally_), this),
      commits_(*backend_, region_, expandable_, rc.cfg.capacity_bytes, region.commit_granularity,
               rc.cfg.commit_chunk_bytes != 0 ? rc.cfg.commit_chunk_bytes : kDefaultCommitChunk),
      overflow_(*backend_, policy, rc.cfg.alignment, rc.cfg.overflow_limit_bytes,
                rc.cfg.overflow_slow_ns, &pin_tally_),
      poison_((rc.cfg.flags & ZARENA_FLAG_POISON) != 0, rc.cfg.poison_word),
      diag_(rc.cfg.capacity_bytes, rc.log_source(), (rc.cfg.flags & ZARENA_FLAG_NO_RESETS) != 0),
      plans_((rc.cfg.flags & ZARENA_FLAG_NO_PLAN) == 0, rc.cfg.alignment) {
  scope_stream_.store(rc.cfg.stream, std::memory_order_relaxed);
  region_.set_fill_enabled(poison_.on());
}

Arena::~Arena() = default;

// The tracer's writer thread, no lock held, once: the trace stopped (a write failed, or
// host memory for its buffers ran out). The program hears of it now, not at destroy.
void Arena::trace_failed(void* ctx, const std::string& path, const Result& why) {
  const Arena* a = static_cast<const Arena*>(ctx);
  if (!log_enabled(ZARENA_LOG_WARN)) return;
  try {
    LogRecord rec(log_events::kTraceFailed, a->source_);
    rec.message(
        fmt::format("the trace stopped: {}. The file '{}' ends there; "
                    "zarena_trace_status reports it",
                    why.message, path));
    rec.add_string("trace_file", path);
    rec.add_string("reason", why.message);
    log_emit(rec);
  } catch (...) {  // host memory: zarena_trace_status still says it
  }
}

Result Arena::trace_status() const {
  if (!tracer_) return Result::ok();
  return tracer_->status();
}

FaultInjectingBackend* Arena::fault_injector() {
  return dynamic_cast<FaultInjectingBackend*>(backend_.get());
}

// --- hooks the region calls under its locks ------------------------------------------

RegionHooks::Fill Arena::fill_policy() noexcept {
  if (!poison_.on()) return Fill::kOff;
  // A fill now would be recorded into the user's graph (or break its capture): skip it
  // (the region counts it).
  if (capturing()) {
    note_poison_skipped(0);
    return Fill::kSkip;
  }
  return Fill::kNow;
}

void Arena::fill(uint64_t offset, uint64_t bytes) noexcept {
  const Result r = backend_->fill32(base_ + offset, bytes, poison_.word());
  if (!r.is_ok()) queue_warning(QueuedWarnings::kPoisonFailed, r.message);
}

bool Arena::capture_declared() const noexcept {
  return capture_flag_.load(std::memory_order_relaxed) || graphs_.capturing() ||  // [graphs]
         capture_scope_covers(scope_stream_.load(std::memory_order_relaxed));
}

bool Arena::capturing() {
  if (capture_declared()) return true;
  bool c = false;
  const Result r = backend_->capture_status(&c);
  if (!r.is_ok()) {
    // When the backend cannot tell, act as if it were capturing (and say why, later).
    queue_warning(QueuedWarnings::kCaptureQueryFailed, r.message);
    return true;
  }
  return c;
}

Result Arena::fill_overflow(void* ctx, void* ptr, uint64_t bytes) {
  Arena* a = static_cast<Arena*>(ctx);
  a->poison_.count_overflow_fill();
  Result r = a->backend_->fill32(ptr, bytes & ~uint64_t{3}, a->poison_.word());
  if (!r.is_ok()) a->queue_warning(QueuedWarnings::kPoisonFailed, r.message);
  return r;
}

// No lock held. Blocks waiting from before (a capture, or a give-back that failed) go
// first, so a block that fails now waits for the next give-back point instead of being
// retried at once. A failure is checked against a device reset: then nothing waits (the
// reset took it all), and no further call is made for those blocks.
bool Arena::give_back(std::vector<OverflowBlock>& blocks) {
  Result r;
  {
    // A block's poison fill and its free go to one stream: set_stream waits.
    std::shared_lock<std::shared_mutex> g(stream_mu_);
    const bool cap = capturing();
    // The capture the arena's stream is in: its own allocation nodes are freed into it.
    uint64_t capture_id = 0;
    if (cap && !blocks.empty()) (void)backend_->capture_id(&capture_id);
    const bool poison = poison_.on() && !cap;
    // Blocks of the program's allocator go back to it at once, capture or not: their fill
    // is skipped during a capture (the others wait, and are filled when they go back).
    if (cap && poison_.on()) {
      const auto custom = std::count_if(blocks.begin(), blocks.end(), [](const OverflowBlock& b) {
        return b.route == OverflowRoute::kCustom;
      });
      if (custom != 0) note_poison_skipped(static_cast<uint64_t>(custom));
    }
    OverflowPool::FillFn fill = poison ? &Arena::fill_overflow : nullptr;
    if (!cap && overflow_.has_deferred()) r = overflow_.flush_deferred(fill, this);
    const Result now = overflow_.give_back(blocks, cap, capture_id, fill, this);
    if (r.is_ok()) r = now;
  }
  if (!r.is_ok() && device_lost("an overflow give-back")) {
    std::vector<OverflowBlock> none;
    (void)overflow_.abandon(none);  // what the failure left waiting
    if (warnings_.any()) emit_backend_warnings();
    return false;
  }
  if (!r.is_ok() && log_enabled(ZARENA_LOG_WARN)) {
    LogRecord rec(log_events::kOverflowGiveFailed, source_);
    rec.message(
        fmt::format("could not give an overflow block back to the backend ({}); it is "
                    "kept and tried again at the next overflow call, free, reset or "
                    "destroy",
                    r.message));
    rec.add_string("reason", r.message);
    log_emit(rec);
  }
  if (warnings_.any()) emit_backend_warnings();
  return true;
}

bool Arena::device_lost(const char* call) {
  if (!backend_->context_lost()) return false;
  if (device_lost_logged_.exchange(true)) return true;
  try {
    if (log_enabled(ZARENA_LOG_WARN)) {
      const uint64_t region_bytes = commits_.committed_bytes();
      const OverflowStats o = overflow_.stats();
      const uint64_t blocks = o.live_count + o.deferred_gives;
      LogRecord rec(log_events::kDeviceReset, source_);
      rec.message(fmt::format(
          "the device was reset (cudaDeviceReset or cuDevicePrimaryCtxReset) after the arena "
          "was created, found by {}: its {} of region and {} overflow blocks went with the "
          "reset. zarena touches none of it from now on (those addresses may belong to new "
          "allocations): calls that would need the device fail with ZARENA_E_BACKEND, "
          "zarena_reset and zarena_destroy free nothing. Destroy the arena",
          call, human_bytes(region_bytes), blocks));
      rec.add_string("call", call);
      rec.add_uint("region_bytes", region_bytes);
      rec.add_uint("overflow_blocks", blocks);
      log_emit(rec);
    }
  } catch (...) {  // host memory: the status still says it
  }
  return true;
}

std::string Arena::device_lost_text(const char* call) const {
  return fmt::format(
      "{} (arena '{}'): the device was reset (cudaDeviceReset or cuDevicePrimaryCtxReset) "
      "after the arena was created, and its memory went with the reset; nothing of it was "
      "touched. Destroy the arena",
      call, source_.name);
}

void Arena::emit_backend_warnings() {
  for (auto& [kind, why] : warnings_.take()) {
    if (!log_enabled(ZARENA_LOG_WARN)) continue;
    const LogEvent* event = nullptr;
    std::string message;
    switch (kind) {
      case QueuedWarnings::kPoisonFailed:
        event = &log_events::kPoisonFailed;
        message = fmt::format("a poison fill failed ({}); that block was not poisoned", why);
        break;
      case QueuedWarnings::kCaptureQueryFailed:
        event = &log_events::kCaptureQueryFailed;
        message = fmt::format(
            "could not ask the backend whether a capture is active ({}); the "
            "arena acts as if one were (poison skipped, overflow gives "
            "deferred, SYNC overflow refused)",
            why);
        break;
      default:
        continue;
    }
    LogRecord rec(*event, source_);
    rec.message(std::move(message));
    rec.add_string("reason", why);
    log_emit(rec);
  }
}

void Arena::emit_queued_warnings() {
  if (fast_path_flags_.load(std::memory_order_relaxed) & kWarningsQueued) {
    fast_path_flags_.fetch_and(~kWarningsQueued, std::memory_order_relaxed);
  }
  if (warnings_.any()) emit_backend_warnings();
  if (poison_.take_skip_warning(capture_scope_generation()) && log_enabled(ZARENA_LOG_WARN)) {
    LogRecord rec(log_events::kPoisonSkipped, source_);
    rec.message(
        "a poison fill was skipped because a CUDA graph capture is active (a fill would be "
        "recorded into the graph); freed blocks are not poisoned until the capture ends");
    log_emit(rec);
  }
}

void Arena::warn_commit_failed(const std::string& why) {
  if (!log_enabled(ZARENA_LOG_WARN)) return;
  const uint64_t committed = commits_.committed_bytes();
  LogRecord rec(log_events::kCommitFailed, source_);
  rec.message(
      fmt::format("could not commit more memory for the expandable arena ({}); "
                  "allocations beyond {} go to overflow",
                  why, human_bytes(committed)));
  rec.add_uint("committed_bytes", committed);
  rec.add_string("reason", why);
  log_emit(rec);
}

// --- allocation -----------------------------------------------------------------------

__attribute__((always_inline)) inline Status Arena::served(Slot& s, const Placement& p,
                                                           uint64_t size, uint64_t aligned,
                                                           uint32_t tag, zarena_block* out,
                                                           Lane* lane) noexcept {
  const uint64_t nth = s.c.epoch_allocs;
  ++s.c.hits;
  if (p.reused) ++s.c.reuses;
  if (size > s.c.epoch_max_alloc) s.c.epoch_max_alloc = size;
  if (size > s.c.step_max_alloc) s.c.step_max_alloc = size;
  const uint64_t epoch = region_.epoch();
  const uint32_t flags = fast_path_flags_.load(std::memory_order_relaxed);
  if (ZARENA_UNLIKELY(flags & kTracing)) {
    trace_->slot_alloc(s.id, size, p.offset, p.reused, tag);
  }
  region_.leave(s);
  StepPlans& plans = lane != nullptr ? lane->plans : plans_;
  if (ZARENA_UNLIKELY(plans.learning())) {
    plans.learn_alloc(reinterpret_cast<uintptr_t>(base_ + p.offset), aligned, tag,
                      lane != nullptr ? lane->thread : Region::thread_number(), epoch);
  }
  out->ptr = base_ + p.offset;
  out->epoch = epoch;
  out->size = p.size;
  out->flags = p.reused ? ZARENA_BLOCK_REUSED : 0;
  out->tag = tag;
  // One load and two compares: the diagnosis sees the opening of each epoch, every request
  // while the cadence detector runs, and the ones that carry an epoch past earlier peaks.
  const uint64_t end = p.offset + p.size;
  if (ZARENA_UNLIKELY(diag_.wants_alloc(end, nth))) diagnose_alloc(aligned, end, nth, s.id);
  return Status::kOk;
}

__attribute__((always_inline)) inline Status Arena::alloc_dynamic(uint64_t size, uint64_t aligned,
                                                                  uint32_t tag, zarena_block* out,
                                                                  Lane* lane) noexcept {
  Slot& s = lane != nullptr ? region_.enter_slot(lane->slot) : region_.enter();
  ++s.c.epoch_allocs;
  Placement p;
  bool ok;
  try {
    ok = region_.alloc(s, aligned, tag, &p);
  } catch (...) {  // host memory for block records
    ++s.c.misses;
    region_.leave(s);
    return fail_with(
        Status::kOutOfMemory,
        fmt::format("out of host memory for the block records of arena '{}'", source_.name));
  }
  if (ZARENA_LIKELY(ok)) return served(s, p, size, aligned, tag, out, lane);
  return alloc_missed(s, p, size, aligned, tag, out, lane);
}

Status Arena::alloc(uint64_t size, uint32_t tag, zarena_block* out) noexcept {
  if (ZARENA_UNLIKELY(size - 1 >= kMaxRequest)) return alloc_zero_or_oversized(size, tag, out);
  const uint64_t aligned = (size + granule_ - 1) & ~(granule_ - 1);
  if (ZARENA_UNLIKELY(plans_.engaged() ||
                      (fast_path_flags_.load(std::memory_order_relaxed) & kGraphCapture))) {
    return alloc_under_plan(size, aligned, tag, out);  // a jump: no frame set up here
  }
  return alloc_dynamic(size, aligned, tag, out, nullptr);
}

Status Arena::alloc_unplanned(uint64_t size, uint32_t tag, zarena_block* out) noexcept {
  if (ZARENA_UNLIKELY(size - 1 >= kMaxRequest)) return alloc_zero_or_oversized(size, tag, out);
  // [graphs] During a graph capture only the plan serves (engine/arena_graphs.cpp).
  if (ZARENA_UNLIKELY(graphs_.capturing())) return graph_refuse(size, tag);
  return alloc_dynamic(size, (size + granule_ - 1) & ~(granule_ - 1), tag, out, nullptr);
}

// [lanes] A lane's requests (zarena_lane.h): its plan, else the dynamic engine from its slot
// (here, where the dynamic path is inlined; the rest of the lanes is arena_lanes.cpp).
Status Arena::lane_alloc(Lane& l, uint64_t size, uint32_t tag, zarena_block* out) noexcept {
  if (ZARENA_UNLIKELY(size - 1 >= kMaxRequest)) return alloc_zero_or_oversized(size, tag, out);
  const uint64_t aligned = (size + granule_ - 1) & ~(granule_ - 1);
  if (l.plans.engaged()) {
    PlanRun::Block b;
    if (l.plans.alloc(aligned, tag, l.thread, &b) == PlanRun::Alloc::kServed) {
      out->ptr = reinterpret_cast<void*>(b.ptr);
      out->epoch = b.epoch;
      out->size = b.size;
      out->flags = ZARENA_BLOCK_PLANNED;
      out->tag = tag;
      if (ZARENA_UNLIKELY(fast_path_flags_.load(std::memory_order_relaxed) & kTracing)) {
        trace_planned_alloc(size, aligned, tag, *out);  // plan_trace.cpp
      }
      return Status::kOk;
    }
  }
  // [graphs] A capture holds the arena's plan only: nothing else is handed out meanwhile.
  if (ZARENA_UNLIKELY(graphs_.capturing())) return graph_refuse(size, tag);
  return alloc_dynamic(size, aligned, tag, out, &l);
}

Status Arena::lane_alloc_unplanned(Lane& l, uint64_t size, uint32_t tag,
                                   zarena_block* out) noexcept {
  if (ZARENA_UNLIKELY(size - 1 >= kMaxRequest)) return alloc_zero_or_oversized(size, tag, out);
  if (ZARENA_UNLIKELY(graphs_.capturing())) return graph_refuse(size, tag);  // [graphs]
  return alloc_dynamic(size, (size + granule_ - 1) & ~(granule_ - 1), tag, out, &l);
}

Status Arena::lane_free(Lane& l, void* ptr, uint64_t want_epoch) noexcept {
  const char* p = static_cast<const char*>(ptr);
  if (ZARENA_LIKELY(p >= base_ && p < base_ + capacity_)) {
    // The lane's own zone first (its planned blocks), then any zone, else the lane's slot.
    if (PlanRun* run = l.plans.zone_of(reinterpret_cast<uintptr_t>(ptr))) {
      return free_planned(*run, ptr, want_epoch);
    }
    return free_with_zone(ptr, want_epoch, &l);
  }
  return free(ptr, want_epoch);  // NULL, overflow blocks and foreign pointers
}

bool Arena::commit_round(int round, uint64_t to, uint64_t least, std::string* failure) {
  if (round >= kMaxCommitRounds) return false;
  const bool failed_before = !failure->empty();
  const bool grown = commits_.grow(to, least, failure);
  if (!failed_before && !failure->empty()) warn_commit_failed(*failure);
  return grown;
}

Status Arena::alloc_missed(Slot& s, Placement p, uint64_t size, uint64_t aligned, uint32_t tag,
                           zarena_block* out, Lane* lane) noexcept {
  try {
    // Expandable: the region needs memory above its ceiling. Commit it with no region lock
    // held (a commit can wait on the GPU; threads that need no commit go on meanwhile),
    // then try again. A commit that fails leaves the region what lies below the ceiling.
    std::string commit_failure;
    bool below_ceiling = false;
    for (int round = 0; p.commit_to != 0; ++round) {
      const uint64_t epoch = region_.epoch();
      region_.leave(s);
      below_ceiling = !commit_round(round, p.commit_to, p.commit_least, &commit_failure);
      // The caller's slot (the thread's, or the lane's): s itself.
      Slot& again = lane != nullptr ? region_.enter_slot(lane->slot) : region_.enter();
      // The request counts in the epoch that serves it.
      if (region_.epoch() != epoch) ++again.c.epoch_allocs;
      p = Placement{};
      bool ok;
      try {
        ok = below_ceiling ? region_.alloc_below_ceiling(again, aligned, tag, &p)
                           : region_.alloc(again, aligned, tag, &p);
      } catch (...) {
        ++again.c.misses;
        region_.leave(again);
        throw;
      }
      if (ok) return served(again, p, size, aligned, tag, out, lane);
    }
    ++s.c.misses;
    region_.leave(s);
    emit_queued_warnings();
    return overflow_alloc(size, aligned, tag, commit_failure, out, lane);
  } catch (...) {
    return fail_with(
        Status::kOutOfMemory,
        fmt::format("out of host memory on the overflow path of arena '{}'", source_.name));
  }
}

Status Arena::alloc_zero_or_oversized(uint64_t size, uint32_t tag, zarena_block* out) noexcept {
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
                                 "(arena '{}', capacity {} bytes). {}",
                                 size, source_.name, capacity_,
                                 verdict_suffix(oversized_request_verdict(size))));
  } catch (...) {
    return Status::kOutOfMemory;
  }
}

Status Arena::overflow_alloc(uint64_t size, uint64_t aligned, uint32_t tag,
                             const std::string& commit_failure, zarena_block* out, Lane* lane) {
  if (overflow_.has_deferred()) {
    std::vector<OverflowBlock> none;
    (void)give_back(none);  // a capture that deferred frees may be over: give them back first
  }
  const OverflowAttempt a = overflow_.allocate(aligned, capture_declared());
  if (a.result.status == Status::kBackend) (void)device_lost("zarena_alloc (overflow)");
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
    const uint32_t slot = s.id;
    region_.leave(s);
    // The guess follows the program's whole stream: steps served past the region count.
    if (diag_.on_overflow_alloc(aligned, slot)) {
      ArenaSnapshot snap;
      snapshot(&snap);
      diag_.warn_cadence(step_counters(snap));
    }
    StepPlans& plans = lane != nullptr ? lane->plans : plans_;
    if (plans.learning()) {
      plans.learn_alloc(reinterpret_cast<uintptr_t>(a.block.ptr), aligned, tag,
                        lane != nullptr ? lane->thread : Region::thread_number(), epoch);
    }
  } else {
    epoch = region_.epoch();
    if (trace_ != nullptr) {
      trace_->on_alloc(size, aligned, zarena_trace::TraceAddr{},
                       zarena_trace::AllocOutcome::kRefused, static_cast<int32_t>(a.result.status),
                       epoch, tag);
    }
  }
  if (!a.result.is_ok()) {
    // The diagnosis travels with the error (and its record, when due, is out before the
    // call returns): bindings parse the suffix, see zarena.h. The numbers of the message,
    // the record and the verdict come from one snapshot.
    zarena_stats st;
    const Verdict v = report_failure(a, size, aligned, epoch, commit_failure, &st);
    if (a.slow && log_enabled(ZARENA_LOG_WARN)) {
      log_emit(overflow_slow_record(a.latency_ns, cfg_.overflow_slow_ns, aligned, a.path, source_));
    }
    // A request the region could not hold even empty is no full arena: say what it is.
    const std::string why = refusal_phrase(aligned, st.capacity_bytes, st.floor_bytes);
    const std::string arena = why == "arena full"
                                  ? fmt::format("arena '{}' is full", source_.name)
                                  : fmt::format("arena '{}' cannot hold this request ({})",
                                                source_.name, why.substr(std::strlen("request ")));
    return fail_with(
        a.result.status,
        fmt::format("{} and overflow failed ({}): requested {} bytes ({} aligned), "
                    "region used {} of {} bytes (top {}, floor {}), overflow live {} bytes: {}. {}",
                    arena, a.path, size, aligned, st.used_bytes, st.capacity_bytes, st.top_bytes,
                    st.floor_bytes, st.overflow_live_bytes, a.result.message, verdict_suffix(v)));
  }
  out->ptr = a.block.ptr;
  out->epoch = epoch;
  // The call succeeded: its diagnosis (if this is the epoch's first overflow) is built
  // and logged off it, by the reporter (with the overflow.slow record after it).
  report_success(a, size, aligned, epoch, commit_failure);
  out->size = aligned;
  out->flags = ZARENA_BLOCK_OVERFLOW;
  out->tag = tag;
  return Status::kOk;
}

// --- frees and pins ---------------------------------------------------------------------

// A free answered "stale" or "double" because an older block once started at that address
// is a pointer into a live block now, when the address lies inside one: NOT_OWNED, as
// zarena.h promises for interior pointers. Not for a free that names an earlier epoch:
// its caller's block is of that epoch, whatever lies there now.
template <typename Inside>
FreeOutcome Arena::not_owned_if_interior(FreeOutcome o, uint64_t want_epoch, uint64_t epoch,
                                         Inside&& inside) {
  if (o != FreeOutcome::kStale && o != FreeOutcome::kDoubleFree) return o;
  if (want_epoch != kAnyEpoch && want_epoch < epoch) return o;
  return inside() ? FreeOutcome::kNotOwned : o;
}

__attribute__((always_inline)) inline Status Arena::free_region(void* ptr, uint64_t want_epoch,
                                                                Lane* lane) noexcept {
  const char* p = static_cast<const char*>(ptr);
  {
    const uint64_t off = static_cast<uint64_t>(p - base_);
    Slot& s = lane != nullptr ? region_.enter_slot(lane->slot) : region_.enter();
    // The key is taken before the free, which may hand the space to other slots.
    const uint64_t key =
        ZARENA_UNLIKELY(fast_path_flags_.load(std::memory_order_relaxed) & kTracing)
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
    if (ZARENA_UNLIKELY(o != FreeOutcome::kOk && o != FreeOutcome::kDeferred)) {
      // A piece of the plan's zone: the plan answers, when it holds the zone.
      if (o == FreeOutcome::kZone) {
        if (PlanRun* run = zone_run_of(reinterpret_cast<uintptr_t>(ptr))) {
          region_.leave(s);
          return free_planned(*run, ptr, want_epoch);
        }
      }
      o = refine_refusal(s, From::kRegion, ptr, o, want_epoch);
    }
    // Loaded after the free: the free may have queued a note (a poison fill skipped).
    const uint32_t flags = fast_path_flags_.load(std::memory_order_relaxed);
    if (ZARENA_UNLIKELY(flags & kTracing)) {
      trace_->slot_free(s.id, key, off,
                        o == FreeOutcome::kOk || o == FreeOutcome::kDeferred
                            ? ZARENA_OK
                            : static_cast<int32_t>(status_of(o, want_epoch, region_.epoch())),
                        o == FreeOutcome::kOk ? size : 0, want_epoch != kAnyEpoch,
                        want_epoch == kAnyEpoch ? 0 : want_epoch);
    }
    if (ZARENA_LIKELY(o == FreeOutcome::kOk || o == FreeOutcome::kDeferred)) {
      region_.leave(s);
      if (ZARENA_UNLIKELY(flags & kWarningsQueued)) emit_queued_warnings();
      if (ZARENA_UNLIKELY(any_learning())) learn_free_all(reinterpret_cast<uintptr_t>(ptr));
      if (ZARENA_UNLIKELY(diag_.wants_free())) diag_.on_free(size, s.id);
      return Status::kOk;
    }
    return free_refused(s, o, ptr, want_epoch);
  }
}

// A plan zone exists: its blocks go to the plan, the others to the region. Out of line,
// so that the planned free is a jump from free() and the region's path stays inlined there.
Status Arena::free_with_zone(void* ptr, uint64_t want_epoch, Lane* lane) noexcept {
  if (PlanRun* run = zone_run_of(reinterpret_cast<uintptr_t>(ptr))) {
    return free_planned(*run, ptr, want_epoch);
  }
  return free_region(ptr, want_epoch, lane);
}

Status Arena::free(void* ptr, uint64_t want_epoch) noexcept {
  const char* p = static_cast<const char*>(ptr);
  if (ZARENA_LIKELY(p >= base_ && p < base_ + capacity_)) {
    if (ZARENA_UNLIKELY(any_zone())) return free_with_zone(ptr, want_epoch, nullptr);
    return free_region(ptr, want_epoch, nullptr);
  }
  if (ptr == nullptr) return Status::kOk;
  try {
    return free_slow(ptr, want_epoch);
  } catch (...) {
    return fail_with(Status::kOutOfMemory, "out of host memory freeing an overflow block");
  }
}

Status Arena::free_refused(Slot& s, FreeOutcome o, void* ptr, uint64_t want_epoch) noexcept {
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

Status Arena::free_slow(void* ptr, uint64_t want_epoch) {
  Slot& s = region_.enter();
  const uint64_t epoch = region_.epoch();
  OverflowBlock block;
  uint64_t size = 0;
  FreeOutcome o = overflow_.free(ptr, want_epoch, epoch, &block, &size);
  if (o == FreeOutcome::kNotOwned && want_epoch < epoch) o = FreeOutcome::kStale;
  o = not_owned_if_interior(o, want_epoch, epoch, [&] { return overflow_.inside_live_block(ptr); });
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
  const uint32_t slot = s.id;
  region_.leave(s);
  if ((o == FreeOutcome::kOk || o == FreeOutcome::kDeferred) && any_learning()) {
    learn_free_all(reinterpret_cast<uintptr_t>(ptr));
  }
  if (o == FreeOutcome::kOk && diag_.wants_free()) diag_.on_free(size, slot);
  if (o == FreeOutcome::kOk) {
    std::vector<OverflowBlock> blocks{block};
    const bool given = give_back(blocks);
    emit_queued_warnings();
    if (!given) return fail_with(Status::kBackend, device_lost_text("zarena_free"));
    return Status::kOk;
  }
  if (o == FreeOutcome::kDeferred) return Status::kOk;
  return free_error(o, ptr, false, epoch);
}

Status Arena::status_of(FreeOutcome o, uint64_t want_epoch, uint64_t epoch) {
  if (o == FreeOutcome::kNotOwned && want_epoch < epoch) return Status::kStale;
  return free_status(o);
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
                                   ptr, source_.name, epoch));
    case FreeOutcome::kDoubleFree:
      return fail_with(
          Status::kDoubleFree,
          fmt::format("free({}): the block was already freed (arena '{}')", ptr, source_.name));
    default:
      return fail_with(
          Status::kNotOwned,
          in_region ? fmt::format("free({}): not the start of a block of arena '{}' (offset {} "
                                  "inside the region)",
                                  ptr, source_.name,
                                  static_cast<uint64_t>(static_cast<char*>(ptr) - base_))
                    : fmt::format("free({}): pointer was not allocated by arena '{}'", ptr,
                                  source_.name));
  }
}

Result Arena::pin_error(PinOutcome o, void* ptr, const char* what) {
  switch (o) {
    case PinOutcome::kOk:
      return Result::ok();
    case PinOutcome::kNotOwned:
    case PinOutcome::kZone:  // pin_region answers for the zone itself: never seen here
      return Result::fail(
          Status::kNotOwned,
          fmt::format("{}({}): not inside a live block of arena '{}'", what, ptr, source_.name));
    case PinOutcome::kFreed:
      return Result::fail(
          Status::kDoubleFree,
          fmt::format("{}({}): the block was already freed (arena '{}')", what, ptr, source_.name));
    case PinOutcome::kStale:
      return Result::fail(Status::kStale,
                          fmt::format("{}({}): the block was reclaimed by a reset (arena '{}' is "
                                      "in epoch {})",
                                      what, ptr, source_.name, epoch()));
    case PinOutcome::kNotPinned:
      return Result::fail(
          Status::kNotPinned,
          fmt::format("{}({}): the block is not pinned (arena '{}')", what, ptr, source_.name));
    case PinOutcome::kTooMany:
      return Result::fail(Status::kTooManyPins,
                          fmt::format("{}({}): the block already has {} pins, the most one block "
                                      "can hold (arena '{}')",
                                      what, ptr, Word::kMaxPins, source_.name));
  }
  return Result::fail(Status::kInternal, "unknown pin outcome");
}

// The block a pin or unpin acted on, as the trace names it: its start (the call may have
// named an address inside it).
zarena_trace::TraceAddr Arena::pin_trace_addr(bool in_region, uint64_t start_offset,
                                              void* start) const {
  return in_region ? zarena_trace::TraceAddr::region(start_offset)
                   : zarena_trace::TraceAddr::pointer(start);
}

Result Arena::pin(void* ptr) {
  if (ptr == nullptr) return Result::fail(Status::kInvalidArgument, "zarena_pin: ptr is NULL");
  const bool in_region = contains(ptr);
  uint64_t start_offset = in_region ? static_cast<uint64_t>(static_cast<char*>(ptr) - base_) : 0;
  void* start = ptr;
  uint64_t unused = 0;
  bool planned = false;
  Slot& s = region_.enter();
  PinOutcome o;
  try {
    o = in_region ? pin_region(s, ptr, true, &start_offset, &unused, &planned)
                  : overflow_.pin(ptr, region_.epoch(), &start);
  } catch (...) {
    region_.leave(s);
    throw;
  }
  Result r = pin_error(o, ptr, "zarena_pin");
  if (trace_ != nullptr) {
    if (planned) {
      trace_planned_pin(true, trace_->take_key(), ptr, r);  // plan_trace.cpp
    } else {
      trace_->on_pin(pin_trace_addr(in_region, start_offset, start),
                     static_cast<int32_t>(r.status));
    }
  }
  region_.leave(s);
  // A pinned block may outlive any step: it is no part of one.
  if (r.is_ok() && any_learning()) {
    learn_pin_all(in_region ? reinterpret_cast<uintptr_t>(base_ + start_offset)
                            : reinterpret_cast<uintptr_t>(start));
  }
  emit_queued_warnings();
  return r;
}

Result Arena::unpin(void* ptr) {
  if (ptr == nullptr) return Result::fail(Status::kInvalidArgument, "zarena_unpin: ptr is NULL");
  const bool in_region = contains(ptr);
  uint64_t start_offset = in_region ? static_cast<uint64_t>(static_cast<char*>(ptr) - base_) : 0;
  void* start = ptr;
  Slot& s = region_.enter();
  // Before the unpin: the last one completes a deferred free (space to other slots).
  const uint64_t key = trace_ != nullptr ? trace_->take_key() : 0;
  PinOutcome o;
  OverflowBlock block;
  uint64_t freed = 0;
  bool planned = false;
  try {
    o = in_region ? pin_region(s, ptr, false, &start_offset, &freed, &planned)
                  : overflow_.unpin(ptr, region_.epoch(), &block, &freed, &start);
  } catch (...) {
    region_.leave(s);
    throw;
  }
  if (trace_ != nullptr) {
    const Result r = pin_error(o, ptr, "zarena_unpin");
    if (planned) {
      trace_planned_pin(false, key, ptr, r);  // plan_trace.cpp
    } else {
      trace_->on_unpin(pin_trace_addr(in_region, start_offset, start),
                       static_cast<int32_t>(r.status), key);
    }
  }
  region_.leave(s);
  if (o == PinOutcome::kOk && freed != 0 && !in_region) {
    std::vector<OverflowBlock> blocks{block};
    if (!give_back(blocks)) {
      emit_queued_warnings();
      return Result::fail(Status::kBackend, device_lost_text("zarena_unpin"));
    }
  }
  emit_queued_warnings();
  return pin_error(o, ptr, "zarena_unpin");
}

}  // namespace zarena_core
