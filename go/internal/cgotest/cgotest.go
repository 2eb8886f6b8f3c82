// Package cgotest holds the C helpers that the binding's tests and benchmarks need and
// that cannot live in _test.go files (they may not use cgo): an empty C call to price
// cgo itself, C loops that price the library without cgo, a thread that Go did not
// create, and memory tagging to check that blocks handed to concurrent goroutines never
// overlap.
package cgotest

/*
#cgo LDFLAGS: -lpthread -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <zarena/zarena.h>

static void cgotest_empty(void) {}

typedef struct {
  const char* name;
  uint64_t capacity;
  zarena_status status;
} foreign_job;

// On a pthread: create a small host arena, overflow it (logging arena.config,
// arena.first_overflow and arena.destroy from this thread), destroy it.
static void* foreign_main(void* arg) {
  foreign_job* job = (foreign_job*)arg;
  zarena_config cfg;
  zarena_config_init(&cfg);
  cfg.backend = ZARENA_BACKEND_HOST;
  cfg.capacity_bytes = job->capacity;
  cfg.overflow_policy = ZARENA_OVERFLOW_SYNC;
  // Twice the capacity spills past the default overflow cap (the capacity).
  cfg.overflow_limit_bytes = ZARENA_OVERFLOW_UNLIMITED;
  cfg.name = job->name;
  zarena* a = NULL;
  job->status = zarena_create(&cfg, &a);
  if (job->status != ZARENA_OK) return NULL;
  void* p = NULL;
  job->status = zarena_alloc(a, job->capacity * 2, &p);
  if (job->status == ZARENA_OK) job->status = zarena_free(a, p);
  zarena_status d = zarena_destroy(a);
  if (job->status == ZARENA_OK) job->status = d;
  return NULL;
}

static int32_t cgotest_on_foreign_threads(const char* name, uint64_t capacity, int n) {
  pthread_t t[16];
  foreign_job jobs[16];
  if (n > 16) n = 16;
  for (int i = 0; i < n; ++i) {
    jobs[i].name = name;
    jobs[i].capacity = capacity;
    jobs[i].status = ZARENA_OK;
    if (pthread_create(&t[i], NULL, foreign_main, &jobs[i]) != 0) return -1;
  }
  int32_t worst = ZARENA_OK;
  for (int i = 0; i < n; ++i) {
    pthread_join(t[i], NULL);
    if (jobs[i].status != ZARENA_OK) worst = jobs[i].status;
  }
  return worst;
}

static void cgotest_tag(uintptr_t p, uint64_t n, uint8_t tag) { memset((void*)p, tag, n); }

// The C-level costs the Go benchmarks compare with: a host arena driven from a C loop.
static uintptr_t cgotest_arena_new(uint64_t capacity) {
  zarena_config cfg;
  zarena_config_init(&cfg);
  cfg.backend = ZARENA_BACKEND_HOST;
  cfg.capacity_bytes = capacity;
  cfg.name = "cgotest";
  zarena* a = NULL;
  if (zarena_create(&cfg, &a) != ZARENA_OK) return 0;
  return (uintptr_t)a;
}

static void cgotest_arena_destroy(uintptr_t a) { zarena_destroy((zarena*)a); }

typedef zarena_status (*cgotest_alloc_ex_fn)(zarena*, uint64_t, uint32_t, zarena_block*);
typedef zarena_status (*cgotest_free_at_fn)(zarena*, void*, uint64_t);

// n alloc_ex + free_at pairs of size bytes through the functions given; the first failing
// status, else 0. Always inlined: given the library's functions themselves, the calls stay
// direct (through the PLT), as a program linked against it makes them.
static inline __attribute__((always_inline)) int32_t cgotest_pairs_with(
    cgotest_alloc_ex_fn alloc_ex, cgotest_free_at_fn free_at, uintptr_t h, int64_t n,
    uint64_t size) {
  zarena* a = (zarena*)h;
  for (int64_t i = 0; i < n; ++i) {
    zarena_block b;
    zarena_status s = alloc_ex(a, size, 0, &b);
    if (s == ZARENA_OK) s = free_at(a, b.ptr, b.epoch);
    if (s != ZARENA_OK) return s;
  }
  return 0;
}

// n alloc_ex + free_at pairs of size bytes; the first failing status, else 0.
static int32_t cgotest_pairs(uintptr_t h, int64_t n, uint64_t size) {
  return cgotest_pairs_with(zarena_alloc_ex, zarena_free_at, h, n, size);
}

// n pairs as the binding makes them: each allocation carries the previous block's free
// (zarena_free_then_alloc with one item).
static int32_t cgotest_pairs_batched(uintptr_t h, int64_t n, uint64_t size) {
  zarena* a = (zarena*)h;
  zarena_free_item item = {NULL, ZARENA_ANY_EPOCH};
  zarena_status st;
  for (int64_t i = 0; i < n; ++i) {
    zarena_block b;
    zarena_status s = zarena_free_then_alloc(a, &item, item.ptr != NULL, &st, size, 0, &b);
    if (s != ZARENA_OK) return s;
    item.ptr = b.ptr;
    item.epoch = b.epoch;
  }
  return item.ptr != NULL ? zarena_free_at(a, item.ptr, item.epoch) : 0;
}

// cgotest_pairs through pointers from dlsym, as the binding's zarena_dlopen mode calls:
// the price of the indirection against the linked calls (which go through the PLT).
static int32_t cgotest_pairs_dlsym(uintptr_t h, int64_t n, uint64_t size) {
  cgotest_alloc_ex_fn alloc_ex = (cgotest_alloc_ex_fn)dlsym(RTLD_DEFAULT, "zarena_alloc_ex");
  cgotest_free_at_fn free_at = (cgotest_free_at_fn)dlsym(RTLD_DEFAULT, "zarena_free_at");
  if (alloc_ex == NULL || free_at == NULL) return -1;
  return cgotest_pairs_with(alloc_ex, free_at, h, n, size);
}

// n allocations of size bytes, a reset after every `every` of them.
static int32_t cgotest_bump_reset(uintptr_t h, int64_t n, uint64_t size, int64_t every) {
  zarena* a = (zarena*)h;
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i) {
    zarena_block b;
    zarena_status s = zarena_alloc_ex(a, size, 0, &b);
    if (s != ZARENA_OK) return s;
    if (++k == every) {
      k = 0;
      zarena_reset(a);
    }
  }
  return 0;
}

static int cgotest_check(uintptr_t p, uint64_t n, uint8_t tag) {
  const uint8_t* b = (const uint8_t*)p;
  for (uint64_t i = 0; i < n; ++i) {
    if (b[i] != tag) return 0;
  }
  return 1;
}
*/
import "C"

