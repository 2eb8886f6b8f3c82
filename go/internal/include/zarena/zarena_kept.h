/*
 * zarena_kept.h — EXPERIMENTAL: blocks a binding keeps for its caller, and what it reports
 * of them.
 *
 * Outside the stable contract (zarena.h, STABILITY): may change in any minor version. The
 * function carries the symbol version ZARENA_EXPERIMENTAL.
 *
 * WHAT IT IS
 *   A binding whose every call into the library costs more than the library's own work
 *   (Go: a cgo crossing, about a pure-Go arena's whole alloc+free pair) may keep blocks its
 *   caller freed, live in the arena, and hand them out again for the next requests of the
 *   same rounded size (and no tag) without calling in: the Go binding's Lanes do
 *   (go/lane_cache.go). The library sees a kept block as one live block, from its
 *   allocation to the free that finally gives it back. So that its counters stay those of
 *   what the caller did, the binding reports what happened in between:
 *     allocs         requests it served from kept blocks: counted as requests
 *                    (epoch_allocs), hits and reuses;
 *     max_request    the largest of those requests (epoch_max_alloc_bytes);
 *     invalid_frees  frees it refused: double frees of kept blocks (invalid_frees);
 *     stale_frees    frees it refused: a kept-track block named with another epoch
 *                    (stale_frees).
 *   A binding reports before every call whose answer reads the counters (stats, the
 *   diagnosis, a reset, which closes the epoch), and gives its kept blocks back (frees
 *   them) before every call that must see the blocks as they are (stats, live blocks,
 *   resets, floors, pins): used_bytes, live_allocs and the free index count a kept block
 *   as live until then. Peaks (high_water_bytes, used_peak_bytes) may include kept blocks.
 *   While poison is on a binding keeps nothing (a freed block must be filled at once).
 *
 * WHEN A BINDING MAY KEEP
 *   A binding asks with an empty report (no allocs, invalid_frees or stale_frees): OK means
 *   it may keep blocks now; ZARENA_E_UNSUPPORTED means it must keep nothing (and give back
 *   what it keeps) because the arena must see every allocation and free itself:
 *     - a trace is being written (ZARENA_TRACE_FILE): refused for the arena's life;
 *     - step plans (on by default) follow the requests now: the learner is recording a
 *       step, or a plan is engaged. A kept block would hide requests from the learner,
 *       which would then learn a step the program does not make, and from the plan, which
 *       would be abandoned at once. This changes only at zarena_step_begin, zarena_reset
 *       and floor changes (zarena_set_floor, zarena_mark_step_boundary), where the binding
 *       asks again, and when the learner gives up a step too long to learn (1M
 *       allocations; 64k before the arena's first boundary: a program that marks no steps),
 *       which a binding refused finds by asking again now and then (the Go binding: every
 *       1024 crossings of a shard). Learning also pauses after many steps in a row that do
 *       not repeat, and stops once the plans hold their budget (docs/PLANS.md): keeping is
 *       allowed meanwhile.
 *   A report with counts is always taken (OK) unless a trace is being written: it counts
 *   what happened while keeping was allowed, and frees the binding refused.
 *   With ZARENA_FLAG_NO_PLAN (ZARENA_PLAN=0) and no trace the answer is always OK.
 */
#ifndef ZARENA_ZARENA_KEPT_H
#define ZARENA_ZARENA_KEPT_H

#include <stdint.h>

#include "zarena/zarena.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest block a binding keeps. The arena gives every freed block at least this large
 * to its shared side at once, where any thread can take it and it merges with the free
 * blocks around it (docs/CONCURRENCY.md, "Big blocks are shared"); kept by one thread it
 * would be memory no other could use. */
#define ZARENA_KEPT_MAX_BLOCK_BYTES (512u * 1024u)

typedef struct zarena_kept_report {
  uint32_t struct_size; /* sizeof(zarena_kept_report) as the caller compiled it */
  uint32_t reserved;    /* 0 */
  uint64_t allocs;
  uint64_t max_request;
  uint64_t invalid_frees;
  uint64_t stale_frees;
} zarena_kept_report;

/* Adds r's counts to the arena's (see above), as if the calling thread had made those
 * requests and frees; an empty report asks whether the binding may keep blocks now (WHEN A
 * BINDING MAY KEEP). OK; ZARENA_E_UNSUPPORTED when a trace is being written (nothing
 * counted), or for an empty report while step plans follow every request;
 * ZARENA_E_INVALID_ARGUMENT for a NULL arena or report, or a struct_size smaller than the
 * first layout's. Thread-safe; no lock beyond the calling thread's slot. */
ZARENA_API zarena_status zarena_kept_report_add(zarena* a, const zarena_kept_report* r);

#ifdef __cplusplus
}
#endif

#endif /* ZARENA_ZARENA_KEPT_H */
