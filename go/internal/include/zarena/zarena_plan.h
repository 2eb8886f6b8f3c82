/*
 * zarena_plan.h — EXPERIMENTAL: the shared memory of a step plan, for bindings.
 *
 * Outside the stable contract (zarena.h, STABILITY): layouts and rules here may change in
 * any minor version; a binding checks `version` and uses the plan only when it matches the
 * version it was built for (otherwise it simply never takes the planned path). The
 * functions carry the symbol version ZARENA_EXPERIMENTAL.
 *
 * WHAT IT IS
 *   Under a step plan (ZARENA_FLAG_PLAN; docs/PLANS.md) the arena serves a repeating step's
 *   allocations from precomputed offsets inside one zone of the region. Everything the
 *   planned path needs lives in one block of host memory owned by the library: the plan
 *   (sizes, offsets, check lists) and its state (one word per planned block, a lock, a
 *   cursor). A binding that wants to serve planned requests without calling into the
 *   library (the Go binding: no cgo crossing per tensor) reads this memory directly and
 *   follows the protocol below with atomic operations, exactly as the library does; the
 *   library reads the same words for its stats, resets and frees.
 *
 * LIFETIME
 *   A view returned by zarena_plan_view_get stays valid (readable, its words usable) until
 *   zarena_destroy of its arena, even after the plan was replaced: the library keeps every
 *   plan it published until then (at most 64 MiB of them: then it publishes no new one). A
 *   replaced plan is no longer engaged (its state word says so), so a binding that still
 *   holds it simply falls back to the library.
 *
 * THE PROTOCOL (every rule; the library's own planned path is the reference, src/plan/)
 *   Instances. A step makes n allocations; the plan repeats every `period` steps (1 or 2).
 *   Instance (q, i) = allocation i of the q-th step of the period, id = q*n + i.
 *   Word of an instance (words[id], 64-bit, atomic):
 *     bits 0-1  state: 0 never handed out, 1 live, 2 freed, 3 freed while pinned (deferred)
 *     bit  2    persistent (survives resets; set when a floor was raised over it)
 *     bits 3-18 pins
 *     bits 19-63 epoch it was handed out in (low 45 bits)
 *   An instance is live when its state is 1 or 3 and (persistent, or pins > 0, or its
 *   epoch equals the arena's current epoch (`epoch`, low 45 bits)): a reset kills every
 *   unpinned, non-persistent instance without touching its word (the library re-stamps
 *   pinned ones with the new epoch, so they stay live once unpinned, as region blocks do).
 *   Allocation (size = the request rounded up to the arena's alignment, tag):
 *     1. state = atomic load of `state`; if bit 0 (engaged) is clear: not planned.
 *     2. take `lock` (0 -> 1 by compare-and-swap; spin while 1). Under it, re-read `state`
 *        (engaged?), i = cursor, q = (state >> 1) & 1.
 *     3. i >= n, or item_size[i] != size, or item_tag[i] != tag: a deviation: clear bit 0
 *        of `state` (atomic and), record it (miss_index = i, miss_reason), release the
 *        lock; not planned (the library serves it; the step is no longer planned).
 *     4. item_planned[i] == 0: cursor = i + 1, release; not planned, but no deviation (the
 *        plan leaves this allocation to the library): allocate it with
 *        zarena_plan_alloc_unplanned, which does not ask the plan again (zarena_alloc would,
 *        and would take the request for item i + 1).
 *     5. for every c in check_list[check_begin[id] .. check_begin[id+1]): if instance c is
 *        live: a deviation (a block was freed later than the plan assumed): as in 3.
 *     6. born[id] = epoch; words[id] = live | epoch << 19 (atomic stores, the word's with
 *        release, after born's); dlast[dindex[id]] = id
 *        (atomic store); cursor = i + 1; hits = hits + 1 (only lock holders write it: a
 *        load and an atomic store); release the lock (atomic store 0, release). The block
 *        is zone + offset[id], its size item_size[i].
 *   Free of a pointer p with zone <= p < zone + zone_bytes:
 *     off = p - zone; find d with doffset[d] == off (buckets: the indices
 *     [bucket[off >> bucket_shift], bucket[(off >> bucket_shift) + 1]) of doffset hold
 *     every distinct offset of that bucket, sorted); none: not a block start (NOT_OWNED).
 *     id = dlast[d]; w = words[id]; not live: a double free or a stale free (the library
 *     classifies it: call it); pins > 0: the library defers it (call it); else
 *     compare-and-swap words[id] from w to (w & ~3) | 2 (retry on failure from the top).
 *     Frees need no lock. Anything but the plain case: call the library (zarena_free).
 *   Poison, pins, epoch-checked frees, the trace and every error path: call the library.
 *   The step boundary, resets and floors: only the library changes `state`, `cursor`,
 *   `epoch` (it takes `lock`).
 */
