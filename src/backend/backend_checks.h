// The checks the host and the CUDA backends make before any call, in one place so that
// both refuse the same requests with the same messages (each names its backend).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/commit_map.h"
#include "base/status.h"

namespace zarena_core {

inline bool is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// reserve_region's request: bytes > 0 and a power-of-two alignment. `backend` names the
// backend in the message ("host", "cuda").
inline Result check_region_request(const char* backend, const RegionRequest& req) {
  if (req.bytes == 0 || !is_pow2(req.alignment)) {
    return Result::fail(Status::kInvalidArgument,
                        fmt::format("{} backend: cannot reserve {} bytes aligned to {} "
                                    "(need bytes > 0 and a power-of-two alignment)",
                                    backend, req.bytes, req.alignment));
  }
  return Result::ok();
}

// overflow_alloc's request: bytes > 0 and a power-of-two alignment (kInvalidArgument),
// neither above max_bytes (kOutOfMemory: refused before any call, so that a size never
// wraps when the alignment slack is added). `what` opens the messages ("overflow
// allocation"); a refusal of a size names the device after the alignment (none for a
// negative one) and ends "larger than any <larger_than>".
inline Result check_overflow_request(const char* what, uint64_t bytes, uint64_t alignment,
                                     uint64_t max_bytes, int32_t device, const char* larger_than) {
  if (bytes == 0 || !is_pow2(alignment)) {
    return Result::fail(Status::kInvalidArgument,
                        fmt::format("{} of {} bytes aligned to {}: need bytes > 0 and a "
                                    "power-of-two alignment",
                                    what, bytes, alignment));
  }
  if (bytes > max_bytes || alignment > max_bytes) {
    const std::string on = device >= 0 ? fmt::format(" on device {}", device) : std::string();
    return Result::fail(Status::kOutOfMemory,
                        fmt::format("{} of {} bytes aligned to {}{} refused: larger than any {}",
                                    what, bytes, alignment, on, larger_than));
  }
  return Result::ok();
}

// commit and decommit need an expandable region; else kUnsupported.
inline Result check_expandable(const char* backend, bool expandable, const char* what) {
  if (expandable) return Result::ok();
  return Result::fail(Status::kUnsupported,
                      fmt::format("{} backend: {} needs an expandable region", backend, what));
}

// commit's request: an expandable region and a range CommitMap::check_commit accepts.
inline Result check_commit_request(const char* backend, bool expandable, const CommitMap& commits,
                                   uint64_t offset, uint64_t bytes) {
  Result r = check_expandable(backend, expandable, "commit");
  if (!r.is_ok()) return r;
  return commits.check_commit(offset, bytes);
}

// decommit's request: an expandable region and a range CommitMap::check_decommit accepts
// (the committed ranges it covers into *covered).
inline Result check_decommit_request(const char* backend, bool expandable, const CommitMap& commits,
                                     uint64_t offset, uint64_t bytes,
                                     std::vector<CommitMap::Range>* covered) {
  Result r = check_expandable(backend, expandable, "decommit");
  if (!r.is_ok()) return r;
  return commits.check_decommit(offset, bytes, covered);
}

// fill32's arguments: pointer and size multiples of 4.
inline Result check_fill32_args(const void* ptr, uint64_t bytes) {
  if (bytes % 4 != 0 || reinterpret_cast<uintptr_t>(ptr) % 4 != 0) {
    return Result::fail(Status::kInvalidArgument,
                        fmt::format("fill32({}, {} bytes): pointer and size must be "
                                    "multiples of 4",
                                    ptr, bytes));
  }
  return Result::ok();
}

}  // namespace zarena_core
