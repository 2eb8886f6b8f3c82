/* The zarena_dlopen build mode: the package builds without libzarena (the header comes
 * from internal/include, a copy kept in sync by the zarena_generate target) and loads
 * the library at run time with dlopen. Each zarena_* function the binding calls becomes
 * a call through a pointer that zarena_go_dl_load fills; the macros below rename the calls, so
 * shim.h is the same code in every mode. Without ZARENA_GO_DLOPEN this header declares nothing
 * and the calls are linked directly. */
#ifndef ZARENA_GO_DLOPEN_H
#define ZARENA_GO_DLOPEN_H

#include <stdint.h>
#include <zarena/zarena.h>
#include <zarena/zarena_graph.h>
#include <zarena/zarena_kept.h>
#include <zarena/zarena_lane.h>
#include <zarena/zarena_plan.h>

#include "internal/include/zarena/zarena_testing.h" /* not installed: see shim.h */

/* Every function the binding calls, in the order they are looked up. */
#define ZARENA_GO_DL_FUNCTIONS(X)       \
  X(zarena_version_number)              \
  X(zarena_version_string)              \
  X(zarena_status_string)               \
  X(zarena_last_error)                  \
  X(zarena_config_init_sized)           \
  X(zarena_create)                      \
  X(zarena_destroy)                     \
  X(zarena_alloc_ex)                    \
  X(zarena_free_at)                     \
  X(zarena_free_batch)                  \
  X(zarena_free_then_alloc)             \
  X(zarena_alloc_batch)                 \
  X(zarena_reset)                       \
  X(zarena_mark_step_boundary)          \
  X(zarena_step_begin)                  \
  X(zarena_diagnose)                    \
  X(zarena_log_flush)                   \
  X(zarena_epoch)                       \
  X(zarena_get_stats)                   \
  X(zarena_format_stats)                \
  X(zarena_reset_peak_stats)            \
  X(zarena_format_live_blocks)          \
  X(zarena_pin)                         \
  X(zarena_unpin)                       \
  X(zarena_set_floor)                   \
  X(zarena_region_info)                 \
  X(zarena_set_capture_active)          \
  X(zarena_capture_begin)               \
  X(zarena_capture_end)                 \
  X(zarena_arena_id)                    \
  X(zarena_set_stream)                  \
  X(zarena_set_poison)                  \
  X(zarena_set_overflow_policy)         \
  X(zarena_overflow_policy)             \
  X(zarena_set_overflow_allocator)      \
  X(zarena_for_each_live_block)         \
  X(zarena_tag_register)                \
  X(zarena_tag_name)                    \
  X(zarena_set_log_callback)            \
  X(zarena_debug_inject_overflow_fault) \
  X(zarena_backend)

/* Experimental functions (ZARENA_EXPERIMENTAL): looked up when the library has them; their
 * pointers stay NULL otherwise, and the binding does without (the shims check). */
#define ZARENA_GO_DL_OPTIONAL(X) \
  X(zarena_plan_view_get)        \
  X(zarena_plan_alloc_unplanned) \
  X(zarena_graph_capture_begin)  \
  X(zarena_graph_capture_end)    \
  X(zarena_graph_replay)         \
  X(zarena_graph_release)        \
  X(zarena_graph_free_after)     \
  X(zarena_graph_get_info) \
  X(zarena_kept_report_add)      \
  X(zarena_lane_create)          \
  X(zarena_lane_destroy)         \
  X(zarena_lane_alloc)           \
  X(zarena_lane_alloc_unplanned) \
  X(zarena_lane_step_begin)      \
  X(zarena_lane_plan_view)       \
  X(zarena_lane_get_stats)

#ifdef ZARENA_GO_DLOPEN
#define ZARENA_GO_DL_DECLARE(name) extern __typeof__(name)* zarena_go_dl_##name;
ZARENA_GO_DL_FUNCTIONS(ZARENA_GO_DL_DECLARE)
ZARENA_GO_DL_OPTIONAL(ZARENA_GO_DL_DECLARE)
#undef ZARENA_GO_DL_DECLARE

/* Loads the library: path, or when NULL/empty, $ZARENA_LIBRARY, then libzarena.so.1.
 * Returns 1 when every function was found. Otherwise 0, and *err (static, or malloc'ed
 * when *err_owned) says what is missing. Idempotent once it succeeded. Thread-safe. */
int zarena_go_dl_load(const char* path, const char** err, int* err_owned, const char** loaded_from);

