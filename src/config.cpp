#include "config.h"

#include <fmt/format.h>
#include <strings.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace zarena_core {

namespace {

constexpr uint64_t kGiB = 1ull << 30;
// The 1.0 layout ends after `name`; callers compiled against 1.0 pass this size.
constexpr uint32_t kConfigV1Size = offsetof(zarena_config, name) + sizeof(const char*);

bool parse_u64(const char* s, uint64_t* out) {
  if (s == nullptr || *s == '\0') return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 0);
  if (errno != 0 || end == s || *end != '\0' || s[0] == '-') return false;
  *out = v;
  return true;
}

bool parse_gib(const char* s, uint64_t* out) {
  if (s == nullptr || *s == '\0') return false;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !(v > 0) || v > 1e9) return false;
  *out = static_cast<uint64_t>(std::llround(v * static_cast<double>(kGiB)));
  return true;
}

}  // namespace

bool parse_env_bool(const char* s, bool* out) {
  if (s == nullptr) return false;
  if (!strcasecmp(s, "1") || !strcasecmp(s, "true") || !strcasecmp(s, "yes") ||
      !strcasecmp(s, "on")) {
    *out = true;
    return true;
  }
  if (!strcasecmp(s, "0") || !strcasecmp(s, "false") || !strcasecmp(s, "no") ||
      !strcasecmp(s, "off") || *s == '\0') {
    *out = false;
    return true;
  }
  return false;
}

namespace {

bool parse_enum(const char* s, const char* const* names, int n, int32_t* out) {
  if (s == nullptr) return false;
  for (int i = 0; i < n; ++i) {
    if (!strcasecmp(s, names[i])) {
      *out = i;
      return true;
    }
  }
  return false;
}

const char* const kBackendNames[] = {"auto", "host", "cuda"};
const char* const kPolicyNames[] = {"default", "async", "sync", "refuse"};

// Names are static strings; the environment is read at each zarena_config_init.
struct EnvContext {
  zarena_config* cfg;
  std::vector<EnvSetting>* found;

  const char* get(const char* field, const char* var) {
    const char* v = std::getenv(var);
    if (v == nullptr) return nullptr;
    found->push_back({field, var, v, false});
    return v;
  }
  void ok() { found->back().parsed = true; }
};

void set_flag(zarena_config* cfg, uint32_t flag, bool on) {
  if (on) {
    cfg->flags |= flag;
  } else {
    cfg->flags &= ~flag;
  }
}

}  // namespace

uint64_t default_retain_bytes(uint64_t capacity) {
  return capacity > kMinDefaultRetain ? capacity : kMinDefaultRetain;
}

const char* backend_name(int32_t backend) {
  return (backend >= 0 && backend <= 2) ? kBackendNames[backend] : "invalid";
}

const char* policy_name(int32_t policy) {
  return (policy >= 0 && policy <= 3) ? kPolicyNames[policy] : "invalid";
}

zarena_config default_config() {
  zarena_config c;
  std::memset(&c, 0, sizeof c);
  c.struct_size = sizeof(zarena_config);
  c.backend = ZARENA_BACKEND_AUTO;
  c.device = 0;
  c.capacity_bytes = kDefaultCapacity;
  c.alignment = kDefaultAlignment;
  c.overflow_policy = ZARENA_OVERFLOW_DEFAULT;
  c.overflow_retain_bytes = 0;
  c.overflow_limit_bytes = 0;
  c.stream = nullptr;
  c.flags = 0;
  c.name = nullptr;
  c.overflow_slow_ns = 0;
  return c;
}

