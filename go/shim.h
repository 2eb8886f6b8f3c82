/* The binding's C shims: one small static inline wrapper per zarena call the Go side makes.
 * Each returns its results by value, so Go never hands C a pointer to Go memory it could
 * keep, and copies zarena_last_error() in the same call that failed (it is thread-local:
 * before Go could read it, the goroutine may move to another thread, or another goroutine
 * may call on this one). Handles and addresses travel as uintptr_t: cgo checks every
 * pointer argument on every call, an integer it does not.
 *
 * Queued frees (freequeue.go): a buffer of frees is C memory owned by the Go side. The
 * allocation shims take one buffer and apply it first, in the same crossing; the other calls
 * are made after shim_apply_queues emptied every buffer.
 *
 * With ZARENA_GO_DLOPEN (the zarena_dlopen build tag) every zarena_* call below goes through
 * a function pointer that zarena_go_dl_load filled (dlopen.h); otherwise they are direct
 * calls. */
#ifndef ZARENA_GO_SHIM_H
#define ZARENA_GO_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zarena/zarena.h>
#include <zarena/zarena_graph.h>
#include <zarena/zarena_kept.h>
#include <zarena/zarena_lane.h>
#include <zarena/zarena_plan.h>
/* zarena_testing.h is not installed (test hooks, outside the contract): the package's copy,
 * kept identical to capi/include by tools/gen. */
#include "internal/include/zarena/zarena_testing.h"

#include "dlopen.h"

_Static_assert(sizeof(uintptr_t) == sizeof(void*), "uintptr_t holds a pointer");

/* A malloc'ed copy of the last error (freed by Go), or NULL on success or when the copy
 * cannot be made. */
static inline char* shim_last_error(zarena_status s) {
  if (s == ZARENA_OK) return NULL;
  const char* m = zarena_last_error();
  size_t n = strlen(m) + 1;
  char* c = (char*)malloc(n);
  if (c != NULL) memcpy(c, m, n);
  return c;
}

/* The outcome of a call: its status and, when it failed, the copied message. */
typedef struct {
  zarena_status status;
  char* err;
} shim_result;

static inline shim_result shim_wrap(zarena_status s) {
  shim_result r;
  r.status = s;
  r.err = shim_last_error(s);
  return r;
}

/* ---- queued frees ---- */

/* zarena_free_item with the pointer as an integer, so Go writes it without converting an
 * integer to a pointer; same layout. */
typedef struct {
  uintptr_t ptr;
  uint64_t epoch;
} shim_free_item;
_Static_assert(sizeof(shim_free_item) == sizeof(zarena_free_item), "shim_free_item layout");
_Static_assert(offsetof(shim_free_item, epoch) == offsetof(zarena_free_item, epoch),
               "shim_free_item layout");

/* Frees one buffer holds; a full buffer is applied at once. */
#define SHIM_QUEUE_CAP 256

/* One buffer: SHIM_QUEUE_CAP items, then as many statuses, then the shard's report of the
 * blocks its Lanes kept (lane_cache.go; zarena/zarena_kept.h), in one zeroed allocation
 * (NULL when host memory ran out). */
#define SHIM_QUEUE_REPORT_AT (SHIM_QUEUE_CAP * (sizeof(shim_free_item) + sizeof(zarena_status)))
_Static_assert(SHIM_QUEUE_REPORT_AT % 8 == 0, "the report is 8-byte aligned");
static inline shim_free_item* shim_queue_alloc(void) {
  zarena_kept_report* r;
  void* q = calloc(1, SHIM_QUEUE_REPORT_AT + sizeof *r);
  if (q == NULL) return NULL;
  r = (zarena_kept_report*)(void*)((char*)q + SHIM_QUEUE_REPORT_AT);
  r->struct_size = sizeof *r;
  return (shim_free_item*)q;
}
static inline void shim_queue_free(uintptr_t q) { free((void*)q); }
static inline zarena_status* shim_queue_statuses(uintptr_t q) {
  return (zarena_status*)(void*)((shim_free_item*)q + SHIM_QUEUE_CAP);
}
static inline zarena_kept_report* shim_queue_report(uintptr_t q) {
  return (zarena_kept_report*)(void*)((char*)q + SHIM_QUEUE_REPORT_AT);
}

