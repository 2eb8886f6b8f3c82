#include "engine/capture_scope.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "zarena/zarena.h"

namespace zarena_core {

namespace {

constexpr uintptr_t kStreamLegacy = 0x1;     // cudaStreamLegacy
constexpr uintptr_t kStreamPerThread = 0x2;  // cudaStreamPerThread

struct Scopes {
  std::mutex mu;
  uint32_t process = 0;
  std::vector<std::pair<void*, uint32_t>> streams;  // open stream scopes (count > 0)
  std::atomic<uint64_t> open{0};                    // sum of all counts
  std::atomic<uint64_t> generation{0};
};

Scopes& scopes() {
  static Scopes* s = new Scopes();  // never destroyed: arenas may outlive static destructors
  return *s;
}

void* key(void* stream) {
  return reinterpret_cast<uintptr_t>(stream) == kStreamLegacy ? nullptr : stream;
}

Result check(int32_t scope, void* stream) {
  if (scope != ZARENA_CAPTURE_PROCESS && scope != ZARENA_CAPTURE_STREAM)
    return Result::fail(Status::kInvalidArgument,
                        fmt::format("scope {} is not ZARENA_CAPTURE_PROCESS (0) or "
                                    "ZARENA_CAPTURE_STREAM (1)",
                                    scope));
  if (scope == ZARENA_CAPTURE_STREAM && reinterpret_cast<uintptr_t>(stream) == kStreamPerThread)
    return Result::fail(Status::kInvalidArgument,
                        "cudaStreamPerThread names a different stream in every thread; "
                        "name the stream being captured");
  return Result::ok();
}

}  // namespace

Result capture_scope_begin(int32_t scope, void* stream) {
  Result r = check(scope, stream);
  if (!r.is_ok()) return r;
  Scopes& s = scopes();
  std::lock_guard<std::mutex> lock(s.mu);
  uint32_t* count = &s.process;
  if (scope == ZARENA_CAPTURE_STREAM) {
    count = nullptr;
    for (auto& [st, n] : s.streams)
      if (st == key(stream)) count = &n;
    if (count == nullptr) {
      s.streams.emplace_back(key(stream), 0);  // may throw bad_alloc: nothing changed
      count = &s.streams.back().second;
    }
  }
  if (*count == UINT32_MAX)
    return Result::fail(Status::kInvalidArgument, "the scope already counts 2^32-1 begins");
  ++*count;
  s.open.fetch_add(1, std::memory_order_relaxed);
  s.generation.fetch_add(1, std::memory_order_relaxed);
  return Result::ok();
}

Result capture_scope_end(int32_t scope, void* stream) {
  Result r = check(scope, stream);
  if (!r.is_ok()) return r;
  Scopes& s = scopes();
  std::lock_guard<std::mutex> lock(s.mu);
  if (scope == ZARENA_CAPTURE_PROCESS) {
    if (s.process == 0)
      return Result::fail(Status::kInvalidArgument,
                          "no process-wide capture is open (more ends than begins)");
    --s.process;
  } else {
    size_t i = 0;
    while (i < s.streams.size() && s.streams[i].first != key(stream)) ++i;
    if (i == s.streams.size())
      return Result::fail(
          Status::kInvalidArgument,
          fmt::format("no capture is open on stream {} (more ends than begins)", stream));
    if (--s.streams[i].second == 0) {
      s.streams[i] = s.streams.back();
      s.streams.pop_back();
    }
  }
  s.open.fetch_sub(1, std::memory_order_relaxed);
  return Result::ok();
}

bool capture_scope_covers(void* stream) noexcept {
  Scopes& s = scopes();
  if (s.open.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.process > 0) return true;
  for (const auto& [st, n] : s.streams)
    if (st == key(stream)) return true;
  return false;
}

uint64_t capture_scope_generation() noexcept {
  return scopes().generation.load(std::memory_order_relaxed);
}

}  // namespace zarena_core
