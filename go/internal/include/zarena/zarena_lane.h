/*
 * zarena_lane.h — EXPERIMENTAL: lanes, one stream = one lane = one slot = one plan.
 *
 * Outside the stable contract (zarena.h, STABILITY): the functions here may change in any
 * minor version; they carry the symbol version ZARENA_EXPERIMENTAL.
 *
 * WHAT A LANE IS
 *   An engine's unit of concurrency (one CUDA stream, one worker goroutine) made explicit.
 *   A lane of an arena has
 *   - its own region slot: a slot no thread maps to (docs/CONCURRENCY.md), so its span and
 *     the index of the blocks freed through it are its own, and its allocations never wait
 *     for another thread's;
 *   - its own step plans: the allocations made through the lane are one sequence, learned,
 *     planned and served apart from every other lane's and from the arena's own plan
 *     (which follows the threads that call zarena_alloc, zarena.h "STEP PLANS"). Its step
 *     ends at zarena_lane_step_begin and at every zarena_reset of the arena.
 *   A thread (or goroutine) that calls zarena_alloc / zarena_free without a lane keeps
 *   what it had: its thread's slot and the arena's plan.
 *
 * SHARING THE REGION
 *   Lanes share the arena's region, its capacity, floor, epoch, overflow route and stats.
 *   Each lane's plan claims a zone of its own from the region when it engages (as the
 *   arena's plan does): the other lanes' zones and the arena's are live region blocks then,
 *   obstacles its layout goes around, so no two zones overlap and a planned block is never
 *   handed out over another lane's block. The footprint is the sum: each engaged lane holds
 *   its zone (its step's peak, about the bytes it has live at once) for as long as it
 *   serves; the dynamic engine serves the rest from what lies between and above. A lane
 *   whose plan ends (a deviation) keeps its zone for its next repeat, as the arena's plan
 *   does; a destroyed lane gives its zone back once no block in it is live (at the latest,
 *   at a reset after its blocks were freed).
 *   A block belongs to the arena, not to the lane: it may be freed, pinned or unpinned
 *   through zarena_free / zarena_pin (any thread), through its own lane or another one; the
 *   arena finds the zone (or region block) the address lies in. A reset of the arena ends
 *   the step of every lane and reclaims their blocks as it does the others; it moves every
 *   lane's plan to the new epoch under the same lock as the region's, so no planned block
 *   of any lane is handed out with the ended epoch. zarena_get_stats counts every lane's
 *   planned allocations in plan_hits (and the other plan_* fields summed over the arena's
 *   plan and every lane's); zarena_lane_get_stats gives one lane's.
 *
 * THREADS: ONE CALLER AT A TIME
 *   A lane serves one caller at a time: its owner, whatever thread that is (a goroutine
 *   moves between threads; a stream's host work may too). Calls on one lane must not
 *   overlap. A call that finds another call on the same lane still running (a second
 *   caller) is refused with ZARENA_E_INVALID_ARGUMENT and a last error that says the lane
 *   is in use, and changes nothing; the call in progress is not disturbed. (Frees, pins and
 *   unpins of a lane's blocks through zarena_free / zarena_pin are not calls on the lane:
 *   any thread may make them at any time.) zarena_reset, zarena_get_stats and the other
 *   whole-arena calls may run while lanes are used, as with threads.
 *
 *   The owner's planned pair. A zarena_lane_alloc that the lane's plan serves and a
 *   zarena_lane_free of a block of the lane's zone (while no trace, poison or graph capture
 *   is on) do not mark the lane busy: they take what any thread's planned allocation and
 *   free take (the plan's lock for the allocation, one compare-and-swap of the block's word
 *   for the free; docs/PLANS.md "Lanes") and nothing else: two atomics for the pair, not
 *   four.
 *   Misuse by the owner is still an error at the call, as zarena_free_at says: a double
 *   free ZARENA_E_DOUBLE_FREE, a free naming an ended epoch ZARENA_E_STALE, a pointer that
 *   is no block ZARENA_E_NOT_OWNED (or the status zarena_free_at gives it), each counted in
 *   the stats and never freeing another block handed out at the same address since.
 *   What a racing non-owner gets:
 *   - a second caller on the lane while such a planned call of the owner runs is not
 *     refused: both calls are served, each whole, in some order (a planned allocation is
 *     decided under the plan's lock, so no two callers are handed one instance and no
 *     instance is handed out over a live block). The plan then sees the two callers'
 *     requests as one sequence, which it may not follow: a deviation (the dynamic engine
 *     serves the rest of the step), never an overlap. A call that finds another call on
 *     the lane in progress on the full path (the owner's dynamic allocation, a boundary, the
 *     stats) is refused as above, changing nothing; but an allocation whose plan was asked
 *     (an unplanned item, a deviation) and that then finds the lane in use is refused after
 *     the plan moved past that request, so the plan deviates at its next one.
 *   - zarena_free, zarena_pin and zarena_unpin of a lane's planned block from another thread,
 *     racing the owner's free of it, get what they get for any block: one free wins (OK),
 *     the other is ZARENA_E_DOUBLE_FREE; a pin that wins before the free defers the free
 *     until its unpin (the free answers OK), a pin after it is refused as zarena_pin
 *     refuses a pin of a freed block. (Once the plan hands the address out again, a late
 *     call names the new block, as for any reused address; zarena_free_at with an ended
 *     epoch is still ZARENA_E_STALE.)
 *   - zarena_reset racing the owner's planned allocation: the allocation is either before
 *     the reset (its block belongs to the ended epoch and is reclaimed) or after it (the new
 *     epoch's); never a block stamped with the ended epoch after zarena_epoch() moved.
 *
 * LIMITS AND LIFETIME
 *   An arena has at most ZARENA_LANE_MAX lanes at once (one region slot each); past it,
 *   zarena_lane_create fails with ZARENA_E_OUT_OF_MEMORY and creates nothing. A destroyed
 *   lane's place is taken by the next lane created once its zone went back. A handle stays
 *   recognisable after zarena_lane_destroy (calls on it are refused with
 *   ZARENA_E_INVALID_ARGUMENT) until zarena_destroy of its arena, which destroys every lane
 *   left; after that, as for the arena's own handle, it must not be used. The handle's few
 *   bytes are kept until then.
 *
 * BAD INPUT
 *   A NULL, destroyed or foreign lane (created on another arena), a NULL out pointer, a NULL
 *   or inherited arena: ZARENA_E_INVALID_ARGUMENT, a last error naming the call and the
 *   reason, nothing changed. Never a crash for any handle zarena_lane_create returned.
 */
