// Captures the engine declares for more than one arena (zarena.h, zarena_capture_begin):
// process-wide (every arena) or per stream (every arena whose stream is that one). Each
// scope counts its begins and ends; an arena treats a capture as active while a scope that
// covers it counts more than zero, whatever the arena's age. Process-wide; thread-safe.
#pragma once

#include <cstdint>

#include "base/status.h"

namespace zarena_core {

// ZARENA_CAPTURE_PROCESS (stream ignored) or ZARENA_CAPTURE_STREAM. Fails, changing
// nothing, for an unknown scope, cudaStreamPerThread (0x2: a different stream in every
// thread), a count at 2^32-1 (begin) or at 0 (end).
Result capture_scope_begin(int32_t scope, void* stream);
Result capture_scope_end(int32_t scope, void* stream);
// True while a process scope, or the scope of this stream (NULL and cudaStreamLegacy are
// the same stream), counts more than zero. One relaxed load when no scope is open.
bool capture_scope_covers(void* stream) noexcept;
// Increases at every begin: an arena warns once per capture by remembering the last one.
uint64_t capture_scope_generation() noexcept;

}  // namespace zarena_core
