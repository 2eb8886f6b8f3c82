// Process-wide structured logging: records go to the registered callback, or to stderr
// (spdlog) when none is registered, or to both with ZARENA_LOG_STDERR=1.
// emit() must be called with no engine lock held: the callback may call back into
// zarena_get_stats.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zarena/zarena.h"

namespace zarena_core {

// A record under construction; owns its strings until emitted.
class LogRecord {
 public:
  LogRecord(int32_t level, std::string event, std::string arena_name);

  LogRecord& message(std::string m);
  LogRecord& add_int(const char* key, int64_t v);
  LogRecord& add_uint(const char* key, uint64_t v);
  LogRecord& add_double(const char* key, double v);
  LogRecord& add_string(const char* key, std::string v);
  LogRecord& add_bool(const char* key, bool v);

  int32_t level() const { return level_; }
  const std::string& event() const { return event_; }
  const std::string& text() const { return message_; }
  const std::string& arena_name() const { return arena_name_; }

  struct Field {
    const char* key;  // static strings only
    int32_t kind;
    int64_t i = 0;
    double f = 0;
    std::string s;
  };
  const std::vector<Field>& fields() const { return fields_; }

 private:
  int32_t level_;
  std::string event_;
  std::string message_;
  std::string arena_name_;
  std::vector<Field> fields_;
};

// True when a record of this level would reach any sink (cheap; check before building).
bool log_enabled(int32_t level) noexcept;
// Delivers the record to the sinks. Never throws; never holds a lock during delivery.
void log_emit(const LogRecord& rec) noexcept;
// Registers the callback (NULL = default stderr sink) and threshold.
void log_set_callback(zarena_log_fn fn, void* user_data, int32_t min_level) noexcept;
// Renders the record as one line: "event: message key=value ...".
std::string log_format_line(const LogRecord& rec);
const char* log_level_name(int32_t level) noexcept;

}  // namespace zarena_core
