/* A program outside the zarena tree, built against an installed prefix (by
 * tests/check_install.sh, through find_package and through pkg-config). */
#include <stdio.h>
#include <zarena/zarena.h>

int main(void) {
  zarena_config cfg;
  zarena* a = NULL;
  zarena_stats st;
  void* p[4];
  int i;

  zarena_set_log_callback(NULL, NULL, ZARENA_LOG_WARN);
  zarena_config_init(&cfg);
  cfg.backend = ZARENA_BACKEND_HOST;
  cfg.capacity_bytes = 8u << 20;
  cfg.name = "consumer";
  if (zarena_create(&cfg, &a) != ZARENA_OK) {
    fprintf(stderr, "zarena_create: %s\n", zarena_last_error());
    return 1;
  }
  for (i = 0; i < 4; ++i) {
    if (zarena_alloc(a, 1000u * (unsigned)(i + 1), &p[i]) != ZARENA_OK) return 2;
  }
  if (zarena_free(a, p[1]) != ZARENA_OK) return 3;
  if (zarena_free(a, p[1]) != ZARENA_E_DOUBLE_FREE) return 4;
  if (zarena_reset(a) != ZARENA_OK) return 5;
  st.struct_size = (uint32_t)sizeof st;
  if (zarena_get_stats(a, &st) != ZARENA_OK) return 6;
  if (st.epoch != 1 || st.live_allocs != 0 || st.invalid_frees != 1) return 7;
  zarena_destroy(a);
  printf("consumer OK: zarena %s (header %d.%d.%d), epoch %llu\n", zarena_version_string(),
         ZARENA_VERSION_MAJOR, ZARENA_VERSION_MINOR, ZARENA_VERSION_PATCH,
         (unsigned long long)st.epoch);
  return zarena_version_number() / 10000 == ZARENA_VERSION_MAJOR ? 0 : 8;
}
