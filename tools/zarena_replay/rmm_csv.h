// RMM's memory event log (rmm::mr::logging_resource_adaptor), read as a trace: the CSV
// "Thread,Time,Action,Pointer,Size,Stream" with Action allocate / free (also
// "deallocate", and "allocate failure" as a refused request). RMM logs carry no arena
// configuration, resets or steps: capacity is unknown (0) and the alignment is 256.
#pragma once

#include <istream>
#include <string>

#include "trace/trace_reader.h"

namespace zarena_replay {

// Parses the log; on a malformed line returns false with *error "source:line: reason".
bool parse_rmm_csv(std::istream& in, const std::string& source, zarena_trace::Trace* out,
                   std::string* error);
// Reads and parses a file.
bool read_rmm_csv_file(const std::string& path, zarena_trace::Trace* out, std::string* error);

}  // namespace zarena_replay
