// The trace writer and reader: every event written from several threads comes back, in
// one global order, with its fields; the file is complete after close(), after threads
// exit, and at process exit without close(); unknown record kinds are skipped; damaged
// files are reported.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "trace/trace.h"
#include "trace/trace_reader.h"
#include "trace_test_support.h"
#include "zarena/zarena.h"

namespace {

using zarena_core::Result;
using zarena_trace::AllocOutcome;
using zarena_trace::Event;
using zarena_trace::Kind;
using zarena_trace::Trace;
using zarena_trace::TraceAddr;
using zarena_trace::TraceHeader;
using zarena_trace::TraceOptions;
using zarena_trace::Tracer;

std::string temp_path(const std::string& stem) {
  return zarena_test::trace_temp_path("zarena_", stem);
}

TraceHeader header(const std::string& name = "fmt") {
  TraceHeader h;
  h.arena_name = name;
  h.capacity_bytes = 64ull << 30;
  h.alignment = 512;
  h.overflow_policy = ZARENA_OVERFLOW_ASYNC;
  h.backend = ZARENA_BACKEND_CUDA;
  h.config_flags = ZARENA_FLAG_POISON;
  h.region_base = 0x7f0000000000ull;
  return h;
}

std::unique_ptr<Tracer> open_or_die(const std::string& path, const TraceOptions& o = {},
                                    const TraceHeader& h = header()) {
  Result err;
  auto t = Tracer::open(path, h, &err, o);
  EXPECT_TRUE(t != nullptr) << err.message;
  return t;
}

using zarena_test::read_or_die;

std::vector<char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Writes every kind from one thread; k numbers the event within the thread, and every
// payload carries (thread, k) so the reader can check what came back.
void write_mixed(Tracer* t, uint64_t thread, uint64_t count) {
  for (uint64_t k = 0; k < count; ++k) {
    const uint64_t v = (thread << 32) | k;
    switch (k % 10) {
      case 0:
      case 1:
      case 2:
        t->on_alloc(v, v + 1, TraceAddr::region(v), AllocOutcome::kRegionReuse, 0, thread, 7);
        break;
      case 3:
      case 4:
        t->on_free(TraceAddr::pointer(reinterpret_cast<void*>(v)), ZARENA_E_STALE, v, true, k);
        break;
      case 5:
        t->on_reset(v);
        break;
      case 6:
        t->on_boundary(v);
        break;
      case 7:
        t->on_set_floor(v, ZARENA_E_INVALID_ARGUMENT);
        break;
      case 8:
        if (k % 20 == 8) {
          t->on_pin(TraceAddr::region(v), ZARENA_OK);
        } else {
          t->on_unpin(TraceAddr::pointer(reinterpret_cast<void*>(v)), ZARENA_E_NOT_OWNED);
        }
        break;
      case 9:
        if (k % 30 == 9) {
          t->on_step_begin();
        } else if (k % 30 == 19) {
          t->on_capture(true);
        } else {
          // Tag ids are 32 bits: (thread, k) packed as 8 + 24 bits.
          t->on_tag(static_cast<uint32_t>((thread << 24) | k), "tag." + std::to_string(v));
        }
        break;
    }
  }
}

// The payload an event carries, as write_mixed wrote it: (thread, k) or none.
bool payload(const Event& e, uint64_t* v) {
  switch (e.kind) {
    case Kind::kAlloc:
      EXPECT_EQ(e.aligned, e.size + 1);
      EXPECT_EQ(e.addr, e.size);
      EXPECT_EQ(e.tag, 7u);
      EXPECT_EQ(e.outcome, AllocOutcome::kRegionReuse);
      EXPECT_EQ(e.flags, 0);
      EXPECT_EQ(e.epoch, e.size >> 32);
      *v = e.size;
      return true;
    case Kind::kFree:
      EXPECT_EQ(e.status, ZARENA_E_STALE);
      EXPECT_EQ(e.flags, zarena_trace::kAddrRaw | zarena_trace::kFreeEpochChecked);
      EXPECT_EQ(e.size, e.addr);
      EXPECT_EQ(e.epoch, e.addr & 0xFFFFFFFF);
      *v = e.addr;
      return true;
    case Kind::kReset:
      *v = e.epoch;
      return true;
    case Kind::kBoundary:
      *v = e.value;
      return true;
    case Kind::kSetFloor:
      EXPECT_EQ(e.status, ZARENA_E_INVALID_ARGUMENT);
      *v = e.value;
      return true;
    case Kind::kPin:
      EXPECT_EQ(e.status, ZARENA_OK);
      EXPECT_EQ(e.flags, 0);
      *v = e.addr;
      return true;
    case Kind::kUnpin:
      EXPECT_EQ(e.status, ZARENA_E_NOT_OWNED);
      EXPECT_EQ(e.flags, zarena_trace::kAddrRaw);
      *v = e.addr;
      return true;
    case Kind::kTag:
      *v = (uint64_t{e.tag >> 24} << 32) | (e.tag & 0xFFFFFF);
      return true;
    case Kind::kCapture:
      EXPECT_EQ(e.value, 1u);
      return false;
    default:
      return false;
  }
}

TEST(TraceFormat, HeaderRoundTrip) {
  const std::string path = temp_path("header");
  TraceHeader h = header("arena <\"&'> name");
  auto t = open_or_die(path, {}, h);
  ASSERT_TRUE(t->close().is_ok());
  const Trace r = read_or_die(path);
  EXPECT_EQ(r.info.arena_name, h.arena_name);
  EXPECT_EQ(r.info.capacity_bytes, h.capacity_bytes);
  EXPECT_EQ(r.info.alignment, h.alignment);
  EXPECT_EQ(r.info.overflow_policy, h.overflow_policy);
  EXPECT_EQ(r.info.backend, h.backend);
  EXPECT_EQ(r.info.config_flags, h.config_flags);
  EXPECT_EQ(r.info.region_base, h.region_base);
  EXPECT_EQ(r.info.trace_flags, zarena_trace::kTraceCoarseClock);
  EXPECT_EQ(r.info.clock_resolution_ns, TraceOptions{}.tick_ns);
  EXPECT_GT(r.info.start_unix_ns, 1'600'000'000ull * 1'000'000'000ull);
  EXPECT_TRUE(r.summary.complete);
  EXPECT_FALSE(r.summary.ended_at_exit);
  EXPECT_TRUE(r.events.empty());
  std::remove(path.c_str());
}

// Small buffers, so that every thread hands many full buffers to the writer while the
// others are writing.
TEST(TraceFormat, ManyThreadsEveryEventOnceInOneOrder) {
  const std::string path = temp_path("threads");
  TraceOptions o;
  o.buffer_bytes = 4096;
  auto t = open_or_die(path, o);
  constexpr uint64_t kThreads = 4, kPerThread = 30000;
  std::vector<std::thread> threads;
  for (uint64_t i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] { write_mixed(t.get(), i + 1, kPerThread); });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(t->events(), kThreads * kPerThread);
  ASSERT_TRUE(t->close().is_ok());

