// The thread-local detail of the most recent failure (zarena_last_error). It lives in the
// engine so that the hot paths can return a bare status and write the message only on
// failure; the C API's shims read it.
#pragma once

#include <string>

#include "base/status.h"

namespace zarena_core {

void set_last_error(std::string message) noexcept;
// A fixed message: copied into the thread's buffer, which keeps its capacity, so an answer
// given again and again (a refusal the Go binding asks for at every step boundary) costs
// no allocation.
void set_last_error(const char* message) noexcept;
const char* last_error_text() noexcept;
// Sets the message and returns the status (for `return fail_with(...)` on failure paths).
inline Status fail_with(Status s, std::string message) noexcept {
  set_last_error(std::move(message));
  return s;
}
inline Status fail_with(Status s, const char* message) noexcept {
  set_last_error(message);
  return s;
}

}  // namespace zarena_core