/* Hands buffer q's report of kept blocks to the library, if it holds anything, and clears
 * it. Counts exist only where the arena allowed keeping (shim_kept_allowed), or for frees
 * the binding refused; the library takes them whenever it lets a binding keep at all. */
static inline void shim_report(uintptr_t a, uintptr_t q) {
  if (q == 0) return;
  zarena_kept_report* r = shim_queue_report(q);
  if ((r->allocs | r->invalid_frees | r->stale_frees) == 0) return;
  (void)zarena_kept_report_add((zarena*)a, r);
  r->allocs = r->max_request = r->invalid_frees = r->stale_frees = 0;
}

/* Whether the library has zarena_kept_report_add (with ZARENA_GO_DLOPEN, an older library
 * may not). */
static inline int shim_kept_available(void) {
#ifdef ZARENA_GO_DLOPEN
  return zarena_go_dl_zarena_kept_report_add != NULL;
#else
  return 1;
#endif
}

/* Whether the arena lets the binding keep blocks now (an empty report is accepted: not
 * while a trace is written, nor while step plans follow every request); 0 also when the
 * library has no zarena_kept_report_add. */
static inline int shim_kept_allowed(uintptr_t a) {
  if (!shim_kept_available()) return 0;
  zarena_kept_report r;
  memset(&r, 0, sizeof r);
  r.struct_size = sizeof r;
  return zarena_kept_report_add((zarena*)a, &r) == ZARENA_OK;
}

/* Applies n queued frees of buffer q in order, after its report; returns how many failed
 * (each item's status is then in the buffer's statuses). */
static inline uint32_t shim_apply(uintptr_t a, uintptr_t q, size_t n) {
  shim_report(a, q);
  if (n == 0) return 0;
  zarena_status* qs = shim_queue_statuses(q);
  if (zarena_free_batch((zarena*)a, (const zarena_free_item*)q, n, qs) == ZARENA_OK) return 0;
  uint32_t failed = 0;
  for (size_t i = 0; i < n; ++i) failed += qs[i] != ZARENA_OK;
  return failed;
}

/* The queued frees of one shard, as a whole-arena call passes them (in Go memory holding no
 * Go pointer, used only during the call). */
typedef struct {
  uintptr_t buf;
  size_t n;
  uint32_t failed; /* out: how many of them failed */
  uint32_t reserved;
} shim_queue;

/* Applies queues[0..count) in order, one crossing for all; returns how many frees failed. */
static inline uint32_t shim_apply_queues(uintptr_t a, shim_queue* queues, size_t count) {
  uint32_t failed = 0;
  for (size_t i = 0; i < count; ++i) {
    queues[i].failed = shim_apply(a, queues[i].buf, queues[i].n);
    failed += queues[i].failed;
  }
  return failed;
}

/* ---- create, allocate, free ---- */

static inline zarena_config shim_config_defaults(void) {
  zarena_config c;
  zarena_config_init(&c);
  return c;
}

typedef struct {
  zarena_status status;
  char* err;
  uintptr_t arena;
  uintptr_t base;
  uint64_t capacity;
} shim_create_result;

static inline shim_create_result shim_create(zarena_config cfg, uintptr_t stream) {
  shim_create_result r;
  zarena* a = NULL;
  r.arena = 0;
  r.base = 0;
  r.capacity = 0;
  if (stream != 0) cfg.stream = (void*)stream;
  r.status = zarena_create(&cfg, &a);
  r.err = shim_last_error(r.status);
  if (r.status == ZARENA_OK) {
    zarena_region reg;
    memset(&reg, 0, sizeof reg);
    reg.struct_size = sizeof reg;
    if (zarena_region_info(a, &reg) == ZARENA_OK) {
      r.base = (uintptr_t)reg.base;
      r.capacity = reg.capacity_bytes;
    }
    r.arena = (uintptr_t)a;
  }
  return r;
}

