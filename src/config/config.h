// Configuration: defaults, environment overrides, validation, and where each resolved
// value came from (reported in the "arena.config" log record). Every field is declared
// once, in config_fields.h; this file and config*.cpp walk that table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "config/config_fields.h"
#include "config/config_parse.h"
#include "log/log.h"
#include "zarena/zarena.h"

namespace zarena_core {

// One environment override as read from the process environment.
struct EnvSetting {
  std::string field;     // config field it sets ("capacity_bytes")
  std::string variable;  // variable that set it ("ZERFOO_ARENA_SIZE_GB")
  std::string raw;       // its text
  bool parsed = false;   // false: ignored, the default stays
  std::string why;       // when not parsed: what is wrong with the text
  std::string example;   // when not parsed: a valid value of this variable
};

// A configuration problem found in the environment: an invalid value (of a field's
// variable or of another zarena variable such as ZARENA_LOG_LEVEL), or a ZARENA_*
// variable zarena does not know.
struct ConfigProblem {
  bool unknown_variable = false;
  std::string variable;
  std::string value;
  std::string why;      // "unknown unit \"XB\" ...", "unknown variable"
  std::string example;  // invalid value: a valid one ("2GiB")
  std::string closest;  // unknown variable: the nearest known name(s) ("A or B"; "" none)
  // One line: what, why, and what to write instead.
  std::string describe() const;
};

// Library defaults (no environment).
zarena_config default_config();
// Applies environment overrides to cfg; returns what was found, parsed or not.
std::vector<EnvSetting> apply_environment(zarena_config* cfg);
// Reads `text` as the field `key` ("capacity_bytes", "flags.poison") of the table would be
// read from its ZARENA_* variable: same syntax, range and check; *out gets the number the
// struct stores. kInvalidArgument with the reason and an example otherwise.
Result parse_field_text(const char* key, const char* text, uint64_t* out);
// Every problem in the current environment: invalid values of known variables (fields'
// and the logging ones) and unknown ZARENA_* names, in that order.
std::vector<ConfigProblem> environment_problems();
// The known variable a mistyped `name` most likely meant: the nearest by edit distance
// (a shortened name such as ZARENA_CAPACITY counts as near ZARENA_CAPACITY_BYTES); among
// equally near ones, those `value` is valid for, then those it looks like ("A or B" when
// still tied); "" when none is near.
std::string closest_known_variable(const std::string& name, const std::string& value = "");
// True when zarena reads or reserves this ZARENA_* name.
bool is_known_variable(const std::string& name);

// The configuration an arena runs with, validated, plus each field's source.
struct ResolvedConfig {
  zarena_config cfg{};             // full current layout; "0 = default" fields hold the default;
                                   // name and trace_file are NULL here: see the strings below
  std::string name;                // the arena's copy of cfg.name ("zarena" when none)
  uint64_t arena_id = 0;           // zarena_arena_id of the arena being created
  const zarena* handle = nullptr;  // its handle (an identity in log records)
  LogSource log_source() const { return LogSource(name, arena_id, handle); }
  std::string trace_file;  // the arena's copy of cfg.trace_file ("" when none)
  struct Source {
    std::string field;
    std::string value;        // rendered value
    std::string origin;       // "default", "config", "env:VAR"
    std::string env_ignored;  // "VAR=value" the program's value overrode ("" when none)
  };
  std::vector<Source> sources;          // one per kConfigFields row, in table order
  std::vector<ConfigProblem> problems;  // from the environment (see environment_problems)
  std::vector<std::string> warnings;    // problems[i].describe()
};

// Copies a caller's struct honouring struct_size (older: tail defaults; newer: tail must
// be zero), validates every field, resolves the "0 = default" fields (overflow_limit_bytes
// 0 becomes the capacity, ZARENA_OVERFLOW_UNLIMITED stays) and attributes sources. Fails
// with kInvalidArgument; with ZARENA_FLAG_STRICT_CONFIG also when the environment has a
// problem (the message lists them all). Otherwise each problem is logged at warn
// ("config.invalid_value" / "config.unknown_variable") before this returns.
Result resolve_config(const zarena_config* user, ResolvedConfig* out, uint64_t arena_id = 0,
                      const zarena* handle = nullptr);

// overflow_retain_bytes when the caller leaves it 0: max(capacity, kMinDefaultRetain).
uint64_t default_retain_bytes(uint64_t capacity);

// Name helpers shared by logging and the C API.
const char* backend_name(int32_t backend);
const char* policy_name(int32_t policy);

// Generic access to a field of the table (numbers as stored: enum index, 0/1 for a flag,
// the pointer's address for kPointer; strings may be NULL).
uint64_t field_number(const zarena_config& c, const FieldSpec& f);
void set_field_number(zarena_config* c, const FieldSpec& f, uint64_t v);
const char* field_text(const zarena_config& c, const FieldSpec& f);
void set_field_text(zarena_config* c, const FieldSpec& f, const char* v);
// The value as people read it: names for enums, on/off, hex words, "unlimited".
std::string render_field(const zarena_config& c, const FieldSpec& f);
// Why v (a number as field_number gives it) is not a valid value of f, or "" when it is:
// its range and its extra check. One test for every source: the environment's values and
// the struct's (C, Go, Python) at create.
std::string value_problem(const FieldSpec& f, uint64_t v);

}  // namespace zarena_core
