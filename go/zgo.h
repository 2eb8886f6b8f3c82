/* C side of the Go binding: small static inline wrappers that return results by value,
 * so Go never passes a Go pointer to C, and that copy zarena_last_error() in the same
 * call that failed (it is thread-local; the goroutine may run on another thread, or
 * another goroutine on this one, before Go could read it). */
#ifndef ZARENA_GO_ZGO_H
#define ZARENA_GO_ZGO_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zarena/zarena.h>

/* A malloc'ed copy of the last error (freed by Go), or NULL on success or when the
 * copy cannot be made. */
static inline char* zgo_last_error(zarena_status s) {
  if (s == ZARENA_OK) return NULL;
  const char* m = zarena_last_error();
  size_t n = strlen(m) + 1;
  char* c = (char*)malloc(n);
  if (c != NULL) memcpy(c, m, n);
  return c;
}

typedef struct {
  zarena_status status;
  char* err;
} zgo_result;

typedef struct {
  zarena_status status;
  char* err;
  uintptr_t ptr;
} zgo_ptr_result;

typedef struct {
  zarena_status status;
  char* err;
  zarena* arena;
} zgo_create_result;

typedef struct {
  zarena_status status;
  char* err;
  zarena_stats stats;
} zgo_stats_result;

static inline zgo_result zgo_wrap(zarena_status s) {
  zgo_result r;
  r.status = s;
  r.err = zgo_last_error(s);
  return r;
}

static inline zarena_config zgo_config_defaults(void) {
  zarena_config c;
  zarena_config_init(&c);
  return c;
}

static inline zgo_create_result zgo_create(zarena_config cfg, uintptr_t stream) {
  zgo_create_result r;
  r.arena = NULL;
  if (stream != 0) cfg.stream = (void*)stream;
  r.status = zarena_create(&cfg, &r.arena);
  r.err = zgo_last_error(r.status);
  return r;
}

static inline zgo_ptr_result zgo_alloc(zarena* a, uint64_t size) {
  zgo_ptr_result r;
  void* p = NULL;
  r.status = zarena_alloc(a, size, &p);
  r.ptr = (uintptr_t)p;
  r.err = r.status == ZARENA_OK ? NULL : zgo_last_error(r.status);
  return r;
}

static inline zgo_result zgo_free(zarena* a, uintptr_t ptr) {
  zgo_result r;
  r.status = zarena_free(a, (void*)ptr);
  r.err = r.status == ZARENA_OK ? NULL : zgo_last_error(r.status);
  return r;
}

static inline zgo_result zgo_destroy(zarena* a) { return zgo_wrap(zarena_destroy(a)); }
static inline zgo_result zgo_reset(zarena* a) { return zgo_wrap(zarena_reset(a)); }
static inline zgo_result zgo_mark_step_boundary(zarena* a) {
  return zgo_wrap(zarena_mark_step_boundary(a));
}

static inline zgo_stats_result zgo_get_stats(const zarena* a) {
  zgo_stats_result r;
  memset(&r.stats, 0, sizeof r.stats);
  r.stats.struct_size = sizeof r.stats;
  r.status = zarena_get_stats(a, &r.stats);
  r.err = zgo_last_error(r.status);
  return r;
}

static inline zgo_result zgo_inject_overflow_fault(zarena* a, uint64_t fail_nth,
                                                   uint64_t delay_nth, uint64_t delay_ns) {
  return zgo_wrap(zarena_debug_inject_overflow_fault(a, fail_nth, delay_nth, delay_ns));
}

#endif
