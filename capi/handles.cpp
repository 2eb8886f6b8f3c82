// The live handles, so that a child forked by the program refuses every call on an arena
// its parent created (zarena.h, FORK): at fork the handles' magic becomes kInherited in
// the child, so checked() turns such a call away before it reaches any lock (a slot lock
// a parent thread held at the fork stays held in the child forever) or any memory (the
// region is the parent's, and on a GPU not the child's to use). A handle costs one set
// entry, at create and destroy only.
#include <pthread.h>

#include <mutex>
#include <new>
#include <unordered_set>

#include "handle.h"

namespace zarena_core {

namespace {

struct Handles {
  std::mutex mu;
  std::unordered_set<::zarena*> live;
};

void lock_for_fork();
void unlock_in_parent();
void mark_inherited_in_child();

Handles& handles() {
  static Handles* h = [] {  // never destroyed: handles may be destroyed at exit
    auto* fresh = new Handles;
    pthread_atfork(lock_for_fork, unlock_in_parent, mark_inherited_in_child);
    return fresh;
  }();
  return *h;
}

// Around fork(): the set is taken, so the child finds it whole.
void lock_for_fork() { handles().mu.lock(); }
void unlock_in_parent() { handles().mu.unlock(); }
void mark_inherited_in_child() {
  Handles& h = handles();
  for (::zarena* a : h.live) a->magic = ::zarena::kInherited;
  h.live.clear();
  new (&h.mu) std::mutex();  // the forking thread's lock, in a process where it is alone
}

}  // namespace

void handle_created(::zarena* a) {
  Handles& h = handles();
  std::lock_guard<std::mutex> lock(h.mu);
  h.live.insert(a);
}

void handle_destroyed(::zarena* a) noexcept {
  Handles& h = handles();
  std::lock_guard<std::mutex> lock(h.mu);
  h.live.erase(a);
}

}  // namespace zarena_core
