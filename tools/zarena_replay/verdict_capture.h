// What the live diagnostics said during a replay: the engine's "arena.first_overflow"
// (verdict, advice, path) and "arena.reset_cadence" records, caught through the
// process-wide log callback and attributed to the replayed event that caused them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zarena/zarena.h"

namespace zarena_replay {

struct Diagnosis {
  uint64_t event = 0;  // index of the trace event being replayed
  uint64_t epoch = 0;
  std::string verdict;
  std::string advice;
  std::string path;  // the overflow route
  uint64_t requested_bytes = 0;
  uint64_t offset_bytes = 0;
};

// Installs the log callback for its lifetime (records below WARN are not delivered, so
// nothing reaches stderr meanwhile) and restores the default sink afterwards. One at a
// time per process; records arrive on the replaying thread, inside the call.
class VerdictCapture {
 public:
  VerdictCapture();
  ~VerdictCapture();
  VerdictCapture(const VerdictCapture&) = delete;
  VerdictCapture& operator=(const VerdictCapture&) = delete;

  // The event and epoch the next records belong to.
  void set_position(uint64_t event, uint64_t epoch) {
    event_ = event;
    epoch_ = epoch;
  }

  const std::vector<Diagnosis>& first_overflows() const { return first_overflows_; }
  // The "arena.reset_cadence" early warning, when it came.
  bool cadence_warned() const { return cadence_warned_; }
  uint64_t cadence_event() const { return cadence_event_; }
  const std::string& cadence_message() const { return cadence_message_; }

 private:
  static void on_record(void* self, const zarena_log_record* rec);

  uint64_t event_ = 0;
  uint64_t epoch_ = 0;
  std::vector<Diagnosis> first_overflows_;
  bool cadence_warned_ = false;
  uint64_t cadence_event_ = 0;
  std::string cadence_message_;
};

}  // namespace zarena_replay
