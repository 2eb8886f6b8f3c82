#include "config/config.h"

#include <fmt/format.h>

#include <cstring>
#include <mutex>
#include <set>

#include "config/config_records.h"
#include "log/log.h"

namespace zarena_core {

namespace {

// The 1.0 layout ends after `name`; callers compiled against 1.0 pass this size.
constexpr uint32_t kConfigV1Size = offsetof(zarena_config, name) + sizeof(const char*);

constexpr uint32_t known_flags() {
  uint32_t bits = 0;
  for (const FieldSpec& f : kConfigFields) {
    if (f.storage == Storage::kFlag) bits |= f.bit;
  }
  return bits;
}

unsigned char* at(zarena_config* c, const FieldSpec& f) {
  return reinterpret_cast<unsigned char*>(c) + f.offset;
}
const unsigned char* at(const zarena_config& c, const FieldSpec& f) {
  return reinterpret_cast<const unsigned char*>(&c) + f.offset;
}

template <typename T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
void store(unsigned char* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

// Each field's value with its "0 = default" rule applied, in the context of `ctx` (the
// rules read other fields, e.g. the retain default is the capacity).
uint64_t effective(const zarena_config& c, const FieldSpec& f, const zarena_config& ctx) {
  const uint64_t v = field_number(c, f);
  return (v == 0 && f.zero_means != nullptr) ? f.zero_means(ctx) : v;
}

// Each distinct problem is logged once per process: a program that creates an arena per
// request would otherwise repeat the same warnings (arena.config still lists them all).
void emit_new_problems(const std::vector<ConfigProblem>& problems, const LogSource& arena) {
  static std::mutex mu;
  static std::set<std::string>* seen = new std::set<std::string>();  // lives to exit
  std::vector<const ConfigProblem*> fresh;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const ConfigProblem& p : problems) {
      if (seen->insert(p.variable + "=" + p.value).second) fresh.push_back(&p);
    }
  }
  for (const ConfigProblem* p : fresh) log_emit(config_problem_record(*p, arena));
}

std::string text_or(const char* s, const char* fallback) {
  return (s != nullptr && s[0] != '\0') ? s : fallback;
}

}  // namespace

uint64_t field_number(const zarena_config& c, const FieldSpec& f) {
  const unsigned char* p = at(c, f);
  switch (f.storage) {
    case Storage::kI32:
      return static_cast<uint64_t>(static_cast<int64_t>(load<int32_t>(p)));
    case Storage::kU32:
      return load<uint32_t>(p);
    case Storage::kU64:
      return load<uint64_t>(p);
    case Storage::kPointer:
      return reinterpret_cast<uintptr_t>(load<void*>(p));
    case Storage::kFlag:
      return (load<uint32_t>(p) & f.bit) != 0 ? 1 : 0;
    case Storage::kString:
      return load<const char*>(p) != nullptr ? 1 : 0;
  }
  return 0;
}

void set_field_number(zarena_config* c, const FieldSpec& f, uint64_t v) {
  unsigned char* p = at(c, f);
  switch (f.storage) {
    case Storage::kI32:
      store<int32_t>(p, static_cast<int32_t>(v));
      break;
    case Storage::kU32:
      store<uint32_t>(p, static_cast<uint32_t>(v));
      break;
    case Storage::kU64:
      store<uint64_t>(p, v);
      break;
    case Storage::kPointer:
      store<void*>(p, reinterpret_cast<void*>(static_cast<uintptr_t>(v)));
      break;
    case Storage::kFlag: {
      const uint32_t flags = load<uint32_t>(p);
      store<uint32_t>(p, v != 0 ? (flags | f.bit) : (flags & ~f.bit));
      break;
    }
    case Storage::kString:
      break;  // strings go through set_field_text
  }
}

const char* field_text(const zarena_config& c, const FieldSpec& f) {
  return f.storage == Storage::kString ? load<const char*>(at(c, f)) : nullptr;
}

void set_field_text(zarena_config* c, const FieldSpec& f, const char* v) {
  if (f.storage == Storage::kString) store<const char*>(at(c, f), v);
}

std::string render_field(const zarena_config& c, const FieldSpec& f) {
  const uint64_t v = field_number(c, f);
  switch (f.kind) {
    case ValueKind::kEnum:
      return v < f.enum_count ? f.enum_names[v] : "invalid";
    case ValueKind::kCount:
      return std::to_string(static_cast<int64_t>(v));
    case ValueKind::kBytes:
      return v == ZARENA_OVERFLOW_UNLIMITED ? "unlimited" : std::to_string(v);
    case ValueKind::kDuration:
      return std::to_string(v);
    case ValueKind::kWord:
      return fmt::format("0x{:08X}", v);
    case ValueKind::kSwitch:
      return v != 0 ? "on" : "off";
    case ValueKind::kText:
      return text_or(field_text(c, f), "");
    case ValueKind::kPointer:
      return fmt::format("{}", reinterpret_cast<void*>(static_cast<uintptr_t>(v)));
  }
  return "";
}

