// The one table of configuration fields. Each zarena_config field is declared here once,
// and everything else is driven by the table: the defaults zarena_config_init writes, the
// environment variables that set a field (ztensor's aliases included) and how their text
// is read, the valid range of every number (checked alike for the C struct, the
// environment, Go and Python, which all reach zarena_create with a struct), the "0 means
// a default" rules applied at create, source attribution, the typed fields of the
// "arena.config" record, the Go mirror (go/config_fields_gen.go), zarena.h's and Python's
// ZARENA_FLAG_* / FLAG_* values, the README's configuration table and docs/CONFIG.md's (all
// written by tools/gen; CTest fails when the committed copies differ). The other ZARENA_* variables
// (logging, tooling) are listed below the table so that the unknown-variable check knows them.
//
// Adding a field: append it to zarena_config (zarena.h), add its row here in struct order,
// then regenerate (cmake --build <build> --target zarena_generate). Adding a flag: its row
// (the next bit, with header_doc: zarena.h's comment on it), then regenerate.
#pragma once

#include <cstddef>
#include <cstdint>

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
// A quiet NaN as float32, and as float64 where two words pair up: poisoned memory read as
// either propagates NaN instead of plausible numbers.
inline constexpr uint32_t kDefaultPoisonWord = 0x7FF80000u;
inline constexpr uint64_t kDefaultCommitChunk = 64ull << 20;
// The largest byte size a capacity or a commit step may be: sizes up to it round up to any
// alignment or commit granularity without wrapping (a commit step near 2^64 wrapped to 0
// and the first allocation divided by it). Requests above it are refused too (arena.cpp).
inline constexpr uint64_t kMaxSizeBytes = 1ull << 62;
inline constexpr const char kDefaultName[] = "zarena";

// Where a field lives in zarena_config.
enum class Storage : uint8_t { kI32, kU32, kU64, kPointer, kString, kFlag };

// What a field's value is; decides how it is rendered and typed in the record.
enum class ValueKind : uint8_t {
  kEnum,      // an int32 named by enum_names (record: STRING)
  kCount,     // a signed count or ordinal (record: INT)
  kBytes,     // a byte size (record: UINT)
  kDuration,  // nanoseconds (record: UINT)
  kWord,      // a bit pattern, shown in hex (record: UINT)
  kSwitch,    // one bit of flags (record: BOOL)
  kText,      // a string the arena copies (record: STRING)
  kPointer,   // an opaque handle; no environment variable (record: STRING)
};

// The kind of the field's value in the "arena.config" record (ZARENA_FIELD_*).
constexpr int32_t record_field_kind(ValueKind k) {
  switch (k) {
    case ValueKind::kCount:
      return ZARENA_FIELD_INT;
    case ValueKind::kBytes:
    case ValueKind::kDuration:
    case ValueKind::kWord:
      return ZARENA_FIELD_UINT;
    case ValueKind::kSwitch:
      return ZARENA_FIELD_BOOL;
    default:  // enum names, text, the stream
      return ZARENA_FIELD_STRING;
  }
}

// How one environment variable writes a value (docs/CONFIG.md has the parsing rules).
enum class Syntax : uint8_t {
  kNone,              // no value to check (tooling variables)
  kEnumName,          // one of enum_names, any case
  kCount,             // decimal digits
  kBytes,             // decimal number, optional fraction and unit (2GB, 512MiB, 1.5GiB, 64k)
  kBytesOrUnlimited,  // kBytes, or "unlimited" (= ZARENA_OVERFLOW_UNLIMITED)
  kGiB,               // decimal number of GiB, fraction allowed (ztensor's *_GB variables)
  kMillis,            // decimal milliseconds, stored as nanoseconds
  kWord,              // decimal, or hexadecimal with 0x, fitting 32 bits
  kSwitch,            // 1/true/yes/on, 0/false/no/off/empty
  kSwitchOff,         // a switch that turns its flag off: 0/false/no/off sets the flag
  kNonEmpty,          // on when set to anything but "" (ztensor's reading of its switches)
  kText,              // non-empty, no blanks at either end
  kLogLevel,          // a ZARENA_LOG_LEVEL name
};

