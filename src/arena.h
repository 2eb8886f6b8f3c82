// The arena: a Region over memory reserved from a Backend, an OverflowPool behind it,
// counters, poison, capture state, and the diagnostics hooks. The region's slots make
// allocation and free concurrent (region.h, docs/CONCURRENCY.md); whole-arena operations
// take every lock at once. Log records are built and emitted with no lock held.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "backend_faults.h"
#include "cadence.h"
#include "config.h"
#include "log.h"
#include "overflow.h"
#include "region.h"
#include "spin_lock.h"
#include "status.h"
#include "trace.h"
#include "zarena/zarena.h"

namespace zarena_core {

// One live block as the walks report it (region and overflow).
struct LiveBlock {
  void* ptr;
  uint64_t size, epoch;
  uint32_t pins, tag;
  bool persistent, overflow, deferred;
};

class Arena final : private RegionHooks {
 public:
  // Resolves the backend (AUTO), reserves the region, logs "arena.config".
  static Result create(const ResolvedConfig& rc, std::unique_ptr<Arena>* out);
  ~Arena() override;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // size 0: OK, out->ptr NULL. out is written on success only.
  Result alloc(uint64_t size, uint32_t tag, zarena_block* out);
  // want_epoch: kAnyEpoch, or the epoch the block must have been handed out in.
  Result free(void* ptr, uint64_t want_epoch);
  Result pin(void* ptr);
  Result unpin(void* ptr);
  void reset();
  void mark_step_boundary();
  Result set_floor(uint64_t offset);
  uint64_t epoch() const { return region_.epoch(); }
  // Fills the full current stats layout from one consistent snapshot.
  void stats(zarena_stats* out);
  // Restarts the epoch-independent peaks (high water, used and overflow peaks) from now.
  void reset_peak_stats();
  void region_info(zarena_region* out);
  bool contains(const void* p) const {
    return static_cast<const char*>(p) >= base_ && static_cast<const char*>(p) < base_ + capacity_;
  }
  void set_capture_active(bool active);
  // The engine marks the start of a step (counted; diagnostics use it).
  void step_begin();
  Result set_stream(void* stream);
  void set_poison(bool enabled, uint32_t word);
  // Live blocks (region and overflow) from one snapshot, in address order for the region;
  // *epoch (may be null): the epoch at that instant.
  void live_blocks(std::vector<LiveBlock>* out, uint64_t* epoch = nullptr);
  // Releases region and overflow blocks and logs "arena.destroy".
  Result destroy();

  int32_t backend_kind() const { return backend_->kind(); }
  Backend& backend() { return *backend_; }
  // The fault injector wrapping a host backend (nullptr for CUDA).
  FaultInjectingBackend* fault_injector();
  const std::string& name() const { return name_; }
  const void* region_base() const { return base_; }
  // For tests: the region's layout invariants ("" when sound).
  std::string check_invariants();

 private:
  Arena(const ResolvedConfig& rc, std::unique_ptr<Backend> backend, const RegionInfo& region,
        int32_t policy);
  Result overflow_alloc(uint64_t size, uint64_t aligned, uint32_t tag, zarena_block* out);
  Result free_error(FreeOutcome o, void* ptr, bool in_region, uint64_t epoch);
  static Status status_of(FreeOutcome o, uint64_t want_epoch, uint64_t epoch);
  Result pin_error(PinOutcome o, void* ptr, const char* what);
  void give_back(std::vector<OverflowBlock>& blocks);
  bool capturing();  // the engine's flag, else the backend's answer
  void after_op();   // emits records queued under locks (poison skipped, commit failed)
  void feed_cadence_alloc(uint64_t aligned, uint64_t end);
  void fill_snapshot(zarena_stats* s, const RegionSnapshot& r, const OverflowStats& o) const;
  void first_overflow(const OverflowAttempt& a, uint64_t size, uint64_t aligned, uint64_t epoch);

  // RegionHooks (called with region locks held: no logging, no waiting).
  Fill fill_policy() noexcept override;
  void fill(uint64_t offset, uint64_t bytes) noexcept override;
  bool ensure_committed(uint64_t end) noexcept override;
  static Result fill_overflow(void* ctx, void* ptr, uint64_t bytes);
  void trim_w();

  const std::string name_;
  const zarena_config cfg_;
  const int32_t policy_;
  std::unique_ptr<Backend> backend_;
  char* const base_;
  const uint64_t capacity_;
  const uint64_t granule_;
  const bool managed_;
  const bool expandable_;

  Region region_;
  OverflowPool overflow_;

  std::atomic<bool> capture_flag_{false};
  std::atomic<bool> poison_on_;
  std::atomic<uint32_t> poison_word_;
  std::atomic<bool> poison_skip_note_{false};  // a fill was skipped: warn once per capture
  std::atomic<bool> poison_skip_warned_{false};  // once per capture (the flag's clearing re-arms)

  // Expandable regions (guarded by the region's central lock: ensure_committed runs there).
  const uint64_t commit_granularity_;
  const uint64_t commit_chunk_;
  uint64_t committed_ = 0;
  std::vector<std::pair<uint64_t, uint64_t>> commits_;  // the ranges commit() mapped
  std::atomic<uint64_t> commit_events_{0}, trim_events_{0}, commit_failures_{0};
  std::atomic<uint64_t> committed_bytes_{0};
  std::string commit_failure_;  // the last failure's message, logged after the op
  std::atomic<bool> commit_failure_note_{false};

  // Counters that belong to no slot.
  std::atomic<uint64_t> resets_{0};
  std::atomic<uint64_t> overflow_epochs_{0};
  std::atomic<uint64_t> first_overflow_epoch_{~0ull};

  // Tracing (ZARENA_TRACE_FILE / cfg.trace_file): null when off, so each hook costs one
  // predictable branch.
  std::unique_ptr<zarena_trace::Tracer> tracer_;
  zarena_trace::Tracer* trace_ = nullptr;
  std::atomic<uint64_t> steps_{0}, epoch_steps_{0};

  // Reset-cadence detection (only before the first reset, under its own lock).
  std::atomic<bool> cadence_armed_{true};
  SpinLock cadence_mu_;
  CadenceDetector cadence_;
  uint64_t cadence_top_ = 0;  // highest block end seen: the detector's view of the top
};

}  // namespace zarena_core
