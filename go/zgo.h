/* C side of the Go binding: small static inline wrappers that return results by value,
 * so Go never passes a Go pointer to C, and that copy zarena_last_error() in the same
 * call that failed (it is thread-local; the goroutine may run on another thread, or
 * another goroutine on this one, before Go could read it).
 *
 * Queued frees: Arena.Free only queues (freequeue.go); every wrapper that acts on an arena
 * takes the queue (items, n, statuses: C memory owned by the Go side) and applies it
 * first, in the same crossing, so a free queued before a call is applied before it.
 *
 * With ZGO_DLOPEN (the zarena_dlopen build tag) every zarena_* call below goes through a
 * function pointer that zgo_dl_load filled (zgo_dl.h); otherwise they are direct calls. */
#ifndef ZARENA_GO_ZGO_H
#define ZARENA_GO_ZGO_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zarena/zarena.h>
#include <zarena/zarena_testing.h>

#include "zgo_dl.h"

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

/* zarena_free_item with the pointer as an integer, so Go writes it without converting an
 * integer to a pointer; same layout (checked below). */
typedef struct {
  uintptr_t ptr;
  uint64_t epoch;
} zgo_free_item;
_Static_assert(sizeof(zgo_free_item) == sizeof(zarena_free_item), "zgo_free_item layout");
_Static_assert(offsetof(zgo_free_item, epoch) == offsetof(zarena_free_item, epoch),
               "zgo_free_item layout");
_Static_assert(sizeof(uintptr_t) == sizeof(void*), "uintptr_t holds a pointer");

/* One buffer of queued frees: items[cap] then statuses[cap], one allocation. */
static inline zgo_free_item* zgo_queue_alloc(size_t cap) {
  return (zgo_free_item*)malloc(cap * (sizeof(zgo_free_item) + sizeof(zarena_status)));
}
static inline zarena_status* zgo_queue_statuses(zgo_free_item* q, size_t cap) {
  return (zarena_status*)(void*)(q + cap);
}
static inline void zgo_queue_free(zgo_free_item* q) { free(q); }

/* Applies the queued frees; returns how many failed (their statuses are in qs). */
static inline uint32_t zgo_apply(zarena* a, const zgo_free_item* q, size_t nq, zarena_status* qs) {
  if (nq == 0) return 0;
  if (zarena_free_batch(a, (const zarena_free_item*)(const void*)q, nq, qs) == ZARENA_OK) return 0;
  uint32_t failed = 0;
  for (size_t i = 0; i < nq; ++i) failed += qs[i] != ZARENA_OK;
  return failed;
}

static inline uint32_t zgo_count_failed(const zarena_status* qs, size_t nq) {
  uint32_t failed = 0;
  for (size_t i = 0; i < nq; ++i) failed += qs[i] != ZARENA_OK;
  return failed;
}

typedef struct {
  zarena_status status;
  uint32_t qfailed; /* queued frees applied first that failed */
  char* err;
} zgo_result;

typedef struct {
  zarena_status status;
  uint32_t qfailed;
  char* err;
  uintptr_t ptr;
  uint64_t epoch;
  uint64_t size;
  uint32_t flags;
  uint32_t tag;
} zgo_block_result;

typedef struct {
  zarena_status status;
  char* err;
  zarena* arena;
  uintptr_t base;
  uint64_t capacity;
} zgo_create_result;

typedef struct {
  zarena_status status;
  uint32_t qfailed;
  char* err;
  zarena_stats stats;
} zgo_stats_result;

typedef struct {
  zarena_status status;
  uint32_t qfailed;
  char* err;
  uintptr_t base;
  zarena_region region;
} zgo_region_result;

typedef struct {
  zarena_status status;
  uint32_t qfailed;
  char* err;
  uint64_t epoch;
} zgo_epoch_result;

static inline zgo_result zgo_wrap(zarena_status s) {
  zgo_result r;
  r.status = s;
  r.qfailed = 0;
  r.err = zgo_last_error(s);
  return r;
}

static inline zgo_result zgo_wrap_q(zarena_status s, uint32_t qfailed) {
  zgo_result r = zgo_wrap(s);
  r.qfailed = qfailed;
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
  r.base = 0;
  r.capacity = 0;
  if (stream != 0) cfg.stream = (void*)stream;
  r.status = zarena_create(&cfg, &r.arena);
  r.err = zgo_last_error(r.status);
  if (r.status == ZARENA_OK) {
    zarena_region reg;
    memset(&reg, 0, sizeof reg);
    reg.struct_size = sizeof reg;
    if (zarena_region_info(r.arena, &reg) == ZARENA_OK) {
      r.base = (uintptr_t)reg.base;
      r.capacity = reg.capacity_bytes;
    }
  }
  return r;
}

