package cgotest

// A host arena with step plans driven through the C API alone, for the conformance test
// that runs the library's planned path (PlanRun) and the binding's (planView) over the
// same traces (go/plan_conform_test.go).

/*
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <zarena/zarena.h>
#include <zarena/zarena_plan.h>

static uintptr_t cgotest_plan_arena_new(uint64_t capacity, uint64_t alignment) {
  zarena_config cfg;
  zarena_config_init(&cfg);
  cfg.backend = ZARENA_BACKEND_HOST;
  cfg.capacity_bytes = capacity;
  cfg.alignment = alignment;
  cfg.overflow_policy = ZARENA_OVERFLOW_REFUSE;
  cfg.flags |= ZARENA_FLAG_PLAN;
  cfg.name = "conform-c";
  zarena* a = NULL;
  if (zarena_create(&cfg, &a) != ZARENA_OK) return 0;
  return (uintptr_t)a;
}

typedef struct {
  int32_t status;
  uint32_t flags;
  uintptr_t ptr;
  uint64_t epoch;
  uint64_t size;
} cgotest_block;

static cgotest_block cgotest_alloc_ex(uintptr_t h, uint64_t size, uint32_t tag) {
  zarena_block b;
  memset(&b, 0, sizeof b);
  cgotest_block r;
  r.status = zarena_alloc_ex((zarena*)h, size, tag, &b);
  r.flags = b.flags;
  r.ptr = (uintptr_t)b.ptr;
  r.epoch = b.epoch;
  r.size = b.size;
  return r;
}

static int32_t cgotest_free_at(uintptr_t h, uintptr_t p, uint64_t epoch) {
  return zarena_free_at((zarena*)h, (void*)p, epoch);
}

// what: 0 step begin, 1 reset, 2 mark step boundary.
static int32_t cgotest_control(uintptr_t h, int what) {
  switch (what) {
    case 0:
      return zarena_step_begin((zarena*)h);
    case 1:
      return zarena_reset((zarena*)h);
    default:
      return zarena_mark_step_boundary((zarena*)h);
  }
}

static int32_t cgotest_pin(uintptr_t h, uintptr_t p, int pin) {
  return pin ? zarena_pin((zarena*)h, (void*)p) : zarena_unpin((zarena*)h, (void*)p);
}

static uint64_t cgotest_epoch(uintptr_t h) { return zarena_epoch((const zarena*)h); }

static uintptr_t cgotest_base(uintptr_t h) {
  zarena_region r;
  memset(&r, 0, sizeof r);
  r.struct_size = sizeof r;
  if (zarena_region_info((const zarena*)h, &r) != ZARENA_OK) return 0;
  return (uintptr_t)r.base;
}

// The stats' uint64 fields, in struct order, into out (at most cap); how many, or -1.
static int64_t cgotest_stats(uintptr_t h, uint64_t* out, size_t cap) {
  zarena_stats s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  if (zarena_get_stats((const zarena*)h, &s) != ZARENA_OK) return -1;
  size_t n = (sizeof s - offsetof(zarena_stats, capacity_bytes)) / sizeof(uint64_t);
  if (n > cap) n = cap;
  memcpy(out, &s.capacity_bytes, n * sizeof(uint64_t));
  return (int64_t)n;
}

static uintptr_t cgotest_plan_view(uintptr_t h) {
  return (uintptr_t)zarena_plan_view_get((zarena*)h);
}

// The state of h's current plan into out (at most cap words): n, period, the zone's
// offset from base, zone_bytes, cursor, state, epoch, hits, miss_index, miss_reason, then
// words, born (period*n each) and dlast (distinct). How many words, -1 with no plan, or
// -2 when cap is too small.
static int64_t cgotest_plan_state(uintptr_t h, uintptr_t base, uint64_t* out, size_t cap) {
  const zarena_plan_view* v = zarena_plan_view_get((zarena*)h);
  if (v == NULL) return -1;
  const size_t inst = (size_t)v->period * v->n;
  const size_t need = 10 + 2 * inst + v->distinct;
  if (need > cap) return -2;
  size_t k = 0;
  out[k++] = v->n;
  out[k++] = v->period;
  out[k++] = v->zone - base;
  out[k++] = v->zone_bytes;
  out[k++] = __atomic_load_n(v->cursor, __ATOMIC_ACQUIRE);
  out[k++] = __atomic_load_n(v->state, __ATOMIC_ACQUIRE);
  out[k++] = __atomic_load_n(v->epoch, __ATOMIC_ACQUIRE);
  out[k++] = __atomic_load_n(v->hits, __ATOMIC_ACQUIRE);
  out[k++] = __atomic_load_n(v->miss_index, __ATOMIC_ACQUIRE);
  out[k++] = __atomic_load_n(v->miss_reason, __ATOMIC_ACQUIRE);
  for (size_t i = 0; i < inst; ++i) out[k++] = __atomic_load_n(&v->words[i], __ATOMIC_ACQUIRE);
  for (size_t i = 0; i < inst; ++i) out[k++] = __atomic_load_n(&v->born[i], __ATOMIC_ACQUIRE);
  for (size_t i = 0; i < v->distinct; ++i)
    out[k++] = __atomic_load_n(&v->dlast[i], __ATOMIC_ACQUIRE);
  return (int64_t)k;
}
*/
import "C"