  const Trace r = read_or_die(path);
  ASSERT_EQ(r.events.size(), kThreads * kPerThread);
  EXPECT_TRUE(r.summary.complete);
  EXPECT_EQ(r.summary.missing, 0u);
  EXPECT_FALSE(r.summary.truncated);
  // Global order: sequence numbers 0..N-1, each once. (Times follow the sequence within
  // a thread only: across threads, a clock tick can fall between one thread's sequence
  // number and its clock read.)
  std::map<uint16_t, uint64_t> last_time;
  for (uint64_t i = 0; i < r.events.size(); ++i) {
    ASSERT_EQ(r.events[i].seq, i);
    EXPECT_GE(r.events[i].time_ns, last_time[r.events[i].thread]);
    last_time[r.events[i].thread] = r.events[i].time_ns;
  }
  // Per thread: its events in the order it wrote them, none lost; one small thread
  // number per writing thread.
  std::map<uint16_t, uint64_t> writer_of;  // trace thread number -> write_mixed thread
  std::map<uint64_t, uint64_t> next_k;     // write_mixed thread -> next payload k
  std::map<uint64_t, uint64_t> seen;
  for (const Event& e : r.events) {
    ++seen[e.thread];
    uint64_t v = 0;
    if (!payload(e, &v)) continue;
    const uint64_t th = v >> 32, k = v & 0xFFFFFFFF;
    auto w = writer_of.emplace(e.thread, th).first;
    EXPECT_EQ(w->second, th) << "thread number " << e.thread << " used by two threads";
    EXPECT_GE(k, next_k[th]) << "thread " << th << " out of order";
    next_k[th] = k + 1;
    if (e.kind == Kind::kTag) {
      EXPECT_EQ(r.tags.at(e.tag), "tag." + std::to_string(v));
    }
  }
  EXPECT_EQ(writer_of.size(), kThreads);
  for (const auto& [th, n] : seen) {
    EXPECT_LT(th, kThreads);
    EXPECT_EQ(n, kPerThread);
  }
  std::remove(path.c_str());
}

