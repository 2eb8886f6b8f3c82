// Status strings, version queries and the thread-local last error.
#include <string>

#include "base/last_error.h"
#include "base/status_codes.h"
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

const char* zarena_status_string(zarena_status s) { return zarena_core::status_text(s); }

const char* zarena_last_error(void) { return zarena_core::last_error_text(); }

}  // extern "C"