import "unsafe"

// Block is an allocation's outcome through zarena_alloc_ex.
type Block struct {
	Status int32
	Flags  uint32
	Ptr    uintptr
	Epoch  uint64
	Size   uint64
}

// NewPlanArena creates a host arena with step plans on and overflow refused (0 on failure).
func NewPlanArena(capacity, alignment uint64) uintptr {
	return uintptr(C.cgotest_plan_arena_new(C.uint64_t(capacity), C.uint64_t(alignment)))
}

// AllocEx is zarena_alloc_ex.
func AllocEx(h uintptr, size uint64, tag uint32) Block {
	r := C.cgotest_alloc_ex(C.uintptr_t(h), C.uint64_t(size), C.uint32_t(tag))
	return Block{Status: int32(r.status), Flags: uint32(r.flags), Ptr: uintptr(r.ptr),
		Epoch: uint64(r.epoch), Size: uint64(r.size)}
}

// FreeAt is zarena_free_at.
func FreeAt(h, p uintptr, epoch uint64) int32 {
	return int32(C.cgotest_free_at(C.uintptr_t(h), C.uintptr_t(p), C.uint64_t(epoch)))
}

// StepBegin, Reset and MarkStepBoundary are the calls of the same names.
func StepBegin(h uintptr) int32        { return int32(C.cgotest_control(C.uintptr_t(h), 0)) }
func Reset(h uintptr) int32            { return int32(C.cgotest_control(C.uintptr_t(h), 1)) }
func MarkStepBoundary(h uintptr) int32 { return int32(C.cgotest_control(C.uintptr_t(h), 2)) }

// Pin is zarena_pin (pin) or zarena_unpin.
func Pin(h, p uintptr, pin bool) int32 {
	k := C.int(0)
	if pin {
		k = 1
	}
	return int32(C.cgotest_pin(C.uintptr_t(h), C.uintptr_t(p), k))
}

// Epoch is zarena_epoch.
func Epoch(h uintptr) uint64 { return uint64(C.cgotest_epoch(C.uintptr_t(h))) }

// Base is the region's base address (zarena_region_info).
func Base(h uintptr) uintptr { return uintptr(C.cgotest_base(C.uintptr_t(h))) }

// Stats returns zarena_get_stats' uint64 fields in struct order (nil on failure).
func Stats(h uintptr) []uint64 {
	out := make([]uint64, 256)
	n := C.cgotest_stats(C.uintptr_t(h), (*C.uint64_t)(unsafe.Pointer(&out[0])), C.size_t(len(out)))
	if n < 0 {
		return nil
	}
	return out[:n]
}

// PlanView is zarena_plan_view_get's pointer (0: none).
func PlanView(h uintptr) uintptr { return uintptr(C.cgotest_plan_view(C.uintptr_t(h))) }

// PlanState is the state of h's current plan (see cgotest_plan_state for the order), with
// addresses as offsets from base; nil when h has no plan.
func PlanState(h, base uintptr) []uint64 {
	for size := 1 << 12; ; size *= 4 {
		out := make([]uint64, size)
		n := C.cgotest_plan_state(C.uintptr_t(h), C.uintptr_t(base),
			(*C.uint64_t)(unsafe.Pointer(&out[0])), C.size_t(len(out)))
		switch {
		case n == -1:
			return nil
		case n >= 0:
			return out[:n]
		}
	}
}
