// zarena_stats as text for people and as JSON for programs (zarena_format_stats). The
// names are the struct's field names (stats_fields.h) in both.
#pragma once

#include <string>
#include <string_view>

#include "zarena/zarena.h"

namespace zarena_core {

// A titled table, grouped, one field a line, sizes also in binary units; ends with '\n'.
std::string stats_text(const zarena_stats& s, std::string_view arena_name);
// One compact JSON object: every field, struct order, integer values.
std::string stats_json(const zarena_stats& s);

}  // namespace zarena_core
