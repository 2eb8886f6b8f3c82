#include "trace/trace_registry.h"

#include <pthread.h>

#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <utility>
#include <vector>

namespace zarena_trace {

namespace {

// Leaked on purpose: it must outlive every static destructor and thread exit that may
// still consult it.
struct Registry {
  // Recursive: broadcast_tag writes into tracers while holding it, and a thread's first
  // event in a tracer registers its buffer here (registry_note_thread_buffer).
  std::recursive_mutex mu;
  std::unordered_map<uint64_t, Tracer*> open;
  bool atexit_installed = false;
};

void lock_for_fork();
void unlock_in_parent();
void forget_in_child();

Registry& registry() {
  static Registry* r = [] {
    auto* fresh = new Registry;
    pthread_atfork(lock_for_fork, unlock_in_parent, forget_in_child);
    return fresh;
  }();
  return *r;
}

// Around fork(): the registry is taken, so the child finds it consistent and free.
void lock_for_fork() { registry().mu.lock(); }
void unlock_in_parent() { registry().mu.unlock(); }
// The parent's traces stay the parent's: the child never writes them, not at its exit
// either (their writer threads did not survive the fork, their locks may be held by
// threads that did not either, and the file offset is shared with the parent). The
// engine refuses the child every call on an arena created before the fork.
void forget_in_child() {
  Registry& r = registry();
  r.open.clear();
  // A new lock, not an unlock: a recursive mutex belongs to the thread that locked it, and
  // the child's thread has another id.
  new (&r.mu) std::recursive_mutex();
}

// Runs at exit(): tracers the program never closed are finished, so their file is
// complete. Holding the registry lock keeps a concurrently destroyed tracer from going
// away mid-flush (its destructor waits in registry_remove).
void finish_all_at_exit() {
  Registry& r = registry();
  std::lock_guard<std::recursive_mutex> lock(r.mu);
  for (auto& entry : r.open) TracerAccess::finish_at_exit(*entry.second);
}

// The buffers the current thread holds, detached when the thread exits.
struct ThreadHook {
  std::vector<std::pair<uint64_t, Tracer::ThreadBuffer*>> buffers;
  ~ThreadHook() {
    Registry& r = registry();
    std::lock_guard<std::recursive_mutex> lock(r.mu);
    for (auto& [id, buf] : buffers) {
      auto it = r.open.find(id);
      if (it != r.open.end()) TracerAccess::detach(*it->second, buf);
    }
  }
};

ThreadHook& thread_hook() {
  static thread_local ThreadHook hook;
  return hook;
}

}  // namespace

void registry_add(uint64_t id, Tracer* t) {
  Registry& r = registry();
  std::lock_guard<std::recursive_mutex> lock(r.mu);
  r.open.emplace(id, t);
  if (!r.atexit_installed) {
    r.atexit_installed = true;
    std::atexit(finish_all_at_exit);
  }
}

void broadcast_tag(uint32_t id, std::string_view name) {
  Registry& r = registry();
  std::lock_guard<std::recursive_mutex> lock(r.mu);
  for (auto& entry : r.open) entry.second->on_tag(id, name);
}

void registry_remove(uint64_t id) {
  Registry& r = registry();
  std::lock_guard<std::recursive_mutex> lock(r.mu);
  r.open.erase(id);
}

void registry_note_thread_buffer(uint64_t id, Tracer::ThreadBuffer* b) {
  ThreadHook& hook = thread_hook();
  {
    // A long-lived thread that traces many short-lived arenas would otherwise collect
    // an entry per arena.
    Registry& r = registry();
    std::lock_guard<std::recursive_mutex> lock(r.mu);
    auto& v = hook.buffers;
    for (size_t i = 0; i < v.size();) {
      if (r.open.count(v[i].first) == 0) {
        v[i] = v.back();
        v.pop_back();
      } else {
        ++i;
      }
    }
  }
  hook.buffers.emplace_back(id, b);
}

Tracer::ThreadBuffer* registry_find_thread_buffer(uint64_t id) {
  for (auto& [tid, buf] : thread_hook().buffers) {
    if (tid == id) return buf;
  }
  return nullptr;
}

}  // namespace zarena_trace