import "unsafe"

// Empty makes one cgo call that does nothing.
func Empty() { C.cgotest_empty() }

// OnForeignThreads runs n pthreads (at most 16), each creating a host arena named name
// with the given capacity, overflowing it once and destroying it. It returns the
// worst zarena status (-1 when a thread could not start).
func OnForeignThreads(name string, capacity uint64, n int) int32 {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return int32(C.cgotest_on_foreign_threads(cname, C.uint64_t(capacity), C.int(n)))
}

// NewHostArena creates a host arena through the C API (0 on failure) for C-level loops.
func NewHostArena(capacity uint64) uintptr { return uintptr(C.cgotest_arena_new(C.uint64_t(capacity))) }

// DestroyArena destroys an arena of NewHostArena.
func DestroyArena(h uintptr) { C.cgotest_arena_destroy(C.uintptr_t(h)) }

// Pairs makes n alloc+free pairs of size bytes in one C loop (the C pair's cost); it
// returns the first failing status, else 0.
func Pairs(h uintptr, n int, size uint64) int32 {
	return int32(C.cgotest_pairs(C.uintptr_t(h), C.int64_t(n), C.uint64_t(size)))
}

// PairsBatched makes n pairs as the Go binding does: every allocation applies the
// previous block's free first, in the same call (zarena_free_then_alloc).
func PairsBatched(h uintptr, n int, size uint64) int32 {
	return int32(C.cgotest_pairs_batched(C.uintptr_t(h), C.int64_t(n), C.uint64_t(size)))
}

// PairsDlsym is Pairs calling through function pointers from dlsym (-1: not found).
func PairsDlsym(h uintptr, n int, size uint64) int32 {
	return int32(C.cgotest_pairs_dlsym(C.uintptr_t(h), C.int64_t(n), C.uint64_t(size)))
}

// BumpReset makes n allocations of size bytes with a reset after every `every`, in C.
func BumpReset(h uintptr, n int, size uint64, every int) int32 {
	return int32(C.cgotest_bump_reset(C.uintptr_t(h), C.int64_t(n), C.uint64_t(size),
		C.int64_t(every)))
}

// Tag fills n bytes of host memory at p with tag.
func Tag(p uintptr, n uint64, tag byte) { C.cgotest_tag(C.uintptr_t(p), C.uint64_t(n), C.uint8_t(tag)) }

// Check reports whether n bytes at p all hold tag.
func Check(p uintptr, n uint64, tag byte) bool {
	return C.cgotest_check(C.uintptr_t(p), C.uint64_t(n), C.uint8_t(tag)) != 0
}
