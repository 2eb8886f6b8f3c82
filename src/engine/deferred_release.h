// Arenas destroyed while a CUDA graph capture was running (zarena.h, zarena_destroy): their
// device memory cannot go back then (a free or a wait on the captured stream would be
// recorded into the graph, or break the capture), and a Go finalizer may destroy an arena
// on any thread at any moment. So the backend (the region, the overflow pool) and the
// overflow blocks still out wait here, and go at the next safe point: a zarena_create, a
// zarena_destroy, a zarena_set_capture_active(a, 0) or a zarena_capture_end, of any arena,
// made when their backend sees no capture any more and no capture scope covers their stream.
// Process-wide; thread-safe.
#pragma once

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

// Keeps d until a safe point. false: host memory ran out; d is left as it was.
bool defer_release(DeferredRelease& d) noexcept;
// Releases what waits and whose backend now sees no capture (logs "arena.released", or a
// warning for a backend error). No lock held by the caller.
void release_deferred() noexcept;
// What waits now (tests).
size_t deferred_releases() noexcept;

}  // namespace zarena_core
