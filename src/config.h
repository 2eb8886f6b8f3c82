// Configuration: defaults, environment overrides, validation, and where each resolved
// value came from (reported in the "arena.config" log record).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "status.h"
#include "zarena/zarena.h"

namespace zarena_core {

inline constexpr uint64_t kDefaultCapacity = 1ull << 30;
inline constexpr uint64_t kDefaultAlignment = 256;
inline constexpr uint64_t kMinAlignment = 8;
inline constexpr uint64_t kMaxAlignment = 1ull << 30;
inline constexpr uint64_t kDefaultOverflowSlowNs = 10'000'000;  // 10 ms
// CUDA memory pools map memory in chunks (32 MiB on an H200); a release threshold below
// one chunk keeps nothing resident, which is the give-back/fault-in cycle the overflow
// pool exists to avoid. So the default retain is the capacity, but at least this.
inline constexpr uint64_t kMinDefaultRetain = 64ull << 20;

// One environment override as read from the process environment.
struct EnvSetting {
  std::string field;     // config field it sets ("capacity_bytes")
  std::string variable;  // variable that set it ("ZERFOO_ARENA_SIZE_GB")
  std::string raw;       // its text
  bool parsed = false;   // false: ignored, the default stays
};

// An environment switch: 1/true/yes/on or 0/false/no/off/"" (any case). False when the
// text is none of these (*out untouched).
bool parse_env_bool(const char* s, bool* out);

// Library defaults (no environment).
zarena_config default_config();
// Applies environment overrides to cfg; returns what was found, parsed or not.
std::vector<EnvSetting> apply_environment(zarena_config* cfg);

// The configuration an arena runs with, validated, plus each field's source.
struct ResolvedConfig {
  zarena_config cfg{};  // full current layout; name points into `name`
  std::string name;
  struct Source {
    std::string field;
    std::string value;   // rendered value
    std::string origin;  // "default", "config", "env:VAR"
  };
  std::vector<Source> sources;
  std::vector<std::string> warnings;  // unparseable environment values
};

// Copies a caller's struct honouring struct_size (older: tail defaults; newer: tail must
// be zero), validates every field and attributes sources. Fails with kInvalidArgument.
Result resolve_config(const zarena_config* user, ResolvedConfig* out);

// overflow_retain_bytes when the caller leaves it 0: max(capacity, kMinDefaultRetain).
uint64_t default_retain_bytes(uint64_t capacity);

// Name helpers shared by logging and the C API.
const char* backend_name(int32_t backend);
const char* policy_name(int32_t policy);

}  // namespace zarena_core
