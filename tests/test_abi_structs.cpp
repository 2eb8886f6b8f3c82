// Versioned structs across library versions: a caller compiled against an older header
// (smaller struct) or a newer one (larger struct) must work with this library. The "old"
// and "new" layouts below are what such callers compile; guard bytes catch any access
// beyond the caller's struct_size.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "config/config.h"
#include "zarena/zarena.h"

namespace {

// zarena_config as of 1.0, before the overflow_slow_ns extension.
struct OldConfig {
  uint32_t struct_size;
  int32_t backend;
  int32_t device;
  uint64_t capacity_bytes;
  uint64_t alignment;
  int32_t overflow_policy;
  uint64_t overflow_retain_bytes;
  uint64_t overflow_limit_bytes;
  void* stream;
  uint32_t flags;
  const char* name;
};
static_assert(sizeof(OldConfig) == offsetof(zarena_config, overflow_slow_ns),
              "OldConfig must be a prefix of zarena_config");

// zarena_config as released in 1.0.0: OldConfig plus overflow_slow_ns (88 bytes).
struct Config100 {
  OldConfig head;
  uint64_t overflow_slow_ns;
};
static_assert(sizeof(Config100) == 88, "the 1.0.0 layout is 88 bytes");
static_assert(sizeof(Config100) == offsetof(zarena_config, poison_word),
              "Config100 must be the 1.0.0 prefix of zarena_config");
// The 1.1 layout: five fields appended, nothing moved.
static_assert(offsetof(zarena_config, poison_word) == 88 &&
                  offsetof(zarena_config, reserved0) == 92 &&
                  offsetof(zarena_config, commit_chunk_bytes) == 96 &&
                  offsetof(zarena_config, trim_keep_bytes) == 104 &&
                  offsetof(zarena_config, trace_file) == 112 && sizeof(zarena_config) == 120,
              "the 1.1 config layout moved");

// A later version that appended two fields.
struct NewConfig {
  zarena_config current;
  uint64_t future_a;
  uint64_t future_b;
};

// zarena_stats as of 1.0: ends at overflow_max_latency_ns.
struct OldStats {
  uint32_t struct_size;
  uint64_t fields[22];
};
static_assert(sizeof(OldStats) ==
                  offsetof(zarena_stats, overflow_max_latency_ns) + sizeof(uint64_t),
              "OldStats must be the 1.0 prefix of zarena_stats");

// 1.1 appends, in this order: the pin/poison/commit counters, the diagnosis counters, then
// used_peak_bytes, pinned_peak_bytes, epoch_max_alloc_aligned_bytes and overflow_live_blocks
// at the very end (readers that read stats by layout, such as Python's Stats, rely on it).
static_assert(offsetof(zarena_stats, pinned_bytes) == offsetof(zarena_stats, overflow_failures) + 8,
              "1.1 fields follow the 1.0 extensions");
static_assert(
    offsetof(zarena_stats, steps) == offsetof(zarena_stats, commit_failures) + 8 &&
        offsetof(zarena_stats, epoch_steps) == offsetof(zarena_stats, steps) + 8 &&
        offsetof(zarena_stats, overflow_epochs) == offsetof(zarena_stats, steps) + 16 &&
        offsetof(zarena_stats, overflow_records) == offsetof(zarena_stats, steps) + 24 &&
        offsetof(zarena_stats, overflow_summaries) == offsetof(zarena_stats, steps) + 32 &&
        offsetof(zarena_stats, needed_bytes) == offsetof(zarena_stats, steps) + 40 &&
        offsetof(zarena_stats, used_peak_bytes) == offsetof(zarena_stats, needed_bytes) + 8 &&
        offsetof(zarena_stats, pinned_peak_bytes) == offsetof(zarena_stats, used_peak_bytes) + 8 &&
        offsetof(zarena_stats, epoch_max_alloc_aligned_bytes) ==
            offsetof(zarena_stats, pinned_peak_bytes) + 8 &&
        offsetof(zarena_stats, overflow_live_blocks) ==
            offsetof(zarena_stats, epoch_max_alloc_aligned_bytes) + 8 &&
        offsetof(zarena_stats, plan_steps) == offsetof(zarena_stats, overflow_live_blocks) + 8,
    "the diagnosis counters, then used_peak_bytes, pinned_peak_bytes, "
    "epoch_max_alloc_aligned_bytes and overflow_live_blocks, then the step-plan counters");
// 1.2 appends the step-plan counters (ZARENA_FLAG_PLAN), plan_live_bytes last.
static_assert(offsetof(zarena_stats, plan_hits) == offsetof(zarena_stats, plan_steps) + 8 &&
                  offsetof(zarena_stats, plan_live_bytes) ==
                      offsetof(zarena_stats, plan_steps) + 64 &&
                  sizeof(zarena_stats) == offsetof(zarena_stats, plan_live_bytes) + 8 &&
                  sizeof(zarena_stats) == 448,
              "the step-plan counters are the last fields of zarena_stats");
// zarena_overflow_allocator (1.1): a versioned struct the program fills; its 1.1 layout is
// the smallest zarena_set_overflow_allocator accepts.
static_assert(offsetof(zarena_overflow_allocator, reserved) == 4 &&
                  offsetof(zarena_overflow_allocator, ctx) == 8 &&
                  offsetof(zarena_overflow_allocator, allocate) == 16 &&
                  offsetof(zarena_overflow_allocator, deallocate) == 24 &&
                  offsetof(zarena_overflow_allocator, name) == 32 &&
                  sizeof(zarena_overflow_allocator) == 40,
              "the 1.1 layout of zarena_overflow_allocator");
// zarena_diagnosis (1.1): the sentences first, then the facts.
static_assert(offsetof(zarena_diagnosis, overflowed) == 4 &&
                  offsetof(zarena_diagnosis, verdict) == 8 &&
                  offsetof(zarena_diagnosis, advice) == 16 &&
                  offsetof(zarena_diagnosis, cause) == 24 &&
                  offsetof(zarena_diagnosis, epoch) == 32 &&
                  offsetof(zarena_diagnosis, steps_explicit) == 56 &&
                  offsetof(zarena_diagnosis, warned) == 60 &&
                  sizeof(zarena_diagnosis) == offsetof(zarena_diagnosis, requested_bytes) + 8,
              "zarena_diagnosis layout");

struct NewStats {
  zarena_stats current;
  uint64_t future[3];
};

constexpr unsigned char kGuard = 0xCD;
constexpr uint64_t kCapacity = 1u << 20;

// Captures "arena.config" records so a test can see what the library resolved.
struct ConfigLog {
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> fields;  // of the last arena.config
  uint32_t record_size = 0;
};

void capture(void* user, const zarena_log_record* rec) {
  auto* log = static_cast<ConfigLog*>(user);
  std::lock_guard<std::mutex> lock(log->mu);
  log->record_size = rec->struct_size;
  if (std::strcmp(rec->event, "arena.config") != 0) return;
  log->fields.clear();
  for (uint32_t i = 0; i < rec->field_count; ++i) {
    const zarena_log_field& f = rec->fields[i];
    std::string v;
    switch (f.kind) {
      case ZARENA_FIELD_STRING:
        v = f.s;
        break;
      case ZARENA_FIELD_UINT:
        v = std::to_string(static_cast<uint64_t>(f.i));
        break;
      case ZARENA_FIELD_DOUBLE:
        v = std::to_string(f.f);
        break;
      default:
        v = std::to_string(f.i);
        break;
    }
    log->fields.emplace_back(f.key, v);
  }
}

class AbiStructs : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(zarena_set_log_callback(&capture, &log_, ZARENA_LOG_INFO), ZARENA_OK);
  }
  void TearDown() override {
    zarena_destroy(arena_);
    zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_INFO);
  }
  std::string config_field(const std::string& key) {
    std::lock_guard<std::mutex> lock(log_.mu);
    for (const auto& kv : log_.fields)
      if (kv.first == key) return kv.second;
    return "<absent>";
  }
  void make_arena() {
    zarena_config cfg;
    zarena_config_init(&cfg);
    cfg.backend = ZARENA_BACKEND_HOST;
    cfg.capacity_bytes = kCapacity;
    ASSERT_EQ(zarena_create(&cfg, &arena_), ZARENA_OK) << zarena_last_error();
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(arena_, 1000, &p), ZARENA_OK);
    ASSERT_EQ(zarena_alloc(arena_, 3000, &p), ZARENA_OK);
    ASSERT_EQ(zarena_free(arena_, p), ZARENA_OK);
    ASSERT_EQ(zarena_reset(arena_), ZARENA_OK);
    ASSERT_EQ(zarena_alloc(arena_, 500, &p), ZARENA_OK);
  }
  zarena_stats reference_stats() {
    zarena_stats s;
    std::memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    EXPECT_EQ(zarena_get_stats(arena_, &s), ZARENA_OK);
    return s;
  }

  ConfigLog log_;
  zarena* arena_ = nullptr;
};

