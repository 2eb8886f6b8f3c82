// Diagnosis and the records that carry it: from the arena's counters at the moment it is
// first exhausted in an epoch, name the likely cause (a verdict) and the fix (advice), and
// build the "arena.first_overflow" record with the fields that diagnosed the original
// failure; likewise the "arena.reset_cadence" early warning, and the "arena.config" /
// "arena.destroy" records. Pure functions of their inputs: the arena gathers the facts
// under its lock and emits the records after releasing it.
#pragma once

#include <cstdint>
#include <string>

#include "config.h"
#include "log.h"

namespace zarena_core {

struct ExhaustionFacts {
  const char* path = "";  // overflow route taken: async|sync|capture_refused|refused|limit
  uint64_t requested_bytes = 0;
  uint64_t aligned_bytes = 0;
  uint64_t capacity_bytes = 0;
  uint64_t offset_bytes = 0;  // the top when the region gave up
  uint64_t floor_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t epoch = 0;
  uint64_t epoch_allocs = 0;
  uint64_t epoch_max_alloc_bytes = 0;
  uint64_t step_max_alloc_bytes = 0;  // largest request since the last reset or boundary
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t reuses = 0;
  uint64_t resets = 0;
  uint64_t free_list_len = 0;
  uint64_t free_list_bytes = 0;
  uint64_t largest_free_block_bytes = 0;
  uint64_t step_repeats = 0;  // times the epoch's opening request sequence restarted
  // Expandable arenas: memory committed when the region gave up, and whether it gave up
  // because committing more failed (the device, not the arena, is full).
  uint64_t committed_bytes = 0;
  bool commit_failed = false;
  std::string commit_error;  // the backend's reason when commit_failed
};

struct Verdict {
  const char* name;    // never_reset | runaway_buffer | working_set_full | fragmentation |
                       // capture_refused | commit_failed
  std::string cause;   // what the counters show
  std::string advice;  // one sentence naming the fix
};

// Rules, first match wins:
//   capture_refused   the overflow route was refused because the stream was being captured;
//   commit_failed     an expandable arena could not commit memory for the request: the
//                     device is out of physical memory, the arena is not full;
//   runaway_buffer    the request can never fit above the floor, even right after a reset;
//   never_reset       no reset ever happened and the epoch's opening sequence restarted;
//   runaway_buffer    the request, or the step's largest, is >= half the space above the
//                     floor (weights below the floor do not count: they are big on purpose);
//   fragmentation     the free index holds >= the request and >= 1/8 of that space, but
//                     no block fits;
//   working_set_full  otherwise: one step needs more than the arena.
Verdict diagnose(const ExhaustionFacts& f);
LogRecord first_overflow_record(const ExhaustionFacts& f, const std::string& arena_name);

struct CadenceFacts {
  uint64_t step_repeats = 0;  // restarts of the opening sequence (steps = repeats + 1)
  uint64_t step_allocs = 0;   // requests per step
  uint64_t step_bytes = 0;    // top growth per step
  uint64_t grown_bytes = 0;   // added since the steps began
  uint64_t offset_bytes = 0;  // the top now
  uint64_t capacity_bytes = 0;
  uint64_t epoch_allocs = 0;
  uint64_t resets = 0;
};
LogRecord reset_cadence_record(const CadenceFacts& f, const std::string& arena_name);

// An overflow backend call slower than the watchdog threshold (rate-limited).
LogRecord overflow_slow_record(uint64_t duration_ns, uint64_t threshold_ns, uint64_t bytes,
                               const char* path, const std::string& arena_name);

// backend_desc: the backend's own description; backend_kind/policy: resolved values;
// fallback: why AUTO fell back to host although a device was counted ("" if it did not);
// memory_free/total: the backend's memory after the region was reserved (0 = unknown), so
// the first line already says how much room a larger arena would have.
LogRecord config_record(const ResolvedConfig& rc, const std::string& backend_desc,
                        int32_t backend_kind, int32_t policy, const std::string& fallback = "",
                        uint64_t memory_free = 0, uint64_t memory_total = 0);

// A problem in the environment found at create (warn, rate-limited like other repeatable
// warnings): "config.invalid_value" with variable, value, reason and example (a valid
// value), or "config.unknown_variable" with variable, value and closest (a known name).
LogRecord config_problem_record(const ConfigProblem& p, const std::string& arena_name);

struct LifetimeFacts {
  uint64_t total_allocs = 0;
  uint64_t overflow_epochs = 0;  // epochs in which the region was exhausted
};
LogRecord destroy_record(const zarena_stats& s, const LifetimeFacts& f,
                         const std::string& arena_name);

// "1.5 MiB": byte counts for people.
std::string human_bytes(uint64_t bytes);

}  // namespace zarena_core