std::vector<EnvSetting> apply_environment(zarena_config* cfg) {
  std::vector<EnvSetting> found;
  EnvContext env{cfg, &found};
  uint64_t u = 0;
  bool b = false;
  int32_t e = 0;
  const char* v;

  if ((v = env.get("backend", "ZARENA_BACKEND")) && parse_enum(v, kBackendNames, 3, &e)) {
    cfg->backend = e;
    env.ok();
  }
  if ((v = env.get("device", "ZARENA_DEVICE")) && parse_u64(v, &u) && u < 1024) {
    cfg->device = static_cast<int32_t>(u);
    env.ok();
  }
  // ztensor's name first, so the zarena-specific one wins when both are set.
  if ((v = env.get("capacity_bytes", "ZERFOO_ARENA_SIZE_GB")) && parse_gib(v, &u) && u > 0) {
    cfg->capacity_bytes = u;
    env.ok();
  }
  if ((v = env.get("capacity_bytes", "ZARENA_CAPACITY_BYTES")) && parse_u64(v, &u) && u > 0) {
    cfg->capacity_bytes = u;
    env.ok();
  }
  if ((v = env.get("alignment", "ZARENA_ALIGNMENT")) && parse_u64(v, &u)) {
    cfg->alignment = u;
    env.ok();
  }
  if ((v = env.get("overflow_policy", "ZARENA_OVERFLOW_POLICY")) &&
      parse_enum(v, kPolicyNames, 4, &e)) {
    cfg->overflow_policy = e;
    env.ok();
  }
  if ((v = env.get("overflow_retain_bytes", "ZERFOO_OVERFLOW_POOL_RETAIN_GB")) &&
      parse_gib(v, &u)) {
    cfg->overflow_retain_bytes = u;
    env.ok();
  }
  if ((v = env.get("overflow_retain_bytes", "ZARENA_OVERFLOW_RETAIN_BYTES")) && parse_u64(v, &u)) {
    cfg->overflow_retain_bytes = u;
    env.ok();
  }
  if ((v = env.get("overflow_limit_bytes", "ZARENA_OVERFLOW_LIMIT_BYTES")) && parse_u64(v, &u)) {
    cfg->overflow_limit_bytes = u;
    env.ok();
  }
  if ((v = env.get("overflow_slow_ns", "ZARENA_OVERFLOW_SLOW_MS")) && parse_u64(v, &u) &&
      u < 1'000'000'000ull) {
    cfg->overflow_slow_ns = u * 1'000'000ull;
    env.ok();
  }
  if ((v = env.get("flags.poison", "ZTENSOR_ARENA_POISON")) && parse_env_bool(v, &b)) {
    set_flag(cfg, ZARENA_FLAG_POISON, b);
    env.ok();
  }
  if ((v = env.get("flags.poison", "ZARENA_POISON")) && parse_env_bool(v, &b)) {
    set_flag(cfg, ZARENA_FLAG_POISON, b);
    env.ok();
  }
  if ((v = env.get("flags.managed", "ZERFOO_ENABLE_MANAGED_MEM")) && parse_env_bool(v, &b)) {
    set_flag(cfg, ZARENA_FLAG_MANAGED, b);
    env.ok();
  }
  if ((v = env.get("flags.managed", "ZARENA_MANAGED")) && parse_env_bool(v, &b)) {
    set_flag(cfg, ZARENA_FLAG_MANAGED, b);
    env.ok();
  }
  if ((v = env.get("flags.overflow_prewarm", "ZARENA_OVERFLOW_PREWARM")) && parse_env_bool(v, &b)) {
    set_flag(cfg, ZARENA_FLAG_OVERFLOW_PREWARM, b);
    env.ok();
  }
  if ((v = env.get("name", "ZARENA_NAME")) && *v != '\0') {
    cfg->name = v;  // points into the environment, which outlives the call
    env.ok();
  }
  return found;
}