OldConfig old_config() {
  OldConfig c;
  std::memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.backend = ZARENA_BACKEND_HOST;
  c.capacity_bytes = kCapacity;
  c.alignment = 512;
  c.overflow_policy = ZARENA_OVERFLOW_REFUSE;
  c.name = "old-caller";
  return c;
}

TEST_F(AbiStructs, OlderConfigReadsOnlyItsFieldsAndDefaultsTheRest) {
  // What follows the caller's struct in its memory is not the library's to read.
  struct {
    OldConfig cfg;
    uint64_t beyond;
  } mem;
  mem.cfg = old_config();
  mem.beyond = ~0ull;
  ASSERT_EQ(zarena_create(reinterpret_cast<const zarena_config*>(&mem.cfg), &arena_), ZARENA_OK)
      << zarena_last_error();
  EXPECT_EQ(config_field("overflow_slow_ns"), std::to_string(zarena_core::kDefaultOverflowSlowNs));
  EXPECT_EQ(config_field("overflow_slow_ns_source"), "default");
  EXPECT_EQ(config_field("alignment"), "512");
  EXPECT_EQ(config_field("alignment_source"), "config");
  EXPECT_EQ(config_field("name"), "old-caller");

  zarena_core::ResolvedConfig rc;
  ASSERT_TRUE(
      zarena_core::resolve_config(reinterpret_cast<const zarena_config*>(&mem.cfg), &rc).is_ok());
  EXPECT_EQ(rc.cfg.overflow_slow_ns, zarena_core::kDefaultOverflowSlowNs);
  EXPECT_EQ(rc.cfg.capacity_bytes, kCapacity);
  EXPECT_EQ(rc.cfg.overflow_policy, ZARENA_OVERFLOW_REFUSE);
  EXPECT_EQ(rc.cfg.struct_size, sizeof(zarena_config));

  // Old callers keep working end to end.
  void* p = nullptr;
  ASSERT_EQ(zarena_alloc(arena_, 4096, &p), ZARENA_OK);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 512, 0u);
}

