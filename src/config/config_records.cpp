#include "config/config_records.h"

#include <fmt/format.h>

#include "base/human_bytes.h"

namespace zarena_core {

LogRecord config_record(const ResolvedConfig& rc, const std::string& backend_desc,
                        int32_t backend_kind, int32_t policy, const std::string& fallback,
                        uint64_t memory_free, uint64_t memory_total) {
  const zarena_config& c = rc.cfg;
  LogRecord rec(log_events::kArenaConfig, rc.name);
  std::string from, from_short;
  for (const auto& s : rc.sources) {
    if (s.origin == "default") continue;
    from += fmt::format("{}{}={} ({})", from.empty() ? "" : ", ", s.field, s.value, s.origin);
    from_short += fmt::format("{}{} ({})", from_short.empty() ? "" : ", ", s.field, s.origin);
  }
  const std::string limit = c.overflow_limit_bytes == ZARENA_OVERFLOW_UNLIMITED
                                ? std::string("unlimited")
                                : human_bytes(c.overflow_limit_bytes);
  const std::string head =
      fmt::format("created on {}: capacity {}, overflow {} (limit {})", backend_desc,
                  human_bytes(c.capacity_bytes), policy_name(policy), limit);
  std::string msg = fmt::format("{}, alignment {}; {}{}", head, c.alignment,
                                from.empty() ? "all defaults" : "set: ", from);
  for (const auto& w : rc.warnings) msg += "; " + w;
  if (!fallback.empty()) msg += "; AUTO fell back to host: " + fallback;
  if (memory_total != 0) {
    msg += fmt::format("; {} memory: {} free of {}",
                       backend_kind == ZARENA_BACKEND_CUDA ? "device" : "host",
                       human_bytes(memory_free), human_bytes(memory_total));
  }
  rec.message(std::move(msg));
  // The human line names what is not a default and where it came from; the values are in
  // the fields, and each environment problem has its own warning line.
  rec.human(
      fmt::format("{}; {}{}", head, from_short.empty() ? "all defaults" : "set: ", from_short));
  rec.add_string("backend_resolved", backend_name(backend_kind));
  rec.add_string("overflow_policy_resolved", policy_name(policy));
  for (size_t i = 0; i < kConfigFieldCount && i < rc.sources.size(); ++i) {
    const FieldSpec& f = kConfigFields[i];
    const ResolvedConfig::Source& s = rc.sources[i];
    const uint64_t v = field_number(c, f);
    switch (record_field_kind(f.kind)) {
      case ZARENA_FIELD_INT:
        rec.add_int(s.field, static_cast<int64_t>(v));
        break;
      case ZARENA_FIELD_UINT:
        rec.add_uint(s.field, v);
        break;
      case ZARENA_FIELD_BOOL:
        rec.add_bool(s.field, v != 0);
        break;
      default:  // enum names, text (the arena's copies), the stream
        rec.add_string(s.field, s.value);
    }
    rec.add_string(s.field + "_source", s.origin);
  }
  if (!fallback.empty()) rec.add_string("backend_fallback", fallback);
  if (memory_total != 0) {
    rec.add_uint("memory_free_bytes", memory_free);
    rec.add_uint("memory_total_bytes", memory_total);
  }
  for (size_t i = 0; i < rc.warnings.size(); ++i) {
    rec.add_string(fmt::format("warning{}", i), rc.warnings[i]);
  }
  return rec;
}

LogRecord config_problem_record(const ConfigProblem& p, const std::string& arena_name) {
  const std::string value = p.value.size() <= 24 ? p.value : p.value.substr(0, 21) + "...";
  LogRecord rec(
      p.unknown_variable ? log_events::kConfigUnknownVariable : log_events::kConfigInvalidValue,
      arena_name);
  rec.message(p.describe());
  rec.add_string("variable", p.variable).add_string("value", p.value);
  if (p.unknown_variable) {
    rec.human(fmt::format("unknown variable {}, ignored; did you mean {}?", p.variable, p.closest));
    rec.add_string("closest", p.closest);
  } else {
    rec.human(fmt::format("ignored {}='{}': {}", p.variable, value, p.why));
    rec.add_string("reason", p.why).add_string("example", p.example).headline({"example"});
  }
  return rec;
}

}  // namespace zarena_core
