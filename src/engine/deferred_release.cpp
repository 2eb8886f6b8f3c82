#include "engine/deferred_release.h"

#include <fmt/format.h>
#include <pthread.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

#include "diagnosis/diagnostics.h"
#include "engine/capture_scope.h"
#include "log/log.h"

namespace zarena_core {

namespace {

// The release thread's first wait (a short capture ends soon); it doubles up to kPollMax.
constexpr std::chrono::milliseconds kPollMin{5};
// At exit: how long the release in progress may take before the exit goes on without it.
constexpr std::chrono::seconds kExitWait{2};

// Never destroyed: an exit may find entries in it, and exit handlers run after static
// destructors of other translation units.
struct Waiting {
  // One pass at a time (taken before mu), so a safe point that returns has seen every
  // entry, the release thread's included.
  std::mutex pass_mu;
  std::mutex mu;                    // the rest
  std::condition_variable wake;     // exiting
  std::condition_variable stopped;  // the thread ended
  std::condition_variable emitted;  // the thread's records of a pass are out
  std::vector<DeferredRelease> list;
  size_t in_pass = 0;            // entries a pass holds outside `list`
  bool thread_emitting = false;  // the thread logs what its last pass did
  bool thread_running = false;
  bool exiting = false;
  uint64_t thread_passes = 0;
};

void fork_prepare();
void fork_parent();
void fork_child();

Waiting& waiting() {
  static Waiting* w = [] {
    auto* p = new Waiting();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    return p;
  }();
  return *w;
}

void fork_prepare() {
  Waiting& w = waiting();
  w.pass_mu.lock();
  w.mu.lock();
}
void fork_parent() {
  Waiting& w = waiting();
  w.mu.unlock();
  w.pass_mu.unlock();
}
void fork_child() {
  Waiting& w = waiting();
  // The parent's arenas: their memory is the parent's (on a GPU the child has no context
  // to free it in), so they are forgotten. No thread survived the fork.
  for (DeferredRelease& d : w.list) (void)d.backend.release();
  w.list.clear();
  w.in_pass = 0;
  w.thread_emitting = false;
  w.thread_running = false;
  new (&w.wake) std::condition_variable();
  new (&w.stopped) std::condition_variable();
  new (&w.emitted) std::condition_variable();
  w.mu.unlock();
  w.pass_mu.unlock();
}

// What a pass did with one entry, logged after the pass (no lock held).
struct Outcome {
  enum Kind { kReleased, kFailed, kDeviceReset } kind;
  LogSource source;
  uint64_t region_bytes;
  size_t blocks;
  Result result;
};

// Gives back what d holds; the first error, if any.
Result release(DeferredRelease& d) {
  Result first;
  for (const OverflowBlock& b : d.blocks) {
    Result r = d.backend->overflow_free(b);
    if (!r.is_ok()) r = d.backend->overflow_free(b);  // once more, as destroy does
    if (!r.is_ok() && first.is_ok()) first = r;
  }
  const Result r = d.backend->release_region();
  if (first.is_ok()) first = r;
  d.backend.reset();
  return first;
}

void start_thread_locked(Waiting& w);

thread_local bool t_on_release_thread = false;

// Under w.pass_mu. Releases what can go back; the rest returns to the list.
void pass(Waiting& w, std::vector<Outcome>* done) {
  std::vector<DeferredRelease> mine;
  {
    std::lock_guard<std::mutex> lock(w.mu);
    if (w.list.empty()) return;
    mine.swap(w.list);
    w.in_pass = mine.size();
  }
  size_t kept = 0;
  for (size_t i = 0; i < mine.size(); ++i) {
    DeferredRelease& d = mine[i];
    Outcome::Kind kind = Outcome::kReleased;
    Result result;
    if (d.backend->context_lost()) {
      // The reset took it all; the backend's destructor frees nothing.
      kind = Outcome::kDeviceReset;
      d.backend.reset();
    } else {
      bool capturing = capture_scope_covers(d.backend->stream());
      if (capturing || !d.backend->capture_status(&capturing).is_ok() || capturing) {
        if (kept != i) mine[kept] = std::move(d);
        ++kept;
        continue;
      }
      result = release(d);
      if (!result.is_ok()) kind = Outcome::kFailed;
    }
    try {
      done->push_back(Outcome{kind, d.source, d.region_bytes, d.blocks.size(), result});
    } catch (...) {  // host memory: this one goes unlogged
    }
  }
  mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(kept), mine.end());
  std::lock_guard<std::mutex> lock(w.mu);
  w.in_pass = 0;
  if (w.list.empty()) {
    w.list.swap(mine);
  } else {
    for (DeferredRelease& d : mine) {
      try {
        w.list.push_back(std::move(d));
      } catch (...) {  // host memory: it stays with the process, as at exit
        (void)d.backend.release();
      }
    }
  }
  if (!w.list.empty()) start_thread_locked(w);  // the thread may have ended meanwhile
}

void emit(std::vector<Outcome>& done) noexcept {
  for (Outcome& o : done) {
    try {
      if (o.kind == Outcome::kFailed && log_enabled(ZARENA_LOG_WARN)) {
        LogRecord rec(log_events::kReleaseFailed, o.source);
        rec.message(
            fmt::format("giving back the device memory of the arena destroyed during "
                        "a capture failed ({}); it stays with the process",
                        o.result.message));
        rec.add_string("reason", o.result.message);
        log_emit(rec);
      } else if (o.kind == Outcome::kReleased && log_enabled(ZARENA_LOG_INFO)) {
        LogRecord rec(log_events::kReleased, o.source);
        rec.message(
            fmt::format("the device memory of the arena destroyed during a capture "
                        "went back ({} region, {} overflow blocks)",
                        human_bytes(o.region_bytes), o.blocks));
        rec.add_uint("region_bytes", o.region_bytes);
        rec.add_uint("overflow_blocks", o.blocks);
        log_emit(rec);
      } else if (o.kind == Outcome::kDeviceReset && log_enabled(ZARENA_LOG_WARN)) {
        const char* call = "the release of an arena destroyed during a capture";
        LogRecord rec(log_events::kDeviceReset, o.source);
        rec.message(fmt::format(
            "the device was reset (cudaDeviceReset or cuDevicePrimaryCtxReset) while the "
            "memory of this arena, destroyed during a capture, waited to go back: its {} of "
            "region and {} overflow blocks went with the reset, and nothing of it was freed "
            "(those addresses may belong to new allocations)",
            human_bytes(o.region_bytes), o.blocks));
        rec.add_string("call", call);
        rec.add_uint("region_bytes", o.region_bytes);
        rec.add_uint("overflow_blocks", o.blocks);
        log_emit(rec);
      }
    } catch (...) {  // host memory: the record is lost, the release is done
    }
  }
}

void thread_main() {
  t_on_release_thread = true;
  pthread_setname_np(pthread_self(), "zarena-release");
  Waiting& w = waiting();
  std::chrono::milliseconds interval = kPollMin;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(w.mu);
      w.wake.wait_for(lock, interval, [&] { return w.exiting; });
      // Entries a safe point's pass holds come back through it, which starts a thread
      // again if they still wait.
      if (w.exiting || w.list.empty()) {
        w.thread_running = false;
        w.stopped.notify_all();
        return;
      }
    }
    std::vector<Outcome> done;
    {
      std::lock_guard<std::mutex> pass_lock(w.pass_mu);
      pass(w, &done);
      std::lock_guard<std::mutex> lock(w.mu);
      w.thread_emitting = true;  // before the pass is seen over: safe points wait for it
    }
    emit(done);
    {
      std::lock_guard<std::mutex> lock(w.mu);
      w.thread_emitting = false;
      ++w.thread_passes;
      w.emitted.notify_all();
    }
    interval = std::min(interval * 2, std::chrono::milliseconds(kPollMax));
  }
}

