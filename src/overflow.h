// The overflow pool behind the arena: when the region cannot serve a request, the
// policy decides whether and how the backend provides a separate block. Blocks are
// tracked so zarena_free routes them back, a reset reclaims the epoch's live ones, and a
// step boundary makes the live ones persistent (like region blocks below the floor).
// Backend calls are made without the pool's lock held.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend.h"
#include "region.h"
#include "status.h"
#include "zarena/zarena.h"

namespace zarena_core {

struct OverflowAttempt {
  Result result;  // kOk, kOutOfMemory, kCaptureUnsafe, kBackend
  void* ptr = nullptr;
  const char* path = "";    // async | sync | capture_refused | refused | limit
  uint64_t latency_ns = 0;  // time spent in the backend call (0 if none was made)
  bool slow = false;        // latency above the watchdog threshold
};

struct OverflowStats {
  uint64_t allocs = 0;
  uint64_t live_count = 0;
  uint64_t live_bytes = 0;
  uint64_t peak_bytes = 0;
  uint64_t max_latency_ns = 0;
  uint64_t reclaimed = 0;
  uint64_t failures = 0;
};

class OverflowPool {
 public:
  // policy: ZARENA_OVERFLOW_* already resolved from DEFAULT; blocks are aligned to
  // `alignment` (the arena's).
  OverflowPool(Backend& backend, int32_t policy, uint64_t alignment, uint64_t limit_bytes,
               uint64_t slow_ns);
  OverflowPool(const OverflowPool&) = delete;
  OverflowPool& operator=(const OverflowPool&) = delete;

  OverflowAttempt alloc(uint64_t size, uint64_t epoch);
  // kNotOwned when ptr is not an overflow block this pool knows.
  FreeOutcome free(void* ptr, uint64_t* size);
  // Frees every live non-persistent block (returns how many); remembers them as stale.
  uint64_t reclaim(uint64_t new_epoch);
  void mark_step_boundary();
  // Frees everything (destroy). Returns the first backend error, if any.
  Result release_all();

  OverflowStats stats() const;

 private:
  enum class State : uint8_t { kLive, kFreed, kReclaimed };
  struct Entry {
    uint64_t size;
    uint64_t epoch;
    State state;
    bool persistent;
    OverflowBlock block;  // what the backend needs to give it back
  };

  Backend& backend_;
  const int32_t policy_;
  const uint64_t alignment_;
  const uint64_t limit_bytes_;
  const uint64_t slow_ns_;
  mutable std::mutex mu_;
  std::unordered_map<void*, Entry> blocks_;
  uint64_t reserved_bytes_ = 0;  // live bytes + bytes of allocations in flight
  OverflowStats stats_;
};

}  // namespace zarena_core
