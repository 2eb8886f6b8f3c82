// Status strings, version queries and the thread-local last error.
#include <string>

#include "base/last_error.h"
#include "handle.h"

namespace zarena_core {

zarena_status fail(Status s, std::string message) noexcept {
  set_last_error(std::move(message));
  return static_cast<zarena_status>(s);
}

zarena_status report(const Result& r) noexcept {
  if (r.is_ok()) return ZARENA_OK;
  return fail(r.status, r.message);
}

Arena* reject_handle(const ::zarena* a, const char* fn) noexcept {
  const char* why =
      a == nullptr ? ": arena handle is NULL"
      : a->magic == ::zarena::kInherited
          ? ": the arena was created by the parent process before fork(); a forked child "
            "cannot use it (zarena.h, FORK): nothing was done"
          : ": not a live arena handle (a corrupted pointer; a handle used after "
            "zarena_destroy is undefined and not reliably detected)";
  fail(Status::kInvalidArgument, std::string(fn) + why);
  return nullptr;
}

}  // namespace zarena_core

extern "C" {

uint32_t zarena_version_number(void) { return ZARENA_VERSION_NUMBER; }

const char* zarena_version_string(void) {
#define ZARENA_STR2(x) #x
#define ZARENA_STR(x) ZARENA_STR2(x)
  return ZARENA_STR(ZARENA_VERSION_MAJOR) "." ZARENA_STR(ZARENA_VERSION_MINOR) "." ZARENA_STR(
      ZARENA_VERSION_PATCH);
}

const char* zarena_status_string(zarena_status s) {
  switch (s) {
    case ZARENA_OK:
      return "ok";
    case ZARENA_E_INVALID_ARGUMENT:
      return "invalid argument";
    case ZARENA_E_OUT_OF_MEMORY:
      return "out of memory";
    case ZARENA_E_NOT_OWNED:
      return "pointer not owned by this arena";
    case ZARENA_E_DOUBLE_FREE:
      return "double free";
    case ZARENA_E_STALE:
      return "stale pointer (reclaimed by a reset)";
    case ZARENA_E_CAPTURE_UNSAFE:
      return "unsafe during stream capture";
    case ZARENA_E_NO_DEVICE:
      return "no usable CUDA device";
    case ZARENA_E_BACKEND:
      return "backend error";
    case ZARENA_E_UNSUPPORTED:
      return "unsupported";
    case ZARENA_E_INTERNAL:
      return "internal error";
    case ZARENA_E_NOT_PINNED:
      return "block not pinned";
    case ZARENA_E_TOO_MANY_PINS:
      return "too many pins on one block";
    case ZARENA_E_CLOSED:
      return "the arena is closed";
    default:
      return "unknown status";
  }
}

const char* zarena_last_error(void) { return zarena_core::last_error_text(); }

}  // extern "C"
