// extern "C" shim for the process-wide log sink.
#include <string>

#include "handle.h"
#include "log/log.h"
#include "log/reporter.h"

extern "C" zarena_status zarena_set_log_callback(zarena_log_fn fn, void* user_data,
                                                 int32_t min_level) {
  if (min_level < ZARENA_LOG_TRACE || min_level > ZARENA_LOG_OFF) {
    return zarena_core::fail(zarena_core::Status::kInvalidArgument,
                             "zarena_set_log_callback: min_level " + std::to_string(min_level) +
                                 " is not a ZARENA_LOG_* level");
  }
  // Records of calls made before this one go to the sink they were made under.
  zarena_core::Reporter::flush_all();
  zarena_core::log_set_callback(fn, user_data, min_level);
  return ZARENA_OK;
}

extern "C" void zarena_log_flush(void) { zarena_core::Reporter::flush_all(); }

extern "C" uint64_t zarena_arena_id(const zarena* a) {
  if (a == nullptr || a->magic != ::zarena::kMagic || !a->arena) return 0;
  return a->arena->id();
}
