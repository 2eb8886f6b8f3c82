// Helpers every C API suite shares: one RAII arena holder, one capture of the
// process-wide log sink, one stats_of, and the workload the diagnostics suites replay.
// (Before this header there were two of each: log_capture.h's LogCapture and
// overflow_test_util.h's LogCollector, test_capi.cpp's ArenaGuard and test_overflow.cpp's
// ArenaHolder, and two stats_of.)
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/test_points.h"
#include "config/config_fields.h"
#include "diagnosis/verdicts.h"
#include "log/log_events.h"
#include "zarena/zarena.h"

namespace zarena_test {

inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = 1024 * kKiB;

// Stress loops divide their iteration counts by this under a sanitizer (5-15x slower), so
// the sanitizer builds of scripts/test.sh stay within the CI budget.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr int kSanitizerSlowdown = 4;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr int kSanitizerSlowdown = 4;
#else
inline constexpr int kSanitizerSlowdown = 1;
#endif
#else
inline constexpr int kSanitizerSlowdown = 1;
#endif

// --- the log sink --------------------------------------------------------------------

struct Field {
  std::string key;
  int32_t kind = -1;
  int64_t i = 0;
  double f = 0;
  std::string s;
};

struct Record {
  int32_t level = -1;
  std::string event, message, arena;
  std::vector<Field> fields;
  const zarena* handle = nullptr;  // zarena_log_record.arena
  uint64_t arena_id = 0;