/* The allocation of Alloc/AllocBlock: the queued frees, then zarena_alloc_ex, one call
 * (zarena_free_then_alloc, so freed space is reused exactly as if freed one by one). */
static inline zgo_block_result zgo_alloc(uintptr_t handle, const zgo_free_item* q, size_t nq,
                                         zarena_status* qs, uint64_t size, uint32_t tag) {
  zarena* a = (zarena*)handle;
  zgo_block_result r;
  zarena_block b;
  if (nq == 0) {
    r.status = zarena_alloc_ex(a, size, tag, &b);
    r.qfailed = 0;
  } else {
    r.status = zarena_free_then_alloc(a, (const zarena_free_item*)(const void*)q, nq, qs, size,
                                      tag, &b);
    r.qfailed = zgo_count_failed(qs, nq);
  }
  if (r.status == ZARENA_OK) {
    r.err = NULL;
    r.ptr = (uintptr_t)b.ptr;
    r.epoch = b.epoch;
    r.size = b.size;
    r.flags = b.flags;
    r.tag = b.tag;
  } else {
    r.err = zgo_last_error(r.status);
    r.ptr = 0;
    r.epoch = 0;
    r.size = 0;
    r.flags = 0;
    r.tag = 0;
  }
  return r;
}

/* Applies the queued frees only (a full queue, or Flush). */
static inline zgo_result zgo_flush(zarena* a, const zgo_free_item* q, size_t nq,
                                   zarena_status* qs) {
  zgo_result r;
  r.status = ZARENA_OK;
  r.err = NULL;
  r.qfailed = zgo_apply(a, q, nq, qs);
  return r;
}

/* The checked free (FreeNow/FreeAtNow): the queue, then this free, whose status is the
 * result. */
static inline zgo_result zgo_free_at(zarena* a, const zgo_free_item* q, size_t nq,
                                     zarena_status* qs, uintptr_t ptr, uint64_t epoch) {
  const uint32_t failed = zgo_apply(a, q, nq, qs);
  return zgo_wrap_q(zarena_free_at(a, (void*)ptr, epoch), failed);
}

static inline zgo_result zgo_destroy(zarena* a, const zgo_free_item* q, size_t nq,
                                     zarena_status* qs) {
  const uint32_t failed = zgo_apply(a, q, nq, qs);
  return zgo_wrap_q(zarena_destroy(a), failed);
}

/* Reset returns the new epoch so Go can keep Epoch() without a call. */
static inline zgo_epoch_result zgo_reset(zarena* a, const zgo_free_item* q, size_t nq,
                                         zarena_status* qs) {
  zgo_epoch_result r;
  r.qfailed = zgo_apply(a, q, nq, qs);
  r.status = zarena_reset(a);
  r.err = zgo_last_error(r.status);
  r.epoch = zarena_epoch(a);
  return r;
}

static inline zgo_result zgo_mark_step_boundary(zarena* a, const zgo_free_item* q, size_t nq,
                                                zarena_status* qs) {
  const uint32_t failed = zgo_apply(a, q, nq, qs);
  return zgo_wrap_q(zarena_mark_step_boundary(a), failed);
}

static inline zgo_result zgo_step_begin(zarena* a, const zgo_free_item* q, size_t nq,
                                        zarena_status* qs) {
  const uint32_t failed = zgo_apply(a, q, nq, qs);
  return zgo_wrap_q(zarena_step_begin(a), failed);
}

static inline zgo_stats_result zgo_get_stats(const zarena* a, const zgo_free_item* q, size_t nq,
                                             zarena_status* qs) {
  zgo_stats_result r;
  r.qfailed = zgo_apply((zarena*)a, q, nq, qs);
  memset(&r.stats, 0, sizeof r.stats);
  r.stats.struct_size = sizeof r.stats;
  r.status = zarena_get_stats(a, &r.stats);
  r.err = zgo_last_error(r.status);
  return r;
}

/* ---- epochs, pins, floors ---- */

static inline zgo_result zgo_pin(zarena* a, const zgo_free_item* q, size_t nq, zarena_status* qs,
                                 uintptr_t ptr, int pin) {
  const uint32_t failed = zgo_apply(a, q, nq, qs);
  return zgo_wrap_q(pin ? zarena_pin(a, (void*)ptr) : zarena_unpin(a, (void*)ptr), failed);
}

