#include <stdio.h>
#include <zarena/zarena.h>

/* Every call returns a status; zarena_last_error() says why one failed (an overflow's
 * message ends with its verdict and fix). */
#define CHECK(call)                                            \
  do {                                                         \
    zarena_status s_ = (call);                                 \
    if (s_ != ZARENA_OK) {                                     \
      fprintf(stderr, "%s: %s\n", #call, zarena_last_error()); \
      return 1;                                                \
    }                                                          \
  } while (0)

int main(void) {
  zarena_config cfg;
  zarena_config_init(&cfg); /* defaults + ZARENA_* / ZERFOO_* env */
  cfg.capacity_bytes = 256u << 20;
  zarena* a;
  CHECK(zarena_create(&cfg, &a));
  void* weights;
  CHECK(zarena_alloc(a, 64u << 20, &weights)); /* survives resets once the floor is set */
  CHECK(zarena_mark_step_boundary(a));
  for (int step = 0; step < 100; ++step) {
    void *act, *grad;
    CHECK(zarena_step_begin(a)); /* lets the diagnosis count steps */
    CHECK(zarena_alloc(a, 8u << 20, &act));
    CHECK(zarena_alloc(a, 8u << 20, &grad));
    CHECK(zarena_free(a, act)); /* reused within the step */
    CHECK(zarena_reset(a));     /* everything above the floor, in O(1) */
  }
  zarena_stats st = {.struct_size = sizeof st};
  CHECK(zarena_get_stats(a, &st));
  printf("epoch %llu, high water %llu bytes\n", (unsigned long long)st.epoch,
         (unsigned long long)st.high_water_bytes);
  return zarena_destroy(a) == ZARENA_OK ? 0 : 1;
}
