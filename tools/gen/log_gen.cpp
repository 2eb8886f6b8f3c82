// The catalogue of log records (src/log/log_events.h) and the verdict table
// (src/diagnosis/verdicts.h) as docs/LOGGING.md's lists.
#include <sstream>
#include <string>
#include <vector>

#include "config/config_fields.h"
#include "diagnosis/verdicts.h"
#include "gen.h"
#include "log/log_events.h"

namespace zarena_gen {

using zarena_core::LogEvent;
using zarena_core::LogFieldSpec;

namespace {

const char kEventsSource[] = "src/log/log_events.h";
const char kVerdictsSource[] = "src/diagnosis/verdicts.h";

const char* kind_name(int32_t kind) {
  switch (kind) {
    case ZARENA_FIELD_INT:
      return "INT";
    case ZARENA_FIELD_UINT:
      return "UINT";
    case ZARENA_FIELD_DOUBLE:
      return "DOUBLE";
    case ZARENA_FIELD_BOOL:
      return "BOOL";
    default:
      return "STRING";
  }
}

const char* level_name(int32_t level) {
  static const char* const kNames[] = {"trace", "debug", "info", "warn", "error"};
  return level >= 0 && level < 5 ? kNames[level] : "off";
}

void field_row(std::ostringstream& o, const std::string& key, int32_t kind,
               const std::string& doc) {
  o << "| `" << key << "` | " << kind_name(kind) << " | " << cell(doc) << " |\n";
}

std::string events() {
  std::ostringstream o;
  for (const LogEvent* e : zarena_core::kLogEvents) {
    o << "\n### " << e->name << "\n\n"
      << level_name(e->level) << ", "
      << (e->rate_limited ? "rate-limited" : "never dropped by the limiter") << ": " << e->when
      << ".\n";
    const LogFieldSpec* config_values = nullptr;
    for (size_t i = 0; i < e->field_count; ++i) {
      if (e->fields[i].kind == zarena_core::kKindOfConfigRow) config_values = &e->fields[i];
    }
    if (config_values != nullptr) {
      o << "\nEvery configuration field (docs/CONFIG.md) is a field under its own name: "
        << config_values->doc << ".\n";
    }
    if (e->field_count == 0 && !e->rate_limited) {
      o << "\nNo fields.\n";
      continue;
    }
    o << "\n| field | type | meaning |\n| --- | --- | --- |\n";
    for (size_t i = 0; i < e->field_count; ++i) {
      const LogFieldSpec& f = e->fields[i];
      if (&f != config_values) {
        field_row(o, f.key, f.kind, f.doc);
        continue;
      }
      for (const zarena_core::FieldSpec& c : zarena_core::kConfigFields) {
        field_row(o, c.key, zarena_core::record_field_kind(c.kind), c.doc);
      }
    }
    if (e->rate_limited) {
      const LogFieldSpec& s = zarena_core::kSuppressedField;
      field_row(o, s.key, s.kind, s.doc);
    }
  }
  o << "\n";
  return o.str();
}

std::string verdicts() {
  std::ostringstream o;
  o << "| verdict | given when |\n| --- | --- |\n";
  for (const zarena_core::VerdictSpec& v : zarena_core::kVerdicts) {
    o << "| `" << v.name << "` | " << cell(v.meaning) << " |\n";
  }
  return o.str();
}

// Python's VERDICTS: every name an overflow can be given (not zarena_diagnose's "ok").
std::string python_verdicts() {
  const std::string head = "VERDICTS = (";
  std::string out, line = head;
  bool first = true;
  for (const zarena_core::VerdictSpec& v : zarena_core::kVerdicts) {
    if (std::string(v.name) == zarena_core::verdict_name(zarena_core::VerdictId::kOk)) continue;
    const std::string item = std::string("\"") + v.name + "\"";
    if (!first && line.size() + 2 + item.size() + 2 > kPythonColumns) {
      out += line + ",\n";
      line = std::string(head.size(), ' ') + item;
    } else {
      line += (first ? "" : ", ") + item;
    }
    first = false;
  }
  return out + line + ")\n";
}

}  // namespace

void log_outputs(std::vector<Output>* out) {
  out->push_back({"docs/LOGGING.md", "events", events(), kEventsSource});
  out->push_back({"docs/LOGGING.md", "verdicts", verdicts(), kVerdictsSource});
  out->push_back({"python/zarena/constants.py", "verdicts", python_verdicts(), kVerdictsSource});
}

}  // namespace zarena_gen
