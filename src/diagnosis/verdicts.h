// The verdicts: the names zarena gives the likely cause when an arena's region cannot serve a
// request (diagnostics.h has the rules that pick one). This table is the one list of them: a
// Verdict is made from a VerdictId, docs/LOGGING.md's list is generated from it (tools/gen),
// and the test suites' log capture (tests/support.h) fails on a "verdict" field that is not
// a name here. The names are a stable contract (zarena.h: the error carries the verdict).
#pragma once

#include <cstddef>
#include <cstdint>

namespace zarena_core {

// In the order the rules try them (first match wins), then "ok". graph_capture is given
// by the refusal of an allocation during a graph-captured step (graph_capture_verdict),
// never by the rules.
enum class VerdictId : uint8_t {
  kCaptureRefused,
  kGraphCapture,
  kCommitFailed,
  kRunawayBuffer,
  kNeverReset,
  kResetStopped,
  kFragmentation,
  kWorkingSetFull,
  kOk,
};

struct VerdictSpec {
  const char* name;
  const char* meaning;  // when it is given, for docs/LOGGING.md
};

// In VerdictId's order (verdict_name indexes it). diagnostics.h has each rule in full.
inline constexpr VerdictSpec kVerdicts[] = {
    {"capture_refused", "the region was full during a CUDA graph capture: no SYNC overflow"},
    {"graph_capture",
     "an allocation of a graph-captured step was not one its step plan serves (another size or "
     "tag, an extra one, a block still live, another thread): refused, never served from the "
     "dynamic engine or overflow (zarena_graph.h)"},
    {"commit_failed", "an expandable arena could not commit memory: the device is full"},
    {"runaway_buffer", "a request (or the step's largest) takes half the space above the floor"},
    {"never_reset",
     "never reset, and the repeated steps kept live bytes step over step (or, after a step "
     "boundary, blocks of one size piled up, none freed)"},
    {"reset_stopped", "the loop reset after every step, then stopped resetting"},
    {"fragmentation", "enough bytes are free, but no free block is big enough"},
    {"working_set_full",
     "one step needs more than the arena holds (with ZARENA_FLAG_NO_RESETS: what the program "
     "holds at once does)"},
    {"ok", "no overflow, no sign of a missing reset (zarena_diagnose only)"},
};
static_assert(sizeof(kVerdicts) / sizeof(kVerdicts[0]) == static_cast<size_t>(VerdictId::kOk) + 1,
              "a VerdictId has no row in kVerdicts");

constexpr const char* verdict_name(VerdictId id) { return kVerdicts[static_cast<size_t>(id)].name; }

}  // namespace zarena_core
