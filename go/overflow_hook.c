/* See overflow_hook.h. */
#include "overflow_hook.h"

#include "_cgo_export.h"

static zarena_status go_overflow_alloc(void* ctx, uint64_t bytes, uint64_t alignment, void* stream,
                                       void** ptr) {
  uintptr_t out = 0;
  const zarena_status st =
      zarenaGoOverflowAlloc((uintptr_t)ctx, bytes, alignment, (uintptr_t)stream, &out);
  if (st == ZARENA_OK) *ptr = (void*)out;
  return st;
}

static void go_overflow_free(void* ctx, void* ptr, uint64_t bytes, void* stream) {
  zarenaGoOverflowFree((uintptr_t)ctx, (uintptr_t)ptr, bytes, (uintptr_t)stream);
}

zarena_overflow_allocator zarena_go_overflow_allocator(uintptr_t handle, const char* name) {
  zarena_overflow_allocator a;
  a.struct_size = sizeof a;
  a.reserved = 0;
  a.ctx = (void*)handle;
  a.allocate = go_overflow_alloc;
  a.deallocate = go_overflow_free;
  a.name = name;
  return a;
}
