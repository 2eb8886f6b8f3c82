/*
 * zarena_plan.h — EXPERIMENTAL: the shared memory of a step plan, for bindings.
 *
 * Outside the stable contract (zarena.h, STABILITY): layouts and rules here may change in
 * any minor version; a binding checks `version` and uses the plan only when it matches the
 * version it was built for (otherwise it simply never takes the planned path). The
 * functions carry the symbol version ZARENA_EXPERIMENTAL.
 *
 * WHAT IT IS
 *   Under a step plan (on by default; ZARENA_FLAG_NO_PLAN turns plans off; docs/PLANS.md)
 *   the arena serves a repeating step's allocations from precomputed offsets inside one
 *   zone of the region. Everything the planned path needs lives in one block of host
 *   memory owned by the library: the plan (sizes, offsets, check lists) and its state (one
 *   word per planned block, a lock, a cursor). A binding that wants to serve planned
 *   requests without calling into the library (the Go binding: no cgo crossing per tensor)
 *   reads this memory directly and follows the protocol below with atomic operations,
 *   exactly as the library does; the library reads the same words for its stats, resets
 *   and frees.
 *
 * LIFETIME
 *   A view returned by zarena_plan_view_get stays valid (readable, its words usable) until
 *   zarena_destroy of its arena, even after the plan was replaced: the library keeps every
 *   plan it published until then (at most 64 MiB of them: then it publishes no new one). A
 *   replaced plan is no longer engaged (its state word says so), so a binding that still
 *   holds it simply falls back to the library.
 *
 * LEFTOVERS: THE VIEW IS WITHHELD, NOT SHARED
 *   A plan may reuse the bytes of blocks the learned step left live (gradients freed early
 *   in the next step: "leftovers", docs/PLANS.md). Before it hands out an instance over one,
 *   the library checks the leftover dead by claiming its bytes for the zone (a region
 *   operation no binding can make). So while any leftover of a plan is not claimed yet,
 *   zarena_plan_view_get returns NULL for it, and the binding sends every request to the
 *   library, which serves the plan itself and claims as it goes (meanwhile a request from
 *   a thread the plan does not follow is the plan's when it is its next one: a binding's
 *   requests may come from any thread); the view is returned at the first boundary after
 *   the last claim. A plan's pending leftovers are known before the plan is published and
 *   only ever decrease, so a view a binding holds never belongs to a plan with a pending
 *   leftover: the protocol below needs no rule for them.
 *
 * THE PROTOCOL (every rule; the library's own planned path is the reference, src/plan/)
 *   Instances. A step makes n allocations; the plan repeats every `period` steps (1 or 2).
 *   Instance (q, i) = allocation i of the q-th step of the period, id = q*n + i.
 *   Word of an instance (words[id], 64-bit, atomic): the fields ZARENA_PLAN_W_* below:
 *   STATE (never handed out, live, freed, or freed while pinned: deferred), PERSISTENT
 *   (survives resets; set when a floor was raised over it), PIN (pins), EPOCH (the epoch it
 *   was handed out in, its low bits: ZARENA_PLAN_EPOCH_MASK).
 *   An instance is live when its state is LIVE or DEFERRED and (persistent, or pins > 0, or
 *   its epoch equals the arena's current epoch (`epoch`, in its low bits)): a reset kills every
 *   unpinned, non-persistent instance without touching its word (the library re-stamps
 *   pinned ones with the new epoch, so they stay live once unpinned, as region blocks do).
 *   Allocation (size = the request rounded up to the arena's alignment, tag):
 *     1. state = atomic load of `state` (ZARENA_PLAN_S_*); if ENGAGED is clear: not planned.
 *     2. take `lock` (0 -> 1 by compare-and-swap; spin while 1). Under it, re-read `state`
 *        (engaged?), i = cursor, q = the PARITY bit.
 *     3. i >= n, or item_size[i] != size, or item_tag[i] != tag: a deviation: clear ENGAGED
 *        in `state` (atomic and), record it (miss_index = i, miss_reason), release the
 *        lock; not planned (the library serves it; the step is no longer planned).
 *     4. item_planned[i] == 0: cursor = i + 1, release; not planned, but no deviation (the
 *        plan leaves this allocation to the library): allocate it with
 *        zarena_plan_alloc_unplanned, which does not ask the plan again (zarena_alloc would,
 *        and would take the request for item i + 1).
 *     5. for every c in check_list[check_begin[id] .. check_begin[id+1]): if instance c is
 *        live: a deviation (a block was freed later than the plan assumed): as in 3.
 *     6. born[id] = epoch; words[id] = LIVE with EPOCH = epoch (atomic stores, the word's with
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
 *     compare-and-swap words[id] from w to w with STATE = FREED (retry on failure from the top).
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

/* generated: plan protocol, from src/plan/plan_protocol.h (tools/gen) */
#define ZARENA_PLAN_VIEW_VERSION 1