// A thread that exits before close() leaves a partly filled buffer; it must be written.
TEST(TraceFormat, ThreadsThatExitBeforeCloseLoseNothing) {
  const std::string path = temp_path("exited");
  auto t = open_or_die(path);
  for (int round = 0; round < 8; ++round) {
    std::thread([&] { write_mixed(t.get(), 1, 123); }).join();
  }
  ASSERT_TRUE(t->close().is_ok());
  const Trace r = read_or_die(path);
  EXPECT_EQ(r.events.size(), 8u * 123u);
  EXPECT_EQ(r.summary.missing, 0u);
  std::remove(path.c_str());
}

// More tracers than a thread's cache has slots, used in turn from the same threads:
// each file gets exactly its own events.
TEST(TraceFormat, SeveralTracersOnTheSameThreads) {
  constexpr int kTracers = 6;
  std::vector<std::string> paths;
  std::vector<std::unique_ptr<Tracer>> tracers;
  for (int i = 0; i < kTracers; ++i) {
    paths.push_back(temp_path("multi" + std::to_string(i)));
    tracers.push_back(open_or_die(paths.back()));
  }
  auto work = [&] {
    for (int round = 0; round < 500; ++round) {
      for (int i = 0; i < kTracers; ++i) tracers[i]->on_reset(static_cast<uint64_t>(i));
    }
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  for (int i = 0; i < kTracers; ++i) {
    ASSERT_TRUE(tracers[i]->close().is_ok());
    const Trace r = read_or_die(paths[i]);
    ASSERT_EQ(r.events.size(), 1000u);
    for (const Event& e : r.events) EXPECT_EQ(e.epoch, static_cast<uint64_t>(i));
    std::remove(paths[i].c_str());
  }
}

// A writer that cannot keep up makes producers wait rather than drop events.
TEST(TraceFormat, BackpressureDropsNothing) {
  const std::string path = temp_path("backpressure");
  TraceOptions o;
  o.buffer_bytes = 4096;
  o.max_queued_bytes = 4096;
  auto t = open_or_die(path, o);
  std::thread a([&] { write_mixed(t.get(), 1, 50000); });
  std::thread b([&] { write_mixed(t.get(), 2, 50000); });
  a.join();
  b.join();
  ASSERT_TRUE(t->close().is_ok());
  const Trace r = read_or_die(path);
  EXPECT_EQ(r.events.size(), 100000u);
  EXPECT_EQ(r.summary.missing, 0u);
  std::remove(path.c_str());
}

TEST(TraceFormat, PreciseClockIsNanosecondsAndMonotonic) {
  const std::string path = temp_path("precise");
  TraceOptions o;
  o.precise_clock = true;
  auto t = open_or_die(path, o);
  for (int i = 0; i < 1000; ++i) t->on_step_begin();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  t->on_step_begin();
  ASSERT_TRUE(t->close().is_ok());
  const Trace r = read_or_die(path);
  EXPECT_EQ(r.info.clock_resolution_ns, 1u);
  EXPECT_EQ(r.info.trace_flags & zarena_trace::kTraceCoarseClock, 0u);
  ASSERT_EQ(r.events.size(), 1001u);
  for (size_t i = 1; i < r.events.size(); ++i) {
    EXPECT_GE(r.events[i].time_ns, r.events[i - 1].time_ns);
  }
  EXPECT_GE(r.events.back().time_ns - r.events[999].time_ns, 5'000'000u);
  std::remove(path.c_str());
}

TEST(TraceFormat, LongTagNamesAreCut) {
  const std::string path = temp_path("tag");
  auto t = open_or_die(path);
  t->on_tag(3, std::string(5000, 'x'));
  t->on_tag(4, "");
  ASSERT_TRUE(t->close().is_ok());
  const Trace r = read_or_die(path);
  EXPECT_EQ(r.tags.at(3), std::string(zarena_trace::kMaxTagNameBytes, 'x'));
  EXPECT_EQ(r.tags.at(4), "");
  std::remove(path.c_str());
}

TEST(TraceFormat, CloseIsIdempotentAndLaterEventsAreDropped) {
  const std::string path = temp_path("closed");
  auto t = open_or_die(path);
  t->on_reset(1);
  ASSERT_TRUE(t->close().is_ok());
  EXPECT_TRUE(t->close().is_ok());
  // Against the contract, but it must neither crash nor change the file.
  const auto before = file_bytes(path);
  for (int i = 0; i < 20000; ++i) t->on_reset(2);
  t.reset();
  EXPECT_EQ(file_bytes(path), before);
  std::remove(path.c_str());
}

TEST(TraceFormat, UnwritablePathFailsWithTheReason) {
  Result err;
  auto t = Tracer::open("/nonexistent-dir/x.zat", header(), &err);
  EXPECT_EQ(t, nullptr);
  EXPECT_EQ(err.status, zarena_core::Status::kBackend);
  EXPECT_NE(err.message.find("No such file"), std::string::npos) << err.message;
}

// A reader skips records of kinds it does not know, using their length.
TEST(TraceFormat, UnknownKindsAreSkipped) {
  const std::string path = temp_path("unknown");
  auto t = open_or_die(path);
  t->on_reset(1);
  t->on_reset(2);
  ASSERT_TRUE(t->close().is_ok());
  std::vector<char> bytes = file_bytes(path);
  // The header, then [reset 1][reset 2][end]. Put a 40-byte record of kind 200 (a later
  // minor version's) after the first reset, with its own sequence number.
  const size_t first = bytes.size() - 2 * 32 - sizeof(zarena_trace::EndRecord);
  zarena_trace::RecordHeader h{};
  h.seq = 99;
  h.kind = 200;
  h.words = 5;
  std::vector<char> unknown(40, 'u');
  std::memcpy(unknown.data(), &h, sizeof h);
  bytes.insert(bytes.begin() + static_cast<long>(first + 32), unknown.begin(), unknown.end());
  Trace r;
  std::string err;
  ASSERT_TRUE(zarena_trace::parse_trace(bytes.data(), bytes.size(), &r, &err)) << err;
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0].epoch, 1u);
  EXPECT_EQ(r.events[1].epoch, 2u);
  EXPECT_EQ(r.summary.unknown_skipped, 1u);
  EXPECT_EQ(r.summary.missing, 0u);
  std::remove(path.c_str());
}