static inline zgo_result zgo_set_floor(zarena* a, const zgo_free_item* q, size_t nq,
                                       zarena_status* qs, uint64_t offset) {
  const uint32_t failed = zgo_apply(a, q, nq, qs);
  return zgo_wrap_q(zarena_set_floor(a, offset), failed);
}

static inline zgo_region_result zgo_region_info(zarena* a, const zgo_free_item* q, size_t nq,
                                                zarena_status* qs) {
  zgo_region_result r;
  r.qfailed = zgo_apply(a, q, nq, qs);
  memset(&r.region, 0, sizeof r.region);
  r.region.struct_size = sizeof r.region;
  r.status = zarena_region_info(a, &r.region);
  r.err = zgo_last_error(r.status);
  r.base = (uintptr_t)r.region.base;
  r.region.base = NULL; /* Go reads base, an integer */
  return r;
}

/* zarena_diagnose, its sentences copied here (the library's are valid until this thread's
 * next zarena_diagnose, and Go may run another goroutine on this thread before it reads
 * them). */
typedef struct {
  zarena_status status;
  uint32_t qfailed;
  char* err;
  zarena_diagnosis d;
  char verdict[32];
  char advice[512];
  char cause[512];
} zgo_diagnosis_result;

static inline void zgo_copy_text(char* dst, size_t n, const char* src) {
  if (src == NULL) src = "";
  size_t len = strlen(src);
  if (len >= n) len = n - 1;
  memcpy(dst, src, len);
  dst[len] = 0;
}

static inline zgo_diagnosis_result zgo_diagnose(zarena* a, const zgo_free_item* q, size_t nq,
                                                zarena_status* qs) {
  zgo_diagnosis_result r;
  memset(&r, 0, sizeof r);
  r.qfailed = zgo_apply(a, q, nq, qs);
  r.d.struct_size = sizeof r.d;
  r.status = zarena_diagnose(a, &r.d);
  r.err = zgo_last_error(r.status);
  if (r.status == ZARENA_OK) {
    zgo_copy_text(r.verdict, sizeof r.verdict, r.d.verdict);
    zgo_copy_text(r.advice, sizeof r.advice, r.d.advice);
    zgo_copy_text(r.cause, sizeof r.cause, r.d.cause);
  }
  r.d.verdict = r.d.advice = r.d.cause = NULL; /* Go reads the copies */
  return r;
}

/* ---- capture, stream, poison ---- */

static inline zgo_result zgo_set_capture_active(zarena* a, const zgo_free_item* q, size_t nq,
                                                zarena_status* qs, int active) {
  const uint32_t failed = zgo_apply(a, q, nq, qs);
  return zgo_wrap_q(zarena_set_capture_active(a, active), failed);
}

static inline zgo_result zgo_set_stream(zarena* a, const zgo_free_item* q, size_t nq,
                                        zarena_status* qs, uintptr_t stream) {
  const uint32_t failed = zgo_apply(a, q, nq, qs);
  return zgo_wrap_q(zarena_set_stream(a, (void*)stream), failed);
}

static inline zgo_result zgo_set_poison(zarena* a, const zgo_free_item* q, size_t nq,
                                        zarena_status* qs, int enabled, uint32_t word) {
  const uint32_t failed = zgo_apply(a, q, nq, qs);
  return zgo_wrap_q(zarena_set_poison(a, enabled, word), failed);
}

/* ---- live blocks and tags ---- */

/* The live blocks as one malloc'ed array (freed by Go with zgo_blocks_free): the walk's
 * callback is C, so the walk never calls into Go. */
typedef struct {
  uintptr_t ptr;
  uint64_t size;
  uint64_t epoch;
  uint32_t pins;
  uint32_t tag;
  uint32_t flags;
  uint32_t reserved;
} zgo_live_block;

typedef struct {
  zgo_live_block* items;
  size_t len;
  size_t cap;
  int oom;
} zgo_block_list;

static inline int zgo_collect_block(void* user_data, const zarena_live_block* b) {
  zgo_block_list* l = (zgo_block_list*)user_data;
  if (l->len == l->cap) {
    size_t cap = l->cap == 0 ? 64 : l->cap * 2;
    zgo_live_block* grown = (zgo_live_block*)realloc(l->items, cap * sizeof *grown);
    if (grown == NULL) {
      l->oom = 1;
      return 1;
    }
    l->items = grown;
    l->cap = cap;
  }
  zgo_live_block* o = &l->items[l->len++];
  o->ptr = (uintptr_t)b->ptr;
  o->size = b->size;
  o->epoch = b->epoch;
  o->pins = b->pins;
  o->tag = b->tag;
  o->flags = b->flags;
  o->reserved = 0;
  return 0;
}

