// The trace writer at its edges, through the engine (cfg.trace_file): host memory running
// out under a traced arena, a write that fails, a forked child, two arenas given one path.
// Each failure must cost the trace, never the call, and must be told when it happens.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "report.h"
#include "support.h"
#include "trace/trace_reader.h"
#include "trace_test_support.h"
#include "zarena/zarena.h"

// Array allocations of exactly g_fail_size bytes fail while it is set (0: none): the
// tracer's chunks (TraceOptions::buffer_bytes, 256 KiB for an arena's trace) and nothing
// else this suite allocates. Both forms: a writer that used the throwing one would let
// std::bad_alloc escape zarena_alloc (noexcept) and end the process.
namespace {
std::atomic<size_t> g_fail_size{0};
}  // namespace

void* operator new[](std::size_t n) {
  if (n != 0 && n == g_fail_size.load(std::memory_order_relaxed)) throw std::bad_alloc();
  void* p = std::malloc(n != 0 ? n : 1);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  if (n != 0 && n == g_fail_size.load(std::memory_order_relaxed)) return nullptr;
  return std::malloc(n != 0 ? n : 1);
}
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace {

using zarena_test::kKiB;
using zarena_test::kMiB;
using zarena_test::LogCapture;
using zarena_test::read_or_die;
using zarena_trace::Trace;

constexpr size_t kArenaChunkBytes = 256 * 1024;  // TraceOptions' default, an arena's
// Waits for a log record that comes from another thread (the tracer's writer). Not a
// time assumption: the limit only turns a missing record into a failure, not a hang.
constexpr auto kRecordWatchdog = std::chrono::minutes(2);

std::string temp_path(const std::string& stem) {
  return zarena_test::trace_temp_path("zarena_edges_", stem);
}

zarena_config traced_config(const std::string& path, const char* name) {
  zarena_config c;
  zarena_config_init(&c);
  c.backend = ZARENA_BACKEND_HOST;
  c.capacity_bytes = 64 * kMiB;
  c.overflow_policy = ZARENA_OVERFLOW_REFUSE;
  c.name = name;
  c.trace_file = path.c_str();
  return c;
}

bool wait_for_record(const LogCapture& log, const std::string& event) {
  return zarena_test::eventually([&] { return log.count(event) != 0; }, kRecordWatchdog);
}

// The report zarena-replay would print for the trace, and its exit status.
int replay_exit(const Trace& t, std::string* text) {
  zarena_replay::Report rep;
  rep.input = "edges";
  rep.trace = &t;
  rep.config = zarena_test::config_of(t);
  rep.main = zarena_test::replay_or_die(t, rep.config);
  std::ostringstream out;
  zarena_replay::print_text(out, rep, 20);
  *text = out.str();
  return rep.exit_code();
}

// Host memory for the trace's buffers runs out: every call still answers as it would
// untraced, the trace stops (its end record counts what it dropped), the program is told
// at once (a record, zarena_trace_status), and replay does not call the file whole.
TEST(TraceEdges, HostMemoryRunningOutCostsTheTraceNotTheCall) {
  LogCapture log(ZARENA_LOG_WARN);
  const std::string path = temp_path("oom");
  const zarena_config c = traced_config(path, "oom");
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(zarena_trace_status(a), ZARENA_OK);
  g_fail_size.store(kArenaChunkBytes);  // no trace chunk can be had from now on
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        void* p = nullptr;
        if (zarena_alloc(a, 256 + i % 4096, &p) != ZARENA_OK) ++failures;
        if (zarena_free(a, p) != ZARENA_OK) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(zarena_reset(a), ZARENA_OK);  // a generic record too (a thread buffer)
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(wait_for_record(log, "arena.trace_failed"));
  EXPECT_EQ(zarena_trace_status(a), ZARENA_E_OUT_OF_MEMORY);
  EXPECT_NE(std::string(zarena_last_error()).find("out of host memory"), std::string::npos)
      << zarena_last_error();
  g_fail_size.store(0);
  EXPECT_EQ(zarena_destroy(a), ZARENA_E_OUT_OF_MEMORY);
  const Trace t = read_or_die(path);
  EXPECT_TRUE(t.summary.complete) << "the file itself is sound: its end record is there";
  EXPECT_GT(t.summary.dropped, 0u);
  EXPECT_FALSE(t.summary.whole());
  std::string text;
  EXPECT_EQ(replay_exit(t, &text), zarena_replay::kExitIncomplete) << text;
  EXPECT_EQ(text.find("fits in"), std::string::npos) << text;
  std::remove(path.c_str());
}

// A write that fails (here: the file may not grow past 8 KiB) is told when it happens,
// not at destroy; the file it leaves is cut short, and replay does not say "fits".
TEST(TraceEdges, AFailedWriteIsToldAtOnce) {
  LogCapture log(ZARENA_LOG_WARN);
  const std::string path = temp_path("write");
  const zarena_config c = traced_config(path, "write");
  rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  rlimit small = saved;
  small.rlim_cur = 8 * kKiB;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  // Enough events to hand a chunk to the writer (whose write then fails), and a bound.
  uint64_t calls = 0;
  for (; calls < 10'000'000 && zarena_trace_status(a) == ZARENA_OK; ++calls) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(a, 512, &p), ZARENA_OK);
    ASSERT_EQ(zarena_free(a, p), ZARENA_OK);
    if (calls % 4096 == 0) {
      EXPECT_EQ(zarena_reset(a), ZARENA_OK);
    }
  }
  EXPECT_EQ(zarena_trace_status(a), ZARENA_E_BACKEND) << "after " << calls << " pairs";
  const std::string why = zarena_last_error();
  EXPECT_NE(why.find(path), std::string::npos) << why;
  EXPECT_NE(why.find("File too large"), std::string::npos) << why;
  EXPECT_TRUE(wait_for_record(log, "arena.trace_failed"));
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto rec = log.of("arena.trace_failed");
  if (!rec.empty()) {
    EXPECT_EQ(rec.front().str("trace_file"), path);
  }
  // The calls go on, untraced.
  void* p = nullptr;
  EXPECT_EQ(zarena_alloc(a, 512, &p), ZARENA_OK);
  EXPECT_EQ(zarena_destroy(a), ZARENA_E_BACKEND);
  const Trace t = read_or_die(path);
  EXPECT_FALSE(t.summary.complete);
  std::string text;
  EXPECT_EQ(replay_exit(t, &text), zarena_replay::kExitIncomplete) << text;
  EXPECT_EQ(text.find("fits in"), std::string::npos) << text;
  EXPECT_NE(text.find("verdict: incomplete_trace"), std::string::npos) << text;
  std::remove(path.c_str());
}

