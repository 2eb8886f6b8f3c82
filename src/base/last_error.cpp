#include "base/last_error.h"

namespace zarena_core {

namespace {
thread_local std::string t_last_error;
}

void set_last_error(std::string message) noexcept {
  try {
    t_last_error = std::move(message);
  } catch (...) {
    t_last_error.clear();
  }
}

void set_last_error(const char* message) noexcept {
  try {
    t_last_error.assign(message);
  } catch (...) {
    t_last_error.clear();
  }
}

const char* last_error_text() noexcept { return t_last_error.c_str(); }

}  // namespace zarena_core