/* The plan's state word (state): only the library changes it. */
/* ENGAGED (bit 0): the plan serves the step's allocations. */
#define ZARENA_PLAN_S_ENGAGED_SHIFT 0
#define ZARENA_PLAN_S_ENGAGED_MASK 0x1ull
/* PARITY (bit 1): which step of a period-2 plan this is (q). */
#define ZARENA_PLAN_S_PARITY_SHIFT 1
#define ZARENA_PLAN_S_PARITY_MASK 0x2ull
/* STEPS (bits 2-63): steps served whole so far. */
#define ZARENA_PLAN_S_STEPS_SHIFT 2
#define ZARENA_PLAN_S_STEPS_MASK 0xFFFFFFFFFFFFFFFCull

/* An instance's word (words[id]). */
/* STATE (bits 0-1): handed out or not: the values below. */
#define ZARENA_PLAN_W_STATE_SHIFT 0
#define ZARENA_PLAN_W_STATE_MASK 0x3ull
/* PERSISTENT (bit 2): survives resets (a floor was raised over it). */
#define ZARENA_PLAN_W_PERSISTENT_SHIFT 2
#define ZARENA_PLAN_W_PERSISTENT_MASK 0x4ull
/* PIN (bits 3-18): pins held now. */
#define ZARENA_PLAN_W_PIN_SHIFT 3
#define ZARENA_PLAN_W_PIN_MASK 0x7FFF8ull
/* EPOCH (bits 19-63): the epoch it was handed out in (low bits). */
#define ZARENA_PLAN_W_EPOCH_SHIFT 19
#define ZARENA_PLAN_W_EPOCH_MASK 0xFFFFFFFFFFF80000ull
/* The values of STATE. */
/* NEVER: never handed out. */
#define ZARENA_PLAN_W_NEVER 0x0ull
/* LIVE: handed out, not freed. */
#define ZARENA_PLAN_W_LIVE 0x1ull
/* FREED: freed. */
#define ZARENA_PLAN_W_FREED 0x2ull
/* DEFERRED: freed while pinned: freed at its last unpin. */
#define ZARENA_PLAN_W_DEFERRED 0x3ull

/* Why a planned step stopped being planned (miss_reason, zarena_stats.plan_first_miss). */
#define ZARENA_PLAN_MISS_NONE 0  /* no deviation */
#define ZARENA_PLAN_MISS_SIZE 1  /* a request of another size than the plan's */
#define ZARENA_PLAN_MISS_TAG 2   /* a request with another tag than the plan's */
#define ZARENA_PLAN_MISS_EXTRA 3 /* more allocations than the learned step */
#define ZARENA_PLAN_MISS_SHORT 4 /* the step ended before its last planned allocation */
/* a block the plan reuses was still live (freed later than in the learned step) */
#define ZARENA_PLAN_MISS_LATE 5
#define ZARENA_PLAN_MISS_FLOOR 6 /* the floor moved over the plan's zone */

