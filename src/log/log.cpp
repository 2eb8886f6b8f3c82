#include "log/log.h"

#include <fmt/format.h>
#include <pthread.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <strings.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "base/env_bool.h"

namespace zarena_core {

namespace {

const char* const kLevelNames[] = {"trace", "debug", "info", "warn", "error", "off"};

int32_t level_from_env() {
  int32_t level = ZARENA_LOG_INFO;
  log_parse_level(std::getenv("ZARENA_LOG_LEVEL"), &level);
  return level;
}

bool mirror_from_env() {
  bool on = false;
  return parse_env_bool(std::getenv("ZARENA_LOG_STDERR"), &on) && on;
}

// An invalid value keeps the text format; the config check reports it at create.
bool json_from_env() {
  bool json = false;
  log_parse_format(std::getenv("ZARENA_LOG_FORMAT"), &json);
  return json;
}

int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

uint64_t steady_now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// One token bucket per rate-limited event name. There are only a handful of such events,
// so a small fixed table searched linearly is enough and never allocates.
struct Bucket {
  char event[48] = {};
  double tokens = 0;
  uint64_t last_ns = 0;
  uint64_t suppressed = 0;
};
constexpr int kMaxBuckets = 16;

struct Sink {
  std::mutex mu;  // guards fn/user_data and the buckets; never held while a sink runs
  zarena_log_fn fn = nullptr;
  void* user_data = nullptr;
  std::atomic<bool> has_callback{false};
  std::atomic<int32_t> callback_level{ZARENA_LOG_OFF};
  std::atomic<int32_t> stderr_level{level_from_env()};
  std::atomic<bool> mirror_stderr{mirror_from_env()};
  std::atomic<bool> stderr_json{json_from_env()};
  std::atomic<bool> json_hinted{false};  // the ZARENA_LOG_FORMAT=json hint was written
  uint64_t (*now_ns)() = steady_now_ns;
  Bucket buckets[kMaxBuckets];
  int bucket_count = 0;
};

void lock_for_fork();
void unlock_in_parent();
void renew_in_child();

Sink& sink() {
  static Sink* s = [] {  // never destroyed: records may be emitted at exit
    auto* fresh = new Sink();
    pthread_atfork(lock_for_fork, unlock_in_parent, renew_in_child);
    return fresh;
  }();
  return *s;
}

// A stderr logger that writes every line at once (never destroyed: records may be emitted
// at exit).
spdlog::logger* new_stderr_logger(const char* name, const char* pattern) {
  auto l = new spdlog::logger(name, std::make_shared<spdlog::sinks::stderr_sink_mt>());
  l->set_pattern(pattern);
  l->set_level(spdlog::level::trace);
  l->flush_on(spdlog::level::trace);
  return l;
}

// Around fork(): the sink's lock (a leaf: nothing is taken under it) is held, so the child
// finds the callback and the rate buckets whole and the lock free.
void lock_for_fork() { sink().mu.lock(); }
void unlock_in_parent() { sink().mu.unlock(); }
void renew_in_child() { new (&sink().mu) std::mutex(); }

spdlog::logger& stderr_logger() {
  // The level is written by deliver(), as ZARENA_LOG_LEVEL and the JSON lines name it
  // ("warn"; spdlog's %l says "warning").
  static spdlog::logger* logger = new_stderr_logger("zarena", "%Y-%m-%dT%H:%M:%S.%e zarena %v");
  return *logger;
}

// JSON lines carry their own time and level: the sink writes them as they are.
spdlog::logger& json_logger() {
  static spdlog::logger* logger = new_stderr_logger("zarena-json", "%v");
  return *logger;
}

spdlog::level::level_enum to_spdlog(int32_t level) {
  switch (level) {
    case ZARENA_LOG_TRACE:
      return spdlog::level::trace;
    case ZARENA_LOG_DEBUG:
      return spdlog::level::debug;
    case ZARENA_LOG_INFO:
      return spdlog::level::info;
    case ZARENA_LOG_WARN:
      return spdlog::level::warn;
    default:
      return spdlog::level::err;
  }
}

// Takes a token for the event under s.mu. Returns false when the record must be dropped;
// otherwise *suppressed gets the drops to report with it (and the count restarts).
bool take_token(Sink& s, const char* event, uint64_t* suppressed) {
  const uint64_t now = s.now_ns();
  Bucket* b = nullptr;
  for (int i = 0; i < s.bucket_count; ++i) {
    if (std::strcmp(event, s.buckets[i].event) == 0) b = &s.buckets[i];
  }
  if (b == nullptr) {
    // An unknown event beyond the table's size, or a name too long for it, is not
    // limited rather than limited together with others.
    const size_t len = std::strlen(event);
    if (s.bucket_count == kMaxBuckets || len >= sizeof(Bucket::event)) return true;
    b = &s.buckets[s.bucket_count++];
    *b = Bucket{};
    std::memcpy(b->event, event, len + 1);
    b->tokens = static_cast<double>(kRateBurst);
    b->last_ns = now;
  }
  if (now > b->last_ns) {
    b->tokens += static_cast<double>(now - b->last_ns) / static_cast<double>(kRateIntervalNs);
    if (b->tokens > static_cast<double>(kRateBurst)) b->tokens = static_cast<double>(kRateBurst);
  }
  b->last_ns = now;
  if (b->tokens < 1.0) {
    ++b->suppressed;
    return false;
  }
  b->tokens -= 1.0;
  *suppressed = b->suppressed;
  b->suppressed = 0;
  return true;
}

void deliver(const LogRecord& rec, zarena_log_fn fn, void* ud, bool to_stderr) {
  if (to_stderr) {
    if (sink().stderr_json.load(std::memory_order_relaxed)) {
      json_logger().log(to_spdlog(rec.level()), "{}", log_format_json(rec, unix_now_ms()));
    } else {
      // Once per process, the first line that leaves fields out says how to get them all.
      const bool hint = log_line_omits_fields(rec) &&
                        !sink().json_hinted.exchange(true, std::memory_order_relaxed);
      stderr_logger().log(to_spdlog(rec.level()), "{} {}", log_level_name(rec.level()),
                          log_format_line(rec, hint));
    }
  }
  if (fn == nullptr) return;
  std::vector<zarena_log_field> fields;
  fields.reserve(rec.fields().size());
  for (const auto& f : rec.fields()) {
    fields.push_back(
        {f.key.c_str(), f.kind, f.i, f.f, f.kind == ZARENA_FIELD_STRING ? f.s.c_str() : ""});
  }
  zarena_log_record out;
  std::memset(&out, 0, sizeof out);
  out.struct_size = sizeof(zarena_log_record);
  out.level = rec.level();
  out.event = rec.event();
  out.message = rec.text().c_str();
  out.arena_name = rec.arena_name().c_str();
  out.fields = fields.data();
  out.field_count = static_cast<uint32_t>(fields.size());
  out.arena = rec.source().handle;
  out.arena_id = rec.source().id;
  fn(ud, &out);
}

}  // namespace

LogRecord::LogRecord(const LogEvent& event, LogSource source)
    : event_(&event), source_(std::move(source)) {}

LogRecord& LogRecord::message(std::string m) {
  message_ = std::move(m);
  return *this;
}
LogRecord& LogRecord::add_int(std::string key, int64_t v) {
  fields_.push_back({std::move(key), ZARENA_FIELD_INT, v, 0, {}});
  return *this;
}
LogRecord& LogRecord::add_uint(std::string key, uint64_t v) {
  fields_.push_back({std::move(key), ZARENA_FIELD_UINT, static_cast<int64_t>(v), 0, {}});
  return *this;
}
LogRecord& LogRecord::add_double(std::string key, double v) {
  fields_.push_back({std::move(key), ZARENA_FIELD_DOUBLE, 0, v, {}});
  return *this;
}
LogRecord& LogRecord::add_string(std::string key, std::string v) {
  fields_.push_back({std::move(key), ZARENA_FIELD_STRING, 0, 0, std::move(v)});
  return *this;
}
LogRecord& LogRecord::add_bool(std::string key, bool v) {
  fields_.push_back({std::move(key), ZARENA_FIELD_BOOL, v ? 1 : 0, 0, {}});
  return *this;
}
LogRecord& LogRecord::human(std::string sentence) {
  human_ = std::move(sentence);
  return *this;
}
LogRecord& LogRecord::headline(std::initializer_list<const char*> keys) {
  for (Field& f : fields_) {
    int rank = 0;
    for (const char* k : keys) {
      if (f.key == k) {
        f.headline = true;
        f.headline_rank = rank;
      }
      ++rank;
    }
  }
  return *this;
}
LogRecord& LogRecord::stderr_message_only(bool on) {
  stderr_message_only_ = on;
  return *this;
}

const char* log_level_name(int32_t level) noexcept {
  return level >= ZARENA_LOG_TRACE && level <= ZARENA_LOG_OFF ? kLevelNames[level] : "?";
}

bool log_parse_level(const char* text, int32_t* level) noexcept {
  if (text == nullptr) return false;
  for (int32_t i = 0; i <= ZARENA_LOG_OFF; ++i) {
    if (!strcasecmp(text, kLevelNames[i])) {
      *level = i;
      return true;
    }
  }
  if (!strcasecmp(text, "warning")) {
    *level = ZARENA_LOG_WARN;
    return true;
  }
  return false;
}

bool log_parse_format(const char* text, bool* json) noexcept {
  if (text == nullptr) return false;
  if (!strcasecmp(text, "text") || !strcasecmp(text, "json")) {
    *json = !strcasecmp(text, "json");
    return true;
  }
  return false;
}

bool log_enabled(int32_t level) noexcept {
  if (level < ZARENA_LOG_TRACE || level >= ZARENA_LOG_OFF) return false;
  const Sink& s = sink();
  const bool cb = s.has_callback.load(std::memory_order_acquire);
  if (cb && level >= s.callback_level.load(std::memory_order_relaxed)) return true;
  const bool to_stderr = !cb || s.mirror_stderr.load(std::memory_order_relaxed);
  return to_stderr && level >= s.stderr_level.load(std::memory_order_relaxed);
}

void log_emit(const LogRecord& rec) noexcept {
  try {
    const int32_t level = rec.level();
    if (!log_enabled(level)) return;
    Sink& s = sink();
    zarena_log_fn fn;
    void* ud;
    uint64_t suppressed = 0;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (rec.is_rate_limited() && !take_token(s, rec.event(), &suppressed)) return;
      fn = s.fn;
      ud = s.user_data;
    }
    const bool cb = fn != nullptr && level >= s.callback_level.load(std::memory_order_relaxed);
    const bool to_stderr = (fn == nullptr || s.mirror_stderr.load(std::memory_order_relaxed)) &&
                           level >= s.stderr_level.load(std::memory_order_relaxed);
    if (suppressed == 0) {
      deliver(rec, cb ? fn : nullptr, ud, to_stderr);
      return;
    }
    LogRecord with_count = rec;
    with_count.message(fmt::format("{} ({} similar records suppressed)", rec.text(), suppressed));
    with_count.add_uint("suppressed", suppressed).headline({"suppressed"});
    deliver(with_count, cb ? fn : nullptr, ud, to_stderr);
  } catch (...) {
    // Logging must never take the program down; a record that cannot be built is lost.
  }
}