struct EnvVar {
  const char* name = nullptr;
  Syntax syntax = Syntax::kNone;
  const char* example = nullptr;  // a valid value, shown when the given one is not
};

// The Go mirror's view of a field.
enum class GoKind : uint8_t {
  kPlain,     // Go numeric type converted to and from the C type; zero = default/env
  kDuration,  // time.Duration from nanoseconds; > 0 overrides
  kString,    // Go string; "" = default/env
  kStream,    // uintptr passed to shim_create, not through the struct (cgo pointer rules)
  kFlag,      // a Flags constant; the Config's one Flags field is OR-ed in
};

inline constexpr int kMaxEnvPerField = 2;

struct FieldSpec {
  const char* key;  // the record key and source name: "capacity_bytes", "flags.poison"
  size_t offset;    // offsetof(zarena_config, member)
  Storage storage;
  ValueKind kind;
  uint32_t bit = 0;      // Storage::kFlag: the ZARENA_FLAG_* bit
  uint64_t initial = 0;  // what zarena_config_init writes before the env
  const char* const* enum_names = nullptr;
  uint32_t enum_count = 0;
  // The valid range of a number (rows that hold one must give it: range(), or names() and
  // flag() for enums and switches), for every source alike: the C struct, the
  // environment, Go and Python. Empty (min > max) on rows without a number.
  uint64_t min = 1, max = 0;
  // "0 means the default D": D from the otherwise resolved config; applied at create.
  uint64_t (*zero_means)(const zarena_config&) = nullptr;
  // Extra check of an environment value; returns why it is invalid, or nullptr.
  const char* (*check)(uint64_t) = nullptr;
  const char* text_default = "";     // Storage::kString: what NULL or "" stands for
  EnvVar env[kMaxEnvPerField] = {};  // applied in order: the last one set wins
  int env_count = 0;
  // Documentation and the Go mirror.
  const char* go_name = nullptr;  // Config field (or Flag constant) name
  const char* go_type = nullptr;  // its Go type
  GoKind go_kind = GoKind::kPlain;
  const char* doc = "";          // one line for the README and the Go comment
  const char* default_doc = "";  // the README's default column
  const char* c_doc = "";        // Storage::kFlag: zarena.h's comment on ZARENA_FLAG_<NAME>

  constexpr FieldSpec(const char* k, size_t off, Storage s, ValueKind v)
      : key(k), offset(off), storage(s), kind(v) {}
  constexpr FieldSpec initially(uint64_t v) const {
    FieldSpec f = *this;
    f.initial = v;
    return f;
  }
  constexpr FieldSpec flag(uint32_t b) const {
    FieldSpec f = *this;
    f.bit = b;
    f.min = 0;
    f.max = 1;
    return f;
  }
  template <uint32_t N>
  constexpr FieldSpec names(const char* const (&n)[N]) const {
    FieldSpec f = *this;
    f.enum_names = n;
    f.enum_count = N;
    f.min = 0;
    f.max = N - 1;
    return f;
  }
  constexpr FieldSpec range(uint64_t lo, uint64_t hi) const {
    FieldSpec f = *this;
    f.min = lo;
    f.max = hi;
    return f;
  }
  constexpr FieldSpec zero_is(uint64_t (*fn)(const zarena_config&)) const {
    FieldSpec f = *this;
    f.zero_means = fn;
    return f;
  }
  constexpr FieldSpec checked(const char* (*fn)(uint64_t)) const {
    FieldSpec f = *this;
    f.check = fn;
    return f;
  }
  constexpr FieldSpec text_is(const char* v) const {
    FieldSpec f = *this;
    f.text_default = v;
    return f;
  }
  constexpr FieldSpec var(const char* name, Syntax syntax, const char* example) const {
    FieldSpec f = *this;
    f.env[f.env_count++] = EnvVar{name, syntax, example};
    return f;
  }
  constexpr FieldSpec go(const char* name, const char* type, GoKind k = GoKind::kPlain) const {
    FieldSpec f = *this;
    f.go_name = name;
    f.go_type = type;
    f.go_kind = k;
    return f;
  }
  constexpr FieldSpec docs(const char* what, const char* default_text) const {
    FieldSpec f = *this;
    f.doc = what;
    f.default_doc = default_text;
    return f;
  }
  constexpr FieldSpec header_doc(const char* text) const {
    FieldSpec f = *this;
    f.c_doc = text;
    return f;
  }
};

