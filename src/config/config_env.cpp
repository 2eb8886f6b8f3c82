// The environment side of configuration: applying the table's variables, checking the
// other zarena variables, and finding ZARENA_* names zarena does not know.
#include <fmt/format.h>

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
      if (parse_value(var.syntax, text, f.enum_names, f.enum_count, &v, &s.why)) {
        if (f.storage == Storage::kString) {
          set_field_text(cfg, f, text);  // the environment outlives the call
          s.parsed = true;
        } else if (std::string why = value_problem(f, v); !why.empty()) {
          s.why = std::move(why);
        } else {
          set_field_number(cfg, f, v);
          s.parsed = true;
        }
      }
      found.push_back(std::move(s));
    }
  }
  return found;
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

std::string closest_known_variable(const std::string& name) {
  std::string best;
  size_t best_d = SIZE_MAX;
  auto consider = [&](const char* known) {
    if (std::strncmp(known, kPrefix, sizeof kPrefix - 1) != 0) return;  // ours only
    const size_t d = edit_distance(name, known);
    if (d < best_d) {
      best_d = d;
      best = known;
    }
  };
  for (const FieldSpec& f : kConfigFields) {
    for (int k = 0; k < f.env_count; ++k) consider(f.env[k].name);
  }
  for (const OtherVariable& o : kOtherVariables) consider(o.name);
  return best;
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
                   closest_known_variable(name)});
  }
  return out;
}

}  // namespace zarena_core
