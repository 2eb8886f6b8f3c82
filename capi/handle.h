// The opaque zarena handle and the boundary helpers every extern "C" shim uses:
// handle validation, thread-local last error, and exception-to-status translation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "base/last_error.h"
#include "base/status.h"
#include "engine/arena.h"
#include "zarena/zarena.h"

struct zarena {
  static constexpr uint64_t kMagic = 0x7A6172656E613031ull;  // "zarena01"
  // A handle a forked child inherited (handles.cpp): every call on it is refused.
  static constexpr uint64_t kInherited = 0x7A6172656E614B31ull;  // "zarenaK1"
  uint64_t magic = kMagic;
  std::unique_ptr<zarena_core::Arena> arena;
};

namespace zarena_core {

zarena_status fail(Status s, std::string message) noexcept;
// The set of live handles (handles.cpp), for fork: created may throw std::bad_alloc.
void handle_created(::zarena* a);
void handle_destroyed(::zarena* a) noexcept;
zarena_status report(const Result& r) noexcept;
// A live handle, or nullptr (and last error set) when a is NULL or not a live arena.
// The failure half of checked(), out of line: sets the last error, returns nullptr.
Arena* reject_handle(const ::zarena* a, const char* fn) noexcept;
inline Arena* checked(const ::zarena* a, const char* fn) noexcept {
  if (a != nullptr && a->magic == ::zarena::kMagic && a->arena) return a->arena.get();
  return reject_handle(a, fn);
}

// Writes a library struct into a caller's versioned struct of dst_size bytes: the common
// prefix is copied, a tail this library does not know is zeroed, nothing beyond dst_size
// is touched.
inline void write_versioned(void* dst, uint32_t dst_size, const void* src, size_t src_size) {
  std::memcpy(dst, src, dst_size < src_size ? dst_size : src_size);
  if (dst_size > src_size) std::memset(static_cast<char*>(dst) + src_size, 0, dst_size - src_size);
}

// Runs body, converting any escaping exception into a status: no exception crosses the ABI.
template <typename Body>
zarena_status guarded(const char* fn, Body&& body) noexcept {
  try {
    return body();
  } catch (const Error& e) {
    return fail(e.status, std::string(fn) + ": " + e.message);
  } catch (const std::bad_alloc&) {
    return fail(Status::kOutOfMemory, std::string(fn) + ": out of host memory");
  } catch (const std::exception& e) {
    return fail(Status::kInternal, std::string(fn) + ": internal error: " + e.what());
  } catch (...) {
    return fail(Status::kInternal, std::string(fn) + ": internal error (unknown exception)");
  }
}

}  // namespace zarena_core
