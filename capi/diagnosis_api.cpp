// extern "C" shim for zarena_diagnose: the current diagnosis, with its sentences kept in
// thread-local storage until the calling thread's next zarena_diagnose.
#include <fmt/format.h>

#include <cstddef>
#include <string>

#include "handle.h"

using zarena_core::Arena;
using zarena_core::Status;

namespace {

// A caller must at least receive the three sentences.
constexpr uint32_t kDiagnosisMinSize = offsetof(zarena_diagnosis, cause) + sizeof(const char*);

thread_local std::string t_cause, t_advice;

}  // namespace

extern "C" zarena_status zarena_diagnose(zarena* a, zarena_diagnosis* out) {
  Arena* arena = zarena_core::checked(a, "zarena_diagnose");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  if (out == nullptr) {
    return zarena_core::fail(Status::kInvalidArgument, "zarena_diagnose: out is NULL");
  }
  const uint32_t given = out->struct_size;
  if (given < kDiagnosisMinSize) {
    return zarena_core::fail(Status::kInvalidArgument,
                             fmt::format("zarena_diagnose: struct_size {} is smaller than {}; set "
                                         "it to sizeof(zarena_diagnosis)",
                                         given, kDiagnosisMinSize));
  }
  return zarena_core::guarded("zarena_diagnose", [&] {
    zarena_core::CurrentDiagnosis d;
    arena->diagnose_now(&d);
    t_cause = std::move(d.cause);
    t_advice = std::move(d.advice);
    const zarena_core::ExhaustionFacts& f = d.facts;
    zarena_diagnosis full{};
    full.struct_size = given;
    full.overflowed = d.overflowed ? 1 : 0;
    full.warned = d.warned ? 1 : 0;
    full.verdict = d.verdict;
    full.advice = t_advice.c_str();
    full.cause = t_cause.c_str();
    full.epoch = f.epoch;
    full.resets = f.resets;
    full.steps = zarena_core::reported_steps(f);
    full.steps_explicit = f.steps_explicit ? 1 : 0;
    full.kept_bytes = f.kept_bytes;
    full.steps_to_full = d.steps_to_full;
    full.capacity_bytes = f.capacity_bytes;
    full.top_bytes = f.offset_bytes;
    full.floor_bytes = f.floor_bytes;
    full.live_bytes = d.live_bytes;
    full.overflow_live_bytes = f.overflow_live_bytes;
    full.epoch_allocs = f.epoch_allocs;
    full.epoch_peak_bytes = f.epoch_peak_bytes;
    full.prior_epochs = f.prior_epochs;
    full.prior_peak_bytes = f.prior_peak_bytes;
    full.prior_allocs = f.prior_allocs;
    full.overflow_epochs = d.overflow_epochs;
    full.needed_bytes = d.needed_bytes;
    full.requested_bytes = f.requested_bytes;
    zarena_core::write_versioned(out, given, &full, sizeof full);
    out->struct_size = given;
    return ZARENA_OK;
  });
}
