// ZARENA_LOG_FORMAT=json: one JSON object per record for log shippers, built with
// nlohmann-json so that every string (arena names, paths, advice) is escaped correctly.
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "log/log.h"

namespace zarena_core {

namespace {

std::string iso8601_utc(int64_t unix_ms) {
  const std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03d}Z", tm, static_cast<int>(unix_ms % 1000));
}

}  // namespace

std::string log_format_json(const LogRecord& rec, int64_t unix_ms) {
  // Ordered, so that a person reading the stream sees time, level and event first.
  nlohmann::ordered_json j;
  j["time"] = iso8601_utc(unix_ms);
  j["level"] = log_level_name(rec.level());
  j["event"] = rec.event();
  j["arena"] = rec.arena_name();
  if (rec.source().id != 0) j["arena_id"] = rec.source().id;  // zarena_arena_id
  j["message"] = rec.text();
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();
  for (const auto& f : rec.fields()) {
    switch (f.kind) {
      case ZARENA_FIELD_INT:
        fields[f.key] = f.i;
        break;
      case ZARENA_FIELD_UINT:
        fields[f.key] = static_cast<uint64_t>(f.i);
        break;
      case ZARENA_FIELD_DOUBLE:
        fields[f.key] = f.f;  // NaN and infinities become null
        break;
      case ZARENA_FIELD_BOOL:
        fields[f.key] = f.i != 0;
        break;
      default:
        fields[f.key] = f.s;
    }
  }
  j["fields"] = std::move(fields);
  // A name that is not valid UTF-8 is written with U+FFFD instead of failing the record.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace zarena_core
