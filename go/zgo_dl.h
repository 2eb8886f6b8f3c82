/* The zarena_dlopen build mode: the package builds without libzarena (the header comes
 * from internal/include, a copy kept in sync by the zarena_generate target) and loads
 * the library at run time with dlopen. Each zarena_* function the binding calls becomes
 * a call through a pointer that zgo_dl_load fills; the macros below rename the calls, so
 * zgo.h is the same code in every mode. Without ZGO_DLOPEN this header declares nothing
 * and the calls are linked directly. */
#ifndef ZARENA_GO_ZGO_DL_H
#define ZARENA_GO_ZGO_DL_H

#include <stdint.h>

#include <zarena/zarena.h>
#include <zarena/zarena_testing.h>

/* Every function the binding calls, in the order they are looked up. */
#define ZGO_DL_FUNCTIONS(X)                \
  X(zarena_version_number)                 \
  X(zarena_version_string)                 \
  X(zarena_status_string)                  \
  X(zarena_last_error)                     \
  X(zarena_config_init_sized)              \
  X(zarena_create)                         \
  X(zarena_destroy)                        \
  X(zarena_alloc_ex)                       \
  X(zarena_free_at)                        \
  X(zarena_free_batch)                     \
  X(zarena_free_then_alloc)                \
  X(zarena_reset)                          \
  X(zarena_mark_step_boundary)             \
  X(zarena_step_begin)                     \
  X(zarena_diagnose)                       \
  X(zarena_log_flush)                      \
  X(zarena_epoch)                          \
  X(zarena_get_stats)                      \
  X(zarena_format_stats)                   \
  X(zarena_reset_peak_stats)               \
  X(zarena_format_live_blocks)             \
  X(zarena_pin)                            \
  X(zarena_unpin)                          \
  X(zarena_set_floor)                      \
  X(zarena_region_info)                    \
  X(zarena_set_capture_active)             \
  X(zarena_set_stream)                     \
  X(zarena_set_poison)                     \
  X(zarena_for_each_live_block)            \
  X(zarena_tag_register)                   \
  X(zarena_tag_name)                       \
  X(zarena_set_log_callback)               \
  X(zarena_debug_inject_overflow_fault)    \
  X(zarena_backend)

#ifdef ZGO_DLOPEN
#define ZGO_DL_DECLARE(name) extern __typeof__(name)* zgo_dl_##name;
ZGO_DL_FUNCTIONS(ZGO_DL_DECLARE)
#undef ZGO_DL_DECLARE

/* Loads the library: path, or when NULL/empty, $ZARENA_LIBRARY, then libzarena.so.1.
 * Returns 1 when every function was found. Otherwise 0, and *err (static, or malloc'ed
 * when *err_owned) says what is missing. Idempotent once it succeeded. Thread-safe. */
int zgo_dl_load(const char* path, const char** err, int* err_owned, const char** loaded_from);

#define zarena_version_number (*zgo_dl_zarena_version_number)
#define zarena_version_string (*zgo_dl_zarena_version_string)
#define zarena_status_string (*zgo_dl_zarena_status_string)
#define zarena_last_error (*zgo_dl_zarena_last_error)
#define zarena_config_init_sized (*zgo_dl_zarena_config_init_sized)
#define zarena_create (*zgo_dl_zarena_create)
#define zarena_destroy (*zgo_dl_zarena_destroy)
#define zarena_alloc_ex (*zgo_dl_zarena_alloc_ex)
#define zarena_free_at (*zgo_dl_zarena_free_at)
#define zarena_free_batch (*zgo_dl_zarena_free_batch)
#define zarena_free_then_alloc (*zgo_dl_zarena_free_then_alloc)
#define zarena_reset (*zgo_dl_zarena_reset)
#define zarena_mark_step_boundary (*zgo_dl_zarena_mark_step_boundary)
#define zarena_step_begin (*zgo_dl_zarena_step_begin)
#define zarena_epoch (*zgo_dl_zarena_epoch)
#define zarena_get_stats (*zgo_dl_zarena_get_stats)
#define zarena_format_stats (*zgo_dl_zarena_format_stats)
#define zarena_reset_peak_stats (*zgo_dl_zarena_reset_peak_stats)
#define zarena_format_live_blocks (*zgo_dl_zarena_format_live_blocks)
#define zarena_pin (*zgo_dl_zarena_pin)
#define zarena_unpin (*zgo_dl_zarena_unpin)
#define zarena_set_floor (*zgo_dl_zarena_set_floor)
#define zarena_region_info (*zgo_dl_zarena_region_info)
#define zarena_diagnose (*zgo_dl_zarena_diagnose)
#define zarena_log_flush (*zgo_dl_zarena_log_flush)
#define zarena_set_capture_active (*zgo_dl_zarena_set_capture_active)
#define zarena_set_stream (*zgo_dl_zarena_set_stream)
#define zarena_set_poison (*zgo_dl_zarena_set_poison)
#define zarena_for_each_live_block (*zgo_dl_zarena_for_each_live_block)
#define zarena_tag_register (*zgo_dl_zarena_tag_register)
#define zarena_tag_name (*zgo_dl_zarena_tag_name)
#define zarena_set_log_callback (*zgo_dl_zarena_set_log_callback)
#define zarena_debug_inject_overflow_fault (*zgo_dl_zarena_debug_inject_overflow_fault)
#define zarena_backend (*zgo_dl_zarena_backend)
#endif /* ZGO_DLOPEN */

#endif