#ifndef ZARENA_ZARENA_LANE_H
#define ZARENA_ZARENA_LANE_H

#include <stdint.h>

#include "zarena/zarena.h"
#include "zarena/zarena_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most lanes an arena has at once. */
#define ZARENA_LANE_MAX 64

typedef struct zarena_lane zarena_lane; /* opaque */

/* One lane's share, from one instant (zarena_lane_get_stats). Versioned like zarena_stats:
 * set struct_size; fields only appended. */
typedef struct zarena_lane_stats {
  uint32_t struct_size;
  uint32_t slot;            /* its region slot */
  uint64_t plan_steps;      /* steps its plan served whole */
  uint64_t plan_hits;       /* allocations its plan served (the library's and a binding's) */
  uint64_t plan_misses;     /* steps a deviation ended */
  uint64_t plan_first_miss; /* ZARENA_PLAN_MISS_* of its first deviation (0: none) */
  uint64_t plans_learned;   /* plans laid out for it */
  uint64_t plan_bytes;      /* its latest plan's own bytes (its peak less what it went around) */
  uint64_t plan_zone_bytes; /* the zone it holds now (0: none) */
  uint64_t plan_live_bytes; /* its planned blocks live now */
  uint64_t plan_live_count;
} zarena_lane_stats;

/* A new lane of a: its own slot and plans (learning from its first step). */
ZARENA_API zarena_status zarena_lane_create(zarena* a, zarena_lane** out);

/* Destroys the lane: its plan serves no more, its slot and place go to the next lane
 * created. Its blocks stay live (free them with zarena_free, or a reset reclaims them). A
 * second destroy is refused (INVALID_ARGUMENT). */
ZARENA_API zarena_status zarena_lane_destroy(zarena* a, zarena_lane* lane);

/* zarena_alloc_ex through the lane: its plan serves the request when it expects it
 * (ZARENA_BLOCK_PLANNED), else the dynamic engine from the lane's slot, and the lane's
 * learner records it. */
ZARENA_API zarena_status zarena_lane_alloc(zarena* a, zarena_lane* lane, uint64_t size,
                                           uint32_t tag, zarena_block* out);

/* zarena_free_at through the lane (epoch: ZARENA_ANY_EPOCH, or the block's): a block of any
 * lane's zone goes to that lane's plan, a region block to the lane's slot. Statuses as
 * zarena_free_at. */
ZARENA_API zarena_status zarena_lane_free(zarena* a, zarena_lane* lane, void* ptr, uint64_t epoch);

/* The top of the lane's step (as zarena_step_begin is the arena's): the lane's step ends
 * here. A boundary with no allocation since the last is not a step. */
ZARENA_API zarena_status zarena_lane_step_begin(zarena* a, zarena_lane* lane);

/* The lane's numbers (see zarena_lane_stats). */
ZARENA_API zarena_status zarena_lane_get_stats(zarena* a, zarena_lane* lane,
                                               zarena_lane_stats* out);

/* The lane's plan view (zarena_plan.h: the same protocol and lifetime), or NULL when it has
 * none (nothing learned yet, plans off, a trace written) or on bad input. */
ZARENA_API const zarena_plan_view* zarena_lane_plan_view(zarena* a, zarena_lane* lane);

/* zarena_plan_alloc_unplanned for the lane's plan (zarena_plan.h rule 4): the dynamic engine
 * serves it from the lane's slot, and the plan is not asked again. */
ZARENA_API zarena_status zarena_lane_alloc_unplanned(zarena* a, zarena_lane* lane, uint64_t size,
                                                     uint32_t tag, zarena_block* out);

#ifdef __cplusplus
}
#endif

#endif /* ZARENA_ZARENA_LANE_H */