Result resolve_config(const zarena_config* user, ResolvedConfig* out) {
  if (user == nullptr) return Result::fail(Status::kInvalidArgument, "config is NULL");
  if (user->struct_size < kConfigV1Size) {
    return Result::fail(Status::kInvalidArgument,
                        fmt::format("config struct_size {} is smaller than the 1.0 layout ({}); "
                                    "initialise it with zarena_config_init",
                                    user->struct_size, kConfigV1Size));
  }
  zarena_config c = default_config();
  const size_t known = sizeof(zarena_config);
  const size_t given = user->struct_size;
  std::memcpy(&c, user, given < known ? given : known);
  if (given > known) {
    const unsigned char* tail = reinterpret_cast<const unsigned char*>(user) + known;
    for (size_t i = 0; i < given - known; ++i) {
      if (tail[i] != 0) {
        return Result::fail(
            Status::kInvalidArgument,
            fmt::format("config struct_size {} is larger than this library's ({}) and its "
                        "unknown tail is not zero: the caller needs a newer zarena",
                        given, known));
      }
    }
  }
  c.struct_size = sizeof(zarena_config);

  if (c.backend < ZARENA_BACKEND_AUTO || c.backend > ZARENA_BACKEND_CUDA)
    return Result::fail(Status::kInvalidArgument, fmt::format("unknown backend {}", c.backend));
  if (c.capacity_bytes == 0)
    return Result::fail(Status::kInvalidArgument, "capacity_bytes must be > 0");
  if (c.alignment < kMinAlignment || c.alignment > kMaxAlignment ||
      (c.alignment & (c.alignment - 1)) != 0)
    return Result::fail(Status::kInvalidArgument,
                        fmt::format("alignment {} must be a power of two in [{}, {}]", c.alignment,
                                    kMinAlignment, kMaxAlignment));
  if (c.capacity_bytes % c.alignment != 0) {
    // Round down to whole granules; a capacity below one granule is an error.
    if (c.capacity_bytes < c.alignment)
      return Result::fail(Status::kInvalidArgument,
                          fmt::format("capacity_bytes {} is smaller than the alignment {}",
                                      c.capacity_bytes, c.alignment));
    c.capacity_bytes -= c.capacity_bytes % c.alignment;
  }
  if (c.overflow_policy < ZARENA_OVERFLOW_DEFAULT || c.overflow_policy > ZARENA_OVERFLOW_REFUSE)
    return Result::fail(Status::kInvalidArgument,
                        fmt::format("unknown overflow_policy {}", c.overflow_policy));
  if (c.device < 0)
    return Result::fail(Status::kInvalidArgument, fmt::format("device {} < 0", c.device));
  constexpr uint32_t kKnownFlags =
      ZARENA_FLAG_MANAGED | ZARENA_FLAG_POISON | ZARENA_FLAG_OVERFLOW_PREWARM;
  if ((c.flags & ~kKnownFlags) != 0)
    return Result::fail(Status::kInvalidArgument,
                        fmt::format("unknown flags 0x{:x}", c.flags & ~kKnownFlags));
  if (c.overflow_retain_bytes == 0)
    c.overflow_retain_bytes = default_retain_bytes(c.capacity_bytes);
  if (c.overflow_slow_ns == 0) c.overflow_slow_ns = kDefaultOverflowSlowNs;

  ResolvedConfig r;
  r.name = (c.name != nullptr && c.name[0] != '\0') ? c.name : "zarena";
  c.name = nullptr;  // the arena owns its copy in r.name
  r.cfg = c;

  // Attribute each field: the environment (when it set this value), the struct, or the
  // default. Recomputed here because zarena_config_init does not record it.
  zarena_config defaults = default_config();
  defaults.overflow_retain_bytes = default_retain_bytes(c.capacity_bytes);
  defaults.overflow_slow_ns = kDefaultOverflowSlowNs;
  zarena_config env_cfg = default_config();
  std::vector<EnvSetting> env = apply_environment(&env_cfg);
  for (const EnvSetting& s : env) {
    if (!s.parsed) {
      r.warnings.push_back(
          fmt::format("ignored {}='{}' (not a valid {})", s.variable, s.raw, s.field));
    }
  }
  auto origin = [&](const char* field, bool equals_default, bool equals_env) -> std::string {
    std::string var;
    for (const EnvSetting& s : env) {
      if (s.parsed && s.field == field) var = s.variable;  // the last one applied wins
    }
    if (!var.empty() && equals_env) return "env:" + var;
    return equals_default ? "default" : "config";
  };
  auto add = [&](const char* field, std::string value, bool eq_def, bool eq_env) {
    r.sources.push_back({field, std::move(value), origin(field, eq_def, eq_env)});
  };
  add("backend", backend_name(c.backend), c.backend == defaults.backend,
      c.backend == env_cfg.backend);
  add("device", std::to_string(c.device), c.device == defaults.device, c.device == env_cfg.device);
  add("capacity_bytes", std::to_string(c.capacity_bytes),
      c.capacity_bytes == defaults.capacity_bytes, c.capacity_bytes == env_cfg.capacity_bytes);
  add("alignment", std::to_string(c.alignment), c.alignment == defaults.alignment,
      c.alignment == env_cfg.alignment);
  add("overflow_policy", policy_name(c.overflow_policy),
      c.overflow_policy == defaults.overflow_policy, c.overflow_policy == env_cfg.overflow_policy);
  const uint64_t env_retain = env_cfg.overflow_retain_bytes
                                  ? env_cfg.overflow_retain_bytes
                                  : default_retain_bytes(c.capacity_bytes);
  add("overflow_retain_bytes", std::to_string(c.overflow_retain_bytes),
      c.overflow_retain_bytes == defaults.overflow_retain_bytes,
      c.overflow_retain_bytes == env_retain);
  add("overflow_limit_bytes", std::to_string(c.overflow_limit_bytes),
      c.overflow_limit_bytes == defaults.overflow_limit_bytes,
      c.overflow_limit_bytes == env_cfg.overflow_limit_bytes);
  const uint64_t env_slow =
      env_cfg.overflow_slow_ns ? env_cfg.overflow_slow_ns : kDefaultOverflowSlowNs;
  add("overflow_slow_ns", std::to_string(c.overflow_slow_ns),
      c.overflow_slow_ns == defaults.overflow_slow_ns, c.overflow_slow_ns == env_slow);
  add("stream", fmt::format("{}", c.stream), c.stream == nullptr, false);
  auto flag = [&](const char* field, uint32_t bit) {
    add(field, (c.flags & bit) ? "on" : "off", (c.flags & bit) == (defaults.flags & bit),
        (c.flags & bit) == (env_cfg.flags & bit));
  };
  flag("flags.managed", ZARENA_FLAG_MANAGED);
  flag("flags.poison", ZARENA_FLAG_POISON);
  flag("flags.overflow_prewarm", ZARENA_FLAG_OVERFLOW_PREWARM);
  add("name", r.name, r.name == "zarena", env_cfg.name != nullptr && r.name == env_cfg.name);
  *out = std::move(r);
  return Result::ok();
}

}  // namespace zarena_core
