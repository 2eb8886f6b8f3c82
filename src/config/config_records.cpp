#include "config/config_records.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/human_bytes.h"

namespace zarena_core {

LogRecord config_record(const ResolvedConfig& rc, const std::string& backend_desc,
                        int32_t backend_kind, int32_t policy, const std::string& fallback,
                        uint64_t memory_free, uint64_t memory_total) {
  const zarena_config& c = rc.cfg;
  LogRecord rec(log_events::kArenaConfig, rc.log_source());
  std::string from, ignored;
  std::vector<std::string> short_items;  // for the human line: overridden variables first
  for (const auto& s : rc.sources) {
    if (!s.env_ignored.empty()) ignored += (ignored.empty() ? "" : ", ") + s.env_ignored;
    if (s.origin == "default") continue;
    const std::string why =
        s.env_ignored.empty() ? s.origin : fmt::format("{}; {} ignored", s.origin, s.env_ignored);
    from += fmt::format("{}{}={} ({})", from.empty() ? "" : ", ", s.field, s.value, why);
    const std::string item = fmt::format("{} ({})", s.field, why);
    short_items.insert(s.env_ignored.empty() ? short_items.end() : short_items.begin(), item);
  }
  const std::string limit = c.overflow_limit_bytes == ZARENA_OVERFLOW_UNLIMITED
                                ? std::string("unlimited")
                                : human_bytes(c.overflow_limit_bytes);
  const std::string shown_desc =
      backend_desc.size() <= 32 ? backend_desc : backend_desc.substr(0, 29) + "...";
  const std::string head =
      fmt::format("created on {}: capacity {}, overflow {} (limit {})", shown_desc,
                  human_bytes(c.capacity_bytes), policy_name(policy), limit);
  // The human line names what is not a default, as many as fit the line after its head.
  const size_t line_head = std::strlen("arena.config [") +
                           std::min(rc.name.size(), kHumanArenaNameMax) + std::strlen("]: ");
  const size_t used = kHumanPrefixMax + line_head + head.size() + std::strlen("; set: ");
  const size_t set_room = kHumanLineMax > used + 24 ? kHumanLineMax - used : 24;
  std::string from_short;
  for (size_t i = 0; i < short_items.size(); ++i) {
    const std::string more = fmt::format(", +{} more", short_items.size() - i);
    if (from_short.size() + 2 + short_items[i].size() + more.size() > set_room) {
      from_short = i == 0 ? fmt::format("{} values", short_items.size()) : from_short + more;
      break;
    }
    from_short += (i == 0 ? "" : ", ") + short_items[i];
  }
  std::string msg =
      fmt::format("created on {}: capacity {}, overflow {} (limit {}), alignment {}; {}{}",
                  backend_desc, human_bytes(c.capacity_bytes), policy_name(policy), limit,
                  c.alignment, from.empty() ? "all defaults" : "set: ", from);
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
  if (!ignored.empty()) rec.add_string("env_ignored", ignored);
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

LogRecord config_problem_record(const ConfigProblem& p, const LogSource& arena) {
  const std::string value = p.value.size() <= 24 ? p.value : p.value.substr(0, 21) + "...";
  LogRecord rec(
      p.unknown_variable ? log_events::kConfigUnknownVariable : log_events::kConfigInvalidValue,
      arena);
  rec.message(p.describe());
  rec.add_string("variable", p.variable).add_string("value", p.value);
  if (p.unknown_variable) {
    const std::string name =
        p.variable.size() <= 32 ? p.variable : p.variable.substr(0, 29) + "...";
    rec.human(p.closest.empty()
                  ? fmt::format("unknown variable {}, ignored", name)
                  : fmt::format("unknown variable {}, ignored; did you mean {}?", name, p.closest));
    rec.add_string("closest", p.closest);
  } else {
    rec.human(fmt::format("ignored {}='{}': {}", p.variable, value, p.why));
    rec.add_string("reason", p.why).add_string("example", p.example).headline({"example"});
  }
  return rec;
}

}  // namespace zarena_core