/* The n frees queued in buffer q (none: n 0), then zarena_alloc_ex, in one crossing
 * (zarena_free_then_alloc: freed space is reused exactly as if each free had been a call of
 * its own). *failed: how many of the frees failed. */
static inline zarena_status shim_free_then_alloc(uintptr_t a, uintptr_t q, size_t n, uint64_t size,
                                                 uint32_t tag, zarena_block* b, uint32_t* failed) {
  *failed = 0;
  shim_report(a, q);
  if (n == 0) return zarena_alloc_ex((zarena*)a, size, tag, b);
  zarena_status* qs = shim_queue_statuses(q);
  zarena_status s =
      zarena_free_then_alloc((zarena*)a, (const zarena_free_item*)q, n, qs, size, tag, b);
  for (size_t i = 0; i < n; ++i) *failed += qs[i] != ZARENA_OK;
  return s;
}

/* Alloc's: the pointer only (a smaller result is a cheaper crossing). */
typedef struct {
  zarena_status status;
  uint32_t queued_failed; /* queued frees applied first that failed */
  char* err;
  uintptr_t ptr;
} shim_ptr_result;

static inline shim_ptr_result shim_alloc(uintptr_t a, uintptr_t q, size_t n, uint64_t size) {
  shim_ptr_result r;
  zarena_block b;
  r.status = shim_free_then_alloc(a, q, n, size, 0, &b, &r.queued_failed);
  r.err = shim_last_error(r.status);
  r.ptr = r.status == ZARENA_OK ? (uintptr_t)b.ptr : 0;
  return r;
}

/* AllocBlock's and AllocTagged's: the whole block. */
typedef struct {
  zarena_status status;
  uint32_t queued_failed;
  char* err;
  uintptr_t ptr;
  uint64_t epoch;
  uint64_t size;
  uint32_t flags;
  uint32_t tag;
} shim_block_result;

/* The answer's block and last error, once its status is set. */
static inline void shim_fill_block(shim_block_result* r, const zarena_block* b) {
  r->err = shim_last_error(r->status);
  r->ptr = (uintptr_t)b->ptr;
  r->epoch = b->epoch;
  r->size = b->size;
  r->flags = b->flags;
  r->tag = b->tag;
}

/* unplanned: a request a step plan left to the library (plan.go; protocol rule 4), served
 * by zarena_plan_alloc_unplanned, which does not ask the plan again, after the frees. */
static inline shim_block_result shim_alloc_block(uintptr_t a, uintptr_t q, size_t n, uint64_t size,
                                                 uint32_t tag, int unplanned) {
  shim_block_result r;
  zarena_block b;
  memset(&b, 0, sizeof b);
  if (unplanned) {
    r.queued_failed = shim_apply(a, q, n);
    r.status = zarena_plan_alloc_unplanned((zarena*)a, size, tag, &b);
  } else {
    r.status = shim_free_then_alloc(a, q, n, size, tag, &b, &r.queued_failed);
  }
  shim_fill_block(&r, &b);
  return r;
}

typedef struct {
  zarena_status status;
  uint32_t queued_failed;
  char* err;
} shim_batch_result;

/* The n frees queued in buffer q, then zarena_alloc_batch into out (Go memory holding no Go
 * pointer, used only during the call). */
static inline shim_batch_result shim_alloc_batch(uintptr_t a, uintptr_t q, size_t n,
                                                 const uint64_t* sizes, size_t count, uint32_t tag,
                                                 zarena_block* out) {
  shim_batch_result r;
  r.queued_failed = shim_apply(a, q, n);
  r.status = zarena_alloc_batch((zarena*)a, sizes, count, tag, out, NULL);
  r.err = shim_last_error(r.status);
  return r;
}

/* ---- step plans (plan.go; zarena/zarena_plan.h) ---- */

/* The arena's plan view, or NULL (none; or, with ZARENA_GO_DLOPEN, a library without both
 * experimental plan functions). */
