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
 * WHEN IT IS REFUSED
 *   An arena that must see every allocation and free itself refuses: step plans on
 *   (ZARENA_FLAG_PLAN: the learner follows every request) or a trace being written
 *   (ZARENA_TRACE_FILE). zarena_kept_report then returns ZARENA_E_UNSUPPORTED and counts
 *   nothing. A binding asks once, with a zero report, and keeps nothing when refused.
 */
#ifndef ZARENA_ZARENA_KEPT_H
#define ZARENA_ZARENA_KEPT_H

#include <stdint.h>

#include "zarena/zarena.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zarena_kept_report {
  uint32_t struct_size; /* sizeof(zarena_kept_report) as the caller compiled it */
  uint32_t reserved;    /* 0 */
  uint64_t allocs;
  uint64_t max_request;
  uint64_t invalid_frees;
  uint64_t stale_frees;
} zarena_kept_report;

/* Adds r's counts to the arena's (see above), as if the calling thread had made those
 * requests and frees. OK; ZARENA_E_UNSUPPORTED when the arena refuses keeping (nothing
 * counted); ZARENA_E_INVALID_ARGUMENT for a NULL arena or report, or a struct_size smaller
 * than the first layout's. Thread-safe; no lock beyond the calling thread's slot. */
ZARENA_API zarena_status zarena_kept_report_add(zarena* a, const zarena_kept_report* r);

#ifdef __cplusplus
}
#endif

#endif /* ZARENA_ZARENA_KEPT_H */
