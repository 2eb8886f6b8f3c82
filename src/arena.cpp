#include "arena.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "diagnostics.h"

namespace zarena_core {

namespace {

constexpr uint8_t kPoisonByte = 0xA5;

int32_t resolve_policy(const zarena_config& c) {
  if (c.overflow_policy != ZARENA_OVERFLOW_DEFAULT) return c.overflow_policy;
  return c.stream != nullptr ? ZARENA_OVERFLOW_ASYNC : ZARENA_OVERFLOW_SYNC;
}

// AUTO takes CUDA when a device is usable; a device that is counted but fails to come
// up (driver mismatch, exclusive mode, out of memory) falls back to host, and the reason
// goes into *fallback for the arena.config record.
std::unique_ptr<Backend> make_backend(const zarena_config& c, int32_t policy,
                                      std::string* fallback) {
  BackendOptions o;
  o.device = c.device;
  o.managed = (c.flags & ZARENA_FLAG_MANAGED) != 0;
  o.stream = c.stream;
  o.overflow_retain_bytes = c.overflow_retain_bytes;
  o.overflow_prewarm = (c.flags & ZARENA_FLAG_OVERFLOW_PREWARM) != 0;
  o.need_async_pool = policy == ZARENA_OVERFLOW_ASYNC;
  switch (c.backend) {
    case ZARENA_BACKEND_HOST:
      return make_host_backend(o);
    case ZARENA_BACKEND_CUDA:
      return make_cuda_backend(o);
    default:
      if (cuda_device_usable(c.device)) {
        try {
          return make_cuda_backend(o);
        } catch (const Error& e) {
          if (e.status != Status::kNoDevice) throw;
          *fallback = e.message;
        }
      }
      return make_host_backend(o);
  }
}

}  // namespace

Result Arena::create(const ResolvedConfig& rc, std::unique_ptr<Arena>* out) {
  const int32_t policy = resolve_policy(rc.cfg);
  std::unique_ptr<Backend> backend;
  void* base = nullptr;
  std::string fallback;
  try {
    backend = make_backend(rc.cfg, policy, &fallback);
    if (policy == ZARENA_OVERFLOW_ASYNC && !backend->supports_async()) {
      return Result::fail(Status::kUnsupported,
                          fmt::format("overflow policy ASYNC needs stream-ordered memory pools, "
                                      "which {} does not support",
                                      backend->describe()));
    }
    base = backend->reserve_region(rc.cfg.capacity_bytes, rc.cfg.alignment);
  } catch (const Error& e) {
    return Result::fail(e.status, e.message);
  }
  try {
    out->reset(new Arena(rc, std::move(backend), base, policy));
  } catch (const std::bad_alloc&) {
    // The Arena never took ownership; give the region back.
    if (backend) backend->release_region(base, rc.cfg.capacity_bytes);
    return Result::fail(Status::kOutOfMemory, "out of host memory creating the arena");
  }
  Arena& a = **out;
  if (log_enabled(ZARENA_LOG_INFO)) {
    LogRecord rec(ZARENA_LOG_INFO, "arena.config", a.name_);
    std::string msg = fmt::format("created on {}: capacity {} bytes, alignment {}, overflow {}",
                                  a.backend_->describe(), rc.cfg.capacity_bytes, rc.cfg.alignment,
                                  policy_name(policy));
    for (const auto& w : rc.warnings) msg += "; " + w;
    if (!fallback.empty()) msg += "; AUTO fell back to host: " + fallback;
    rec.message(std::move(msg));
    rec.add_string("backend_resolved", backend_name(a.backend_->kind()));
    rec.add_string("overflow_policy_resolved", policy_name(policy));
    for (const auto& s : rc.sources) {
      // Keys must outlive the record: they are the static field names of the table.
      rec.add_string(s.field.c_str(), fmt::format("{} ({})", s.value, s.origin));
    }
    log_emit(rec);
  }
  return Result::ok();
}

Arena::Arena(const ResolvedConfig& rc, std::unique_ptr<Backend> backend, void* base,
             int32_t policy)
    : name_(rc.name),
      cfg_(rc.cfg),
      policy_(policy),
      backend_(std::move(backend)),
      base_(static_cast<char*>(base)),
      poison_((rc.cfg.flags & ZARENA_FLAG_POISON) != 0),
      region_(rc.cfg.capacity_bytes, rc.cfg.alignment),
      overflow_(*backend_, policy, rc.cfg.overflow_limit_bytes, rc.cfg.overflow_slow_ns),
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
  std::optional<LogRecord> cadence_warning;
  void* result = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++epoch_allocs_;
    ++total_allocs_;
    if (size > epoch_max_alloc_) epoch_max_alloc_ = size;
    uint64_t offset = 0;
    bool reused = false;
    if (region_.alloc(aligned, &offset, &reused)) {
      ++hits_;
      if (reused) ++reuses_;
      if (cadence_.on_alloc(aligned, region_.top() - region_.floor(), resets_)) {
        cadence_warning.emplace(ZARENA_LOG_WARN, "arena.reset_cadence", name_);
        cadence_warning->message(fmt::format(
            "the same step has started {} times in this epoch without a reset and the epoch "
            "already holds {} of {} bytes; reset the arena after every step "
            "(zarena_reset) or it will overflow (likely verdict: never_reset)",
            cadence_.repeats() + 1, region_.top() - region_.floor(), region_.capacity()));
        cadence_warning->add_uint("step_repeats", cadence_.repeats())
            .add_uint("epoch_bytes", region_.top() - region_.floor())
            .add_uint("capacity_bytes", region_.capacity())
            .add_uint("epoch_allocs", epoch_allocs_)
            .add_uint("resets", resets_)
            .add_string("verdict", "never_reset")
            .add_string("advice", "call zarena_reset after every step");
      }
      result = base_ + offset;
    } else {
      ++misses_;
      cadence_.on_alloc(aligned, region_.top() - region_.floor(), resets_);
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
      f.hits = hits_;
      f.misses = misses_;
      f.reuses = reuses_;
      f.resets = resets_;
      f.free_list_len = region_.free_count();
      f.free_list_bytes = region_.free_bytes();
      f.largest_free_block_bytes = region_.largest_free();
      f.step_repeats = cadence_.repeats();
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
    slow.emplace(ZARENA_LOG_WARN, "overflow.slow", name_);
    slow->message(fmt::format("overflow allocation of {} bytes via {} took {:.3f} ms", aligned,
                              a.path, static_cast<double>(a.latency_ns) / 1e6));
    slow->add_uint("duration_ns", a.latency_ns)
        .add_uint("threshold_ns", cfg_.overflow_slow_ns)
        .add_uint("bytes", aligned)
        .add_string("path", a.path);
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
    if (outcome == FreeOutcome::kOk && poison_) backend_->fill(ptr, size, kPoisonByte);
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
      return Result::fail(Status::kDoubleFree,
                          fmt::format("free({}): the block was already freed (arena '{}')", ptr,
                                      name_));
    default:
      ++invalid_frees_;
      return Result::fail(
          Status::kNotOwned,
          in_region ? fmt::format("free({}): not the start of a block of arena '{}' (offset {} "
                                  "inside the region)",
                                  ptr, name_, static_cast<uint64_t>(p - base_))
                    : fmt::format("free({}): pointer was not allocated by arena '{}'", ptr,
                                  name_));
  }
}