static inline const zarena_plan_view* shim_plan_view(uintptr_t a) {
#ifdef ZARENA_GO_DLOPEN
  if (zarena_go_dl_zarena_plan_view_get == NULL || zarena_go_dl_zarena_plan_alloc_unplanned == NULL)
    return NULL;
#endif
  return zarena_plan_view_get((zarena*)a);
}

/* ---- lanes (lane.go; zarena/zarena_lane.h) ---- */

/* Whether the library has the lane functions (with ZARENA_GO_DLOPEN, an older one may not). */
static inline int shim_lanes_available(void) {
#ifdef ZARENA_GO_DLOPEN
  return zarena_go_dl_zarena_lane_create != NULL && zarena_go_dl_zarena_lane_destroy != NULL &&
         zarena_go_dl_zarena_lane_alloc != NULL && zarena_go_dl_zarena_lane_alloc_unplanned != NULL &&
         zarena_go_dl_zarena_lane_step_begin != NULL && zarena_go_dl_zarena_lane_plan_view != NULL &&
         zarena_go_dl_zarena_lane_get_stats != NULL;
#else
  return 1;
#endif
}

typedef struct {
  shim_result r;
  uintptr_t lane;
} shim_lane_result;

static inline shim_lane_result shim_lane_create(uintptr_t a) {
  shim_lane_result r;
  zarena_lane* l = NULL;
  r.r = shim_wrap(zarena_lane_create((zarena*)a, &l));
  r.lane = (uintptr_t)l;
  return r;
}

static inline shim_result shim_lane_destroy(uintptr_t a, uintptr_t l) {
  return shim_wrap(zarena_lane_destroy((zarena*)a, (zarena_lane*)l));
}

/* The n frees queued in buffer q, then the lane's allocation (unplanned: the lane's plan left
 * it to the library, rule 4). */
static inline shim_block_result shim_lane_alloc(uintptr_t a, uintptr_t l, uintptr_t q, size_t n,
                                                uint64_t size, uint32_t tag, int unplanned) {
  shim_block_result r;
  zarena_block b;
  memset(&b, 0, sizeof b);
  r.queued_failed = shim_apply(a, q, n);
  r.status = unplanned ? zarena_lane_alloc_unplanned((zarena*)a, (zarena_lane*)l, size, tag, &b)
                       : zarena_lane_alloc((zarena*)a, (zarena_lane*)l, size, tag, &b);
  shim_fill_block(&r, &b);
  return r;
}

/* The lane's step boundary after the n frees queued in buffer q (the learner sees them in
 * this step), with the lane's plan view after it. */
typedef struct {
  shim_result r;
  uint32_t queued_failed;
  const zarena_plan_view* view;
} shim_lane_step_result;

static inline shim_lane_step_result shim_lane_step_begin(uintptr_t a, uintptr_t l, uintptr_t q,
                                                         size_t n) {
  shim_lane_step_result r;
  r.queued_failed = shim_apply(a, q, n);
  r.r = shim_wrap(zarena_lane_step_begin((zarena*)a, (zarena_lane*)l));
  r.view = r.r.status == ZARENA_OK ? zarena_lane_plan_view((zarena*)a, (zarena_lane*)l) : NULL;
  return r;
}

static inline const zarena_plan_view* shim_lane_plan_view(uintptr_t a, uintptr_t l) {
  return zarena_lane_plan_view((zarena*)a, (zarena_lane*)l);
}

typedef struct {
  shim_result r;
  zarena_lane_stats s;
} shim_lane_stats_result;

static inline shim_lane_stats_result shim_lane_stats(uintptr_t a, uintptr_t l) {
  shim_lane_stats_result r;
  memset(&r.s, 0, sizeof r.s);
  r.s.struct_size = sizeof r.s;
  r.r = shim_wrap(zarena_lane_get_stats((zarena*)a, (zarena_lane*)l, &r.s));
  return r;
}

static inline shim_result shim_free_at(uintptr_t a, uintptr_t ptr, uint64_t epoch) {
  return shim_wrap(zarena_free_at((zarena*)a, (void*)ptr, epoch));
}

static inline shim_result shim_destroy(uintptr_t a) {
  return shim_wrap(zarena_destroy((zarena*)a));
}