  const Field* field(const std::string& key) const {
    for (const auto& f : fields) {
      if (f.key == key) return &f;
    }
    return nullptr;
  }
  uint64_t u(const std::string& key) const {
    const Field* f = field(key);
    EXPECT_NE(f, nullptr) << event << " has no field " << key;
    if (f == nullptr) return ~0ull;
    EXPECT_EQ(f->kind, ZARENA_FIELD_UINT) << key;
    return static_cast<uint64_t>(f->i);
  }
  std::string str(const std::string& key) const {
    const Field* f = field(key);
    EXPECT_NE(f, nullptr) << event << " has no field " << key;
    if (f == nullptr) return "<missing>";
    EXPECT_EQ(f->kind, ZARENA_FIELD_STRING) << key;
    return f->s;
  }
};

inline Record copy_record(const zarena_log_record* r) {
  Record out;
  out.level = r->level;
  out.event = r->event;
  out.message = r->message;
  out.arena = r->arena_name;
  out.handle = r->arena;
  out.arena_id = r->arena_id;
  for (uint32_t k = 0; k < r->field_count; ++k) {
    const zarena_log_field& f = r->fields[k];
    out.fields.push_back({f.key, f.kind, f.i, f.f, f.s != nullptr ? f.s : "<NULL>"});
  }
  return out;
}

// --- the catalogue of records (src/log/log_events.h) ---------------------------------

// The catalogue's entry for an event; nullptr when it has none.
inline const zarena_core::LogEvent* catalogue_entry(const std::string& event) {
  for (const zarena_core::LogEvent* e : zarena_core::kLogEvents) {
    if (event == e->name) return e;
  }
  return nullptr;
}

// The kind the entry documents for key (a pattern row matches its family of keys), or -1
// when it documents no such field.
inline int32_t documented_kind(const zarena_core::LogEvent& e, const std::string& key) {
  auto config_row = [](const std::string& k) -> const zarena_core::FieldSpec* {
    for (const zarena_core::FieldSpec& f : zarena_core::kConfigFields) {
      if (k == f.key) return &f;
    }
    return nullptr;
  };
  if (e.rate_limited && key == zarena_core::kSuppressedField.key) {
    return zarena_core::kSuppressedField.kind;
  }
  const std::string source = "_source";
  for (size_t i = 0; i < e.field_count; ++i) {
    const zarena_core::LogFieldSpec& f = e.fields[i];
    const std::string spec = f.key;
    if (spec == key) return f.kind;
    if (spec == "<config field>") {
      if (const zarena_core::FieldSpec* row = config_row(key)) {
        return zarena_core::record_field_kind(row->kind);
      }
    } else if (spec == "<config field>_source") {
      if (key.size() > source.size() &&
          key.compare(key.size() - source.size(), source.size(), source) == 0 &&
          config_row(key.substr(0, key.size() - source.size())) != nullptr) {
        return f.kind;
      }
    } else if (spec == "warning<N>") {
      if (key.rfind("warning", 0) == 0 && key.size() > 7 &&
          key.find_first_not_of("0123456789", 7) == std::string::npos) {
        return f.kind;
      }
    }
  }
  return -1;
}

// What a record shows that the catalogue does not document ("" when nothing): an event
// without an entry, another level than the entry's, a field the entry does not list or of
// another kind, a verdict that is not in the verdict table (src/diagnosis/verdicts.h).
// Events named "test.*" are a test's own and are not checked.
inline std::string undocumented(const Record& r) {
  if (r.event.rfind("test.", 0) == 0) return "";
  const zarena_core::LogEvent* e = catalogue_entry(r.event);
  if (e == nullptr) return "event " + r.event + " is not in src/log/log_events.h";
  std::string out;
  if (r.level != e->level) out += r.event + ": level differs from its entry; ";
  for (const Field& f : r.fields) {
    const int32_t kind = documented_kind(*e, f.key);
    if (kind < 0) {
      out += r.event + ": field " + f.key + " is not in its entry; ";
    } else if (kind != f.kind) {
      out += r.event + ": field " + f.key + " has another kind than its entry says; ";
    }
    if (f.key == "verdict") {
      bool known = false;
      for (const zarena_core::VerdictSpec& v : zarena_core::kVerdicts) known |= f.s == v.name;
      if (!known) out += r.event + ": verdict " + f.s + " is not in src/diagnosis/verdicts.h; ";
    }
  }
  return out;
}

// Registers itself as the log callback for its lifetime (copying every record it
// receives, thread-safe), so records reach the test instead of stderr; restores the
// default sink at the end. LogCapture(ZARENA_LOG_OFF) just keeps a test quiet. Every record
// it receives is checked against the catalogue (undocumented above): a record the
// catalogue does not describe fails the test.
class LogCapture {
 public:
  explicit LogCapture(int32_t min_level = ZARENA_LOG_TRACE) {
    EXPECT_EQ(zarena_set_log_callback(&LogCapture::callback, this, min_level), ZARENA_OK);
  }
  ~LogCapture() { zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_INFO); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // Records of the calls made so far: those the reporter thread still holds (overflows that
  // succeeded) are waited for first.
  std::vector<Record> all() const {
    zarena_log_flush();
    std::lock_guard<std::mutex> lock(mu_);
    return records_;
  }
  std::vector<Record> of(const std::string& event) const {
    zarena_log_flush();
    std::vector<Record> out;
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& r : records_) {
      if (r.event == event) out.push_back(r);
    }
    return out;
  }
  size_t count(const std::string& event) const { return of(event).size(); }
  // The records of `event` that have reached the callback so far, waiting for nothing
  // (of() waits for the reporter thread first).
  std::vector<Record> arrived(const std::string& event) const {
    std::vector<Record> out;
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& r : records_) {
      if (r.event == event) out.push_back(r);
    }
    return out;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    records_.clear();
  }

 private:
  static void callback(void* self, const zarena_log_record* rec) {
    auto* c = static_cast<LogCapture*>(self);
    Record r = copy_record(rec);
    if (const std::string why = undocumented(r); !why.empty()) ADD_FAILURE() << why;
    std::lock_guard<std::mutex> lock(c->mu_);
    c->records_.push_back(std::move(r));
  }

  mutable std::mutex mu_;
  std::vector<Record> records_;
};

// --- arenas --------------------------------------------------------------------------

// Creates the arena (the test fails if it cannot) and destroys it at scope exit,
// expecting ZARENA_OK from both (nothing to destroy when the create failed).
struct ArenaHolder {
  zarena* a = nullptr;
  explicit ArenaHolder(const zarena_config& c) {
    EXPECT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  }
  ~ArenaHolder() {
    if (a != nullptr) {
      EXPECT_EQ(zarena_destroy(a), ZARENA_OK) << zarena_last_error();
    }
  }
  operator zarena*() const { return a; }
  ArenaHolder(const ArenaHolder&) = delete;
  ArenaHolder& operator=(const ArenaHolder&) = delete;
};

// A host arena's configuration for the overflow suites: the defaults, then capacity, name,
// policy and flags as given (none of the environment's flags, no stream), alignment 256
// and overflow uncapped (tests that want a cap set one).
inline zarena_config host_overflow_config(uint64_t capacity, const char* name, int32_t policy,
                                          uint32_t flags = 0) {
  zarena_config c;
  zarena_config_init(&c);
  c.backend = ZARENA_BACKEND_HOST;
  c.capacity_bytes = capacity;
  c.alignment = 256;
  c.overflow_policy = policy;
  c.overflow_limit_bytes = ZARENA_OVERFLOW_UNLIMITED;
  c.flags = flags;
  c.stream = nullptr;
  c.name = name;
  return c;
}

