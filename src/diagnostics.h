// Overflow diagnosis: from the arena's counters at the moment it is first exhausted in
// an epoch, name the likely cause (a verdict) and the fix (advice), and build the
// "arena.first_overflow" record with the fields that diagnosed the original failure.
#pragma once

#include <cstdint>
#include <string>

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
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t reuses = 0;
  uint64_t resets = 0;
  uint64_t free_list_len = 0;
  uint64_t free_list_bytes = 0;
  uint64_t largest_free_block_bytes = 0;
  uint64_t step_repeats = 0;  // times the epoch's opening request sequence restarted
};

struct Verdict {
  const char* name;    // never_reset | runaway_buffer | working_set_full | fragmentation |
                       // capture_refused
  std::string advice;  // one sentence naming the fix
};

Verdict diagnose(const ExhaustionFacts& f);
LogRecord first_overflow_record(const ExhaustionFacts& f, const std::string& arena_name);

}  // namespace zarena_core