/* ---- reset, floors, steps, pins ---- */

/* A step boundary's outcome, with the plan view after it (Go serves planned requests from
 * it until the next boundary) and, when asked, whether the binding may keep blocks now
 * (shim_kept_allowed: the boundary may have started or ended the plans' learning). */
typedef struct {
  shim_result r;
  uint64_t epoch; /* the epoch after the reset, so Go keeps Epoch() without a call */
  const zarena_plan_view* view;
  int kept; /* ask: shim_kept_allowed after the boundary; else 0 */
} shim_epoch_result;

static inline shim_epoch_result shim_reset(uintptr_t a, int ask) {
  shim_epoch_result r;
  r.r = shim_wrap(zarena_reset((zarena*)a));
  r.epoch = zarena_epoch((zarena*)a);
  r.view = shim_plan_view(a);
  r.kept = ask ? shim_kept_allowed(a) : 0;
  return r;
}

static inline shim_result shim_mark_step_boundary(uintptr_t a) {
  return shim_wrap(zarena_mark_step_boundary((zarena*)a));
}

static inline shim_epoch_result shim_step_begin(uintptr_t a, int ask) {
  shim_epoch_result r;
  r.r = shim_wrap(zarena_step_begin((zarena*)a));
  r.epoch = 0;
  r.view = shim_plan_view(a);
  r.kept = ask ? shim_kept_allowed(a) : 0;
  return r;
}

static inline shim_result shim_pin(uintptr_t a, uintptr_t ptr, int pin) {
  return shim_wrap(pin ? zarena_pin((zarena*)a, (void*)ptr) : zarena_unpin((zarena*)a, (void*)ptr));
}

static inline shim_result shim_set_floor(uintptr_t a, uint64_t offset) {
  return shim_wrap(zarena_set_floor((zarena*)a, offset));
}

typedef struct {
  shim_result r;
  uintptr_t base;
  zarena_region region; /* base cleared: Go reads the integer */
} shim_region_result;

static inline shim_region_result shim_region_info(uintptr_t a) {
  shim_region_result r;
  memset(&r.region, 0, sizeof r.region);
  r.region.struct_size = sizeof r.region;
  r.r = shim_wrap(zarena_region_info((zarena*)a, &r.region));
  r.base = (uintptr_t)r.region.base;
  r.region.base = NULL;
  return r;
}

/* ---- stats, diagnosis ---- */

typedef struct {
  shim_result r;
  zarena_stats stats;
} shim_stats_result;

static inline shim_stats_result shim_get_stats(uintptr_t a) {
  shim_stats_result r;
  memset(&r.stats, 0, sizeof r.stats);
  r.stats.struct_size = sizeof r.stats;
  r.r = shim_wrap(zarena_get_stats((zarena*)a, &r.stats));
  return r;
}

static inline shim_result shim_reset_peak_stats(uintptr_t a) {
  return shim_wrap(zarena_reset_peak_stats((zarena*)a));
}

/* zarena_diagnose, its sentences copied (the library's stay valid only until this thread's
 * next zarena_diagnose, and Go may run another goroutine on this thread before it reads
 * them). */
typedef struct {
  shim_result r;
  zarena_diagnosis d; /* its strings cleared: Go reads the copies */
  char verdict[32];
  char advice[512];
  char cause[512];
} shim_diagnosis_result;

static inline void shim_copy_text(char* dst, size_t n, const char* src) {
  if (src == NULL) src = "";
  size_t len = strlen(src);
  if (len >= n) len = n - 1;
  memcpy(dst, src, len);
  dst[len] = 0;
}

static inline shim_diagnosis_result shim_diagnose(uintptr_t a) {
  shim_diagnosis_result r;
  memset(&r, 0, sizeof r);
  r.d.struct_size = sizeof r.d;
  r.r = shim_wrap(zarena_diagnose((zarena*)a, &r.d));
  if (r.r.status == ZARENA_OK) {
    shim_copy_text(r.verdict, sizeof r.verdict, r.d.verdict);
    shim_copy_text(r.advice, sizeof r.advice, r.d.advice);
    shim_copy_text(r.cause, sizeof r.cause, r.d.cause);
  }
  r.d.verdict = r.d.advice = r.d.cause = NULL;
  return r;
}

