// The human stderr line: a sentence and the few headline numbers, bounded in length so
// that the diagnosis reads at a glance.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "log/log.h"

namespace zarena_core {

namespace {

constexpr size_t kBudget = kHumanLineMax - kHumanPrefixMax;
constexpr size_t kMaxFieldText = 40;  // a longer headline string is cut likewise
// Between the sentence and the fields, so the sentence's last word never runs into them.
constexpr const char kFieldsSeparator[] = " | ";
constexpr const char kJsonHint[] = " (every field: ZARENA_LOG_FORMAT=json)";
constexpr const char kEllipsis[] = "...";

// One line whatever the text holds: control characters (a newline in a name) become blanks.
std::string one_line(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return out;
}

// Cuts s to at most n characters, at the last blank when there is one in the second half,
// and marks the cut.
std::string cut(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  const size_t room = n > sizeof kEllipsis - 1 ? n - (sizeof kEllipsis - 1) : 0;
  size_t at = room;
  const size_t blank = s.rfind(' ', room);
  if (blank != std::string::npos && blank >= room / 2) at = blank;
  while (at > 0 && (s[at - 1] == ' ' || s[at - 1] == ',' || s[at - 1] == ';')) --at;
  return s.substr(0, at) + kEllipsis;
}

std::string render(const LogRecord::Field& f) {
  switch (f.kind) {
    case ZARENA_FIELD_INT:
      return fmt::format(" {}={}", f.key, f.i);
    case ZARENA_FIELD_UINT:
      return fmt::format(" {}={}", f.key, static_cast<uint64_t>(f.i));
    case ZARENA_FIELD_DOUBLE:
      return fmt::format(" {}={:.6g}", f.key, f.f);
    case ZARENA_FIELD_BOOL:
      return fmt::format(" {}={}", f.key, f.i ? "true" : "false");
    default: {
      const std::string v = cut(one_line(f.s), kMaxFieldText);
      if (!v.empty() && v.find_first_of(" \"=\\") == std::string::npos) {
        return fmt::format(" {}={}", f.key, v);
      }
      std::string quoted;
      for (char c : v) {
        if (c == '"' || c == '\\') quoted += '\\';
        quoted += c;
      }
      return fmt::format(" {}=\"{}\"", f.key, quoted);
    }
  }
}

}  // namespace

bool log_line_omits_fields(const LogRecord& rec) {
  for (const auto& f : rec.fields()) {
    if (!f.headline || rec.is_stderr_message_only()) return true;
  }
  return false;
}

std::string log_format_line(const LogRecord& rec, bool json_hint) {
  std::string line(rec.event());
  if (!rec.arena_name().empty()) {
    line += fmt::format(" [{}]", cut(one_line(rec.arena_name()), kHumanArenaNameMax));
  }
  line += ": ";
  // The sentence is never cut: the builders keep it short, and the fix it ends with is
  // what a person must read whole.
  line += one_line(rec.human_text());
  const size_t hint_room = json_hint ? sizeof kJsonHint - 1 : 0;
  std::string tail;
  if (!rec.is_stderr_message_only()) {
    std::vector<const LogRecord::Field*> shown;
    for (const auto& f : rec.fields()) {
      if (f.headline) shown.push_back(&f);
    }
    std::stable_sort(shown.begin(), shown.end(), [](const auto* a, const auto* b) {
      return a->headline_rank < b->headline_rank;
    });
    for (const LogRecord::Field* f : shown) {
      const std::string kv = render(*f);
      // Headline fields fill what is left of the budget; the others go to callbacks and JSON.
      if (line.size() + sizeof kFieldsSeparator - 1 + tail.size() + kv.size() + hint_room >
          kBudget) {
        break;
      }
      tail += kv;
    }
  }
  if (!tail.empty()) line += kFieldsSeparator + tail.substr(1);
  if (json_hint) line += kJsonHint;
  return line;
}

}  // namespace zarena_core
