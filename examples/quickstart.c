#include <stdio.h>
#include <zarena/zarena.h>

int main(void) {
  zarena_config cfg;
  zarena_config_init(&cfg); /* defaults + ZARENA_* / ZERFOO_* env */
  cfg.capacity_bytes = 256u << 20;
  zarena* a;
  if (zarena_create(&cfg, &a) != ZARENA_OK) {
    fprintf(stderr, "%s\n", zarena_last_error());
    return 1;
  }
  void* weights;
  zarena_alloc(a, 64u << 20, &weights); /* survives resets once the floor is set */
  zarena_mark_step_boundary(a);
  for (int step = 0; step < 100; ++step) {
    void *act, *grad;
    zarena_alloc(a, 8u << 20, &act);
    zarena_alloc(a, 8u << 20, &grad);
    zarena_free(a, act); /* reused within the step */
    zarena_reset(a);     /* everything above the floor, in O(1) */
  }
  zarena_stats st = {.struct_size = sizeof st};
  zarena_get_stats(a, &st);
  printf("epoch %llu, high water %llu bytes\n", (unsigned long long)st.epoch,
         (unsigned long long)st.high_water_bytes);
  return zarena_destroy(a);
}
