/*
 * zarena_graph.h — EXPERIMENTAL: graph-stable steps. A planned step captured into a CUDA
 * graph once and replayed every step in the step plan's own memory.
 *
 * Outside the stable contract (zarena.h, STABILITY): calls and rules here may change in any
 * minor version. The functions carry the symbol version ZARENA_EXPERIMENTAL. docs/PLANS.md
 * ("Graph-stable steps") says why it is shaped so; docs/PYTORCH.md has the PyTorch route.
 *
 * WHAT IT IS
 *   A CUDA graph bakes in the addresses its kernels use, so an allocator normally gives a
 *   graph memory of its own, held for the graph's life on top of what the eager steps use
 *   (PyTorch's graph pools). Under a step plan (ZARENA_FLAG_PLAN, zarena.h "STEP PLANS")
 *   every step of one phase gets the same addresses in the plan's zone: a step captured
 *   under the plan replays in that zone, shared with the eager steps, with no memory of its
 *   own and no capture again.
 *
 * THE LOOP
 *       ... eager steps: zarena_step_begin(a); allocations, kernels, frees ... until
 *       zarena_graph_get_info says ready (a plan engaged, after a step it served whole)
 *       zarena_step_begin(a);
 *       zarena_graph_capture_begin(a);            (then the engine's cudaStreamBeginCapture)
 *       ... the same step: allocations, kernels, frees ...
 *                                                 (the engine's cudaStreamEndCapture)
 *       zarena_graph_capture_end(a, 1, &g);       the step ends here
 *       zarena_graph_replay(a, g); launch         the first launch: the captured step runs
 *       for each later step:
 *         zarena_step_begin(a);                   (or the reset that ended the step before)
 *         zarena_graph_replay(a, g);              checks, counts the step
 *         launch the graph
 *       zarena_graph_release(a, g);               once it will not be launched again
 *
 * CAPTURE
 *   zarena_graph_capture_begin says that the step starting now is captured. It is accepted
 *   at a step boundary (no allocation since the last zarena_step_begin or zarena_reset)
 *   when the arena's step plan is engaged and served the step before whole; otherwise it
 *   returns ZARENA_E_CAPTURE_UNSAFE saying which of these is missing, and nothing changed
 *   (ZARENA_E_UNSUPPORTED when plans are off). Until zarena_graph_capture_end, every
 *   allocation of the arena (any thread) must be one the plan serves: the next allocation
 *   of the learned step, with its rounded size and tag, whose planned space is free. Any
 *   other request (another size or tag, an extra allocation, a block the plan would reuse
 *   still live, an allocation that outlives its step, a thread the plan does not follow)
 *   is refused with ZARENA_E_CAPTURE_UNSAFE, never served from the dynamic engine or an
 *   overflow pool (that address would be baked into the graph and handed out again under
 *   it): zarena_last_error names the allocation, what the plan expected and what came,
 *   and ends with "verdict=graph_capture; fix: ...". Frees and pins work as in any step.
 *   While a capture runs it is also a capture for the arena's other rules (zarena.h
 *   "CAPTURE": poison fills skipped, overflow blocks not given back, SYNC overflow
 *   refused).
 *   zarena_graph_capture_end ends the captured step (as a step boundary does) and keeps the
 *   graph when `keep` is nonzero and the step was served whole by the plan: *out_graph gets
 *   its id (nonzero). Otherwise no graph is kept and *out_graph is 0: keep == 0 (the
 *   engine's own capture failed) returns ZARENA_OK; a refused allocation, a deviation, a
 *   step cut short (a reset inside the capture before its last allocation) or a capture of
 *   more than one step returns ZARENA_E_CAPTURE_UNSAFE with why. Either way the arena goes
 *   on as after any step that left its plan: eager steps continue, and the plan is taken up
 *   again when the step repeats.
 *
 * THE FIRST LAUNCH
 *   Capturing records work without running it: the captured step's kernels run at the
 *   graph's first launch. Launch it right after zarena_graph_capture_end, before any other
 *   step, calling zarena_graph_replay(a, g) first as before every launch: the first call
 *   for g after its capture (no step since; a zarena_step_begin with no allocation is no
 *   step) is that launch, the captured step itself, and is accepted with nothing counted.
 *
 * REPLAYS
 *   Every later launch is a step of its own: call zarena_graph_replay(a, g) at the step's
 *   boundary (after zarena_step_begin, or after the reset that ended the step before; no
 *   allocation since; two replays need no boundary between them), then launch. It is
 *   refused (ZARENA_E_CAPTURE_UNSAFE; nothing changed; do not launch) when the plan is not
 *   engaged now (an eager step left it: eager steps take it up again when the step
 *   repeats), when the step before was not served whole by the plan (what it left live may
 *   be dynamic blocks, which a replay cannot free: run one planned eager step first), when
 *   the step starting now is of the other phase (below), or when a planned block is live
 *   that the graph did not have live (at its capture, or as its outputs when the step before
 *   was this graph's), or one is pinned: the replay would write over it (the message names
 *   it). A replay allocates nothing and does on the plan's blocks what the captured step
 *   did: the step before's blocks that the step freed are freed (a pointer to them is dead
 *   after the replay, as after the eager step), the blocks the step left live (gradients, a
 *   loss: the graph's outputs) are live again in the current epoch, with their new values.
 *   It counts as a step the plan served whole (zarena_stats.plan_steps, the plan's phase).
 *   Eager steps may come between replays: they run under the same plan and free the
 *   graph's outputs as they free the step before's blocks.
 *
 * PERIOD 2: ONE GRAPH PER PHASE
 *   A plan that alternates two layouts (a tensor rebound while its old value is still live;
 *   zarena_graph_get_info: period 2) gives the steps of one phase one set of addresses. A
 *   graph replays only in the phase it was captured in (zarena_graph_get_info: phase). Capture
 *   two graphs on two consecutive steps (each with its own capture_begin / capture_end / first
 *   launch), then replay them in turn: the replay of the wrong one is refused. A plan cannot be
 *   made period 1 instead: its two layouts exist because two of its blocks are live at once.
 *
 * WHILE A GRAPH EXISTS (from zarena_graph_capture_begin to the zarena_graph_release of the
 * last graph)
 *   - The plan's zone is never given back, moved or laid out again. Steps that do not repeat
 *     the planned one run on the dynamic engine (outside the zone); another step that
 *     repeats is not planned until the last graph is released.
 *   - Floors: zarena_set_floor and zarena_mark_step_boundary are refused with
 *     ZARENA_E_CAPTURE_UNSAFE (nothing changed) when the floor would move over the zone,
 *     which would end the plan (zarena.h "STEP PLANS"). zarena_mark_step_boundary raises the
 *     floor to the top, which lies above the zone: it is refused while a graph exists. A floor
 *     below the zone may be set.
 *   - zarena_reset does what it always does, and never fails: it ends a step, reclaims the
 *     dynamic blocks above the floor and the planned blocks of the ended epoch; the zone stays
 *     (it is held pinned) and the graphs stay valid (a replay after a reset writes planned
 *     blocks no one holds). A reset inside a capture ends the captured step there.
 *   - Deviations of eager steps, pins, poison: as without graphs.
 *   - zarena_destroy frees the zone: a graph of the arena must not be launched after it.
 *   The graph also reads and writes memory that is not the step's (weights, inputs, optimizer
 *   state): keep it allocated while the graph may be launched, as with any CUDA graph.
 *
 * STREAMS
 *   A planned block freed after its last use on a stream other than the arena's (cfg.stream)
 *   may be handed out by the plan at once, to work on the arena's stream: that work must
 *   come after the last use. zarena_graph_free_after(a, ptr, stream) makes the arena's
 *   stream wait for the work queued on `stream` so far (an event recorded on `stream`,
 *   waited for by the arena's stream: no host wait), then frees ptr. During a capture both
 *   streams are in the graph and the wait is recorded as an edge from the last use to what
 *   follows on the arena's stream. Work that uses a block on yet another stream must wait
 *   for the arena's stream itself (cudaEventRecord / cudaStreamWaitEvent, also legal in a
 *   capture). A free is never deferred to the end of a capture: the plan hands out the
 *   freed space within the step, which is what makes the graph's addresses the eager ones.
 *
 * THREADS
 *   All calls are thread-safe. Begin a capture and replay at a step boundary while no other
 *   thread allocates from the arena (the step's own threads make the step's allocations).
 */