void log_set_callback(zarena_log_fn fn, void* user_data, int32_t min_level) noexcept {
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mu);
  s.fn = fn;
  s.user_data = user_data;
  if (fn != nullptr) {
    s.callback_level.store(min_level, std::memory_order_relaxed);
  } else {
    s.callback_level.store(ZARENA_LOG_OFF, std::memory_order_relaxed);
    s.stderr_level.store(min_level, std::memory_order_relaxed);
  }
  s.has_callback.store(fn != nullptr, std::memory_order_release);
}

uint64_t log_pending_suppressed() noexcept {
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mu);
  uint64_t n = 0;
  for (int i = 0; i < s.bucket_count; ++i) n += s.buckets[i].suppressed;
  return n;
}

void log_set_clock_for_testing(uint64_t (*now_ns)()) noexcept {
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mu);
  s.now_ns = now_ns != nullptr ? now_ns : steady_now_ns;
  s.bucket_count = 0;
}

void log_set_stderr_for_testing(int32_t level, bool mirror) noexcept {
  Sink& s = sink();
  s.stderr_level.store(level, std::memory_order_relaxed);
  s.mirror_stderr.store(mirror, std::memory_order_relaxed);
}

void log_set_stderr_format_for_testing(bool json) noexcept {
  sink().stderr_json.store(json, std::memory_order_relaxed);
  sink().json_hinted.store(false, std::memory_order_relaxed);
}

}  // namespace zarena_core
