// The log sink: stderr fallback (seen from a child process), ZARENA_LOG_STDERR mirroring,
// ZARENA_LOG_LEVEL and callback thresholds, callbacks that read stats, callbacks from 8
// threads at once, and the rate limiter with its "suppressed" count.
//
// Child processes re-run this test binary ($ZTEST_HELPER, else /proc/self/exe)
// with ZTEST_HELPER_MODE set: a static initialiser then runs one scenario and
// exits before GoogleTest starts.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "log/log.h"
#include "support.h"
#include "zarena/zarena_testing.h"

extern char** environ;

using zarena_test::kKiB;
using zarena_test::kMiB;
using zarena_test::LogCapture;
using zarena_test::make_host_arena;
using zarena_test::Record;
using zarena_test::sample_pass;
using zarena_test::stats_of;

namespace {

// --- child-process scenarios ------------------------------------------------------

// The original failure, small: weights, boundary, per-sample passes, never a reset.
void never_reset_scenario() {
  zarena* a = make_host_arena(4 * kMiB, "child");
  void* w = nullptr;
  zarena_alloc(a, 512 * kKiB, &w);
  zarena_mark_step_boundary(a);
  while (sample_pass(a, kKiB) == ZARENA_OK) {
  }
  zarena_destroy(a);
}

std::atomic<int> g_child_records{0};
std::string g_child_verdict;
void child_callback(void*, const zarena_log_record* rec) {
  g_child_records.fetch_add(1);
  for (uint32_t i = 0; i < rec->field_count; ++i) {
    if (std::strcmp(rec->fields[i].key, "verdict") == 0 &&
        std::strcmp(rec->event, "arena.first_overflow") == 0) {
      g_child_verdict = rec->fields[i].s;
    }
  }
}

// Every record type the library emits today, with a label of typical length: the
// environment problems (set by the parent), arena.config, arena.reset_cadence,
// arena.first_overflow, overflow.slow (every spill counts as slow) and arena.destroy.
void every_record_scenario() {
  zarena_config cfg;
  zarena_config_init(&cfg);
  cfg.backend = ZARENA_BACKEND_HOST;
  cfg.capacity_bytes = 4 * kMiB;
  cfg.overflow_policy = ZARENA_OVERFLOW_SYNC;  // spills until the default cap, then fails
  cfg.overflow_slow_ns = 1;
  cfg.name = "llama-7b-finetune-rank0";
  zarena* a = nullptr;
  if (zarena_create(&cfg, &a) != ZARENA_OK) return;
  void* w = nullptr;
  zarena_alloc(a, 512 * kKiB, &w);
  zarena_mark_step_boundary(a);
  while (sample_pass(a, kKiB) == ZARENA_OK) {
  }
  zarena_destroy(a);
}

int run_helper_mode(const std::string& mode) {
  if (mode == "every_record") {
    every_record_scenario();
  } else if (mode == "never_reset") {
    never_reset_scenario();
  } else if (mode == "callback" || mode == "callback_off") {
    // A host program that wired a logger (or, with min_level OFF, a Nop logger).
    zarena_set_log_callback(child_callback, nullptr,
                            mode == "callback" ? ZARENA_LOG_TRACE : ZARENA_LOG_OFF);
    never_reset_scenario();
    std::printf("callback records: %d verdict: %s\n", g_child_records.load(),
                g_child_verdict.c_str());
  } else {
    std::fprintf(stderr, "unknown helper mode %s\n", mode.c_str());
    return 2;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  return 0;
}

struct HelperHook {
  HelperHook() {
    const char* mode = std::getenv("ZTEST_HELPER_MODE");
    if (mode != nullptr) _exit(run_helper_mode(mode));
  }
} const g_helper_hook;

struct ChildResult {
  int exit_code = -1;
  std::string out, err;
};

std::string slurp(const char* path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs this binary in `mode` with the ZARENA_LOG_* variables replaced by `env`.
ChildResult run_child(const std::string& mode, const std::vector<std::string>& env) {
  const char* helper = std::getenv("ZTEST_HELPER");
  const std::string exe = helper != nullptr ? helper : "/proc/self/exe";
  std::vector<std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "ZARENA_LOG_", 11) != 0 &&
        std::strncmp(*e, "ZTEST_HELPER_MODE=", 24) != 0) {
      vars.emplace_back(*e);
    }
  }
  vars.push_back("ZTEST_HELPER_MODE=" + mode);
  for (const auto& v : env) vars.push_back(v);
  std::vector<char*> envp;
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  char out_path[] = "/tmp/zarena_log_out_XXXXXX";
  char err_path[] = "/tmp/zarena_log_err_XXXXXX";
  const int out_fd = mkstemp(out_path);
  const int err_fd = mkstemp(err_path);
  ChildResult r;
  if (out_fd < 0 || err_fd < 0) {
    ADD_FAILURE() << "mkstemp failed";
    return r;
  }
  std::vector<char> exe_buf(exe.begin(), exe.end());
  exe_buf.push_back('\0');
  char* argv[] = {exe_buf.data(), nullptr};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    execve(exe_buf.data(), argv, envp.data());
    _exit(127);
  }
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  close(out_fd);
  close(err_fd);
  r.exit_code = (pid > 0 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  unlink(out_path);
  unlink(err_path);
  return r;
}