// A child forked by a program with a traced arena exits normally: its exit writes nothing
// into the parent's trace (before, the child's exit flush wrote the parent's buffered
// records a second time).
TEST(TraceEdges, AForkedChildDoesNotWriteTheParentsTrace) {
  const std::string path = temp_path("fork");
  zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_OFF);
  const zarena_config c = traced_config(path, "fork");
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  std::vector<void*> blocks(100);
  for (void*& p : blocks) ASSERT_EQ(zarena_alloc(a, 1000, &p), ZARENA_OK);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) std::exit(0);  // exit handlers run
  const int status = zarena_test::wait_child(pid, kRecordWatchdog);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
  zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_INFO);
  const Trace t = read_or_die(path);
  EXPECT_TRUE(t.summary.whole());
  size_t allocs = 0;
  for (const auto& e : t.events) allocs += e.kind == zarena_trace::Kind::kAlloc;
  EXPECT_EQ(allocs, 100u);
  std::remove(path.c_str());
}

// Two arenas (or processes) given one trace path: neither truncates the other's trace;
// the second writes to the first free numbered name after it, and says so.
TEST(TraceEdges, TwoArenasOnOnePathWriteTwoFiles) {
  LogCapture log(ZARENA_LOG_WARN);
  const std::string path = temp_path("shared");
  const std::string second = path.substr(0, path.rfind('.')) + ".2.zat";
  std::remove(second.c_str());
  const zarena_config c1 = traced_config(path, "first");
  const zarena_config c2 = traced_config(path, "second");
  zarena* a = nullptr;
  zarena* b = nullptr;
  ASSERT_EQ(zarena_create(&c1, &a), ZARENA_OK) << zarena_last_error();
  for (int i = 0; i < 300; ++i) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(a, 1000, &p), ZARENA_OK);
  }
  ASSERT_EQ(zarena_create(&c2, &b), ZARENA_OK) << zarena_last_error();
  for (int i = 0; i < 200; ++i) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(b, 1000, &p), ZARENA_OK);
  }
  const auto renamed = log.of("arena.trace_renamed");
  ASSERT_EQ(renamed.size(), 1u);
  EXPECT_EQ(renamed[0].arena, "second");
  EXPECT_EQ(renamed[0].str("trace_path"), second);
  ASSERT_EQ(zarena_destroy(b), ZARENA_OK);
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
  const Trace ta = read_or_die(path);
  const Trace tb = read_or_die(second);
  EXPECT_TRUE(ta.summary.whole());
  EXPECT_TRUE(tb.summary.whole());
  EXPECT_EQ(ta.info.arena_name, "first");
  EXPECT_EQ(tb.info.arena_name, "second");
  EXPECT_EQ(ta.events.size(), 300u);
  EXPECT_EQ(tb.events.size(), 200u);
  // Once the first is closed, its path is free again.
  zarena* c = nullptr;
  ASSERT_EQ(zarena_create(&c2, &c), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(log.count("arena.trace_renamed"), 1u);
  ASSERT_EQ(zarena_destroy(c), ZARENA_OK);
  std::remove(path.c_str());
  std::remove(second.c_str());
}

}  // namespace
