// Package cgotest holds the C helpers that the binding's tests and benchmarks need and
// that cannot live in _test.go files (they may not use cgo): an empty C call to price
// cgo itself, a thread that Go did not create, and memory tagging to check that blocks
// handed to concurrent goroutines never overlap.
package cgotest

/*
#cgo pkg-config: zarena
#cgo LDFLAGS: -lpthread
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

// Tag fills n bytes of host memory at p with tag.
func Tag(p uintptr, n uint64, tag byte) { C.cgotest_tag(C.uintptr_t(p), C.uint64_t(n), C.uint8_t(tag)) }

// Check reports whether n bytes at p all hold tag.
func Check(p uintptr, n uint64, tag byte) bool {
	return C.cgotest_check(C.uintptr_t(p), C.uint64_t(n), C.uint8_t(tag)) != 0
}
