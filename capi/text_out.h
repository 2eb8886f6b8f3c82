// Hands a formatted text to a caller's buffer, the way every zarena_format_* call
// documents it (zarena.h, "Readable stats, peaks and live-block dumps").
#pragma once

#include <fmt/format.h>

#include <cstring>
#include <string>

#include "handle.h"

namespace zarena_core {

// Checks the buffer arguments before any work: buf NULL with cap > 0 is refused, and a
// size query (buf NULL, cap 0) needs `needed`.
inline zarena_status check_text_buffer(const char* fn, const char* buf, size_t cap,
                                       const size_t* needed) noexcept {
  if (buf == nullptr && cap > 0) {
    return fail(Status::kInvalidArgument, std::string(fn) + ": buf is NULL but cap is not 0");
  }
  if (buf == nullptr && needed == nullptr) {
    return fail(Status::kInvalidArgument,
                std::string(fn) + ": a size query (buf NULL) needs `needed`");
  }
  return ZARENA_OK;
}

// Writes text and its NUL when they fit; sets *needed either way.
inline zarena_status put_text(const char* fn, const std::string& text, char* buf, size_t cap,
                              size_t* needed) {
  const size_t need = text.size() + 1;
  if (needed != nullptr) *needed = need;
  if (buf == nullptr) return ZARENA_OK;  // a size query
  if (cap < need) {
    if (cap > 0) buf[0] = '\0';
    return fail(Status::kInvalidArgument,
                fmt::format("{}: the buffer holds {} bytes, the text needs {}", fn, cap, need));
  }
  std::memcpy(buf, text.c_str(), need);
  return ZARENA_OK;
}

}  // namespace zarena_core
