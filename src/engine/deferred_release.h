// Arenas destroyed while a CUDA graph capture was running (zarena.h, zarena_destroy): their
// device memory cannot go back then (a free or a wait on the captured stream would be
// recorded into the graph, or break the capture), and a Go finalizer may destroy an arena
// on any thread at any moment. So the backend (the region, the overflow pool) and the
// overflow blocks still out wait here, and go back once their backend sees no capture any
// more and no capture scope covers their stream, whichever comes first of:
//   - the release thread: while anything waits, a thread of zarena's ("zarena-release")
//     asks every 5 ms, then less often, up to every kPollMax (100 ms), whether that is so
//     (capture queries only: CUDA allows them during a capture) and releases what it can;
//     it ends when nothing waits. So the memory goes back without a further call from the
//     program. Where the thread cannot be started (no threads left), only the safe points
//     below release;
//   - a safe point: a zarena_create, a zarena_destroy, a zarena_set_capture_active(a, 0) or
//     a zarena_capture_end, of any arena. When one returns, everything releasable when it
//     began has gone back and been logged (a pass the thread is making, and its records,
//     are waited for).
// After a device reset (Backend::context_lost) what waits is forgotten instead: the reset
// took it, and its addresses may be new allocations by now.
// Process-wide; thread-safe. Records are emitted with no lock held, from the thread that
// released (the program's callback may run on the release thread). At exit the thread stops
// before the CUDA runtime is torn down (it finishes a release in progress, waiting at most
// 2 s); in a child made by fork() the parent's waiting arenas are forgotten (the child's
// copy of their memory goes with the child).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "log/log.h"

namespace zarena_core {

struct DeferredRelease {
  std::unique_ptr<Backend> backend;
  std::vector<OverflowBlock> blocks;
  LogSource source;           // the arena's, for the log
  uint64_t region_bytes = 0;  // what the region held on the device
};

// The release thread's longest wait between two looks.
inline constexpr std::chrono::milliseconds kPollMax{100};

// Keeps d until it can go back (starts the release thread if none runs). false: host
// memory ran out; d is left as it was.
bool defer_release(DeferredRelease& d) noexcept;
// A safe point: releases what waits and whose backend now sees no capture (logs
// "arena.released", or a warning for a backend error, or "arena.device_reset"). No lock
// held by the caller.
void release_deferred() noexcept;
// Tests: what waits now (a release in progress counts until it is done); the release
// thread's passes so far; whether it runs.
size_t deferred_releases() noexcept;
uint64_t release_thread_passes() noexcept;
bool release_thread_running() noexcept;

}  // namespace zarena_core