#ifndef ZARENA_ZARENA_PLAN_H
#define ZARENA_ZARENA_PLAN_H

#include <stdint.h>

#include "zarena/zarena.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZARENA_PLAN_VIEW_VERSION 1

/* State word bits. */
#define ZARENA_PLAN_ENGAGED 0x1ull

/* Instance word fields. */
#define ZARENA_PLAN_W_STATE 0x3ull
#define ZARENA_PLAN_W_NEVER 0x0ull
#define ZARENA_PLAN_W_LIVE 0x1ull
#define ZARENA_PLAN_W_FREED 0x2ull
#define ZARENA_PLAN_W_DEFERRED 0x3ull
#define ZARENA_PLAN_W_PERSISTENT 0x4ull
#define ZARENA_PLAN_W_PIN_SHIFT 3
#define ZARENA_PLAN_W_PIN_MASK (0xFFFFull << 3)
#define ZARENA_PLAN_W_EPOCH_SHIFT 19
#define ZARENA_PLAN_EPOCH_MASK ((1ull << 45) - 1)

/* Why a planned step stopped being planned (miss_reason, zarena_stats.plan_first_miss). */
/* generated: plan misses, from src/base/plan_misses.h (tools/gen) */
#define ZARENA_PLAN_MISS_NONE 0  /* no deviation */
#define ZARENA_PLAN_MISS_SIZE 1  /* a request of another size than the plan's */
#define ZARENA_PLAN_MISS_TAG 2   /* a request with another tag than the plan's */
#define ZARENA_PLAN_MISS_EXTRA 3 /* more allocations than the learned step */
#define ZARENA_PLAN_MISS_SHORT 4 /* the step ended before its last planned allocation */
/* a block the plan reuses was still live (freed later than in the learned step) */
#define ZARENA_PLAN_MISS_LATE 5
#define ZARENA_PLAN_MISS_FLOOR 6 /* the floor moved over the plan's zone */
/* end of generated plan misses */

typedef struct zarena_plan_view {
  uint32_t struct_size;
  uint32_t version; /* ZARENA_PLAN_VIEW_VERSION */
  uint32_t n;       /* allocations per step */
  uint32_t period;  /* 1 or 2 */
  uintptr_t zone;   /* base address of the zone the planned blocks are in */
  uint64_t zone_bytes;
  /* The plan (read-only). */
  const uint64_t* item_size;   /* [n]: the rounded size */
  const uint32_t* item_tag;    /* [n] */
  const uint8_t* item_planned; /* [n]: 0 = the library serves this one */
  const uint64_t* offset;      /* [period*n]: from zone */
  const uint32_t* check_begin; /* [period*n + 1] */
  const uint32_t* check_list;  /* instance ids */
  const uint32_t* dindex;      /* [period*n]: index of the instance's offset in doffset */
  const uint64_t* doffset;     /* [distinct]: every distinct offset, sorted */
  const uint32_t* bucket;      /* [buckets + 1]: first doffset index of each bucket */
  uint32_t distinct;
  uint32_t buckets;
  uint32_t bucket_shift;
  uint32_t reserved0;
  /* The state (atomic words). */
  uint64_t* words;  /* [period*n] */
  uint64_t* born;   /* [period*n]: the epoch each instance was last handed out in */
  uint32_t* dlast;  /* [distinct] */
  uint32_t* lock;   /* 0 free, 1 held */
  uint32_t* cursor; /* under lock */
  uint64_t* state;  /* bit 0 engaged; bit 1 parity; bits 2..63 step count */
  uint64_t* epoch;  /* the arena's epoch (low 45 bits compared) */
  uint64_t* hits;
  uint64_t* miss_index;
  uint64_t* miss_reason;
} zarena_plan_view;

/* zarena_alloc_ex without asking the plan: for a request the binding's planned path already
 * looked at (rule 4 above: the plan leaves item i to the library and the binding advanced
 * the cursor past it). The dynamic engine serves it as zarena_alloc_ex would with no plan
 * engaged; statuses and errors as zarena_alloc_ex. Thread-safe. */
ZARENA_API zarena_status zarena_plan_alloc_unplanned(zarena* a, uint64_t size, uint32_t tag,
                                                     zarena_block* out);

/* The arena's current plan view, or NULL when it has none (planning off, nothing learned
 * yet, or the arena is traced: cfg.trace_file makes the library serve every planned
 * request itself, so that the trace records it). Thread-safe. The pointer stays valid
 * until zarena_destroy (see LIFETIME). */
ZARENA_API const zarena_plan_view* zarena_plan_view_get(zarena* a);

#ifdef __cplusplus
}
#endif

#endif /* ZARENA_ZARENA_PLAN_H */
