#include "units.h"

#include <cstdio>

#include "zarena/zarena.h"

namespace zarena_replay {

std::string human_bytes(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf,
                  v < 10    ? "%.2f %s"
                  : v < 100 ? "%.1f %s"
                            : "%.0f %s",
                  v, kUnits[u]);
  }
  return buf;
}

std::string policy_name(int32_t policy) {
  switch (policy) {
    case ZARENA_OVERFLOW_DEFAULT:
      return "default";
    case ZARENA_OVERFLOW_ASYNC:
      return "async";
    case ZARENA_OVERFLOW_SYNC:
      return "sync";
    case ZARENA_OVERFLOW_REFUSE:
      return "refuse";
    default:
      return "?";
  }
}

}  // namespace zarena_replay
