// Helpers the trace suites share (test_trace_format, test_trace_replay, test_trace_engine):
// a per-process trace file name, reading a trace, and replaying it at the traced settings.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "replay.h"
#include "trace/trace_reader.h"

namespace zarena_test {

// A trace file of this process under the test temp folder: <prefix><stem>_<pid>.zat.
inline std::string trace_temp_path(const std::string& prefix, const std::string& stem) {
  return ::testing::TempDir() + prefix + stem + "_" + std::to_string(getpid()) + ".zat";
}

inline zarena_trace::Trace read_or_die(const std::string& path) {
  zarena_trace::Trace t;
  std::string err;
  EXPECT_TRUE(zarena_trace::read_trace_file(path, &t, &err)) << err;
  return t;
}

// The replay settings of the traced arena itself (what an exact round trip replays at).
inline zarena_replay::ReplayConfig config_of(const zarena_trace::Trace& t) {
  zarena_replay::ReplayConfig c;
  c.name = t.info.arena_name;
  c.capacity_bytes = t.info.capacity_bytes;
  c.alignment = t.info.alignment;
  c.overflow_policy = t.info.overflow_policy;
  c.overflow_limit_bytes = zarena_replay::limit_for(t.info);
  return c;
}

inline zarena_replay::ReplayResult replay_or_die(const zarena_trace::Trace& t,
                                                 const zarena_replay::ReplayConfig& c) {
  zarena_replay::ReplayResult r;
  std::string err;
  EXPECT_TRUE(zarena_replay::replay(t, c, &r, &err)) << err;
  return r;
}

}  // namespace zarena_test
