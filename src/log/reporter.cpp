#include "log/reporter.h"

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>

namespace zarena_core {

namespace {

struct Job {
  void* owner;
  Reporter::Fn fn;
  alignas(16) unsigned char payload[Reporter::kPayloadMax];
};

// Never destroyed: jobs may be flushed from exit handlers, after static destructors of
// other translation units have run.
struct State {
  std::mutex mu;
  std::condition_variable work;  // a job was queued
  std::condition_variable done;  // a job finished
  Job ring[Reporter::kQueueLen];
  size_t head = 0, count = 0;
  uint64_t posted = 0, finished = 0;  // sequence numbers: flush_all waits for posted
  void* running_owner = nullptr;
  bool running = false;
  bool started = false;
  bool exiting = false;
  uint64_t jobs_run = 0;
};

State& state() {
  static State* s = new State();
  return *s;
}

thread_local bool t_on_reporter = false;

void thread_main() {
  t_on_reporter = true;
  pthread_setname_np(pthread_self(), "zarena-diag");
  State& s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  for (;;) {
    s.work.wait(lock, [&] { return s.count > 0; });
    Job& slot = s.ring[s.head];
    // The job runs from a copy: the ring slot may be reused once it is popped.
    Job job;
    job.owner = slot.owner;
    job.fn = slot.fn;
    std::memcpy(job.payload, slot.payload, sizeof job.payload);
    s.head = (s.head + 1) % Reporter::kQueueLen;
    --s.count;
    s.running = true;
    s.running_owner = job.owner;
    lock.unlock();
    job.fn(job.owner, job.payload);
    lock.lock();
    s.running = false;
    s.running_owner = nullptr;
    ++s.finished;
    ++s.jobs_run;
    s.done.notify_all();
  }
}

// At exit: deliver what is queued, but do not hang the exit on a callback that never
// returns. Posts after this run on the caller.
void flush_at_exit() {
  State& s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  const uint64_t target = s.posted;
  s.done.wait_for(lock, std::chrono::seconds(2), [&] { return s.finished >= target; });
  s.exiting = true;
}

void after_fork_prepare() { state().mu.lock(); }
void after_fork_parent() { state().mu.unlock(); }
void after_fork_child() {
  State& s = state();
  // The thread did not survive the fork; its waiters' state in the condition variables
  // belongs to the parent. Start afresh (the parent delivers what was queued).
  new (&s.work) std::condition_variable();
  new (&s.done) std::condition_variable();
  s.head = s.count = 0;
  s.posted = s.finished = 0;
  s.running = false;
  s.running_owner = nullptr;
  s.started = false;
  s.mu.unlock();
}

// Under s.mu.
bool start_locked(State& s) {
  if (s.started) return true;
  if (s.exiting) return false;
  static bool hooks = [] {
    pthread_atfork(after_fork_prepare, after_fork_parent, after_fork_child);
    std::atexit(flush_at_exit);
    return true;
  }();
  (void)hooks;
  try {
    std::thread(thread_main).detach();
  } catch (...) {
    return false;
  }
  s.started = true;
  return true;
}

bool owner_busy(const State& s, void* owner) {
  if (s.running && s.running_owner == owner) return true;
  for (size_t i = 0; i < s.count; ++i) {
    if (s.ring[(s.head + i) % Reporter::kQueueLen].owner == owner) return true;
  }
  return false;
}

}  // namespace

void Reporter::start() noexcept {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  (void)start_locked(s);
}

bool Reporter::post(void* owner, Fn fn, const void* payload, size_t size) noexcept {
  if (size > kPayloadMax || t_on_reporter) return false;
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.exiting || s.count == kQueueLen || !start_locked(s)) return false;
    Job& j = s.ring[(s.head + s.count) % kQueueLen];
    j.owner = owner;
    j.fn = fn;
    std::memcpy(j.payload, payload, size);
    ++s.count;
    ++s.posted;
  }
  s.work.notify_one();
  return true;
}

void Reporter::flush(void* owner) noexcept {
  if (t_on_reporter) return;
  State& s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  s.done.wait(lock, [&] { return !owner_busy(s, owner); });
}

void Reporter::flush_all() noexcept {
  if (t_on_reporter) return;
  State& s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  const uint64_t target = s.posted;
  s.done.wait(lock, [&] { return s.finished >= target; });
}

bool Reporter::on_reporter_thread() noexcept { return t_on_reporter; }

uint64_t Reporter::jobs_run() noexcept {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.jobs_run;
}

}  // namespace zarena_core