// A caller compiled against 1.0.0 (88 bytes) gets the 1.1 fields' defaults, and the
// library never reads the bytes after its struct (here: values that would be invalid).
TEST_F(AbiStructs, Config100GetsThe11DefaultsAndNothingBeyondIsRead) {
  struct {
    Config100 cfg;
    uint32_t poison_word;
    uint32_t reserved0;
    uint64_t commit_chunk_bytes;
    uint64_t trim_keep_bytes;
    const char* trace_file;
  } mem;
  std::memset(&mem, 0xFF, sizeof mem);
  mem.cfg.head = old_config();
  mem.cfg.head.struct_size = sizeof(Config100);
  mem.cfg.overflow_slow_ns = 12345;
  zarena_core::ResolvedConfig rc;
  const auto* as_config = reinterpret_cast<const zarena_config*>(&mem.cfg);
  ASSERT_TRUE(zarena_core::resolve_config(as_config, &rc).is_ok());  // reserved0 unread
  EXPECT_EQ(rc.cfg.overflow_slow_ns, 12345u);
  EXPECT_EQ(rc.cfg.poison_word, zarena_core::kDefaultPoisonWord);
  EXPECT_EQ(rc.cfg.commit_chunk_bytes, zarena_core::kDefaultCommitChunk);
  EXPECT_EQ(rc.cfg.trim_keep_bytes, 0u);
  EXPECT_EQ(rc.trace_file, "");
  EXPECT_EQ(rc.cfg.overflow_limit_bytes, kCapacity) << "1.0's 0 now means the default cap";
  ASSERT_EQ(zarena_create(as_config, &arena_), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(config_field("poison_word_source"), "default");
  EXPECT_EQ(config_field("trace_file"), "");
  EXPECT_EQ(config_field("overflow_slow_ns_source"), "config");
}

// zarena_config_init_sized for a 1.0.0 caller writes 88 bytes, none of the 1.1 tail.
TEST_F(AbiStructs, ConfigInitSizedFor100WritesNoneOfThe11Tail) {
  struct {
    Config100 cfg;
    unsigned char guard[40];
  } mem;
  std::memset(&mem, kGuard, sizeof mem);
  zarena_config_init_sized(reinterpret_cast<zarena_config*>(&mem.cfg), sizeof(Config100));
  EXPECT_EQ(mem.cfg.head.struct_size, sizeof(Config100));
  EXPECT_EQ(mem.cfg.overflow_slow_ns, 0u);
  for (unsigned char b : mem.guard) ASSERT_EQ(b, kGuard);
}

TEST_F(AbiStructs, ConfigSmallerThanTheFirstLayoutIsRejected) {
  OldConfig c = old_config();
  for (uint32_t size : {0u, 4u, static_cast<uint32_t>(offsetof(OldConfig, name))}) {
    c.struct_size = size;
    zarena* out = reinterpret_cast<zarena*>(0x1);
    EXPECT_EQ(zarena_create(reinterpret_cast<const zarena_config*>(&c), &out),
              ZARENA_E_INVALID_ARGUMENT)
        << size;
    EXPECT_EQ(out, reinterpret_cast<zarena*>(0x1)) << "out must stay untouched on failure";
    EXPECT_NE(std::string(zarena_last_error()).find("struct_size"), std::string::npos);
  }
}

TEST_F(AbiStructs, NewerConfigWithZeroTailIsAccepted) {
  NewConfig c;
  std::memset(&c, 0, sizeof c);
  zarena_config_init(&c.current);
  c.current.struct_size = sizeof c;
  c.current.backend = ZARENA_BACKEND_HOST;
  c.current.capacity_bytes = kCapacity;
  c.current.overflow_slow_ns = 12345;
  ASSERT_EQ(zarena_create(&c.current, &arena_), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(config_field("overflow_slow_ns"), "12345");
  EXPECT_EQ(config_field("overflow_slow_ns_source"), "config");
}

TEST_F(AbiStructs, NewerConfigWithNonZeroTailIsRejected) {
  for (int which = 0; which < 2; ++which) {
    NewConfig c;
    std::memset(&c, 0, sizeof c);
    zarena_config_init(&c.current);
    c.current.struct_size = sizeof c;
    c.current.backend = ZARENA_BACKEND_HOST;
    c.current.capacity_bytes = kCapacity;
    (which == 0 ? c.future_a : c.future_b) = 1;
    zarena* out = nullptr;
    EXPECT_EQ(zarena_create(&c.current, &out), ZARENA_E_INVALID_ARGUMENT);
    EXPECT_EQ(out, nullptr);
    EXPECT_NE(std::string(zarena_last_error()).find("newer"), std::string::npos)
        << zarena_last_error();
  }
}

TEST_F(AbiStructs, ConfigInitWritesExactlyTheCurrentLayout) {
  struct {
    zarena_config cfg;
    unsigned char guard[32];
  } mem;
  std::memset(&mem, kGuard, sizeof mem);
  zarena_config_init(&mem.cfg);
  EXPECT_EQ(mem.cfg.struct_size, sizeof(zarena_config));
  for (unsigned char b : mem.guard) ASSERT_EQ(b, kGuard);
}

// An older caller's zarena_config_init (the macro: its own sizeof) fills only the
// struct it has; the library's newer layout must not spill past it.
TEST_F(AbiStructs, ConfigInitSizedNeverWritesPastTheCallersStruct) {
  struct {
    OldConfig cfg;
    unsigned char guard[32];
  } mem;
  std::memset(&mem, kGuard, sizeof mem);
  zarena_config_init_sized(reinterpret_cast<zarena_config*>(&mem.cfg), sizeof(OldConfig));
  EXPECT_EQ(mem.cfg.struct_size, sizeof(OldConfig));
  EXPECT_EQ(mem.cfg.alignment, 256u);
  for (unsigned char b : mem.guard) ASSERT_EQ(b, kGuard);
  // And the old struct is a valid config.
  mem.cfg.backend = ZARENA_BACKEND_HOST;
  mem.cfg.capacity_bytes = kCapacity;
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(reinterpret_cast<zarena_config*>(&mem.cfg), &a), ZARENA_OK)
      << zarena_last_error();
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

TEST_F(AbiStructs, ConfigInitSizedZeroesANewerCallersTail) {
  NewConfig n;
  std::memset(&n, kGuard, sizeof n);
  zarena_config_init_sized(&n.current, sizeof n);
  EXPECT_EQ(n.current.struct_size, sizeof n);
  EXPECT_EQ(n.future_a, 0u);
  EXPECT_EQ(n.future_b, 0u);
  n.current.backend = ZARENA_BACKEND_HOST;
  n.current.capacity_bytes = kCapacity;
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&n.current, &a), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// The exported unsized symbol (dlopen users, function pointers) fills the 1.0.0 layout.
TEST_F(AbiStructs, ExportedUnsizedConfigInitFillsThe100Layout) {
  struct {
    zarena_config cfg;
    unsigned char guard[32];
  } mem;
  std::memset(&mem, kGuard, sizeof mem);
  (zarena_config_init)(&mem.cfg);  // parentheses: the function, not the macro
  EXPECT_EQ(mem.cfg.struct_size, 88u);
  for (unsigned char b : mem.guard) ASSERT_EQ(b, kGuard);
}

TEST_F(AbiStructs, OlderStatsGetsItsPrefixAndNothingBeyond) {
  make_arena();
  const zarena_stats ref = reference_stats();
  struct {
    OldStats stats;
    unsigned char guard[64];
  } mem;
  std::memset(&mem, kGuard, sizeof mem);
  mem.stats.struct_size = sizeof(OldStats);
  ASSERT_EQ(zarena_get_stats(arena_, reinterpret_cast<zarena_stats*>(&mem.stats)), ZARENA_OK)
      << zarena_last_error();
  EXPECT_EQ(mem.stats.struct_size, sizeof(OldStats));
  EXPECT_EQ(
      std::memcmp(reinterpret_cast<const char*>(&mem.stats) + offsetof(OldStats, fields),
                  reinterpret_cast<const char*>(&ref) + offsetof(zarena_stats, capacity_bytes),
                  sizeof mem.stats.fields),
      0);
  EXPECT_EQ(mem.stats.fields[0], kCapacity);  // capacity_bytes
  EXPECT_EQ(mem.stats.fields[4], 1u);         // epoch
  for (unsigned char b : mem.guard) ASSERT_EQ(b, kGuard);
}

TEST_F(AbiStructs, GetStatsNeverWritesPastStructSize) {
  make_arena();
  const zarena_stats ref = reference_stats();
  const size_t v1 = sizeof(OldStats);
  // Every size a caller could pass, byte by byte, from the 1.0 layout to beyond this one.
  for (size_t size = v1; size <= sizeof(NewStats) + 8; ++size) {
    std::vector<unsigned char> buf(size + 64, kGuard);
    uint32_t s32 = static_cast<uint32_t>(size);
    std::memcpy(buf.data(), &s32, sizeof s32);
    ASSERT_EQ(zarena_get_stats(arena_, reinterpret_cast<zarena_stats*>(buf.data())), ZARENA_OK);
    for (size_t i = size; i < buf.size(); ++i) ASSERT_EQ(buf[i], kGuard) << size << " @" << i;
    uint32_t back;
    std::memcpy(&back, buf.data(), sizeof back);
    EXPECT_EQ(back, size);
    const size_t known = std::min(size, sizeof(zarena_stats));
    EXPECT_EQ(std::memcmp(buf.data() + sizeof(uint32_t),
                          reinterpret_cast<const unsigned char*>(&ref) + sizeof(uint32_t),
                          known - sizeof(uint32_t)),
              0)
        << size;
    for (size_t i = sizeof(zarena_stats); i < size; ++i)
      ASSERT_EQ(buf[i], 0) << "unknown tail must be zeroed, size " << size << " @" << i;
  }
}

TEST_F(AbiStructs, NewerStatsGetsItsUnknownTailZeroed) {
  make_arena();
  const zarena_stats ref = reference_stats();
  struct {
    NewStats stats;
    unsigned char guard[64];
  } mem;
  std::memset(&mem, kGuard, sizeof mem);
  mem.stats.current.struct_size = sizeof(NewStats);
  ASSERT_EQ(zarena_get_stats(arena_, &mem.stats.current), ZARENA_OK);
  EXPECT_EQ(mem.stats.current.struct_size, sizeof(NewStats));
  EXPECT_EQ(mem.stats.current.used_bytes, ref.used_bytes);
  EXPECT_EQ(mem.stats.current.overflow_failures, ref.overflow_failures);
  for (uint64_t f : mem.stats.future) EXPECT_EQ(f, 0u);
  for (unsigned char b : mem.guard) ASSERT_EQ(b, kGuard);
}

TEST_F(AbiStructs, StatsSmallerThanTheFirstLayoutIsRejectedUntouched) {
  make_arena();
  std::vector<unsigned char> buf(sizeof(zarena_stats), kGuard);
  const uint32_t size = sizeof(OldStats) - 1;
  std::memcpy(buf.data(), &size, sizeof size);
  const std::vector<unsigned char> before = buf;
  EXPECT_EQ(zarena_get_stats(arena_, reinterpret_cast<zarena_stats*>(buf.data())),
            ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(buf, before);
  EXPECT_NE(std::string(zarena_last_error()).find("struct_size"), std::string::npos);
}

TEST_F(AbiStructs, LogRecordCarriesTheLibraryStructSize) {
  make_arena();  // logs arena.config
  std::lock_guard<std::mutex> lock(log_.mu);
  EXPECT_EQ(log_.record_size, sizeof(zarena_log_record));
  // An older reader relies on the fields of the first layout being there.
  EXPECT_GE(log_.record_size, offsetof(zarena_log_record, field_count) + sizeof(uint32_t));
  EXPECT_FALSE(log_.fields.empty());
}

}  // namespace