std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(needle) != std::string::npos) out.push_back(line);
  }
  return out;
}

TEST(StderrSink, NoCallbackMeansOneLinePerRecordOnStderr) {
  const ChildResult r = run_child("never_reset", {});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  const auto warn = lines_with(r.err, "arena.reset_cadence");
  const auto over = lines_with(r.err, "arena.first_overflow");
  ASSERT_EQ(warn.size(), 1u) << r.err;
  ASSERT_EQ(over.size(), 1u) << r.err;
  // The level as ZARENA_LOG_LEVEL and the JSON records spell it (spdlog's "warning" was).
  EXPECT_NE(warn[0].find(" zarena warn arena.reset_cadence"), std::string::npos) << warn[0];
  EXPECT_NE(over[0].find(" zarena warn arena.first_overflow"), std::string::npos) << over[0];
  for (const std::string& line : lines_with(r.err, " zarena ")) {
    const std::string level = line.substr(line.find(" zarena ") + 8, 5);
    EXPECT_TRUE(level == "info " || level == "warn " || level == "error") << line;
  }
  EXPECT_NE(warn[0].find("zarena_reset after every step"), std::string::npos) << warn[0];
  EXPECT_NE(over[0].find("verdict=never_reset"), std::string::npos) << over[0];
  EXPECT_NE(over[0].find("verdict never_reset"), std::string::npos) << over[0];
  EXPECT_NE(over[0].find("zarena_reset after every step"), std::string::npos) << over[0];
  EXPECT_NE(over[0].find("requested_bytes="), std::string::npos) << over[0];
  EXPECT_LT(r.err.find("arena.reset_cadence"), r.err.find("arena.first_overflow"));
  EXPECT_EQ(lines_with(r.err, "arena.config").size(), 1u);  // info passes by default
  EXPECT_EQ(lines_with(r.err, "arena.destroy").size(), 1u);
}

