// Process-wide tag registry: names for the small integers allocations carry (so the hot
// path stores an integer, and dumps, traces and diagnoses show the name).
#pragma once

#include <cstdint>

#include "base/status.h"

namespace zarena_core {

inline constexpr uint32_t kMaxTags = 65535;
inline constexpr uint32_t kMaxTagName = 63;

// The id of `name` (registered now if new). kInvalidArgument for an empty name,
// kOutOfMemory when kMaxTags names exist.
Result tag_register(const char* name, uint32_t* id) noexcept;
// The registered name, or "" (0, unknown). The storage lives as long as the process.
const char* tag_name(uint32_t id) noexcept;
// Ids registered so far (tags 1..count).
uint32_t tag_count() noexcept;

}  // namespace zarena_core
