// The records the configuration logs: "arena.config" (at create: every field, its value
// and where it came from) and the environment problems found at create
// ("config.invalid_value", "config.unknown_variable").
#pragma once

#include <cstdint>
#include <string>

#include "config/config.h"
#include "log/log.h"

namespace zarena_core {

// backend_desc: the backend's own description; backend_kind/policy: resolved values;
// fallback: why AUTO fell back to host although a device was counted ("" if it did not);
// memory_free/total: the backend's memory after the region was reserved (0 = unknown), so
// the first line already says how much room a larger arena would have.
LogRecord config_record(const ResolvedConfig& rc, const std::string& backend_desc,
                        int32_t backend_kind, int32_t policy, const std::string& fallback = "",
                        uint64_t memory_free = 0, uint64_t memory_total = 0);

// A problem in the environment found at create (warn, rate-limited like other repeatable
// warnings): "config.invalid_value" with variable, value, reason and example (a valid
// value), or "config.unknown_variable" with variable, value and closest (a known name).
LogRecord config_problem_record(const ConfigProblem& p, const LogSource& arena);

}  // namespace zarena_core
