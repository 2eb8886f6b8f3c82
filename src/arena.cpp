#include "arena.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "backend_faults.h"
#include "diagnostics.h"

namespace zarena_core {

namespace {

constexpr uint32_t kPoisonWord = 0xA5A5A5A5u;

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
    r = backend->reserve_region(req, &region);
    if (!r.is_ok()) return r;
  } catch (const std::bad_alloc&) {
    return Result::fail(Status::kOutOfMemory, "out of host memory creating the backend");
  }
  void* base = region.base;
  try {
    out->reset(new Arena(rc, std::move(backend), base, policy));
  } catch (const std::bad_alloc&) {
    // Whoever holds the backend now (still us, or the half-built Arena's unwinding)
    // releases the region in the backend's destructor.
    return Result::fail(Status::kOutOfMemory, "out of host memory creating the arena");
  }
  Arena& a = **out;
  if (log_enabled(ZARENA_LOG_INFO)) {
    const MemoryInfo mem = a.backend_->memory_info();
    log_emit(config_record(rc, a.backend_->describe(), a.backend_->kind(), policy, fallback,
                           mem.free_bytes, mem.total_bytes));
  }
  return Result::ok();
}

Arena::Arena(const ResolvedConfig& rc, std::unique_ptr<Backend> backend, void* base, int32_t policy)
    : name_(rc.name),
      cfg_(rc.cfg),
      backend_(std::move(backend)),
      base_(static_cast<char*>(base)),
      poison_((rc.cfg.flags & ZARENA_FLAG_POISON) != 0),
      region_(rc.cfg.capacity_bytes, rc.cfg.alignment),
      overflow_(*backend_, policy, rc.cfg.alignment, rc.cfg.overflow_limit_bytes,
                rc.cfg.overflow_slow_ns),
      cadence_(rc.cfg.capacity_bytes) {}

Arena::~Arena() = default;

Result Arena::alloc(uint64_t size, void** out) {
  if (size == 0) {
    *out = nullptr;
    return Result::ok();
  }
  const uint64_t align = cfg_.alignment;
  if (size > ~0ull - (align - 1)) {
    return Result::fail(Status::kOutOfMemory,
                        fmt::format("request of {} bytes cannot be aligned to {}", size, align));
  }
  const uint64_t aligned = (size + align - 1) & ~(align - 1);
  // A pointer, not std::optional: the optional's storage is zero-filled on every call.
  std::unique_ptr<LogRecord> cadence_warning;
  void* result = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++epoch_allocs_;
    ++total_allocs_;
    if (size > epoch_max_alloc_) epoch_max_alloc_ = size;
    if (size > step_max_alloc_) step_max_alloc_ = size;
    uint64_t offset = 0;
    bool reused = false;
    if (region_.alloc(aligned, &offset, &reused)) {
      ++hits_;
      if (reused) ++reuses_;
      result = base_ + offset;
    } else {
      ++misses_;
    }
    if (cadence_.on_alloc(aligned, region_.top(), resets_) && log_enabled(ZARENA_LOG_WARN)) {
      CadenceFacts f;
      f.step_repeats = cadence_.restarts();
      f.step_allocs = cadence_.step_allocs();
      f.step_bytes = cadence_.step_growth();
      f.grown_bytes = cadence_.grown_bytes(region_.top());
      f.offset_bytes = region_.top();
      f.capacity_bytes = region_.capacity();
      f.epoch_allocs = epoch_allocs_;
      f.resets = resets_;
      cadence_warning = std::make_unique<LogRecord>(reset_cadence_record(f, name_));
    }
  }
  if (cadence_warning) log_emit(*cadence_warning);
  if (result != nullptr) {
    *out = result;
    return Result::ok();
  }
  return overflow_alloc(size, aligned, out);
}

Result Arena::overflow_alloc(uint64_t size, uint64_t aligned, void** out) {
  uint64_t epoch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    epoch = region_.epoch();
  }
  OverflowAttempt a = overflow_.alloc(aligned, epoch);
  std::optional<LogRecord> first, slow;
  std::string failure;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!overflowed_this_epoch_ && region_.epoch() == epoch) {
      overflowed_this_epoch_ = true;
      ++overflow_epochs_;
      ExhaustionFacts f;
      f.path = a.path;
      f.requested_bytes = size;
      f.aligned_bytes = aligned;
      f.capacity_bytes = region_.capacity();
      f.offset_bytes = region_.top();
      f.floor_bytes = region_.floor();
      f.used_bytes = region_.live_bytes();
      f.epoch = region_.epoch();
      f.epoch_allocs = epoch_allocs_;
      f.epoch_max_alloc_bytes = epoch_max_alloc_;
      f.step_max_alloc_bytes = step_max_alloc_;
      f.hits = hits_;
      f.misses = misses_;
      f.reuses = reuses_;
      f.resets = resets_;
      f.free_list_len = region_.free_count();
      f.free_list_bytes = region_.free_bytes();
      f.largest_free_block_bytes = region_.largest_free();
      f.step_repeats = cadence_.restarts();
      if (log_enabled(ZARENA_LOG_WARN)) first.emplace(first_overflow_record(f, name_));
    }
    if (!a.result.is_ok()) {
      failure = fmt::format(
          "arena '{}' is full and overflow failed ({}): requested {} bytes ({} aligned), "
          "region used {} of {} bytes (top {}, floor {}), overflow live {} bytes: {}",
          name_, a.path, size, aligned, region_.live_bytes(), region_.capacity(), region_.top(),
          region_.floor(), overflow_.stats().live_bytes, a.result.message);
    }
  }
  if (a.slow && log_enabled(ZARENA_LOG_WARN)) {
    slow.emplace(overflow_slow_record(a.latency_ns, cfg_.overflow_slow_ns, aligned, a.path, name_));
  }
  if (first) log_emit(*first);
  if (slow) log_emit(*slow);
  if (!a.result.is_ok()) {
    *out = nullptr;
    return Result::fail(a.result.status, std::move(failure));
  }
  *out = a.ptr;
  return Result::ok();
}