// Files a 1.x writer made (dense sequence numbers, one per event, threads' buffers
// interleaved in the file; 1.0 without the overflow limit) still read: events in
// sequence order, the end record's count of numbers handed out says what is missing.
TEST(TraceFormat, Reads1xFiles) {
  for (const uint16_t minor : {uint16_t{0}, uint16_t{1}}) {
    SCOPED_TRACE("format 1." + std::to_string(minor));
    const std::string name = "old";
    const uint32_t fixed =
        minor == 0 ? zarena_trace::kFixedBytes_1_0 : uint32_t{sizeof(zarena_trace::FileHeader)};
    zarena_trace::FileHeader fh;
    std::memset(&fh, 0, sizeof fh);
    std::memcpy(fh.magic, zarena_trace::kMagic, sizeof fh.magic);
    fh.major = 1;
    fh.minor = minor;
    fh.fixed_bytes = fixed;
    fh.name_bytes = static_cast<uint32_t>(name.size());
    fh.header_bytes = (fixed + fh.name_bytes + 7) / 8 * 8;
    fh.capacity_bytes = 1 << 20;
    fh.alignment = 256;
    fh.overflow_limit_bytes = 4096;
    std::vector<char> bytes(fh.header_bytes, 0);
    std::memcpy(bytes.data(), &fh, fixed);
    std::memcpy(bytes.data() + fixed, name.data(), name.size());
    auto put = [&bytes](const auto& rec) {
      const char* p = reinterpret_cast<const char*>(&rec);
      bytes.insert(bytes.end(), p, p + sizeof rec);
    };
    auto alloc = [](uint64_t seq, uint16_t thread, uint64_t addr) {
      zarena_trace::AllocRecord a{};
      a.h.seq = seq;
      a.h.thread = thread;
      a.h.kind = static_cast<uint8_t>(Kind::kAlloc);
      a.h.words = sizeof a / 8;
      a.request_bytes = 100;
      a.aligned_bytes = 256;
      a.addr = addr;
      a.epoch = 0;
      return a;
    };
    zarena_trace::FreeRecord f{};
    f.h.seq = 1;
    f.h.thread = 1;
    f.h.kind = static_cast<uint8_t>(Kind::kFree);
    f.h.words = sizeof f / 8;
    f.addr = 0;
    f.freed_bytes = 256;
    zarena_trace::ValueRecord reset{};
    reset.h.seq = 3;
    reset.h.kind = static_cast<uint8_t>(Kind::kReset);
    reset.h.words = sizeof reset / 8;
    reset.value = 1;
    zarena_trace::EndRecord end{};
    end.h.seq = 0;
    end.h.kind = static_cast<uint8_t>(Kind::kEnd);
    end.h.words = zarena_trace::kEndRecordBytes_2_0 / 8;  // no dropped count before 2.1
    end.events = 5;                                       // numbers 0-4 handed out; 4 is missing
    // Thread 0's buffer (seq 0, 2, 3), then thread 1's (seq 1).
    put(alloc(0, 0, 0));
    put(alloc(2, 0, 256));
    put(reset);
    put(f);
    const char* e = reinterpret_cast<const char*>(&end);
    bytes.insert(bytes.end(), e, e + zarena_trace::kEndRecordBytes_2_0);
    Trace r;
    std::string err;
    ASSERT_TRUE(zarena_trace::parse_trace(bytes.data(), bytes.size(), &r, &err)) << err;
    EXPECT_EQ(r.info.source, "zarena trace 1." + std::to_string(minor));
    EXPECT_EQ(r.info.arena_name, name);
    EXPECT_EQ(r.info.overflow_limit_bytes, minor == 0 ? 0u : 4096u);
    ASSERT_EQ(r.events.size(), 4u);
    EXPECT_EQ(r.events[0].kind, Kind::kAlloc);
    EXPECT_EQ(r.events[0].addr, 0u);
    EXPECT_EQ(r.events[1].kind, Kind::kFree);
    EXPECT_EQ(r.events[1].thread, 1u);
    EXPECT_EQ(r.events[1].size, 256u);
    EXPECT_EQ(r.events[2].kind, Kind::kAlloc);
    EXPECT_EQ(r.events[2].addr, 256u);
    EXPECT_EQ(r.events[3].kind, Kind::kReset);
    EXPECT_EQ(r.events[3].epoch, 1u);
    EXPECT_TRUE(r.summary.complete);
    EXPECT_EQ(r.summary.missing, 1u);
    EXPECT_EQ(r.summary.dropped, 0u);
  }
}