/* The text of zarena_format_stats (what = 0) or zarena_format_live_blocks (what = 1) as one
 * malloc'ed string (freed by Go): a size query, then the call, again with the new size while
 * the text grew in between (other threads allocate); one crossing, so the error text is the
 * failing call's. */
typedef struct {
  shim_result r;
  char* text;
  size_t len;
} shim_text_result;

static inline zarena_status shim_format_call(zarena* a, int what, int32_t format, char* buf,
                                             size_t cap, size_t* needed) {
  return what == 0 ? zarena_format_stats(a, format, buf, cap, needed)
                   : zarena_format_live_blocks(a, format, buf, cap, needed);
}

static inline shim_text_result shim_format(uintptr_t handle, int what, int32_t format) {
  zarena* a = (zarena*)handle;
  shim_text_result r;
  r.r.err = NULL;
  r.text = NULL;
  r.len = 0;
  size_t need = 0;
  r.r.status = shim_format_call(a, what, format, NULL, 0, &need);
  while (r.r.status == ZARENA_OK) {
    const size_t cap = need + need / 4 + 64;
    char* buf = (char*)malloc(cap);
    if (buf == NULL) {
      r.r.status = ZARENA_E_OUT_OF_MEMORY;
      r.r.err = strdup("zarena_format: out of host memory for the text");
      return r;
    }
    r.r.status = shim_format_call(a, what, format, buf, cap, &need);
    if (r.r.status == ZARENA_OK) {
      r.text = buf;
      r.len = strlen(buf);
      return r;
    }
    free(buf);
    if (need <= cap) break; /* refused for another reason than the size */
    r.r.status = ZARENA_OK; /* the text grew meanwhile: again, with the new size */
  }
  r.r.err = shim_last_error(r.r.status);
  return r;
}

/* ---- graph-stable steps (graph.go; zarena/zarena_graph.h, experimental) ---- */

/* ZARENA_E_UNSUPPORTED with a message when the library lacks the graph calls (only in the
 * dlopen mode: a linked build has them). */
static inline int shim_graph_missing(shim_result* r) {
#ifdef ZARENA_GO_DLOPEN
  if (zarena_go_dl_zarena_graph_capture_begin == NULL ||
      zarena_go_dl_zarena_graph_get_info == NULL) {
    static const char msg[] = "the loaded libzarena has no graph-stable steps (zarena_graph.h)";
    r->status = ZARENA_E_UNSUPPORTED;
    r->err = (char*)malloc(sizeof msg);
    if (r->err != NULL) memcpy(r->err, msg, sizeof msg);
    return 1;
  }
#else
  (void)r;
#endif
  return 0;
}

typedef struct {
  shim_result r;
  uint32_t graph;
  const zarena_plan_view* view; /* the plan view after the call (it ends a step) */
} shim_graph_result;

/* op: 0 capture begin, 1 capture end (keep), 2 replay (graph), 3 release (graph). */
static inline shim_graph_result shim_graph(uintptr_t a, int op, int keep, uint32_t graph) {
  shim_graph_result g;
  g.graph = 0;
  g.view = NULL;
  if (shim_graph_missing(&g.r)) return g;
  zarena_status s = ZARENA_OK;
  switch (op) {
    case 0:
      s = zarena_graph_capture_begin((zarena*)a);
      break;
    case 1:
      s = zarena_graph_capture_end((zarena*)a, keep, &g.graph);
      break;
    case 2:
      s = zarena_graph_replay((zarena*)a, graph);
      break;
    default:
      s = zarena_graph_release((zarena*)a, graph);
      break;
  }
  g.r = shim_wrap(s);
  g.view = shim_plan_view(a);
  return g;
}

static inline shim_result shim_graph_free_after(uintptr_t a, uintptr_t ptr, uintptr_t stream) {
  shim_result r;
  if (shim_graph_missing(&r)) return r;
  return shim_wrap(zarena_graph_free_after((zarena*)a, (void*)ptr, (void*)stream));
}