typedef struct zarena_plan_view {
  /* sizeof(zarena_plan_view) */
  uint32_t struct_size;
  /* ZARENA_PLAN_VIEW_VERSION */
  uint32_t version;
  /* allocations per step */
  uint32_t n;
  /* 1 or 2 */
  uint32_t period;
  /* base address of the zone the planned blocks are in */
  uintptr_t zone;
  /* the zone's extent from zone */
  uint64_t zone_bytes;
  /* The plan (read-only). */
  /* [n]: the rounded size */
  const uint64_t* item_size;
  /* [n]: the tag */
  const uint32_t* item_tag;
  /* [n]: 0 = the library serves this one */
  const uint8_t* item_planned;
  /* [period*n]: from zone */
  const uint64_t* offset;
  /* [period*n+1]: instance id's check list is check_list[check_begin[id],
   * check_begin[id+1]) */
  const uint32_t* check_begin;
  /* [check_begin[period*n]]: instance ids */
  const uint32_t* check_list;
  /* [period*n]: index of the instance's offset in doffset */
  const uint32_t* dindex;
  /* [distinct]: every distinct offset, sorted */
  const uint64_t* doffset;
  /* [buckets+1]: first doffset index of each bucket */
  const uint32_t* bucket;
  /* distinct offsets */
  uint32_t distinct;
  /* buckets of the offset index */
  uint32_t buckets;
  /* an offset's bucket is offset >> this */
  uint32_t bucket_shift;
  /* 0 */
  uint32_t reserved0;
  /* The state (atomic words). */
  /* [period*n]: each instance's word */
  uint64_t* words;
  /* [period*n]: the epoch each instance was last handed out in */
  uint64_t* born;
  /* [distinct]: the instance last handed out at each distinct offset */
  uint32_t* dlast;
  /* 0 free, 1 held */
  uint32_t* lock;
  /* the step's next allocation (under lock) */
  uint32_t* cursor;
  /* the state word (ZARENA_PLAN_S_*) */
  uint64_t* state;
  /* the arena's epoch (low EPOCH bits compared) */
  uint64_t* epoch;
  /* planned allocations served (lock holders only) */
  uint64_t* hits;
  /* the allocation that deviated */
  uint64_t* miss_index;
  /* why (ZARENA_PLAN_MISS_*) */
  uint64_t* miss_reason;
} zarena_plan_view;
/* end of generated plan protocol */

/* Shorter names the protocol above is written in. */
#define ZARENA_PLAN_ENGAGED ZARENA_PLAN_S_ENGAGED_MASK
#define ZARENA_PLAN_W_STATE ZARENA_PLAN_W_STATE_MASK
#define ZARENA_PLAN_W_PERSISTENT ZARENA_PLAN_W_PERSISTENT_MASK
/* The epoch stamp's width: an epoch is compared in its low bits. */
#define ZARENA_PLAN_EPOCH_MASK (ZARENA_PLAN_W_EPOCH_MASK >> ZARENA_PLAN_W_EPOCH_SHIFT)

/* zarena_alloc_ex without asking the plan: for a request the binding's planned path already
 * looked at (rule 4 above: the plan leaves item i to the library and the binding advanced
 * the cursor past it). The dynamic engine serves it as zarena_alloc_ex would with no plan
 * engaged; statuses and errors as zarena_alloc_ex. Thread-safe. */
ZARENA_API zarena_status zarena_plan_alloc_unplanned(zarena* a, uint64_t size, uint32_t tag,
                                                     zarena_block* out);

/* The arena's current plan view, or NULL when it has none (planning off, nothing learned
 * yet, or the arena is traced: cfg.trace_file makes the library serve every planned
 * request itself, so that the trace records it), and until the first boundary after its
 * plan's last leftover was claimed (LEFTOVERS above: the library serves those steps).
 * Thread-safe. The pointer stays valid until zarena_destroy (see LIFETIME). */
ZARENA_API const zarena_plan_view* zarena_plan_view_get(zarena* a);

#ifdef __cplusplus
}
#endif

#endif /* ZARENA_ZARENA_PLAN_H */