#ifndef ZARENA_ZARENA_GRAPH_H
#define ZARENA_ZARENA_GRAPH_H

#include <stdint.h>

#include "zarena/zarena.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The step starting now is captured (see CAPTURE). Returns ZARENA_OK;
 * ZARENA_E_CAPTURE_UNSAFE (not now, the message says why: no plan engaged, allocations since
 * the last boundary, the step before not planned whole, a capture already running; nothing
 * changed); ZARENA_E_UNSUPPORTED (step plans off); ZARENA_E_INVALID_ARGUMENT (NULL a). */
ZARENA_API zarena_status zarena_graph_capture_begin(zarena* a);

/* Ends the capture and its step (see CAPTURE). keep != 0: keep the graph if the step was
 * served whole; *out_graph (required) := its id, or 0 when none is kept. Returns ZARENA_OK,
 * ZARENA_E_CAPTURE_UNSAFE (the step was not served whole: no graph kept, why in the
 * message), ZARENA_E_INVALID_ARGUMENT (NULL a or out_graph, no capture in progress). */
ZARENA_API zarena_status zarena_graph_capture_end(zarena* a, int keep, uint32_t* out_graph);

/* The step starting now is a replay of graph `graph` (see REPLAYS); call it, then launch.
 * Returns ZARENA_OK; ZARENA_E_CAPTURE_UNSAFE (not now, why in the message; nothing changed:
 * do not launch); ZARENA_E_INVALID_ARGUMENT (NULL a, an unknown or released graph). */
