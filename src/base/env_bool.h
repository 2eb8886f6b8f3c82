// A switch in the environment: shared by the configuration table and the logging
// variables (ZARENA_LOG_STDERR), which are read before any arena exists.
#pragma once

namespace zarena_core {

// 1/true/yes/on or 0/false/no/off/"" (any case). False when the text is none of these
// (*out untouched).
bool parse_env_bool(const char* s, bool* out);

}  // namespace zarena_core