/* generated: pointer defines, from go/dlopen.h's X rows (tools/gen) */
#define zarena_version_number (*zarena_go_dl_zarena_version_number)
#define zarena_version_string (*zarena_go_dl_zarena_version_string)
#define zarena_status_string (*zarena_go_dl_zarena_status_string)
#define zarena_last_error (*zarena_go_dl_zarena_last_error)
#define zarena_config_init_sized (*zarena_go_dl_zarena_config_init_sized)
#define zarena_create (*zarena_go_dl_zarena_create)
#define zarena_destroy (*zarena_go_dl_zarena_destroy)
#define zarena_alloc_ex (*zarena_go_dl_zarena_alloc_ex)
#define zarena_free_at (*zarena_go_dl_zarena_free_at)
#define zarena_free_batch (*zarena_go_dl_zarena_free_batch)
#define zarena_free_then_alloc (*zarena_go_dl_zarena_free_then_alloc)
#define zarena_alloc_batch (*zarena_go_dl_zarena_alloc_batch)
#define zarena_reset (*zarena_go_dl_zarena_reset)
#define zarena_mark_step_boundary (*zarena_go_dl_zarena_mark_step_boundary)
#define zarena_step_begin (*zarena_go_dl_zarena_step_begin)
#define zarena_diagnose (*zarena_go_dl_zarena_diagnose)
#define zarena_log_flush (*zarena_go_dl_zarena_log_flush)
#define zarena_epoch (*zarena_go_dl_zarena_epoch)
#define zarena_get_stats (*zarena_go_dl_zarena_get_stats)
#define zarena_format_stats (*zarena_go_dl_zarena_format_stats)
#define zarena_reset_peak_stats (*zarena_go_dl_zarena_reset_peak_stats)
#define zarena_format_live_blocks (*zarena_go_dl_zarena_format_live_blocks)
#define zarena_pin (*zarena_go_dl_zarena_pin)
#define zarena_unpin (*zarena_go_dl_zarena_unpin)
#define zarena_set_floor (*zarena_go_dl_zarena_set_floor)
#define zarena_region_info (*zarena_go_dl_zarena_region_info)
#define zarena_set_capture_active (*zarena_go_dl_zarena_set_capture_active)
#define zarena_capture_begin (*zarena_go_dl_zarena_capture_begin)
#define zarena_capture_end (*zarena_go_dl_zarena_capture_end)
#define zarena_arena_id (*zarena_go_dl_zarena_arena_id)
#define zarena_set_stream (*zarena_go_dl_zarena_set_stream)
#define zarena_set_poison (*zarena_go_dl_zarena_set_poison)
#define zarena_set_overflow_policy (*zarena_go_dl_zarena_set_overflow_policy)
#define zarena_overflow_policy (*zarena_go_dl_zarena_overflow_policy)
#define zarena_set_overflow_allocator (*zarena_go_dl_zarena_set_overflow_allocator)
#define zarena_for_each_live_block (*zarena_go_dl_zarena_for_each_live_block)
#define zarena_tag_register (*zarena_go_dl_zarena_tag_register)
#define zarena_tag_name (*zarena_go_dl_zarena_tag_name)
#define zarena_set_log_callback (*zarena_go_dl_zarena_set_log_callback)
#define zarena_debug_inject_overflow_fault (*zarena_go_dl_zarena_debug_inject_overflow_fault)
#define zarena_backend (*zarena_go_dl_zarena_backend)
#define zarena_plan_view_get (*zarena_go_dl_zarena_plan_view_get)
#define zarena_plan_alloc_unplanned (*zarena_go_dl_zarena_plan_alloc_unplanned)
#define zarena_graph_capture_begin (*zarena_go_dl_zarena_graph_capture_begin)
#define zarena_graph_capture_end (*zarena_go_dl_zarena_graph_capture_end)
#define zarena_graph_replay (*zarena_go_dl_zarena_graph_replay)
#define zarena_graph_release (*zarena_go_dl_zarena_graph_release)
#define zarena_graph_free_after (*zarena_go_dl_zarena_graph_free_after)
#define zarena_graph_get_info (*zarena_go_dl_zarena_graph_get_info)
#define zarena_kept_report_add (*zarena_go_dl_zarena_kept_report_add)
#define zarena_lane_create (*zarena_go_dl_zarena_lane_create)
#define zarena_lane_destroy (*zarena_go_dl_zarena_lane_destroy)
#define zarena_lane_alloc (*zarena_go_dl_zarena_lane_alloc)
#define zarena_lane_alloc_unplanned (*zarena_go_dl_zarena_lane_alloc_unplanned)
#define zarena_lane_step_begin (*zarena_go_dl_zarena_lane_step_begin)
#define zarena_lane_plan_view (*zarena_go_dl_zarena_lane_plan_view)
#define zarena_lane_get_stats (*zarena_go_dl_zarena_lane_get_stats)
/* end of generated pointer defines */
#endif /* ZARENA_GO_DLOPEN */

#endif
