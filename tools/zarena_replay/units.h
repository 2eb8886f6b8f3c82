// Byte counts and policy names as people read them.
#pragma once

#include <cstdint>
#include <string>

namespace zarena_replay {

// "1.50 GiB", "256 B".
std::string human_bytes(uint64_t bytes);
// "default", "async", "sync", "refuse" (ZARENA_OVERFLOW_*); "?" otherwise.
std::string policy_name(int32_t policy);

}  // namespace zarena_replay