ZARENA_API zarena_status zarena_graph_replay(zarena* a, uint32_t graph);

/* The graph will not be launched again: once no graph remains (and no capture runs), the
 * plan's zone may be laid out again. Returns ZARENA_OK or ZARENA_E_INVALID_ARGUMENT (NULL a,
 * an unknown or released graph). */
ZARENA_API zarena_status zarena_graph_release(zarena* a, uint32_t graph);

/* Frees ptr after the work queued on `stream` so far (see STREAMS): the arena's stream
 * waits for `stream`, then the block is freed as zarena_free frees it (the same statuses).
 * stream may be the arena's own (a plain free). NULL ptr: ZARENA_OK, nothing done. Returns
 * also ZARENA_E_BACKEND (the wait could not be enqueued: the block was not freed) and
 * ZARENA_E_CAPTURE_UNSAFE (CUDA refused the wait during a capture, e.g. `stream` is not in
 * it; the block was not freed). */
ZARENA_API zarena_status zarena_graph_free_after(zarena* a, void* ptr, void* stream);

typedef struct zarena_graph_info {
  uint32_t struct_size;     /* set by the caller to sizeof(zarena_graph_info) */
  uint32_t ready;           /* 1: zarena_graph_capture_begin would be accepted now */
  uint32_t capturing;       /* 1: a capture is in progress */
  uint32_t graphs;          /* graphs alive (kept, not released) */
  uint32_t period;          /* the step plan's period, 1 or 2 (0: no plan) */
  uint32_t phase;           /* the phase of the step starting now (0, or 1 of a period of 2) */
  uint64_t captures;        /* captures kept as graphs */
  uint64_t failed_captures; /* captures that ended with no graph kept */
  uint64_t refused_allocs;  /* allocations refused during captures */
  uint64_t replays;         /* zarena_graph_replay calls accepted */
  uint64_t refused_replays; /* ... refused */
  uint64_t stream_joins;    /* zarena_graph_free_after calls that ordered another stream */
  uint64_t zone_bytes;      /* the plan's zone (held still while graphs > 0 or capturing) */
} zarena_graph_info;

/* Fills *out (at most out->struct_size bytes; set it first). Returns ZARENA_OK or
 * ZARENA_E_INVALID_ARGUMENT (NULL a/out, struct_size smaller than the first field). */
ZARENA_API zarena_status zarena_graph_get_info(zarena* a, zarena_graph_info* out);

#ifdef __cplusplus
}
#endif

#endif /* ZARENA_ZARENA_GRAPH_H */
