// The environment side of configuration: applying the table's variables, checking the
// other zarena variables, and finding ZARENA_* names zarena does not know.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/env_bool.h"
#include "config/config.h"

extern char** environ;

namespace zarena_core {

namespace {

constexpr const char kPrefix[] = "ZARENA_";

// Shown text of a value: long values are cut so that a warning stays one short line.
std::string shown(const std::string& raw) {
  return raw.size() <= 40 ? raw : raw.substr(0, 37) + "...";
}

}  // namespace

std::string ConfigProblem::describe() const {
  if (unknown_variable) {
    if (closest.empty()) {
      return fmt::format("unknown variable {} (no zarena variable is close to it)", variable);
    }
    return fmt::format("unknown variable {} (did you mean {}?)", variable, closest);
  }
  return fmt::format("ignored {}='{}': {}; e.g. {}={}", variable, shown(value), why, variable,
                     example);
}

// ZARENA_ZTENSOR_ENV=0: the variables of other prefixes (ztensor's) are not read.
bool reads_ztensor_variables() {
  const char* text = std::getenv("ZARENA_ZTENSOR_ENV");
  bool on = true;
  return text == nullptr || !parse_env_bool(text, &on) || on;
}

namespace {

// One variable's text, read as the environment would: its syntax, then the field's range
// and check. Numbers as stored in the struct (kText fields accept without a number).
bool read_env_value(const FieldSpec& f, const EnvVar& var, const char* text, uint64_t* v,
                    std::string* why) {
  if (!parse_value(var.syntax, text, f.enum_names, f.enum_count, v, why)) return false;
  if (f.storage == Storage::kString) return true;
  if (std::string bad = value_problem(f, *v); !bad.empty()) {
    *why = std::move(bad);
    return false;
  }
  return true;
}

}  // namespace

std::vector<EnvSetting> apply_environment(zarena_config* cfg) {
  std::vector<EnvSetting> found;
  const bool ztensor = reads_ztensor_variables();
  for (const FieldSpec& f : kConfigFields) {
    for (int k = 0; k < f.env_count; ++k) {
      const EnvVar& var = f.env[k];
      if (!ztensor && std::strncmp(var.name, kPrefix, sizeof kPrefix - 1) != 0) continue;
      const char* text = std::getenv(var.name);
      if (text == nullptr) continue;
      EnvSetting s{f.key, var.name, text, false, {}, var.example};
      uint64_t v = 0;
      if (read_env_value(f, var, text, &v, &s.why)) {
        if (f.storage == Storage::kString) {
          set_field_text(cfg, f, text);  // the environment outlives the call
        } else {
          set_field_number(cfg, f, v);
        }
        s.parsed = true;
      }
      found.push_back(std::move(s));
    }
  }
  return found;
}

Result parse_field_text(const char* key, const char* text, uint64_t* out) {
  for (const FieldSpec& f : kConfigFields) {
    if (std::strcmp(f.key, key) != 0) continue;
    // The ZARENA_* variable's syntax: the library's own for the field (ztensor's *_GB
    // variables take GiB).
    const EnvVar* zvar = nullptr;
    for (int k = 0; k < f.env_count; ++k) {
      if (std::strncmp(f.env[k].name, kPrefix, sizeof kPrefix - 1) == 0) zvar = &f.env[k];
    }
    if (f.storage == Storage::kString || zvar == nullptr) {
      return Result::fail(Status::kInvalidArgument,
                          fmt::format("{} has no text form (no variable sets it)", key));
    }
    const EnvVar& var = *zvar;
    uint64_t v = 0;
    std::string why;
    if (!read_env_value(f, var, text, &v, &why)) {
      return Result::fail(Status::kInvalidArgument,
                          fmt::format("{} '{}': {}; e.g. {}", key, shown(text), why, var.example));
    }
    *out = v;
    return Result::ok();
  }
  return Result::fail(Status::kInvalidArgument,
                      fmt::format("unknown configuration field '{}'", shown(key)));
}

bool is_known_variable(const std::string& name) {
  for (const FieldSpec& f : kConfigFields) {
    for (int k = 0; k < f.env_count; ++k) {
      if (name == f.env[k].name) return true;
    }
  }
  for (const OtherVariable& o : kOtherVariables) {
    if (name == o.name) return true;
  }
  return false;
}

namespace {

// How far `name` is from `known`: the edit distance to the known name, or to a shorter
// form of it with trailing "_WORD" parts dropped, plus one (ZARENA_CAPACTY is two from
// ZARENA_CAPACITY_BYTES, ZARENA_OVERFLOW one from every ZARENA_OVERFLOW_* name).
size_t name_distance(const std::string& name, const std::string& known) {
  size_t best = edit_distance(name, known);
  for (size_t at = known.find('_', sizeof kPrefix); at != std::string::npos;
       at = known.find('_', at + 1)) {
    best = std::min(best, edit_distance(name, known.substr(0, at)) + 1);
  }
  return best;
}

// How well `value` suits a variable of this syntax: 0 it parses, 1 it has the shape
// (letters for a name, a leading digit for a number or size), 2 neither.
int value_fit(Syntax syntax, const char* const* enum_names, uint32_t enum_count,
              const std::string& value) {
  uint64_t v = 0;
  std::string why;
  if (syntax == Syntax::kNone || syntax == Syntax::kText) return 1;
  if (parse_value(syntax, value.c_str(), enum_names, enum_count, &v, &why)) return 0;
  const bool digit = !value.empty() && value[0] >= '0' && value[0] <= '9';
  switch (syntax) {
    case Syntax::kEnumName:
    case Syntax::kLogLevel:
      return digit || value.empty() ? 2 : 1;
    case Syntax::kSwitch:
    case Syntax::kSwitchOff:
      return 2;
    default:
      return digit ? 1 : 2;
  }
}

}  // namespace

std::string closest_known_variable(const std::string& name, const std::string& value) {
  struct Candidate {
    const char* name;
    size_t distance;
    int fit;
  };
  std::vector<Candidate> all;
  auto consider = [&](const char* known, Syntax syntax, const char* const* names, uint32_t count) {
    if (std::strncmp(known, kPrefix, sizeof kPrefix - 1) != 0) return;  // ours only
    all.push_back({known, name_distance(name, known), value_fit(syntax, names, count, value)});
  };
  for (const FieldSpec& f : kConfigFields) {
    for (int k = 0; k < f.env_count; ++k) {
      consider(f.env[k].name, f.env[k].syntax, f.enum_names, f.enum_count);
    }
  }
  for (const OtherVariable& o : kOtherVariables) {
    consider(o.name, o.syntax, o.enum_names, o.enum_count);
  }
  // Nearest name first; among equally near ones, the value decides; a name more than a
  // third away from every known one is no typo of ours.
  size_t best = SIZE_MAX;
  for (const Candidate& c : all) best = std::min(best, c.distance);
  const size_t words = name.size() > sizeof kPrefix - 1 ? name.size() - (sizeof kPrefix - 1) : 0;
  if (best == SIZE_MAX || best > std::max<size_t>(2, words / 3)) return "";
  int best_fit = 2;
  for (const Candidate& c : all) {
    if (c.distance == best) best_fit = std::min(best_fit, c.fit);
  }
  std::vector<const char*> tied;
  for (const Candidate& c : all) {
    if (c.distance == best && c.fit == best_fit) tied.push_back(c.name);
  }
  if (tied.size() == 1) return tied[0];
  std::string out;
  for (size_t i = 0; i < tied.size(); ++i) {
    out += i == 0 ? "" : (i + 1 == tied.size() ? " or " : ", ");
    out += tied[i];
  }
  return out;
}

std::vector<ConfigProblem> environment_problems() {
  std::vector<ConfigProblem> out;
  zarena_config scratch = default_config();
  for (const EnvSetting& s : apply_environment(&scratch)) {
    if (!s.parsed) out.push_back({false, s.variable, s.raw, s.why, s.example, {}});
  }
  for (const OtherVariable& o : kOtherVariables) {
    const char* text = std::getenv(o.name);
    if (text == nullptr || o.syntax == Syntax::kNone) continue;
    uint64_t v = 0;
    std::string why;
    if (!parse_value(o.syntax, text, o.enum_names, o.enum_count, &v, &why)) {
      out.push_back({false, o.name, text, why, o.example, {}});
    }
  }
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, kPrefix, sizeof kPrefix - 1) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    const std::string name =
        eq != nullptr ? std::string(*e, static_cast<size_t>(eq - *e)) : std::string(*e);
    if (is_known_variable(name)) continue;
    out.push_back({true,
                   name,
                   eq != nullptr ? eq + 1 : "",
                   "unknown variable",
                   {},
                   closest_known_variable(name, eq != nullptr ? eq + 1 : "")});
  }
  return out;
}

}  // namespace zarena_core