inline constexpr const char* kBackendNames[] = {"auto", "host", "cuda"};
inline constexpr const char* kPolicyNames[] = {"default", "async", "sync", "refuse"};

namespace config_rules {
constexpr uint64_t retain_default(const zarena_config& c) {
  return c.capacity_bytes > kMinDefaultRetain ? c.capacity_bytes : kMinDefaultRetain;
}
constexpr uint64_t limit_default(const zarena_config& c) { return c.capacity_bytes; }
constexpr uint64_t slow_default(const zarena_config&) { return kDefaultOverflowSlowNs; }
constexpr uint64_t poison_default(const zarena_config&) { return kDefaultPoisonWord; }
constexpr uint64_t chunk_default(const zarena_config&) { return kDefaultCommitChunk; }
constexpr const char* alignment_check(uint64_t v) {
  return (v & (v - 1)) != 0 ? "not a power of two" : nullptr;
}
}  // namespace config_rules

#define ZARENA_FIELD(member, storage, kind) \
  FieldSpec(#member, offsetof(zarena_config, member), Storage::storage, ValueKind::kind)
#define ZARENA_FLAG_FIELD(key, bit)                                                           \
  FieldSpec("flags." key, offsetof(zarena_config, flags), Storage::kFlag, ValueKind::kSwitch) \
      .flag(bit)

// In zarena_config's order. Flag rows sit where `flags` is.
inline constexpr FieldSpec kConfigFields[] = {
    ZARENA_FIELD(backend, kI32, kEnum)
        .names(kBackendNames)
        .initially(ZARENA_BACKEND_AUTO)
        .var("ZARENA_BACKEND", Syntax::kEnumName, "host")
        .go("Backend", "Backend")
        .docs("where the region lives: `auto`, `host` or `cuda`",
              "`auto`: CUDA when a device is usable, else host"),
    ZARENA_FIELD(device, kI32, kCount)
        .range(0, 1023)
        .var("ZARENA_DEVICE", Syntax::kCount, "1")
        .go("Device", "int32")
        .docs("CUDA device ordinal", "`0`"),
    ZARENA_FIELD(capacity_bytes, kU64, kBytes)
        .initially(kDefaultCapacity)
        .range(1, kMaxSizeBytes)
        .var("ZERFOO_ARENA_SIZE_GB", Syntax::kGiB, "0.5")
        .var("ZARENA_CAPACITY_BYTES", Syntax::kBytes, "2GiB")
        .go("CapacityBytes", "uint64")
        .docs("region size (the maximum with `ZARENA_EXPANDABLE`)", "1 GiB"),
    ZARENA_FIELD(alignment, kU64, kBytes)
        .initially(kDefaultAlignment)
        .range(kMinAlignment, kMaxAlignment)
        .checked(config_rules::alignment_check)
        .var("ZARENA_ALIGNMENT", Syntax::kBytes, "4096")
        .go("Alignment", "uint64")
        .docs("alignment of every block, power of two in [8, 1 GiB]",
              "`256` (what `cudaMalloc` gives)"),
    ZARENA_FIELD(overflow_policy, kI32, kEnum)
        .names(kPolicyNames)
        .initially(ZARENA_OVERFLOW_DEFAULT)
        .var("ZARENA_OVERFLOW_POLICY", Syntax::kEnumName, "refuse")
        .go("OverflowPolicy", "OverflowPolicy")
        .docs("when the region is full: `default`, `async`, `sync` or `refuse`",
              "`default`: `async` with a stream, else `sync`"),
    ZARENA_FIELD(overflow_retain_bytes, kU64, kBytes)
        .zero_is(config_rules::retain_default)
        .range(0, UINT64_MAX)
        .var("ZERFOO_OVERFLOW_POOL_RETAIN_GB", Syntax::kGiB, "2")
        .var("ZARENA_OVERFLOW_RETAIN_BYTES", Syntax::kBytes, "512MiB")
        .go("OverflowRetainBytes", "uint64")
        .docs("overflow pool release threshold", "capacity, at least 64 MiB"),
    ZARENA_FIELD(overflow_limit_bytes, kU64, kBytes)
        .zero_is(config_rules::limit_default)
        .range(0, UINT64_MAX)
        .var("ZARENA_OVERFLOW_LIMIT_BYTES", Syntax::kBytesOrUnlimited, "4GiB")
        .go("OverflowLimitBytes", "uint64")
        .docs("cap on live overflow bytes; `unlimited` (Go: `OverflowUnlimited`) for none",
              "the capacity"),
    ZARENA_FIELD(stream, kPointer, kPointer)
        .go("Stream", "uintptr", GoKind::kStream)
        .docs("`cudaStream_t` the memory is used on", "NULL (the legacy stream)"),
    ZARENA_FLAG_FIELD("managed", 0x1)
        .header_doc("region from cudaMallocManaged (where supported)")
        .var("ZERFOO_ENABLE_MANAGED_MEM", Syntax::kNonEmpty, "1")
        .var("ZARENA_MANAGED", Syntax::kSwitch, "1")
        .go("FlagManaged", "Flags", GoKind::kFlag)
        .docs("region from `cudaMallocManaged` where supported", "off"),
    ZARENA_FLAG_FIELD("poison", 0x2)
        .header_doc("fill freed/reclaimed blocks with poison_word (debugging)")
        .var("ZTENSOR_ARENA_POISON", Syntax::kSwitch, "1")
        .var("ZARENA_POISON", Syntax::kSwitch, "1")
        .go("FlagPoison", "Flags", GoKind::kFlag)
        .docs("fill freed and reclaimed blocks with the poison word", "off"),
    ZARENA_FLAG_FIELD("overflow_prewarm", 0x4)
        .header_doc(
            "at create, allocate+free the retained overflow size once so pages are resident")
        .var("ZARENA_OVERFLOW_PREWARM", Syntax::kSwitch, "1")
        .go("FlagOverflowPrewarm", "Flags", GoKind::kFlag)
        .docs("make the retained overflow size resident at create", "off"),
    ZARENA_FLAG_FIELD("expandable", 0x8)
        .header_doc("capacity_bytes becomes the maximum: the region's address range is reserved at "
                    "create and memory is committed on demand, commit_chunk_bytes at a time (see "
                    "\"Expandable arenas\")")
        .var("ZARENA_EXPANDABLE", Syntax::kSwitch, "1")
        .go("FlagExpandable", "Flags", GoKind::kFlag)
        .docs("capacity is the maximum; memory is committed on demand", "off"),
    ZARENA_FLAG_FIELD("managed_fallback", 0x10)
        .header_doc(
            "with ZARENA_FLAG_MANAGED on a device without managed memory: use device memory "
            "(and say so in \"arena.config\") instead of failing zarena_create with "
            "ZARENA_E_UNSUPPORTED")
        .var("ZARENA_MANAGED_FALLBACK", Syntax::kSwitch, "1")
        .go("FlagManagedFallback", "Flags", GoKind::kFlag)
        .docs("managed memory unsupported: use device memory instead of failing", "off"),
    ZARENA_FLAG_FIELD("strict_config", 0x20)
        .header_doc("invalid configuration fails zarena_create with ZARENA_E_INVALID_ARGUMENT (the "
                    "message lists every problem) instead of a warning: this includes invalid "
                    "environment values and unknown ZARENA_* environment variables (see "
                    "zarena_config_init)")
        .var("ZARENA_STRICT_CONFIG", Syntax::kSwitch, "1")
        .go("FlagStrictConfig", "Flags", GoKind::kFlag)
        .docs("invalid configuration or unknown `ZARENA_*` variables fail create", "off"),
    ZARENA_FLAG_FIELD("step_records", 0x40)
        .header_doc("log an \"arena.step\" record (info) at every zarena_reset: the epoch's peak, "
                    "allocations, reuse and overflow. Off by default: a training loop resets "
                    "thousands of times")
        .var("ZARENA_STEP_RECORDS", Syntax::kSwitch, "1")
        .go("FlagStepRecords", "Flags", GoKind::kFlag)
        .docs("log an `arena.step` record at every reset", "off"),
    ZARENA_FLAG_FIELD("no_resets", 0x80)
        .header_doc("the program frees every block it allocates and never resets: the arena is a "
                    "general-purpose pool (zarena.torch sets this). The diagnosis then makes no "
                    "guess about steps that are never reset: no \"arena.reset_cadence\" warning, "
                    "and an overflow is never diagnosed never_reset or reset_stopped (see "
                    "zarena_diagnose)")
        .var("ZARENA_NO_RESETS", Syntax::kSwitch, "1")
        .go("FlagNoResets", "Flags", GoKind::kFlag)
        .docs("the program frees what it allocates and never resets (a general-purpose "
              "pool, as `zarena.torch`): no reset warnings or verdicts",
              "off"),
    ZARENA_FLAG_FIELD("plan", 0x100)
        .header_doc("(1.2) step plans on. Since 1.3 they are on by default (ZARENA_FLAG_NO_PLAN "
                    "turns them off), so this flag changes nothing; kept for programs that set it")
        .go("FlagPlan", "Flags", GoKind::kFlag)
        .docs("(1.2) plans on; they are on by default since 1.3, so it changes nothing", "off"),
    ZARENA_FLAG_FIELD("diagnose_sync", 0x200)
        .header_doc(
            "(1.1) the \"arena.first_overflow\" (or \"arena.overflow_summary\") record of "
            "an overflow that succeeds is built and handed to the log callback (or stderr) "
            "by the allocating call itself, before it returns, instead of by zarena's "
            "reporter thread: an engine whose contract is \"the diagnosis is logged before "
            "Alloc returns\" needs no zarena_log_flush (which waits for every arena's "
            "records). Costs the record's building on that one call (the epoch's first "
            "overflow; later overflows of the epoch log nothing). No lock is held while the "
            "callback runs (see \"Logging\"). Off by default")
        .var("ZARENA_DIAGNOSE_SYNC", Syntax::kSwitch, "1")
        .go("FlagDiagnoseSync", "Flags", GoKind::kFlag)
        .docs("the diagnosis of an overflow that succeeds is logged before the allocating "
              "call returns (not by the reporter thread)",
              "off"),
    ZARENA_FLAG_FIELD("no_plan", 0x400)
        .header_doc("(1.3) step plans off. Plans are on by default: the arena learns a repeating "
                    "step (zarena_step_begin or zarena_reset marks where steps begin) and serves "
                    "it from a packed plan, with no allocator work per block (see \"Step plans\" "
                    "and docs/PLANS.md). A program whose steps never repeat pays for the learning "
                    "now and then only. ZARENA_PLAN=0 sets this flag, ZARENA_PLAN=1 clears it. "
                    "A trace file records what the plans serve (trace format 2.2)")
        .var("ZARENA_PLAN", Syntax::kSwitchOff, "0")
        .go("FlagNoPlan", "Flags", GoKind::kFlag)
        .docs("step plans off (on by default: the arena learns a repeating step and serves it "
              "from a packed plan, docs/PLANS.md)",
              "off: plans on"),
    ZARENA_FIELD(name, kString, kText)
        .text_is(kDefaultName)
        .var("ZARENA_NAME", Syntax::kText, "train")
        .go("Name", "string", GoKind::kString)
        .docs("arena label in log records", "`zarena`"),
    ZARENA_FIELD(overflow_slow_ns, kU64, kDuration)
        .zero_is(config_rules::slow_default)
        .range(0, 999'999'999ull * 1'000'000ull)
        .var("ZARENA_OVERFLOW_SLOW_MS", Syntax::kMillis, "25")
        .go("OverflowSlow", "time.Duration", GoKind::kDuration)
        .docs("watchdog: overflow calls slower than this log `overflow.slow`", "10 ms"),
    ZARENA_FIELD(poison_word, kU32, kWord)
        .zero_is(config_rules::poison_default)
        .range(0, UINT32_MAX)
        .var("ZARENA_POISON_WORD", Syntax::kWord, "0x7FF80000")
        .go("PoisonWord", "uint32")
        .docs("32-bit pattern the poison flag writes", "`0x7FF80000` (a quiet NaN)"),
    ZARENA_FIELD(commit_chunk_bytes, kU64, kBytes)
        .zero_is(config_rules::chunk_default)
        .range(0, kMaxSizeBytes)
        .var("ZARENA_COMMIT_CHUNK_BYTES", Syntax::kBytes, "256MiB")
        .go("CommitChunkBytes", "uint64")
        .docs("expandable arena: commit step", "64 MiB"),
    ZARENA_FIELD(trim_keep_bytes, kU64, kBytes)
        .range(0, UINT64_MAX)
        .var("ZARENA_TRIM_KEEP_BYTES", Syntax::kBytes, "1GiB")
        .go("TrimKeepBytes", "uint64")
        .docs("expandable arena: at reset, decommit above max(this, in use); a step plan claiming "
              "its zone trims whatever the value",
              "0: no trim at a reset"),
    ZARENA_FIELD(trace_file, kString, kText)
        .var("ZARENA_TRACE_FILE", Syntax::kText, "/tmp/train.zatrace")
        .go("TraceFile", "string", GoKind::kString)
        .docs("record every event to this file (see `zarena-replay`)", "none"),
};

#undef ZARENA_FIELD
#undef ZARENA_FLAG_FIELD

inline constexpr size_t kConfigFieldCount = sizeof(kConfigFields) / sizeof(kConfigFields[0]);

// A row whose value is a number (an enum index, a count, a size, a duration, a word, a
// switch): the rows with a range.
constexpr bool holds_number(const FieldSpec& f) {
  return f.storage != Storage::kPointer && f.storage != Storage::kString;
}
constexpr bool every_number_has_a_range() {
  for (const FieldSpec& f : kConfigFields) {
    if (holds_number(f) && f.min > f.max) return false;
  }
  return true;
}
static_assert(every_number_has_a_range(),
              "a number in the configuration table without a valid range: add .range(lo, hi)");

// ZARENA_* variables that are not configuration fields but are zarena's: the unknown-
// variable check must not flag them, and those with a syntax are checked like the rest.
struct OtherVariable {
  const char* name;
  Syntax syntax;
  const char* example;
  const char* doc;          // README, docs/CONFIG.md
  const char* default_doc;  // README, docs/CONFIG.md
  const char* const* enum_names = nullptr;
  uint32_t enum_count = 0;
};
inline constexpr const char* kLogFormatNames[] = {"text", "json"};
inline constexpr OtherVariable kOtherVariables[] = {
    {"ZARENA_ZTENSOR_ENV", Syntax::kSwitch, "0",
     "`0`: read only the `ZARENA_*` variables, not ztensor's `ZERFOO_*`/`ZTENSOR_*` ones (for "
     "an engine that owns those switches and passes its own decisions in the config)",
     "on"},
    {"ZARENA_LOG_LEVEL", Syntax::kLogLevel, "warn",
     "stderr threshold: `trace`, `debug`, `info`, `warn`, `error`, `off`", "`info`"},
    {"ZARENA_LOG_STDERR", Syntax::kSwitch, "1",
     "`1`: mirror records to stderr even when a callback is registered (a Nop logger "
     "cannot swallow the diagnosis)",
     "off"},
    {"ZARENA_LOG_FORMAT", Syntax::kEnumName, "json",
     "stderr format: `text` (a short line per record) or `json` (an object per line, "
     "every field)",
     "`text`", kLogFormatNames, 2},
    {"ZARENA_LIBRARY", Syntax::kNone, nullptr, "the Python module: path of libzarena.so.1",
     "next to the module, then the build tree"},
    {"ZARENA_TORCH_LIBRARY", Syntax::kNone, nullptr, "`zarena.torch`: path of libzarena_torch.so",
     "next to the loaded libzarena.so.1"},
};

}  // namespace zarena_core
