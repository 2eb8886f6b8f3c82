// What zarena-replay found, as a text report for people (stdout) and as JSON for
// programs (--json).
#pragma once

#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <ostream>
#include <string>

#include "replay.h"
#include "sizing.h"
#include "steps.h"

namespace zarena_replay {

// Exit statuses (documented in --help and docs/TRACE.md).
inline constexpr int kExitFits = 0;
inline constexpr int kExitOverflows = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitInternal = 3;
// No overflow at the replayed capacity, but the zarena trace is not whole (cut short,
// events missing or dropped): what it lacks may not fit.
inline constexpr int kExitIncomplete = 4;

struct Report {
  std::string input;
  const zarena_trace::Trace* trace = nullptr;
  ReplayConfig config;         // the main replay's
  bool capacity_known = true;  // false: an RMM log and no --capacity
  ReplayResult main;
  bool sized = false;
  SizingResult sizing;
  // "What if it reset every step": run when the trace has no reset and steps were found.
  StepPlan plan;
  bool what_if_ran = false;
  std::string what_if_skipped;  // why it did not run
  ReplayResult what_if;
  SizingResult what_if_sizing;

  // A zarena trace that does not hold every event the arena made (an RMM log has no end
  // record to tell).
  bool incomplete() const;
  // The first "arena.first_overflow" verdict of the main replay, else "fits", or
  // "incomplete_trace" when the trace is incomplete.
  std::string verdict() const;
  int exit_code() const;
};

// The sizing answer as a line to paste: the smallest capacity without overflow plus
// kHeadroomPercent, rounded up to whole MiB (below 1 GiB) or hundredths of a GiB:
// "ZARENA_CAPACITY_BYTES=1.75GiB"; and the bytes that setting means.
inline constexpr uint64_t kHeadroomPercent = 10;
std::string suggested_setting(uint64_t needed);
uint64_t suggested_capacity(uint64_t needed);

void print_text(std::ostream& out, const Report& r, size_t max_epochs);
nlohmann::json report_json(const Report& r);

}  // namespace zarena_replay