inline zarena* make_host_arena(uint64_t capacity, const char* name,
                               int32_t policy = ZARENA_OVERFLOW_REFUSE, uint32_t flags = 0) {
  zarena_config cfg;
  zarena_config_init(&cfg);
  cfg.backend = ZARENA_BACKEND_HOST;
  cfg.capacity_bytes = capacity;
  cfg.alignment = 256;
  cfg.overflow_policy = policy;
  cfg.flags |= flags;
  cfg.name = name;
  zarena* a = nullptr;
  EXPECT_EQ(zarena_create(&cfg, &a), ZARENA_OK) << zarena_last_error();
  return a;
}

// The whole current stats layout (zeroed first, so a failed call compares as zeros).
inline zarena_stats stats_of(const zarena* a) {
  zarena_stats s;
  std::memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  EXPECT_EQ(zarena_get_stats(a, &s), ZARENA_OK) << zarena_last_error();
  return s;
}

// A variable set for the guard's scope (the suites start with none of ZARENA_*, ZERFOO_*,
// ZTENSOR_*: tests/isolate.h), unset after.
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~EnvGuard() { unsetenv(name_); }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  const char* name_;
};

// Where the region lies and how it is used (zarena_region_info), zeroed first.
inline zarena_region region_of(zarena* a) {
  zarena_region r;
  std::memset(&r, 0, sizeof r);
  r.struct_size = sizeof r;
  EXPECT_EQ(zarena_region_info(a, &r), ZARENA_OK) << zarena_last_error();
  return r;
}

// --- child processes -----------------------------------------------------------------

// waitpid, but a child still running after `watchdog` (waiting forever on a lock, say) is
// killed and fails the test instead of hanging it. The limit is no time assumption: a
// child that is merely slow on a busy machine has minutes. Returns the wait status.
inline int wait_child(pid_t pid, std::chrono::steady_clock::duration watchdog) {
  const auto deadline = std::chrono::steady_clock::now() + watchdog;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0) return -1;
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "the child process is still running after the watchdog's limit";
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// --- what happens on a thread of zarena's ----------------------------------------------

// Whether `pred` holds within `limit`, asking every 2 ms: for what zarena's own threads do
// with no call of the test's to wait on (the release thread of deferred_release.h). The
// limit is a deadline for a failure, not a timing assumption: on a busy machine the thread
// has seconds for what takes it milliseconds.
template <class Pred>
bool eventually(Pred pred, std::chrono::steady_clock::duration limit = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() > deadline) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// --- races driven by events ----------------------------------------------------------

// Widens one window of the library for a racing thread: at each point named, the thread
// that reaches it yields a while (a test point, src/base/test_points.h), so that a race
// the window allows happens in most runs rather than now and then. No outcome depends on
// how long: where the library excludes the race, the other thread just waits. A window
// may end on an event (until(i), asked before yield i: the other thread did what the
// window waits for) and be opened a counted number of times (allow): on a loaded host
// each yield can give the core away for a whole time slice, so a test that needs one
// raced window per round opens one, and it closes as soon as the race happened.
// (test_plan_promises.cpp's, shared since test_semantics.cpp races resets too.)
class YieldAt {
 public:
  using Point = zarena_core::test_points::Point;
  YieldAt(std::initializer_list<Point> points, int yields = 20,
          std::function<bool(int)> until = nullptr)
      : yields_(yields), until_(std::move(until)) {
    for (Point p : points) mask_ |= 1u << static_cast<unsigned>(p);
    zarena_core::test_points::set(&hit, this);
  }
  ~YieldAt() { zarena_core::test_points::set(nullptr, nullptr); }
  YieldAt(const YieldAt&) = delete;
  YieldAt& operator=(const YieldAt&) = delete;

  // From now on only the next n hits open the window (before: every hit).
  void allow(int n) { open_.store(n); }
  // How many windows ended because `until` said so (the race happened inside one).
  uint64_t ended_by_event() const { return ended_by_event_.load(); }

