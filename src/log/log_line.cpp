// The human stderr line: a sentence and the few headline numbers, bounded in length so
// that the diagnosis reads at a glance.
#include <fmt/format.h>

#include "log/log.h"

namespace zarena_core {

namespace {

constexpr size_t kBudget = kHumanLineMax - kHumanPrefixMax;
constexpr size_t kMaxArenaName = 24;  // a longer label is cut; callbacks get it whole
constexpr size_t kMaxFieldText = 40;  // a longer headline string is cut likewise
constexpr size_t kMinSentence = 48;   // headline fields give way before the sentence does
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

std::string log_format_line(const LogRecord& rec) {
  std::string head(rec.event());
  if (!rec.arena_name().empty()) {
    head += fmt::format(" [{}]", cut(one_line(rec.arena_name()), kMaxArenaName));
  }
  head += ": ";
  std::string tail;
  if (!rec.is_stderr_message_only()) {
    for (const auto& f : rec.fields()) {
      if (!f.headline) continue;
      const std::string kv = render(f);
      // Fields that would squeeze the sentence below its minimum are left to callbacks.
      if (head.size() + tail.size() + kv.size() + kMinSentence > kBudget) break;
      tail += kv;
    }
  }
  const size_t room = kBudget > head.size() + tail.size() ? kBudget - head.size() - tail.size() : 0;
  return head + cut(one_line(rec.human_text()), room) + tail;
}

}  // namespace zarena_core
