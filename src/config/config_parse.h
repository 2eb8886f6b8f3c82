// Reading one environment value by its syntax (docs/CONFIG.md has the rules, "How values
// are read"): strict, so that a typo or a shell mistake is reported instead of
// becoming a different number. Pure functions; no environment access.
#pragma once

#include <cstdint>
#include <string>

#include "base/env_bool.h"
#include "config/config_fields.h"

namespace zarena_core {

// Parses `text` written in `syntax` into *out (numbers as stored: bytes, nanoseconds, the
// enum index, 0/1 for switches; kText and kNone accept without writing). On failure
// returns false, leaves *out untouched and sets *why to a short reason ("unknown unit
// \"XB\"").
bool parse_value(Syntax syntax, const char* text, const char* const* enum_names,
                 uint32_t enum_count, uint64_t* out, std::string* why);

// Levenshtein distance, for "did you mean" on unknown variable names.
size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace zarena_core