 private:
  static void hit(Point p, void* ctx) {
    auto* y = static_cast<YieldAt*>(ctx);
    if ((y->mask_ & (1u << static_cast<unsigned>(p))) == 0) return;
    int open = y->open_.load();
    do {
      if (open == 0) return;
    } while (open > 0 && !y->open_.compare_exchange_weak(open, open - 1));
    for (int i = 0; i < y->yields_; ++i) {
      if (y->until_ && y->until_(i)) {
        y->ended_by_event_.fetch_add(1);
        return;
      }
      std::this_thread::yield();
    }
  }
  unsigned mask_ = 0;
  int yields_;
  std::function<bool(int)> until_;
  std::atomic<int> open_{-1};  // < 0: every hit
  std::atomic<uint64_t> ended_by_event_{0};
};

// Resets asked for by the main thread of a test and made by another one: the main thread
// asks (ask), waits until the reset has begun (no timing: it waits for the other thread to
// take it up) and goes on, racing the reset in flight; wait_ended() waits until every reset
// asked for has returned (the epochs before it ended, as the main thread has seen).
class ResetThread {
 public:
  explicit ResetThread(zarena* a)
      : thread_([this, a] {
          for (uint64_t taken = 0;;) {
            const uint64_t want = asked_.load();
            if (want == kStop) return;
            if (want == taken) {
              std::this_thread::yield();
              continue;
            }
            begun_.store(++taken);
            EXPECT_EQ(zarena_reset(a), ZARENA_OK);
            ended_.store(taken);
          }
        }) {}
  ~ResetThread() {
    asked_.store(kStop);
    thread_.join();
  }
  ResetThread(const ResetThread&) = delete;
  ResetThread& operator=(const ResetThread&) = delete;
  // Asks for one more reset and returns once it has begun.
  void ask() {
    const uint64_t n = asked_.fetch_add(1) + 1;
    while (begun_.load() < n) std::this_thread::yield();
  }
  // Returns once every reset asked for has returned.
  void wait_ended() {
    const uint64_t n = asked_.load();
    while (ended_.load() < n) std::this_thread::yield();
  }

 private:
  static constexpr uint64_t kStop = ~uint64_t{0};
  std::atomic<uint64_t> asked_{0}, begun_{0}, ended_{0};
  std::thread thread_;
};

// --- workloads -----------------------------------------------------------------------

// A per-sample pass with the shape of the original failure: an input upload, forward
// activations (scratch freed at once), backward gradients (temporaries freed), the rest
// left for a reset to reclaim. Returns the first failing status, or ZARENA_OK.
inline zarena_status sample_pass(zarena* a, uint64_t unit) {
  void* p = nullptr;
  void* scratch = nullptr;
  zarena_status s;
  if ((s = zarena_alloc(a, 3 * unit, &p)) != ZARENA_OK) return s;
  for (int l = 0; l < 4; ++l) {
    if ((s = zarena_alloc(a, 2 * unit, &scratch)) != ZARENA_OK) return s;
    if ((s = zarena_alloc(a, (5 + l) * unit, &p)) != ZARENA_OK) return s;
    if ((s = zarena_free(a, scratch)) != ZARENA_OK) return s;
  }
  for (int l = 3; l >= 0; --l) {
    if ((s = zarena_alloc(a, (5 + l) * unit, &p)) != ZARENA_OK) return s;
    if ((s = zarena_alloc(a, 16 * unit, &scratch)) != ZARENA_OK) return s;
    if ((s = zarena_free(a, scratch)) != ZARENA_OK) return s;
  }
  return ZARENA_OK;
}
inline constexpr uint64_t kPassAllocs = 1 + 4 * 2 + 4 * 2;  // requests per sample_pass

// A model test's mark on a block: its first and last 64 bytes (all of a smaller one) set to
// `pattern`; ends_hold says whether they still are (another block handed out over it would
// have written its own). For host-backend blocks (plain memory).
inline void write_ends(uintptr_t p, uint64_t size, uint8_t pattern) {
  const uint64_t n = size < 64 ? size : 64;
  std::memset(reinterpret_cast<void*>(p), pattern, n);
  std::memset(reinterpret_cast<void*>(p + size - n), pattern, n);
}
inline ::testing::AssertionResult ends_hold(uintptr_t p, uint64_t size, uint8_t pattern) {
  const uint64_t n = size < 64 ? size : 64;
  const auto* head = reinterpret_cast<const uint8_t*>(p);
  const auto* tail = reinterpret_cast<const uint8_t*>(p + size - n);
  for (uint64_t i = 0; i < n; ++i) {
    if (head[i] != pattern || tail[i] != pattern)
      return ::testing::AssertionFailure() << "block at " << p << " was written by another";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace zarena_test