std::string value_problem(const FieldSpec& f, uint64_t v) {
  if (!holds_number(f)) return "";
  // Signed fields compare as signed: -1 is below a minimum of 0, not above the maximum.
  const bool is_signed = f.storage == Storage::kI32;
  const bool below = is_signed ? static_cast<int64_t>(v) < static_cast<int64_t>(f.min) : v < f.min;
  const bool above = is_signed ? static_cast<int64_t>(v) > static_cast<int64_t>(f.max) : v > f.max;
  if (below) return fmt::format("below the minimum {}", f.min);
  if (above) return fmt::format("above the maximum {}", f.max);
  if (const char* bad = f.check != nullptr ? f.check(v) : nullptr) return bad;
  return "";
}

uint64_t default_retain_bytes(uint64_t capacity) {
  zarena_config c{};
  c.capacity_bytes = capacity;
  return config_rules::retain_default(c);
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
  for (const FieldSpec& f : kConfigFields) {
    if (f.initial != 0) set_field_number(&c, f, f.initial);
  }
  return c;
}

Result resolve_config(const zarena_config* user, ResolvedConfig* out, uint64_t arena_id,
                      const zarena* handle) {
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

  // Every number of the table against its range (the environment's values were checked
  // the same way when they were read).
  for (const FieldSpec& f : kConfigFields) {
    if (f.storage == Storage::kFlag) continue;  // unknown bits: below
    const uint64_t v = field_number(c, f);
    const std::string why = value_problem(f, v);
    if (why.empty()) continue;
    const std::string shown =
        f.storage == Storage::kI32 ? std::to_string(static_cast<int64_t>(v)) : std::to_string(v);
    if (f.kind == ValueKind::kEnum) {
      return Result::fail(Status::kInvalidArgument, fmt::format("unknown {} {}", f.key, shown));
    }
    return Result::fail(
        Status::kInvalidArgument,
        fmt::format("{} {} is invalid: {} (valid: {} to {})", f.key, shown, why, f.min, f.max));
  }
  if (c.capacity_bytes % c.alignment != 0) {
    // Round down to whole granules; a capacity below one granule is an error.
    if (c.capacity_bytes < c.alignment)
      return Result::fail(Status::kInvalidArgument,
                          fmt::format("capacity_bytes {} is smaller than the alignment {}",
                                      c.capacity_bytes, c.alignment));
    c.capacity_bytes -= c.capacity_bytes % c.alignment;
  }
  constexpr uint32_t kKnownFlags = known_flags();
  if ((c.flags & ~kKnownFlags) != 0)
    return Result::fail(Status::kInvalidArgument,
                        fmt::format("unknown flags 0x{:x}", c.flags & ~kKnownFlags));
  if (c.reserved0 != 0)
    return Result::fail(Status::kInvalidArgument,
                        fmt::format("reserved0 is {}; it must be 0", c.reserved0));

  ResolvedConfig r;
  r.name = text_or(c.name, kDefaultName);
  r.arena_id = arena_id;
  r.handle = handle;
  r.trace_file = text_or(c.trace_file, "");
  r.problems = environment_problems();
  for (const ConfigProblem& p : r.problems) r.warnings.push_back(p.describe());
  if ((c.flags & ZARENA_FLAG_STRICT_CONFIG) != 0 && !r.problems.empty()) {
    std::string all;
    for (const std::string& w : r.warnings) all += (all.empty() ? "" : "; ") + w;
    return Result::fail(Status::kInvalidArgument,
                        fmt::format("invalid configuration (ZARENA_FLAG_STRICT_CONFIG), {} "
                                    "problem(s): {}",
                                    r.problems.size(), all));
  }

  // Attribute each field: the environment (when it set this value), the struct, or the
  // default. Recomputed here because zarena_config_init does not record it. The "0 =
  // default" rules read the resolved capacity, so every side is compared resolved.
  const zarena_config defaults = default_config();
  zarena_config env_cfg = default_config();
  const std::vector<EnvSetting> env = apply_environment(&env_cfg);
  const zarena_config given_cfg = c;
  for (const FieldSpec& f : kConfigFields) {
    if (f.zero_means != nullptr) set_field_number(&c, f, effective(given_cfg, f, given_cfg));
  }
  for (const FieldSpec& f : kConfigFields) {
    std::string var, raw;
    for (const EnvSetting& s : env) {
      if (s.parsed && s.field == f.key) {  // the last one applied wins
        var = s.variable;
        raw = s.raw;
      }
    }
    bool eq_default, eq_env;
    std::string value;
    if (f.storage == Storage::kString) {
      value = text_or(field_text(c, f), f.text_default);
      eq_default = value == f.text_default;
      eq_env = value == text_or(field_text(env_cfg, f), f.text_default);
    } else {
      const uint64_t mine = field_number(c, f);
      eq_default = mine == effective(defaults, f, given_cfg);
      eq_env = mine == effective(env_cfg, f, given_cfg);
      value = render_field(c, f);
    }
    std::string origin = (!var.empty() && eq_env) ? "env:" + var
                         : eq_default             ? "default"
                                                  : "config";
    // The program's own value replaced what the environment said: say so, or the user
    // wonders why the variable did nothing.
    std::string ignored = !var.empty() && !eq_env ? fmt::format("{}={}", var, raw) : "";
    r.sources.push_back({f.key, std::move(value), std::move(origin), std::move(ignored)});
  }
  // The arena owns its copies of the strings.
  c.name = nullptr;
  c.trace_file = nullptr;
  r.cfg = c;
  emit_new_problems(r.problems, r.log_source());
  *out = std::move(r);
  return Result::ok();
}

}  // namespace zarena_core