void Arena::reset() {
  uint64_t new_epoch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    region_.reset([this](uint64_t offset, uint64_t bytes) {
      if (poison_) backend_->fill(base_ + offset, bytes, kPoisonByte);
    });
    ++resets_;
    epoch_allocs_ = 0;
    epoch_max_alloc_ = 0;
    overflowed_this_epoch_ = false;
    cadence_.on_reset();
    new_epoch = region_.epoch();
  }
  overflow_.reclaim(new_epoch);
}

void Arena::mark_step_boundary() {
  std::lock_guard<std::mutex> lock(mu_);
  region_.mark_step_boundary();
  overflow_.mark_step_boundary();
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
  Result r2 = backend_->release_region(base_, region_.capacity());
  if (log_enabled(ZARENA_LOG_INFO)) {
    LogRecord rec(ZARENA_LOG_INFO, "arena.destroy", name_);
    rec.message(fmt::format(
        "destroyed after {} allocations in {} epochs: high water {} of {} bytes, {} overflow "
        "allocations (peak {} bytes), {} stale and {} invalid frees, {} live blocks left",
        total_allocs_, s.epoch + 1, s.high_water_bytes, s.capacity_bytes, s.overflow_allocs,
        s.overflow_peak_bytes, s.stale_frees, s.invalid_frees, s.live_allocs));
    rec.add_uint("allocs", total_allocs_)
        .add_uint("resets", s.resets)
        .add_uint("high_water_bytes", s.high_water_bytes)
        .add_uint("capacity_bytes", s.capacity_bytes)
        .add_uint("hits", s.hits)
        .add_uint("misses", s.misses)
        .add_uint("reuses", s.reuses)
        .add_uint("overflow_allocs", s.overflow_allocs)
        .add_uint("overflow_peak_bytes", s.overflow_peak_bytes)
        .add_uint("overflow_epochs", overflow_epochs_)
        .add_uint("stale_frees", s.stale_frees)
        .add_uint("invalid_frees", s.invalid_frees)
        .add_uint("live_allocs", s.live_allocs);
    log_emit(rec);
  }
  if (!r1.is_ok()) return r1;
  return r2;
}

std::string Arena::check_invariants() const {
  std::lock_guard<std::mutex> lock(mu_);
  return region_.check_invariants();
}

}  // namespace zarena_core
