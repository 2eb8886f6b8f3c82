// The reporter: builds and emits diagnosis records off the call that found them.
//
// Why: the first overflow of an epoch is diagnosed from the facts of that instant, but
// turning them into a record (a verdict, sentences, tag attribution, a stderr write or a
// user callback) costs microseconds to milliseconds, and the call that overflowed is often
// one whose budget is a single cudaMallocFromPoolAsync. So a call that *succeeds* captures
// the facts (a plain struct) and posts a job; one process-wide thread ("zarena-diag") runs
// the jobs in order. A call that *fails* builds and emits its record itself, before it
// returns (bindings read the record with the error), after waiting for the jobs its arena
// posted earlier (records keep their order).
//
// Nothing is lost: Reporter::flush(owner) waits for an owner's jobs (an arena's destroy:
// no job outlives its arena), Reporter::flush_all() for every job (zarena_log_flush, and
// at process exit, bounded). A job that cannot be queued (queue full, no thread) runs on
// the calling thread instead. Fork: the child starts with an empty queue and no thread;
// its next job starts one.
//
// Cost of post(): one mutex, a copy of the payload, a condition-variable notify.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zarena_core {

class Reporter {
 public:
  using Fn = void (*)(void* owner, const void* payload);
  static constexpr size_t kPayloadMax = 640;  // bytes; payloads are trivially copyable
  static constexpr size_t kQueueLen = 64;

  // Starts the thread now (arena create), so the first post() does not pay for it.
  static void start() noexcept;
  // Queues fn(owner, copy of payload). false: not queued (full, no thread, process
  // exiting, or called on the reporter thread): the caller runs it itself.
  static bool post(void* owner, Fn fn, const void* payload, size_t size) noexcept;
  // Waits until no job of owner is queued or running. No-op on the reporter thread.
  static void flush(void* owner) noexcept;
  // Waits until every job posted so far has run. No-op on the reporter thread.
  static void flush_all() noexcept;
  static bool on_reporter_thread() noexcept;
  // Jobs run by the reporter thread since start (for tests).
  static uint64_t jobs_run() noexcept;
};

}  // namespace zarena_core
