#include "log.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <strings.h>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace zarena_core {

namespace {

int32_t level_from_env() {
  const char* v = std::getenv("ZARENA_LOG_LEVEL");
  if (v == nullptr) return ZARENA_LOG_INFO;
  static const char* const names[] = {"trace", "debug", "info", "warn", "error", "off"};
  for (int32_t i = 0; i <= ZARENA_LOG_OFF; ++i) {
    if (!strcasecmp(v, names[i])) return i;
  }
  if (!strcasecmp(v, "warning")) return ZARENA_LOG_WARN;
  return ZARENA_LOG_INFO;
}

bool mirror_from_env() {
  const char* v = std::getenv("ZARENA_LOG_STDERR");
  return v != nullptr && (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes"));
}

struct Sink {
  std::mutex mu;  // guards fn/user_data updates; never held while calling fn
  zarena_log_fn fn = nullptr;
  void* user_data = nullptr;
  std::atomic<int32_t> min_level{level_from_env()};
  bool mirror_stderr = mirror_from_env();
};

Sink& sink() {
  static Sink* s = new Sink();  // never destroyed: records may be emitted at exit
  return *s;
}

spdlog::logger& stderr_logger() {
  static spdlog::logger* logger = [] {
    auto l = new spdlog::logger("zarena", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_pattern("%Y-%m-%dT%H:%M:%S.%e zarena %l %v");
    l->set_level(spdlog::level::trace);
    l->flush_on(spdlog::level::trace);
    return l;
  }();
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

}  // namespace

LogRecord::LogRecord(int32_t level, std::string event, std::string arena_name)
    : level_(level), event_(std::move(event)), arena_name_(std::move(arena_name)) {}

LogRecord& LogRecord::message(std::string m) {
  message_ = std::move(m);
  return *this;
}
LogRecord& LogRecord::add_int(const char* key, int64_t v) {
  fields_.push_back({key, ZARENA_FIELD_INT, v, 0, {}});
  return *this;
}
LogRecord& LogRecord::add_uint(const char* key, uint64_t v) {
  fields_.push_back({key, ZARENA_FIELD_UINT, static_cast<int64_t>(v), 0, {}});
  return *this;
}
LogRecord& LogRecord::add_double(const char* key, double v) {
  fields_.push_back({key, ZARENA_FIELD_DOUBLE, 0, v, {}});
  return *this;
}
LogRecord& LogRecord::add_string(const char* key, std::string v) {
  fields_.push_back({key, ZARENA_FIELD_STRING, 0, 0, std::move(v)});
  return *this;
}
LogRecord& LogRecord::add_bool(const char* key, bool v) {
  fields_.push_back({key, ZARENA_FIELD_BOOL, v ? 1 : 0, 0, {}});
  return *this;
}

const char* log_level_name(int32_t level) noexcept {
  static const char* const names[] = {"trace", "debug", "info", "warn", "error", "off"};
  return (level >= 0 && level <= ZARENA_LOG_OFF) ? names[level] : "invalid";
}

bool log_enabled(int32_t level) noexcept {
  return level >= sink().min_level.load(std::memory_order_relaxed) && level < ZARENA_LOG_OFF;
}

std::string log_format_line(const LogRecord& rec) {
  std::string line = rec.event();
  if (!rec.arena_name().empty()) line += fmt::format(" [{}]", rec.arena_name());
  line += ": ";
  line += rec.text();
  for (const auto& f : rec.fields()) {
    switch (f.kind) {
      case ZARENA_FIELD_INT:
        line += fmt::format(" {}={}", f.key, f.i);
        break;
      case ZARENA_FIELD_UINT:
        line += fmt::format(" {}={}", f.key, static_cast<uint64_t>(f.i));
        break;
      case ZARENA_FIELD_DOUBLE:
        line += fmt::format(" {}={:.6g}", f.key, f.f);
        break;
      case ZARENA_FIELD_BOOL:
        line += fmt::format(" {}={}", f.key, f.i ? "true" : "false");
        break;
      default:
        if (f.s.find(' ') != std::string::npos) {
          line += fmt::format(" {}=\"{}\"", f.key, f.s);
        } else {
          line += fmt::format(" {}={}", f.key, f.s);
        }
    }
  }
  return line;
}

void log_emit(const LogRecord& rec) noexcept {
  try {
    if (!log_enabled(rec.level())) return;
    Sink& s = sink();
    zarena_log_fn fn;
    void* ud;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      fn = s.fn;
      ud = s.user_data;
    }
    if (fn == nullptr || s.mirror_stderr) {
      stderr_logger().log(to_spdlog(rec.level()), "{}", log_format_line(rec));
    }
    if (fn != nullptr) {
      std::vector<zarena_log_field> fields;
      fields.reserve(rec.fields().size());
      for (const auto& f : rec.fields()) {
        fields.push_back({f.key, f.kind, f.i, f.f, f.kind == ZARENA_FIELD_STRING ? f.s.c_str() : ""});
      }
      zarena_log_record out;
      std::memset(&out, 0, sizeof out);
      out.struct_size = sizeof(zarena_log_record);
      out.level = rec.level();
      out.event = rec.event().c_str();
      out.message = rec.text().c_str();
      out.arena_name = rec.arena_name().c_str();
      out.fields = fields.data();
      out.field_count = static_cast<uint32_t>(fields.size());
      fn(ud, &out);
    }
  } catch (...) {
    // Logging must never take the program down; a record that cannot be built is lost.
  }
}

void log_set_callback(zarena_log_fn fn, void* user_data, int32_t min_level) noexcept {
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mu);
  s.fn = fn;
  s.user_data = user_data;
  s.min_level.store(min_level, std::memory_order_relaxed);
}

}  // namespace zarena_core