TEST(StderrSink, LogLevelFromTheEnvironment) {
  ChildResult r = run_child("never_reset", {"ZARENA_LOG_LEVEL=warn"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(lines_with(r.err, "arena.config").empty()) << r.err;
  EXPECT_EQ(lines_with(r.err, "arena.first_overflow").size(), 1u) << r.err;

  r = run_child("never_reset", {"ZARENA_LOG_LEVEL=ERROR"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(lines_with(r.err, "arena.first_overflow").empty()) << r.err;

  r = run_child("never_reset", {"ZARENA_LOG_LEVEL=off"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");

  r = run_child("never_reset", {"ZARENA_LOG_LEVEL=debug"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_with(r.err, "arena.config").size(), 1u) << r.err;
}

TEST(StderrSink, CallbackReplacesStderrUnlessMirrored) {
  ChildResult r = run_child("callback", {});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(lines_with(r.err, "arena.").empty()) << r.err;
  EXPECT_NE(r.out.find("verdict: never_reset"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("callback records: 0"), std::string::npos) << r.out;

  r = run_child("callback", {"ZARENA_LOG_STDERR=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("verdict: never_reset"), std::string::npos) << r.out;
  EXPECT_EQ(lines_with(r.err, "arena.first_overflow").size(), 1u) << r.err;
  EXPECT_EQ(lines_with(r.err, "arena.reset_cadence").size(), 1u) << r.err;
}

TEST(StderrSink, MirrorShowsWarningsPastANopLogger) {
  // The host registered its logger with min_level OFF (or a Nop logger): without the
  // mirror nothing is seen; with it, stderr keeps its own ZARENA_LOG_LEVEL threshold.
  ChildResult r = run_child("callback_off", {});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("callback records: 0"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");

  r = run_child("callback_off", {"ZARENA_LOG_STDERR=1", "ZARENA_LOG_LEVEL=warn"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("callback records: 0"), std::string::npos) << r.out;
  EXPECT_EQ(lines_with(r.err, "arena.first_overflow").size(), 1u) << r.err;
  EXPECT_TRUE(lines_with(r.err, "arena.config").empty()) << r.err;
}

const char* const kEveryEvent[] = {
    "config.invalid_value", "config.unknown_variable", "arena.config", "arena.reset_cadence",
    "arena.first_overflow", "overflow.slow",           "arena.destroy"};
const std::vector<std::string> kProblemEnv = {"ZARENA_ALIGNMENT=3", "ZARENA_OVERFLW_POLICY=sync"};

TEST(StderrSink, EveryHumanLineFitsTheBound) {
  const ChildResult r = run_child("every_record", kProblemEnv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* event : kEveryEvent) {
    EXPECT_FALSE(lines_with(r.err, std::string(" ") + event + " ").empty()) << event << r.err;
  }
  for (const std::string& line : lines_with(r.err, " zarena ")) {
    EXPECT_LE(line.size(), zarena_core::kHumanLineMax) << line;
  }
  // The unknown name comes with the one meant.
  EXPECT_EQ(lines_with(r.err, "did you mean ZARENA_OVERFLOW_POLICY?").size(), 1u) << r.err;
}

TEST(StderrSink, JsonFormatIsOneValidObjectPerLine) {
  const ChildResult text = run_child("every_record", kProblemEnv);
  std::vector<std::string> env = kProblemEnv;
  env.push_back("ZARENA_LOG_FORMAT=json");
  const ChildResult r = run_child("every_record", env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.err);
  std::string line;
  std::vector<std::string> events;
  while (std::getline(in, line)) {
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(line)) << line;
    events.push_back(j.at("event").get<std::string>());
    EXPECT_EQ(j.at("arena"), "llama-7b-finetune-rank0");
    EXPECT_TRUE(j.at("fields").is_object());
    if (events.back() == "arena.config") {
      const auto& f = j["fields"];
      EXPECT_TRUE(f.at("capacity_bytes").is_number_unsigned());
      EXPECT_TRUE(f.at("device").is_number_integer());
      EXPECT_TRUE(f.at("flags.poison").is_boolean());
      EXPECT_EQ(f.at("overflow_limit_bytes"), 4 * kMiB);
      EXPECT_EQ(f.at("alignment_source"), "default");
    }
    if (events.back() == "arena.reset_cadence") {
      EXPECT_TRUE(j["fields"].at("fill_percent").is_number_float());
    }
    if (events.back() == "arena.first_overflow") {
      EXPECT_EQ(j["fields"].at("verdict"), "never_reset");
      EXPECT_EQ(j.at("level"), "warn");
    }
  }
  for (const char* event : kEveryEvent) {
    EXPECT_NE(std::find(events.begin(), events.end(), event), events.end()) << event << r.err;
  }
  // The same records as the text run, one line each.
  EXPECT_EQ(events.size(), lines_with(text.err, " zarena ").size()) << text.err;
}

// --- in-process callback behaviour ------------------------------------------------

// Exhausts a small arena once: records arena.config (info), arena.first_overflow (warn),
// arena.destroy (info).
void overflow_once(const char* name) {
  zarena* a = make_host_arena(16 * kKiB, name);
  void* p = nullptr;
  EXPECT_EQ(zarena_alloc(a, 32 * kKiB, &p), ZARENA_E_OUT_OF_MEMORY);
  zarena_destroy(a);
}

TEST(Callback, MinLevelFilters) {
  {
    LogCapture cap(ZARENA_LOG_WARN);
    overflow_once("lvl");
    EXPECT_TRUE(cap.of("arena.config").empty());
    EXPECT_TRUE(cap.of("arena.destroy").empty());
    EXPECT_EQ(cap.of("arena.first_overflow").size(), 1u);
  }
  {
    LogCapture cap(ZARENA_LOG_ERROR);
    overflow_once("lvl");
    EXPECT_TRUE(cap.all().empty());
  }
  {
    LogCapture cap(ZARENA_LOG_OFF);
    overflow_once("lvl");
    EXPECT_TRUE(cap.all().empty());
  }
  {
    LogCapture cap(ZARENA_LOG_INFO);
    overflow_once("lvl");
    EXPECT_EQ(cap.of("arena.config").size(), 1u);
    EXPECT_EQ(cap.of("arena.destroy").size(), 1u);
    for (const Record& r : cap.all()) {
      EXPECT_GE(r.level, ZARENA_LOG_INFO);
      EXPECT_EQ(r.arena, "lvl");
    }
  }
}

TEST(Callback, InvalidMinLevelChangesNothing) {
  LogCapture cap(ZARENA_LOG_WARN);
  EXPECT_EQ(zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_OFF + 1),
            ZARENA_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(zarena_last_error()).find("min_level"), std::string::npos);
  EXPECT_EQ(zarena_set_log_callback(nullptr, nullptr, -1), ZARENA_E_INVALID_ARGUMENT);
  overflow_once("still");
  EXPECT_EQ(cap.of("arena.first_overflow").size(), 1u);  // the capture is still registered
}

TEST(Callback, RecordLayoutAndFieldKinds) {
  struct Seen {
    uint32_t struct_size = 0;
    bool non_string_s_is_empty = true;
    bool strings_non_null = true;
  } seen;
  auto cb = [](void* ud, const zarena_log_record* rec) {
    auto* s = static_cast<Seen*>(ud);
    s->struct_size = rec->struct_size;
    for (uint32_t i = 0; i < rec->field_count; ++i) {
      const zarena_log_field& f = rec->fields[i];
      if (f.kind == ZARENA_FIELD_STRING && f.s == nullptr) s->strings_non_null = false;
      if (f.kind != ZARENA_FIELD_STRING && (f.s == nullptr || f.s[0] != '\0')) {
        s->non_string_s_is_empty = false;
      }
    }
  };
  ASSERT_EQ(zarena_set_log_callback(cb, &seen, ZARENA_LOG_TRACE), ZARENA_OK);
  overflow_once("layout");
  zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_INFO);
  EXPECT_EQ(seen.struct_size, sizeof(zarena_log_record));
  EXPECT_TRUE(seen.non_string_s_is_empty);
  EXPECT_TRUE(seen.strings_non_null);
}

struct StatsReader {
  zarena* arena = nullptr;
  std::atomic<int> calls{0};
  std::atomic<int> ok{0};
  std::atomic<uint64_t> misses_seen{0};
  std::atomic<int> cadence_seen{0};
};

void read_stats_cb(void* ud, const zarena_log_record* rec) {
  auto* r = static_cast<StatsReader*>(ud);
  if (r->arena == nullptr || std::strcmp(rec->arena_name, "reader") != 0) return;
  r->calls.fetch_add(1);
  zarena_stats s;
  s.struct_size = sizeof s;
  if (zarena_get_stats(r->arena, &s) == ZARENA_OK && zarena_epoch(r->arena) == s.epoch) {
    r->ok.fetch_add(1);
  }
  if (std::strcmp(rec->event, "arena.first_overflow") == 0) r->misses_seen = s.misses;
  if (std::strcmp(rec->event, "arena.reset_cadence") == 0) r->cadence_seen.fetch_add(1);
}

TEST(Callback, MayReadStatsFromInsideTheCallback) {
  // Records from the allocation path (reset_cadence), the overflow path
  // (first_overflow, overflow.slow): none may be emitted with a lock held.
  StatsReader reader;
  ASSERT_EQ(zarena_set_log_callback(read_stats_cb, &reader, ZARENA_LOG_TRACE), ZARENA_OK);
  zarena_config cfg;
  zarena_config_init(&cfg);
  cfg.backend = ZARENA_BACKEND_HOST;
  cfg.capacity_bytes = 4 * kMiB;
  cfg.overflow_policy = ZARENA_OVERFLOW_SYNC;
  cfg.overflow_slow_ns = 1;
  cfg.name = "reader";
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&cfg, &a), ZARENA_OK);
  reader.arena = a;
  void* w = nullptr;
  ASSERT_EQ(zarena_alloc(a, 512 * kKiB, &w), ZARENA_OK);
  ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
  for (int i = 0; i < 80; ++i) ASSERT_EQ(sample_pass(a, kKiB), ZARENA_OK);  // overflows
  // The overflows succeeded: their records come from the reporter thread.
  zarena_log_flush();
  const zarena_stats st = stats_of(a);
  reader.arena = nullptr;
  zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_INFO);
  zarena_destroy(a);
  EXPECT_GT(st.overflow_allocs, 0u);
  EXPECT_EQ(reader.cadence_seen.load(), 1);
  EXPECT_GE(reader.misses_seen.load(), 1u);
  EXPECT_GE(reader.calls.load(), 3);
  EXPECT_EQ(reader.ok.load(), reader.calls.load());
}

// Eight threads overflow eight arenas at once. Each callback waits (bounded) until all
// eight are inside it: that can only happen if no lock serialises the callbacks.
struct Rendezvous {
  std::atomic<int> inside{0};   // callbacks running now
  std::atomic<int> arrived{0};  // callbacks started so far
  std::atomic<int> max_inside{0};
  std::atomic<int> delivered{0};
  std::atomic<int> stats_ok{0};
  zarena* arenas[8] = {};
};

void rendezvous_cb(void* ud, const zarena_log_record* rec) {
  if (std::strcmp(rec->event, "arena.first_overflow") != 0) return;
  auto* rv = static_cast<Rendezvous*>(ud);
  const int idx = rec->arena_name[1] - '0';
  rv->inside.fetch_add(1);
  rv->arrived.fetch_add(1);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (rv->arrived.load() < 8 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  // Nobody leaves before all have arrived, so with no serialising lock this reads 8.
  const int now = rv->inside.load();
  int seen = rv->max_inside.load();
  while (now > seen && !rv->max_inside.compare_exchange_weak(seen, now)) {
  }
  zarena_stats s;
  s.struct_size = sizeof s;
  if (idx >= 0 && idx < 8 && zarena_get_stats(rv->arenas[idx], &s) == ZARENA_OK && s.misses == 1) {
    rv->stats_ok.fetch_add(1);
  }
  rv->delivered.fetch_add(1);
  rv->inside.fetch_sub(1);
}

TEST(Callback, EightThreadsAtOnce) {
  Rendezvous rv;
  const char* names[8] = {"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"};
  for (int i = 0; i < 8; ++i) rv.arenas[i] = make_host_arena(64 * kKiB, names[i]);
  ASSERT_EQ(zarena_set_log_callback(rendezvous_cb, &rv, ZARENA_LOG_WARN), ZARENA_OK);
  std::vector<std::thread> threads;
  std::atomic<int> oom{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      void* p = nullptr;
      for (int k = 0; k < 100; ++k) {
        if (zarena_alloc(rv.arenas[i], 1000 + 256 * (k % 7), &p) != ZARENA_OK) break;
      }
      if (zarena_alloc(rv.arenas[i], 1 * kMiB, &p) == ZARENA_E_OUT_OF_MEMORY) oom.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_INFO);
  for (zarena* a : rv.arenas) zarena_destroy(a);
  EXPECT_EQ(oom.load(), 8);
  EXPECT_EQ(rv.delivered.load(), 8);
  EXPECT_EQ(rv.max_inside.load(), 8);
  EXPECT_EQ(rv.stats_ok.load(), 8);
}

// --- the rate limiter -------------------------------------------------------------

std::atomic<uint64_t> g_fake_now{1'000'000'000};
uint64_t fake_now() { return g_fake_now.load(); }

class RateLimit : public ::testing::Test {
 protected:
  void SetUp() override { zarena_core::log_set_clock_for_testing(fake_now); }
  void TearDown() override {
    zarena_core::log_set_clock_for_testing(nullptr);
    zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_INFO);
  }
  static void advance(uint64_t ns) { g_fake_now.fetch_add(ns); }
};

// Events of this test only ("test." events are exempt from the catalogue check).
constexpr zarena_core::LogEvent kTestRepeat = zarena_core::log_event(
    "test.repeat", ZARENA_LOG_WARN, zarena_core::kLimited, "a repeated warning");
constexpr zarena_core::LogEvent kTestOther = zarena_core::log_event(
    "test.other", ZARENA_LOG_WARN, zarena_core::kNeverDropped, "a warning never limited");
constexpr zarena_core::LogEvent kTestFormat =
    zarena_core::log_event("arena.test", ZARENA_LOG_WARN, zarena_core::kNeverDropped, "");

TEST_F(RateLimit, BurstThenDropsThenSuppressedCount) {
  LogCapture cap;
  auto emit = [](const zarena_core::LogEvent& event) {
    zarena_core::LogRecord r(event, "rl");
    r.message("again").add_uint("n", 1);
    zarena_core::log_emit(r);
  };
  for (int i = 0; i < 20; ++i) emit(kTestRepeat);
  for (int i = 0; i < 20; ++i) emit(kTestOther);  // not rate-limited: never dropped
  EXPECT_EQ(cap.of("test.repeat").size(), zarena_core::kRateBurst);
  EXPECT_EQ(cap.of("test.other").size(), 20u);
  for (const Record& r : cap.of("test.repeat")) EXPECT_EQ(r.field("suppressed"), nullptr);
  EXPECT_EQ(zarena_core::log_pending_suppressed(), 15u);

  advance(zarena_core::kRateIntervalNs / 2);  // half a token: still dropped
  emit(kTestRepeat);
  EXPECT_EQ(cap.of("test.repeat").size(), zarena_core::kRateBurst);

  advance(zarena_core::kRateIntervalNs / 2);  // one token
  emit(kTestRepeat);
  auto got = cap.of("test.repeat");
  ASSERT_EQ(got.size(), zarena_core::kRateBurst + 1);
  EXPECT_EQ(got.back().u("suppressed"), 16u);
  EXPECT_NE(got.back().message.find("16 similar records suppressed"), std::string::npos);
  EXPECT_EQ(zarena_core::log_pending_suppressed(), 0u);

  // The count restarts after it was reported; a long pause refills only up to the burst.
  advance(100 * zarena_core::kRateIntervalNs);
  for (int i = 0; i < 10; ++i) emit(kTestRepeat);
  got = cap.of("test.repeat");
  EXPECT_EQ(got.size(), 2 * zarena_core::kRateBurst + 1);
  EXPECT_EQ(got.back().field("suppressed"), nullptr);
}

TEST_F(RateLimit, OverflowSlowIsLimitedFirstOverflowIsNot) {
  LogCapture cap;
  zarena_config cfg;
  zarena_config_init(&cfg);
  cfg.backend = ZARENA_BACKEND_HOST;
  cfg.capacity_bytes = 64 * kKiB;
  cfg.overflow_policy = ZARENA_OVERFLOW_SYNC;
  cfg.overflow_slow_ns = 1;                              // every overflow call counts as slow
  cfg.overflow_limit_bytes = ZARENA_OVERFLOW_UNLIMITED;  // 25 spills exceed the default cap
  cfg.name = "slow";
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&cfg, &a), ZARENA_OK);
  ASSERT_EQ(zarena_debug_inject_overflow_fault(a, 0, 0, 1000), ZARENA_OK);
  void* p = nullptr;
  for (int i = 0; i < 16; ++i) ASSERT_EQ(zarena_alloc(a, 4 * kKiB, &p), ZARENA_OK);  // full
  for (int i = 0; i < 25; ++i) ASSERT_EQ(zarena_alloc(a, 4 * kKiB, &p), ZARENA_OK);  // overflow
  EXPECT_EQ(stats_of(a).overflow_allocs, 25u);
  EXPECT_EQ(cap.of("arena.first_overflow").size(), 1u);
  EXPECT_EQ(cap.of("overflow.slow").size(), zarena_core::kRateBurst);
  advance(zarena_core::kRateIntervalNs);
  ASSERT_EQ(zarena_alloc(a, 4 * kKiB, &p), ZARENA_OK);
  const auto slow = cap.of("overflow.slow");
  ASSERT_EQ(slow.size(), zarena_core::kRateBurst + 1);
  EXPECT_EQ(slow.back().u("suppressed"), 20u);
  EXPECT_EQ(slow.back().str("path"), "sync");
  // Drops not reported by a later record show up in the arena's summary.
  for (int i = 0; i < 3; ++i) ASSERT_EQ(zarena_alloc(a, 4 * kKiB, &p), ZARENA_OK);
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
  const auto destroy = cap.of("arena.destroy");
  ASSERT_EQ(destroy.size(), 1u);
  EXPECT_EQ(destroy[0].u("log_suppressed"), 3u);
}

TEST(Format, OneLineWithTypedValuesAndQuotedStrings) {
  zarena_core::LogRecord r(kTestFormat, "fmt");
  r.message("hello")
      .add_uint("u", 18446744073709551615ull)
      .add_int("i", -3)
      .add_double("d", 1.5)
      .add_bool("b", true)
      .add_string("plain", "word")
      .add_string("spaced", "two words")
      .add_string("quoted", "say \"hi\"")
      .add_string("empty", "")
      .headline({"i", "d", "b", "plain", "spaced", "quoted", "empty"});
  // Only headline fields, in record order: "u" is not one.
  EXPECT_EQ(zarena_core::log_format_line(r),
            "arena.test [fmt]: hello | i=-3 d=1.5 b=true plain=word "
            "spaced=\"two words\" quoted=\"say \\\"hi\\\"\" empty=\"\"");
}

TEST(Levels, ParseNames) {
  int32_t l = -1;
  EXPECT_TRUE(zarena_core::log_parse_level("WARN", &l));
  EXPECT_EQ(l, ZARENA_LOG_WARN);
  EXPECT_TRUE(zarena_core::log_parse_level("warning", &l));
  EXPECT_EQ(l, ZARENA_LOG_WARN);
  EXPECT_TRUE(zarena_core::log_parse_level("off", &l));
  EXPECT_EQ(l, ZARENA_LOG_OFF);
  l = -1;
  EXPECT_FALSE(zarena_core::log_parse_level("loud", &l));
  EXPECT_FALSE(zarena_core::log_parse_level(nullptr, &l));
  EXPECT_EQ(l, -1);
}

// Issue 24: a record names its arena by handle and by a process-unique id, so a host that
// runs several arenas (of one name, even) routes each record to its pool. Records of the
// create (before zarena_create returned), of the reporter thread (an overflow that
// succeeded) and of the destroy all carry them.
TEST(Identity, RecordsNameTheirArenaByHandleAndId) {
  LogCapture log;
  zarena* a = make_host_arena(4 * kKiB, "twin", ZARENA_OVERFLOW_SYNC);
  zarena* b = make_host_arena(4 * kKiB, "twin", ZARENA_OVERFLOW_SYNC);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const uint64_t ida = zarena_arena_id(a), idb = zarena_arena_id(b);
  EXPECT_NE(ida, 0u);
  EXPECT_GT(idb, ida) << "ids are given in order of creation";
  EXPECT_EQ(zarena_arena_id(nullptr), 0u);
  void *full = nullptr, *p = nullptr;
  ASSERT_EQ(zarena_alloc(a, 4 * kKiB, &full), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(a, 1 * kKiB, &p), ZARENA_OK);  // overflows: first_overflow of a
  ASSERT_EQ(zarena_free(a, p), ZARENA_OK);
  ASSERT_EQ(zarena_free(a, full), ZARENA_OK);
  ASSERT_EQ(zarena_destroy(b), ZARENA_OK);  // arena.destroy of b
  std::map<uint64_t, std::vector<Record>> routed;
  for (const Record& r : log.all()) {
    routed[r.arena_id].push_back(r);
    const zarena* want = r.arena_id == ida ? a : r.arena_id == idb ? b : nullptr;
    EXPECT_EQ(r.handle, want) << r.event;
    EXPECT_EQ(r.arena, r.arena_id != 0 ? "twin" : "") << r.event;
  }
  const auto has = [&](uint64_t id, const std::string& event) {
    for (const Record& r : routed[id])
      if (r.event == event) return true;
    return false;
  };
  EXPECT_TRUE(has(ida, "arena.config")) << "emitted before zarena_create returned";
  EXPECT_TRUE(has(ida, "arena.first_overflow")) << "from the reporter thread";
  EXPECT_FALSE(has(ida, "arena.destroy"));
  EXPECT_TRUE(has(idb, "arena.config"));
  EXPECT_TRUE(has(idb, "arena.destroy"));
  EXPECT_FALSE(has(idb, "arena.first_overflow"));
  EXPECT_EQ(routed.size(), 2u) << "no record without its arena";
  // Never reused: a later arena, even at b's old address, gets a new id.
  zarena* c = make_host_arena(4 * kKiB, "twin");
  EXPECT_GT(zarena_arena_id(c), idb);
  ASSERT_EQ(zarena_destroy(c), ZARENA_OK);
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
}

// A reader compiled against the 1.1 record reads the identity only when the library's
// struct_size covers it; this library's always does.
TEST(Identity, TheRecordGrowsAtItsEnd) {
  static_assert(offsetof(zarena_log_record, arena) > offsetof(zarena_log_record, field_count),
                "the identity follows the 1.1 fields");
  static_assert(
      offsetof(zarena_log_record, arena_id) + sizeof(uint64_t) == sizeof(zarena_log_record),
      "arena_id is the last field");
  zarena_core::LogRecord r(zarena_core::log_events::kArenaConfig,
                           zarena_core::LogSource("x", 7, nullptr));
  EXPECT_EQ(r.source().id, 7u);
  EXPECT_EQ(r.arena_name(), "x");
  const nlohmann::json j = nlohmann::json::parse(zarena_core::log_format_json(r, 0));
  EXPECT_EQ(j.at("arena_id"), 7u) << "the JSON line names the arena too";
  zarena_core::LogRecord process(zarena_core::log_events::kArenaConfig, "");
  EXPECT_FALSE(
      nlohmann::json::parse(zarena_core::log_format_json(process, 0)).contains("arena_id"));
}

}  // namespace
