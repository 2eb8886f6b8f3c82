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
  // For the human line: what is set, overridden variables first; each item in full, and
  // briefly (the variable the program overrode, or the field's name) for a short line.
  struct SetItem {
    std::string full, brief;
    bool overridden;
  };
  std::vector<SetItem> short_items;
  for (const auto& s : rc.sources) {
    if (!s.env_ignored.empty()) ignored += (ignored.empty() ? "" : ", ") + s.env_ignored;
    if (s.origin == "default") continue;
    const std::string why =
        s.env_ignored.empty() ? s.origin : fmt::format("{}; {} ignored", s.origin, s.env_ignored);
    from += fmt::format("{}{}={} ({})", from.empty() ? "" : ", ", s.field, s.value, why);
    SetItem item{fmt::format("{} ({})", s.field, why),
                 s.env_ignored.empty() ? s.field : fmt::format("{} ignored", s.env_ignored),
                 !s.env_ignored.empty()};
    short_items.insert(s.env_ignored.empty() ? short_items.end() : short_items.begin(), item);
  }
  const std::string limit = c.overflow_limit_bytes == ZARENA_OVERFLOW_UNLIMITED
                                ? std::string("unlimited")
                                : human_bytes(c.overflow_limit_bytes);
  // The human line names what is not a default, as many as fit the line after its head; the
  // backend's description gives way (down to 16 characters) to an overridden variable.
  const auto head_with = [&](const std::string& desc) {
    return fmt::format("created on {}: capacity {}, overflow {} (limit {})", desc,
                       human_bytes(c.capacity_bytes), policy_name(policy), limit);
  };
  const auto shortened = [&](size_t n) {
    return backend_desc.size() <= n ? backend_desc : backend_desc.substr(0, n - 3) + "...";
  };
  std::string shown_desc = shortened(32);
  const size_t line_head = std::strlen("arena.config [") +
                           std::min(rc.name.size(), kHumanArenaNameMax) + std::strlen("]: ");
  const size_t fixed = kHumanPrefixMax + line_head + head_with("").size() + std::strlen("; set: ");
  const auto room_with = [&](size_t desc_size) {
    return kHumanLineMax > fixed + desc_size ? kHumanLineMax - fixed - desc_size : 0;
  };
  const size_t set_room = std::max<size_t>(room_with(shown_desc.size()), 24);
  // Each item in full where it fits (leaving room to count the rest), else briefly; an
  // overridden variable is named even when nothing else fits.
  std::string from_short;
  for (size_t i = 0; i < short_items.size(); ++i) {
    const size_t left = short_items.size() - i - 1;
    const std::string more = left == 0 ? "" : fmt::format(", +{} more", left);
    const std::string sep = i == 0 ? "" : ", ";
    const std::string* pick = nullptr;
    for (const std::string* t : {&short_items[i].full, &short_items[i].brief}) {
      if (pick == nullptr && from_short.size() + sep.size() + t->size() + more.size() <= set_room) {
        pick = t;
      }
    }
    if (pick == nullptr && i == 0 && short_items[i].overridden) pick = &short_items[i].brief;
    if (pick == nullptr) {
      const size_t rest = short_items.size() - i;
      from_short += i == 0 ? fmt::format("{} value{}", rest, rest == 1 ? "" : "s")
                           : fmt::format(", +{} more", rest);
      break;
    }
    from_short += sep + *pick;
  }
  if (from_short.size() > set_room) {  // the description shrinks, then the list is cut
    const size_t excess = from_short.size() - set_room;
    shown_desc = shortened(shown_desc.size() > excess + 16 ? shown_desc.size() - excess : 16);
    const size_t room = std::max<size_t>(room_with(shown_desc.size()), 24);
    if (from_short.size() > room) from_short = from_short.substr(0, room - 3) + "...";
  }
  const std::string head = head_with(shown_desc);
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
