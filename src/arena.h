// The arena: a Region over memory reserved from a Backend, an OverflowPool behind it,
// counters, and the diagnostics hooks. One mutex guards the region and counters; the
// overflow pool has its own. Log records are built under the lock and emitted after it
// is released.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "backend.h"
#include "backend_faults.h"
#include "cadence.h"
#include "config.h"
#include "log.h"
#include "overflow.h"
#include "region.h"
#include "status.h"

namespace zarena_core {

class Arena {
 public:
  // Resolves the backend (AUTO), reserves the region, logs "arena.config".
  static Result create(const ResolvedConfig& rc, std::unique_ptr<Arena>* out);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  Result alloc(uint64_t size, void** out);
  Result free(void* ptr);
  void reset();
  void mark_step_boundary();
  uint64_t epoch() const;
  // Fills the full current stats layout.
  void stats(zarena_stats* out) const;
  // Releases region and overflow blocks and logs "arena.destroy".
  Result destroy();

  int32_t backend_kind() const { return backend_->kind(); }
  Backend& backend() { return *backend_; }
  // The fault injector around a host backend (nullptr for CUDA arenas).
  FaultInjectingBackend* fault_injector();
  const std::string& name() const { return name_; }
  // For tests: the region's layout invariants ("" when sound).
  std::string check_invariants() const;

 private:
  Arena(const ResolvedConfig& rc, std::unique_ptr<Backend> backend, void* base, int32_t policy);
  Result overflow_alloc(uint64_t size, uint64_t aligned, void** out);
  void stats_locked(zarena_stats* out) const;

  const std::string name_;
  const zarena_config cfg_;
  std::unique_ptr<Backend> backend_;
  char* const base_;
  bool poison_;

  mutable std::mutex mu_;
  Region region_;
  OverflowPool overflow_;
  CadenceDetector cadence_;
  uint64_t hits_ = 0, misses_ = 0, reuses_ = 0, resets_ = 0;
  uint64_t epoch_allocs_ = 0, epoch_max_alloc_ = 0;
  uint64_t step_max_alloc_ = 0;  // since the last reset or step boundary (diagnosis)
  uint64_t stale_frees_ = 0, invalid_frees_ = 0;
  uint64_t total_allocs_ = 0;
  bool overflowed_this_epoch_ = false;
  uint64_t overflow_epochs_ = 0;  // epochs in which the region was exhausted
};

}  // namespace zarena_core