// The CUDA runtime tears itself down in an exit handler registered when it started, before
// any arena existed; this one, registered later, runs earlier: no release is in progress
// when the runtime goes.
void stop_at_exit() {
  Waiting& w = waiting();
  std::unique_lock<std::mutex> lock(w.mu);
  w.exiting = true;
  w.wake.notify_all();
  if (t_on_release_thread) return;  // exit() from a callback the thread called
  w.stopped.wait_for(lock, kExitWait, [&] { return !w.thread_running; });
}

// Under w.mu.
void start_thread_locked(Waiting& w) {
  if (w.thread_running || w.exiting) return;
  static const bool at_exit = [] {
    std::atexit(stop_at_exit);
    return true;
  }();
  (void)at_exit;
  try {
    std::thread(thread_main).detach();
  } catch (...) {  // no thread: the safe points still release
    return;
  }
  w.thread_running = true;
}

}  // namespace

bool defer_release(DeferredRelease& d) noexcept {
  Waiting& w = waiting();
  std::lock_guard<std::mutex> lock(w.mu);
  try {
    w.list.push_back(std::move(d));
  } catch (...) {
    return false;
  }
  start_thread_locked(w);
  return true;
}

void release_deferred() noexcept {
  Waiting& w = waiting();
  {
    std::lock_guard<std::mutex> lock(w.mu);
    if (w.list.empty() && w.in_pass == 0 && !w.thread_emitting) return;
  }
  std::vector<Outcome> done;
  {
    std::lock_guard<std::mutex> pass_lock(w.pass_mu);
    pass(w, &done);
  }
  emit(done);
  // A release the thread made is logged before the safe point returns, as one made here
  // is. (Not on the thread itself: a callback there must not call zarena_create anyway.)
  if (t_on_release_thread) return;
  std::unique_lock<std::mutex> lock(w.mu);
  w.emitted.wait(lock, [&] { return !w.thread_emitting; });
}

size_t deferred_releases() noexcept {
  Waiting& w = waiting();
  std::lock_guard<std::mutex> lock(w.mu);
  return w.list.size() + w.in_pass;
}

uint64_t release_thread_passes() noexcept {
  Waiting& w = waiting();
  std::lock_guard<std::mutex> lock(w.mu);
  return w.thread_passes;
}

bool release_thread_running() noexcept {
  Waiting& w = waiting();
  std::lock_guard<std::mutex> lock(w.mu);
  return w.thread_running;
}

}  // namespace zarena_core
