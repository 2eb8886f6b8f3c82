// Process-wide structured logging: records go to the registered callback, or to stderr
// (spdlog) when none is registered, or to both with ZARENA_LOG_STDERR=1.
// log_emit() must be called with no engine lock held: the callback may call back into
// zarena_get_stats.
//
// Thresholds: the callback has its own (the min_level it was registered with); the
// stderr sink has the ZARENA_LOG_LEVEL one (default info), replaced by the min_level of
// zarena_set_log_callback(NULL, ...). They are separate so that ZARENA_LOG_STDERR=1 still
// shows warnings when the host registered a Nop logger with min_level OFF.
//
// Formats: on stderr a record is one human line by default, "<time> zarena <level>
// <event> [<arena>]: <sentence> | key=value ...", at most kHumanLineMax characters: the
// whole sentence (human(), else the message) and the fields the record builder marked
// headline() that fit after it. With ZARENA_LOG_FORMAT=json it is one JSON
// object per line with every field, typed (log_format_json). Callbacks always get the full
// message and every field.
//
// Events: a record is built from its event's entry in the catalogue (log_events.h), which
// gives its name, level and rate limiting, and documents its fields.
//
// Rate limiting: a record whose event is rate_limited is subject to a token bucket per event
// name (process-wide: a burst of kRateBurst, then one every kRateIntervalNs). A dropped
// record is counted; the next one of that event that passes carries a "suppressed" field
// with the count. The other events (arena.config, arena.first_overflow, arena.destroy, ...)
// are never dropped by the limiter.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "log/log_events.h"
#include "zarena/zarena.h"

namespace zarena_core {

inline constexpr uint64_t kRateBurst = 5;
inline constexpr uint64_t kRateIntervalNs = 10'000'000'000ull;  // one token per 10 s
// A human stderr line, timestamp and level included, is at most this long: a line that
// wraps three times on a terminal is skimmed, and the diagnosis in it is missed.
inline constexpr size_t kHumanLineMax = 200;
// "2025-01-31T12:34:56.789 zarena error ": the sink's prefix at its longest (the level as
// ZARENA_LOG_LEVEL names it: trace, debug, info, warn, error).
inline constexpr size_t kHumanPrefixMax = 37;
// The arena label on the human line is cut to this (callbacks get it whole).
inline constexpr size_t kHumanArenaNameMax = 24;

// What a record is about: an arena (its name, its process-unique id, its C handle, which
// records carry as an identity only) or, with the defaults, the process. Implicit from a
// string literal (a name alone: tests, and records of no particular arena).
struct LogSource {
  std::string name;
  uint64_t id = 0;                 // zarena_arena_id; 0 for process-wide records
  const zarena* handle = nullptr;  // never called through by the library's sinks
  LogSource() = default;
  LogSource(const char* n) : name(n) {}  // NOLINT(google-explicit-constructor)
  LogSource(std::string n, uint64_t i, const zarena* h) : name(std::move(n)), id(i), handle(h) {}
};

// A record under construction; owns its strings until emitted.
class LogRecord {
 public:
  LogRecord(const LogEvent& event, LogSource source);

  LogRecord& message(std::string m);
  LogRecord& add_int(std::string key, int64_t v);
  LogRecord& add_uint(std::string key, uint64_t v);
  LogRecord& add_double(std::string key, double v);
  LogRecord& add_string(std::string key, std::string v);
  LogRecord& add_bool(std::string key, bool v);
  // The sentence of the human stderr line when the message is too long to lead it (e.g.
  // the verdict and its fix without the facts behind them); callbacks get the message.
  LogRecord& human(std::string sentence);
  // Marks the fields (by key, already added) that the human line shows after the sentence,
  // in the order given (the first ones stay when the line runs out of room): the few
  // numbers a person needs; callbacks and JSON get every field regardless.
  LogRecord& headline(std::initializer_list<const char*> keys);
  // On stderr, write the sentence without any key=value field, headline ones included.
  LogRecord& stderr_message_only(bool on = true);

  const LogEvent& spec() const { return *event_; }
  int32_t level() const { return event_->level; }
  const char* event() const { return event_->name; }
  const std::string& text() const { return message_; }
  // The human line's sentence: human() when set, else the message.
  const std::string& human_text() const { return human_.empty() ? message_ : human_; }
  const std::string& arena_name() const { return source_.name; }
  const LogSource& source() const { return source_; }
  bool is_rate_limited() const { return event_->rate_limited; }
  bool is_stderr_message_only() const { return stderr_message_only_; }

  struct Field {
    std::string key;
    int32_t kind;
    int64_t i = 0;
    double f = 0;
    std::string s;
    bool headline = false;  // shown on the human line
    int headline_rank = 0;  // its place there (headline()'s order)
  };
  const std::vector<Field>& fields() const { return fields_; }

 private:
  const LogEvent* event_;
  std::string message_;
  std::string human_;
  LogSource source_;
  std::vector<Field> fields_;
  bool stderr_message_only_ = false;
};

// True when a record of this level would reach any sink (cheap; check before building).
bool log_enabled(int32_t level) noexcept;
// Delivers the record to the sinks (after the rate limiter, for marked records). Never
// throws; holds no lock while a sink runs.
void log_emit(const LogRecord& rec) noexcept;
// Registers the callback (NULL = default stderr sink) and its threshold (see top).
void log_set_callback(zarena_log_fn fn, void* user_data, int32_t min_level) noexcept;
// The human line without the sink's prefix: "event [arena]: sentence | key=value ..." with
// the whole sentence and the headline fields that fit in kHumanLineMax - kHumanPrefixMax
// characters (the builders keep their sentences within that), no newline. json_hint
// appends " (every field: ZARENA_LOG_FORMAT=json)": the stderr sink does that once per
// process, on the first line that leaves fields out.
std::string log_format_line(const LogRecord& rec, bool json_hint = false);
// True when the human line leaves some of the record's fields out.
bool log_line_omits_fields(const LogRecord& rec);
// One JSON object (no newline): time (ISO 8601, UTC, ms; from unix_ms), level, event,
// arena, arena_id (for a record of an arena), message, and "fields" with every field as its JSON
// type (UINT as unsigned).
std::string log_format_json(const LogRecord& rec, int64_t unix_ms);
// Parses a ZARENA_LOG_FORMAT value: "text" (false) or "json" (true), any case.
bool log_parse_format(const char* text, bool* json) noexcept;
// Parses a ZARENA_LOG_LEVEL value; false when it is not a level name.
bool log_parse_level(const char* text, int32_t* level) noexcept;
// A level's name as ZARENA_LOG_LEVEL, the stderr lines and the JSON records spell it
// ("warn"); "?" for a value that is no level.
const char* log_level_name(int32_t level) noexcept;

// Records dropped by the limiter and not yet reported, over all events.
uint64_t log_pending_suppressed() noexcept;

// For tests: replaces the limiter's clock (nullptr = steady_clock) and clears its state;
// overrides the stderr threshold and mirror flag that the environment set at start-up.
void log_set_clock_for_testing(uint64_t (*now_ns)()) noexcept;
void log_set_stderr_for_testing(int32_t level, bool mirror) noexcept;
void log_set_stderr_format_for_testing(bool json) noexcept;

}  // namespace zarena_core