TEST(TraceFormat, DamageIsReported) {
  const std::string path = temp_path("damage");
  auto t = open_or_die(path);
  for (int i = 0; i < 10; ++i) t->on_boundary(static_cast<uint64_t>(i));
  ASSERT_TRUE(t->close().is_ok());
  const std::vector<char> bytes = file_bytes(path);
  Trace r;
  std::string err;

  // Cut inside the end record: the events are there, the file says it is truncated.
  ASSERT_TRUE(zarena_trace::parse_trace(bytes.data(), bytes.size() - 5, &r, &err)) << err;
  EXPECT_EQ(r.events.size(), 10u);
  EXPECT_TRUE(r.summary.truncated);
  EXPECT_FALSE(r.summary.complete);

  std::vector<char> bad = bytes;
  bad[0] = 'X';
  EXPECT_FALSE(zarena_trace::parse_trace(bad.data(), bad.size(), &r, &err));
  EXPECT_NE(err.find("magic"), std::string::npos) << err;

  bad = bytes;
  bad[8] = 3;  // major 3
  EXPECT_FALSE(zarena_trace::parse_trace(bad.data(), bad.size(), &r, &err));
  EXPECT_NE(err.find("format 3."), std::string::npos) << err;

  bad = bytes;
  const size_t header_bytes = bytes.size() - 10 * 32 - sizeof(zarena_trace::EndRecord);
  bad[header_bytes + 19] = 1;  // first record: 8 bytes long, shorter than a header
  EXPECT_FALSE(zarena_trace::parse_trace(bad.data(), bad.size(), &r, &err));
  EXPECT_NE(err.find("malformed"), std::string::npos) << err;

  bad = bytes;
  std::memcpy(bad.data() + header_bytes + 32, bad.data() + header_bytes, 8);  // seq 0 twice
  EXPECT_FALSE(zarena_trace::parse_trace(bad.data(), bad.size(), &r, &err));
  EXPECT_NE(err.find("duplicate"), std::string::npos) << err;
  std::remove(path.c_str());
}