typedef struct {
  shim_result r;
  zarena_graph_info info;
} shim_graph_info_result;

static inline shim_graph_info_result shim_graph_info(uintptr_t a) {
  shim_graph_info_result g;
  memset(&g.info, 0, sizeof g.info);
  if (shim_graph_missing(&g.r)) return g;
  g.info.struct_size = sizeof g.info;
  g.r = shim_wrap(zarena_graph_get_info((zarena*)a, &g.info));
  return g;
}

/* ---- capture, stream, poison ---- */

static inline uint64_t shim_arena_id(uintptr_t a) { return zarena_arena_id((const zarena*)a); }

static inline shim_result shim_capture_scope(int begin, int32_t scope, uintptr_t stream) {
  return shim_wrap(begin ? zarena_capture_begin(scope, (void*)stream)
                         : zarena_capture_end(scope, (void*)stream));
}

static inline shim_result shim_set_capture_active(uintptr_t a, int active) {
  return shim_wrap(zarena_set_capture_active((zarena*)a, active));
}

static inline shim_result shim_set_stream(uintptr_t a, uintptr_t stream) {
  return shim_wrap(zarena_set_stream((zarena*)a, (void*)stream));
}

static inline shim_result shim_set_poison(uintptr_t a, int enabled, uint32_t word) {
  return shim_wrap(zarena_set_poison((zarena*)a, enabled, word));
}

/* ---- live blocks and tags ---- */

/* The live blocks as one malloc'ed array (freed by Go with free): the walk's callback is C,
 * so the walk never calls into Go. */
typedef struct {
  uintptr_t ptr;
  uint64_t size;
  uint64_t epoch;
  uint32_t pins;
  uint32_t tag;
  uint32_t flags;
  uint32_t reserved;
} shim_live_block;

typedef struct {
  shim_live_block* items;
  size_t len;
  size_t cap;
  int oom;
} shim_block_list;

static inline int shim_collect_block(void* user_data, const zarena_live_block* b) {
  shim_block_list* l = (shim_block_list*)user_data;
  if (l->len == l->cap) {
    size_t cap = l->cap == 0 ? 64 : l->cap * 2;
    shim_live_block* grown = (shim_live_block*)realloc(l->items, cap * sizeof *grown);
    if (grown == NULL) {
      l->oom = 1;
      return 1;
    }
    l->items = grown;
    l->cap = cap;
  }
  shim_live_block* o = &l->items[l->len++];
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
  shim_result r;
  shim_live_block* items;
  size_t len;
} shim_blocks_result;

static inline shim_blocks_result shim_live_blocks(uintptr_t handle) {
  zarena* a = (zarena*)handle;
  shim_blocks_result r;
  shim_block_list l = {NULL, 0, 0, 0};
  r.r.status = zarena_for_each_live_block(a, shim_collect_block, &l);
  if (r.r.status == ZARENA_OK && l.oom) {
    r.r.status = ZARENA_E_OUT_OF_MEMORY;
    r.r.err = strdup("zarena_for_each_live_block: out of host memory copying the blocks for Go");
  } else {
    r.r.err = shim_last_error(r.r.status);
  }
  if (r.r.status != ZARENA_OK) {
    free(l.items);
    l.items = NULL;
    l.len = 0;
  }
  r.items = l.items;
  r.len = l.len;
  return r;
}

typedef struct {
  shim_result r;
  uint32_t id;
} shim_tag_result;

static inline shim_tag_result shim_tag_register(const char* name) {
  shim_tag_result r;
  r.id = 0;
  r.r = shim_wrap(zarena_tag_register(name, &r.id));
  return r;
}

/* ---- testing ---- */

static inline shim_result shim_inject_overflow_fault(uintptr_t a, uint64_t fail_nth,
                                                     uint64_t delay_nth, uint64_t delay_ns) {
  return shim_wrap(zarena_debug_inject_overflow_fault((zarena*)a, fail_nth, delay_nth, delay_ns));
}

#endif
