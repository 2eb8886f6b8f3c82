/* Compiled as strict C99 (-std=c99 -pedantic -Wall -Wextra -Werror) by tests/headers.cmake:
 * the public header must be usable from plain C, and what a C caller sees must match
 * what the library was built with. */
#include <stdio.h>
#include <string.h>

#include "zarena/zarena.h"
#include "zarena/zarena_graph.h"
#include "zarena/zarena_kept.h"
#include "zarena/zarena_lane.h"
#include "zarena/zarena_plan.h"
#include "zarena/zarena_testing.h"

static void on_log(void* user_data, const zarena_log_record* rec) {
  (void)user_data;
  (void)rec;
}

int main(void) {
  zarena_config cfg;
  zarena_stats stats;
  zarena* a = NULL;
  void* p = NULL;
  zarena_log_fn fn = on_log;

  if (zarena_version_number() != ZARENA_VERSION_NUMBER) {
    fprintf(stderr, "header %d, library %u\n", ZARENA_VERSION_NUMBER, zarena_version_number());
    return 1;
  }
  if (zarena_set_log_callback(fn, NULL, ZARENA_LOG_OFF) != ZARENA_OK) return 1;
  zarena_config_init(&cfg);
  if (cfg.struct_size != sizeof cfg) return 1;
  cfg.backend = ZARENA_BACKEND_HOST;
  cfg.capacity_bytes = 1u << 20;
  if (zarena_create(&cfg, &a) != ZARENA_OK) {
    fprintf(stderr, "create: %s\n", zarena_last_error());
    return 1;
  }
  if (zarena_alloc(a, 100, &p) != ZARENA_OK || p == NULL) return 1;
  memset(&stats, 0, sizeof stats);
  stats.struct_size = (uint32_t)sizeof stats;
  if (zarena_get_stats(a, &stats) != ZARENA_OK || stats.live_allocs != 1) return 1;
  if (zarena_free(a, p) != ZARENA_OK) return 1;
  if (zarena_debug_inject_overflow_fault(a, 0, 0, 0) != ZARENA_OK) return 1;
  if (zarena_destroy(a) != ZARENA_OK) return 1;
  zarena_set_log_callback(NULL, NULL, ZARENA_LOG_INFO);
  printf("C99 header check OK (zarena %s)\n", zarena_version_string());
  return 0;
}