typedef struct {
  zarena_status status;
  uint32_t qfailed;
  char* err;
  zgo_live_block* items;
  size_t len;
  uint64_t epoch;
  uintptr_t base;
} zgo_blocks_result;

static inline zgo_blocks_result zgo_live_blocks(zarena* a, const zgo_free_item* q, size_t nq,
                                                zarena_status* qs) {
  zgo_blocks_result r;
  zgo_block_list l = {NULL, 0, 0, 0};
  r.qfailed = zgo_apply(a, q, nq, qs);
  r.status = zarena_for_each_live_block(a, zgo_collect_block, &l);
  if (r.status == ZARENA_OK && l.oom) {
    r.status = ZARENA_E_OUT_OF_MEMORY;
    r.err = strdup("zarena_for_each_live_block: out of host memory copying the blocks for Go");
  } else {
    r.err = zgo_last_error(r.status);
  }
  if (r.status != ZARENA_OK) {
    free(l.items);
    l.items = NULL;
    l.len = 0;
  }
  r.items = l.items;
  r.len = l.len;
  r.epoch = zarena_epoch(a);
  zarena_region reg;
  memset(&reg, 0, sizeof reg);
  reg.struct_size = sizeof reg;
  r.base = zarena_region_info(a, &reg) == ZARENA_OK ? (uintptr_t)reg.base : 0;
  return r;
}

static inline void zgo_blocks_free(zgo_live_block* items) { free(items); }

typedef struct {
  zarena_status status;
  char* err;
  uint32_t id;
} zgo_tag_result;

static inline zgo_tag_result zgo_tag_register(const char* name) {
  zgo_tag_result r;
  r.id = 0;
  r.status = zarena_tag_register(name, &r.id);
  r.err = zgo_last_error(r.status);
  return r;
}

/* ---- readable stats, peaks, live-block dumps ---- */

/* zarena_reset_peak_stats after the queued frees (the peaks restart from the state those
 * frees leave). */
static inline zgo_result zgo_reset_peak_stats(zarena* a, const zgo_free_item* q, size_t nq,
                                              zarena_status* qs) {
  const uint32_t failed = zgo_apply(a, q, nq, qs);
  return zgo_wrap_q(zarena_reset_peak_stats(a), failed);
}

/* The text of zarena_format_stats (what = 0) or zarena_format_live_blocks (what = 1), as
 * one malloc'ed string (freed by Go with free): the queued frees, a size query, then the
 * call, again with the new size while the text grew in between (other threads allocate);
 * all in one crossing, so the error text is the failing call's. */
typedef struct {
  zarena_status status;
  uint32_t qfailed;
  char* err;
  char* text;
  size_t len;
} zgo_text_result;

static inline zarena_status zgo_format_call(zarena* a, int what, int32_t format, char* buf,
                                            size_t cap, size_t* needed) {
  return what == 0 ? zarena_format_stats(a, format, buf, cap, needed)
                   : zarena_format_live_blocks(a, format, buf, cap, needed);
}

static inline zgo_text_result zgo_format(zarena* a, const zgo_free_item* q, size_t nq,
                                         zarena_status* qs, int what, int32_t format) {
  zgo_text_result r;
  r.qfailed = zgo_apply(a, q, nq, qs);
  r.err = NULL;
  r.text = NULL;
  r.len = 0;
  size_t need = 0;
  r.status = zgo_format_call(a, what, format, NULL, 0, &need);
  while (r.status == ZARENA_OK) {
    const size_t cap = need + need / 4 + 64;
    char* buf = (char*)malloc(cap);
    if (buf == NULL) {
      r.status = ZARENA_E_OUT_OF_MEMORY;
      r.err = strdup("zarena_format: out of host memory for the text");
      return r;
    }
    r.status = zgo_format_call(a, what, format, buf, cap, &need);
    if (r.status == ZARENA_OK) {
      r.text = buf;
      r.len = strlen(buf);
      return r;
    }
    free(buf);
    if (need <= cap) break; /* refused for another reason than the size */
    r.status = ZARENA_OK;   /* the text grew meanwhile: again, with the new size */
  }
  r.err = zgo_last_error(r.status);
  return r;
}

static inline zgo_result zgo_inject_overflow_fault(zarena* a, uint64_t fail_nth,
                                                   uint64_t delay_nth, uint64_t delay_ns) {
  return zgo_wrap(zarena_debug_inject_overflow_fault(a, fail_nth, delay_nth, delay_ns));
}

#endif