// The child half of the TraceExit tests: traces from several threads and exits without
// close(). Runs only when the parent starts it (ZTEST_TRACE_CHILD_PATH). With
// ZTEST_TRACE_CHILD_BUSY, a thread goes on tracing while the exit flush runs: the
// tracer's flush hook holds the flush until that thread has had a chunk dropped, so the
// drop is certain and nothing waits for a time.
constexpr uint64_t kExitThreads = 3, kExitPerThread = 10001, kExitMain = 77;
constexpr uint64_t kExitBefore = kExitThreads * kExitPerThread + kExitMain;

TEST(TraceExit, ChildBody) {
  const char* path = std::getenv("ZTEST_TRACE_CHILD_PATH");
  if (path == nullptr) GTEST_SKIP() << "run by TraceExit.AtExit*";
  const bool busy = std::getenv("ZTEST_TRACE_CHILD_BUSY") != nullptr;
  static Tracer* t = nullptr;
  TraceOptions o;
  if (busy) {
    o.buffer_bytes = 4096;  // the busy thread rotates often
    o.on_flush_begin = [](void*) {
      while (t->dropped_records() == 0) std::this_thread::yield();
    };
  }
  Result err;
  // Leaked on purpose: the program "forgets" it, as one that never destroys its arena.
  t = Tracer::open(path, header(), &err, o).release();
  if (t == nullptr) _exit(3);
  std::vector<std::thread> threads;
  for (uint64_t i = 0; i < kExitThreads; ++i) {
    threads.emplace_back([i] { write_mixed(t, i + 1, kExitPerThread); });
  }
  for (auto& th : threads) th.join();
  write_mixed(t, 9, kExitMain);
  if (busy) {
    static std::atomic<bool> began{false};
    std::thread([] {
      for (uint64_t i = 0;; ++i) {
        t->on_set_floor(i, 0);  // numbered: the file must hold a prefix of them
        began.store(true, std::memory_order_release);
      }
    }).detach();
    while (!began.load(std::memory_order_acquire)) std::this_thread::yield();
  }
  std::exit(0);
}

// Runs ChildBody in a new process and returns the trace it writes, read through a FIFO:
// the parent holds at most kMaxTraceBytes of it (more fails the test and kills the child:
// an unbounded flush cannot fill the disk), and a child not done within kWatchdog is
// killed and fails the test rather than hang it.
constexpr size_t kMaxTraceBytes = 64u << 20;
constexpr auto kWatchdog = std::chrono::minutes(5);

