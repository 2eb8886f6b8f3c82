// Compiled as strict C++17 (-pedantic -Wall -Wextra -Werror) by tests/headers.cmake: the
// public header must be usable from C++ without warnings and keep C linkage there.
#include <cstdio>
#include <type_traits>

#include "zarena/zarena.h"
#include "zarena/zarena_graph.h"
#include "zarena/zarena_kept.h"
#include "zarena/zarena_lane.h"
#include "zarena/zarena_plan.h"
#include "zarena/zarena_testing.h"

static_assert(std::is_standard_layout<zarena_config>::value, "zarena_config is C layout");
static_assert(std::is_standard_layout<zarena_stats>::value, "zarena_stats is C layout");
static_assert(std::is_trivially_copyable<zarena_log_record>::value, "zarena_log_record is POD");
static_assert(std::is_same<zarena_status, int32_t>::value, "status is int32_t");

extern "C" void on_log(void*, const zarena_log_record*) {}

int main() {
  if (zarena_version_number() != ZARENA_VERSION_NUMBER) return 1;
  if (zarena_set_log_callback(&on_log, nullptr, ZARENA_LOG_OFF) != ZARENA_OK) return 1;
  zarena_config cfg;
  zarena_config_init(&cfg);
  cfg.backend = ZARENA_BACKEND_HOST;
  cfg.capacity_bytes = 1u << 20;
  zarena* a = nullptr;
  if (zarena_create(&cfg, &a) != ZARENA_OK) return 1;
  void* p = nullptr;
  if (zarena_alloc(a, 64, &p) != ZARENA_OK) return 1;
  if (zarena_free(a, p) != ZARENA_OK) return 1;
  if (zarena_destroy(a) != ZARENA_OK) return 1;
  zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_INFO);
  std::printf("C++17 header check OK (%s)\n", zarena_status_string(ZARENA_E_STALE));
  return 0;
}
