// The failure end of ZARENA_ASSERT (checks.h): debug builds only reach it.
#include "base/checks.h"

#include <cstdio>
#include <cstdlib>

namespace zarena_core::checks {

void fail(const char* file, int line, const char* cond, const char* detail) noexcept {
  if (detail != nullptr && detail[0] != '\0') {
    std::fprintf(stderr, "zarena: check failed at %s:%d: %s (%s)\n", file, line, cond, detail);
  } else {
    std::fprintf(stderr, "zarena: check failed at %s:%d: %s\n", file, line, cond);
  }
  std::fflush(stderr);
  std::abort();
}

}  // namespace zarena_core::checks
