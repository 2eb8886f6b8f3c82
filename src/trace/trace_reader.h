// Reading a zarena trace file (trace_format.h, docs/TRACE.md) into memory, in sequence
// order. Not part of libzarena: the replay tool and the tests link it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trace/trace_format.h"

namespace zarena_trace {

// One record, decoded. Fields a kind does not use are 0.
struct Event {
  uint64_t seq = 0;  // position in the order (0, 1, 2, ...; the file's keys are sorted)
  uint64_t time_ns = 0;
  uint64_t addr = 0;     // alloc, free, pin, unpin: offset or raw pointer (kAddrRaw)
  uint64_t size = 0;     // alloc: request bytes; free: freed bytes
  uint64_t aligned = 0;  // alloc: aligned bytes
  uint64_t epoch = 0;    // alloc: the block's epoch; free: epoch_arg; reset: new epoch
  uint64_t value = 0;    // boundary: top; set floor: offset; capture: 1 on / 0 off
  uint32_t tag = 0;      // alloc: tag id; tag: the id registered
  int32_t status = 0;    // alloc, free, set floor, pin, unpin
  uint16_t thread = 0;   // thread number, or kLaneThread | slot (a slot lane, 2.x)
  Kind kind = Kind::kEnd;
  uint8_t flags = 0;  // kAddrRaw, kFreeEpochChecked, kAddrPlanned
  AllocOutcome outcome = AllocOutcome::kRegionBump;
};

struct TraceInfo {
  std::string source;                           // "zarena trace 1.0", "rmm csv"
  uint16_t format_major = 0, format_minor = 0;  // a zarena trace's (0: another source)
  std::string arena_name;
  uint64_t capacity_bytes = 0;  // 0 = unknown (an RMM log)
  uint64_t alignment = 0;
  int32_t overflow_policy = 0;
  int32_t backend = 0;
  uint32_t config_flags = 0;
  uint32_t trace_flags = 0;
  uint64_t start_unix_ns = 0;
  uint64_t clock_resolution_ns = 0;
  uint64_t region_base = 0;
  uint64_t overflow_limit_bytes = 0;  // the traced cap (UINT64_MAX none; 0 not recorded, 1.0)
  // The traced arena served step plans as its config flags say (format 2.2 on; before, a
  // trace turned plans off whatever the flags said).
  bool plans_traced() const {
    return format_major > 2 || (format_major == 2 && format_minor >= kPlansTracedMinor);
  }
};

// How whole the file was.
struct ReadSummary {
  bool complete = false;         // an end record was found
  bool ended_at_exit = false;    // ... written by the exit flush, not close()
  bool truncated = false;        // the file ends inside a record
  uint64_t unknown_skipped = 0;  // records of kinds this reader does not know
  uint64_t missing = 0;          // events the end record counts but the file lacks
  uint64_t dropped = 0;          // events the writer dropped (end record, format 2.1)
  // The file holds every event the arena made: an end record, nothing cut, missing or
  // dropped. A replay of anything less cannot say the workload fits.
  bool whole() const { return complete && !truncated && missing == 0 && dropped == 0; }
};

struct Trace {
  TraceInfo info;
  std::vector<Event> events;  // sequence order; no end record, tag records included
  std::map<uint32_t, std::string> tags;
  ReadSummary summary;
};

// Parses a whole trace (format 1.x or 2.x) held in memory. Returns false with *error set
// when the bytes are not a readable trace (bad magic, unknown major version, malformed
// header or record, duplicate order keys). A file cut short is not an error
// (summary.truncated).
bool parse_trace(const char* data, size_t size, Trace* out, std::string* error);
// The same, from a file.
bool read_trace_file(const std::string& path, Trace* out, std::string* error);
// True when the file starts with the trace magic.
bool looks_like_trace(const std::string& path);

}  // namespace zarena_trace