std::vector<char> run_child(const std::string& fifo, bool busy) {
  std::vector<char> out;
  const char* self = std::getenv("ZTEST_HELPER");
  EXPECT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  // Open before the child: its open for writing then finds a reader and does not block.
  const int in = open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  EXPECT_GE(in, 0) << std::strerror(errno);
  const pid_t pid = fork();
  EXPECT_GE(pid, 0);
  if (pid == 0) {
    setenv("ZTEST_TRACE_CHILD_PATH", fifo.c_str(), 1);
    if (busy) setenv("ZTEST_TRACE_CHILD_BUSY", "1", 1);
    execl(self, self, "--gtest_filter=TraceExit.ChildBody", static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + kWatchdog;
  bool failed = false, writer_seen = false;
  char chunk[1 << 16];
  for (;;) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "the child is still writing after the watchdog's limit";
      failed = true;
      break;
    }
    pollfd p = {in, POLLIN, 0};
    if (poll(&p, 1, 1000) < 0 && errno != EINTR) break;
    const ssize_t n = read(in, chunk, sizeof chunk);
    if (n > 0) {
      writer_seen = true;
      out.insert(out.end(), chunk, chunk + n);
      if (out.size() > kMaxTraceBytes) {
        ADD_FAILURE() << "the child wrote more than " << kMaxTraceBytes << " bytes of trace";
        failed = true;
        break;
      }
    } else if (n == 0 && writer_seen) {
      break;  // every writer closed it: the trace is done
    } else if (n == 0) {
      // No writer yet (the child has not opened it), or it died before: ask waitpid.
      int st = 0;
      if (waitpid(pid, &st, WNOHANG) == pid) {
        ADD_FAILURE() << "the child exited (" << st << ") without writing a trace";
        close(in);
        unlink(fifo.c_str());
        return out;
      }
    }
  }
  if (failed) kill(pid, SIGKILL);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(failed || (WIFEXITED(status) && WEXITSTATUS(status) == 0)) << status;
  close(in);
  unlink(fifo.c_str());
  return out;
}

Trace parse_or_die(const std::vector<char>& bytes) {
  Trace t;
  std::string err;
  EXPECT_TRUE(zarena_trace::parse_trace(bytes.data(), bytes.size(), &t, &err)) << err;
  return t;
}

TEST(TraceExit, AtExitWithoutClose) {
  if (std::getenv("ZTEST_HELPER") == nullptr) {
    GTEST_SKIP() << "ZTEST_HELPER (set by CTest) names this binary";
  }
  const Trace r = parse_or_die(run_child(temp_path("atexit"), false));
  EXPECT_TRUE(r.summary.complete);
  EXPECT_TRUE(r.summary.ended_at_exit);
  EXPECT_EQ(r.events.size(), kExitBefore);
  EXPECT_EQ(r.summary.missing, 0u);
  EXPECT_EQ(r.summary.dropped, 0u);
  EXPECT_TRUE(r.summary.whole());
}

// A thread still tracing while the exit flush runs: the flush ends (bounded: it takes what
// was recorded when it began), the thread's later records are dropped and the end record
// counts them; everything else is in the file, and the thread's records there are a
// prefix of what it traced (nothing after a gap).
TEST(TraceExit, AtExitWhileAThreadIsStillTracing) {
  if (std::getenv("ZTEST_HELPER") == nullptr) {
    GTEST_SKIP() << "ZTEST_HELPER (set by CTest) names this binary";
  }
  const Trace r = parse_or_die(run_child(temp_path("atexit_busy"), true));
  EXPECT_TRUE(r.summary.complete);
  EXPECT_TRUE(r.summary.ended_at_exit);
  EXPECT_EQ(r.summary.missing, 0u);
  EXPECT_GT(r.summary.dropped, 0u) << "the busy thread had a chunk dropped during the flush";
  EXPECT_FALSE(r.summary.whole());
  // The busy thread is the fifth to trace (number 4), and it began after all the others
  // had finished: every earlier event is there, first in the order.
  ASSERT_GE(r.events.size(), kExitBefore);
  for (uint64_t i = 0; i < kExitBefore; ++i) ASSERT_LT(r.events[i].thread, 4) << i;
  for (uint64_t i = kExitBefore; i < r.events.size(); ++i) {
    ASSERT_EQ(r.events[i].thread, 4) << i;
    ASSERT_EQ(r.events[i].kind, Kind::kSetFloor) << i;
    ASSERT_EQ(r.events[i].value, i - kExitBefore) << "a gap in the busy thread's records";
  }
}

}  // namespace