Result Arena::free(void* ptr) {
  if (ptr == nullptr) return Result::ok();
  const char* p = static_cast<const char*>(ptr);
  FreeOutcome outcome;
  uint64_t size = 0;
  const bool in_region = p >= base_ && p < base_ + region_.capacity();
  if (in_region) {
    std::lock_guard<std::mutex> lock(mu_);
    outcome = region_.free(static_cast<uint64_t>(p - base_), &size);
    if (outcome == FreeOutcome::kOk) cadence_.on_free(region_.top(), resets_);
    if (outcome == FreeOutcome::kOk && poison_) (void)backend_->fill32(ptr, size, kPoisonWord);
  } else {
    outcome = overflow_.free(ptr, &size);
  }
  if (outcome == FreeOutcome::kOk) return Result::ok();
  std::lock_guard<std::mutex> lock(mu_);
  switch (outcome) {
    case FreeOutcome::kStale:
      ++stale_frees_;
      return Result::fail(Status::kStale,
                          fmt::format("free({}): the block was reclaimed by a reset (arena '{}' "
                                      "is in epoch {}); the call was dropped",
                                      ptr, name_, region_.epoch()));
    case FreeOutcome::kDoubleFree:
      ++invalid_frees_;
      return Result::fail(
          Status::kDoubleFree,
          fmt::format("free({}): the block was already freed (arena '{}')", ptr, name_));
    default:
      ++invalid_frees_;
      return Result::fail(
          Status::kNotOwned,
          in_region ? fmt::format("free({}): not the start of a block of arena '{}' (offset {} "
                                  "inside the region)",
                                  ptr, name_, static_cast<uint64_t>(p - base_))
                    : fmt::format("free({}): pointer was not allocated by arena '{}'", ptr, name_));
  }
}

void Arena::reset() {
  uint64_t new_epoch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    region_.reset([this](uint64_t offset, uint64_t bytes) {
      if (poison_) (void)backend_->fill32(base_ + offset, bytes, kPoisonWord);
    });
    ++resets_;
    epoch_allocs_ = 0;
    epoch_max_alloc_ = 0;
    step_max_alloc_ = 0;
    overflowed_this_epoch_ = false;
    cadence_.on_reset(region_.top());
    new_epoch = region_.epoch();
  }
  overflow_.reclaim(new_epoch);
}

void Arena::mark_step_boundary() {
  std::lock_guard<std::mutex> lock(mu_);
  region_.mark_step_boundary();
  overflow_.mark_step_boundary();
  step_max_alloc_ = 0;
  cadence_.on_step_boundary(region_.top());
}

uint64_t Arena::epoch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return region_.epoch();
}

void Arena::stats(zarena_stats* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  stats_locked(out);
}

void Arena::stats_locked(zarena_stats* s) const {
  const OverflowStats o = overflow_.stats();
  std::memset(s, 0, sizeof *s);
  s->struct_size = sizeof(zarena_stats);
  s->capacity_bytes = region_.capacity();
  s->used_bytes = region_.live_bytes();
  s->floor_bytes = region_.floor();
  s->high_water_bytes = region_.high_water();
  s->epoch = region_.epoch();
  s->epoch_allocs = epoch_allocs_;
  s->epoch_max_alloc_bytes = epoch_max_alloc_;
  s->epoch_high_water_bytes = region_.epoch_high_water();
  s->hits = hits_;
  s->misses = misses_;
  s->reuses = reuses_;
  s->resets = resets_;
  s->free_list_len = region_.free_count();
  s->free_list_bytes = region_.free_bytes();
  s->largest_free_block_bytes = region_.largest_free();
  s->live_allocs = region_.live_count() + o.live_count;
  s->stale_frees = stale_frees_;
  s->invalid_frees = invalid_frees_;
  s->overflow_allocs = o.allocs;
  s->overflow_live_bytes = o.live_bytes;
  s->overflow_peak_bytes = o.peak_bytes;
  s->overflow_max_latency_ns = o.max_latency_ns;
  s->overflow_reclaimed = o.reclaimed;
  s->overflow_failures = o.failures;
}

Result Arena::destroy() {
  zarena_stats s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_locked(&s);
  }
  Result r1 = overflow_.release_all();
  Result r2 = backend_->release_region();
  if (log_enabled(ZARENA_LOG_INFO)) {
    log_emit(destroy_record(s, LifetimeFacts{total_allocs_, overflow_epochs_}, name_));
  }
  if (!r1.is_ok()) return r1;
  return r2;
}

FaultInjectingBackend* Arena::fault_injector() {
  return dynamic_cast<FaultInjectingBackend*>(backend_.get());
}

std::string Arena::check_invariants() const {
  std::lock_guard<std::mutex> lock(mu_);
  return region_.check_invariants();
}

}  // namespace zarena_core
