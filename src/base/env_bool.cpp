#include "base/env_bool.h"

#include <strings.h>

namespace zarena_core {

bool parse_env_bool(const char* s, bool* out) {
  if (s == nullptr) return false;
  if (!strcasecmp(s, "1") || !strcasecmp(s, "true") || !strcasecmp(s, "yes") ||
      !strcasecmp(s, "on")) {
    *out = true;
    return true;
  }
  if (!strcasecmp(s, "0") || !strcasecmp(s, "false") || !strcasecmp(s, "no") ||
      !strcasecmp(s, "off") || *s == '\0') {
    *out = false;
    return true;
  }
  return false;
}

}  // namespace zarena_core
