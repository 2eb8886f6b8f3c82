// The catalogue of log records: every event zarena emits, its level, whether the rate limiter
// applies to it, when it is emitted, and its fields. A LogRecord is built from an entry here
// (it takes a LogEvent, whose level and limiting it uses), docs/LOGGING.md is generated from
// this file (tools/gen), and the test suites' log capture (tests/support.h) fails on a
// record whose event is not in kLogEvents or whose field its entry does not list. So an
// event cannot be emitted without being documented.
//
// Adding an event: define it below, add it to kLogEvents, build its records with it, then
// regenerate (cmake --build <build> --target zarena_generate).
#pragma once

#include <cstddef>
#include <cstdint>

#include "zarena/zarena.h"

namespace zarena_core {

struct LogFieldSpec {
  // The field's key, or a pattern for a family of keys: "<config field>" (each key of the
  // configuration table, src/config/config_fields.h, typed as its row says),
  // "<config field>_source", "warning<N>" (N = 0, 1, ...).
  const char* key;
  int32_t kind;  // ZARENA_FIELD_*, or kKindOfConfigRow
  const char* doc;
};
// "<config field>": each field has the kind its configuration row gives it
// (record_field_kind in config_fields.h).
inline constexpr int32_t kKindOfConfigRow = -1;

struct LogEvent {
  const char* name;
  int32_t level;      // ZARENA_LOG_*
  bool rate_limited;  // subject to the per-event limiter (log.h); adds "suppressed"
  const char* when;   // when it is emitted, for docs/LOGGING.md
  const LogFieldSpec* fields;
  size_t field_count;
};

inline constexpr bool kLimited = true;
inline constexpr bool kNeverDropped = false;

template <size_t N>
constexpr LogEvent log_event(const char* name, int32_t level, bool rate_limited, const char* when,
                             const LogFieldSpec (&fields)[N]) {
  return {name, level, rate_limited, when, fields, N};
}
constexpr LogEvent log_event(const char* name, int32_t level, bool rate_limited, const char* when) {
  return {name, level, rate_limited, when, nullptr, 0};
}

// The field every rate-limited event may carry (added by log.cpp, not by the builders).
inline constexpr LogFieldSpec kSuppressedField = {
    "suppressed", ZARENA_FIELD_UINT,
    "records of this event the limiter dropped since the last one that passed (only when "
    "there were some)"};

namespace log_events {

constexpr int32_t kUint = ZARENA_FIELD_UINT;
constexpr int32_t kInt = ZARENA_FIELD_INT;
constexpr int32_t kDouble = ZARENA_FIELD_DOUBLE;
constexpr int32_t kString = ZARENA_FIELD_STRING;
constexpr int32_t kBool = ZARENA_FIELD_BOOL;

inline constexpr LogFieldSpec kConfigRecordFields[] = {
    {"<config field>", kKindOfConfigRow,
     "the value as resolved (a \"0 means the default\" field holds the default; "
     "overflow_limit_bytes is ZARENA_OVERFLOW_UNLIMITED when uncapped; trace_file is \"\" "
     "for none)"},
    {"<config field>_source", kString,
     "where that value came from: \"default\", \"config\" (the struct) or "
     "\"env:<VARIABLE>\""},
    {"backend_resolved", kString, "the backend used: host or cuda"},
    {"overflow_policy_resolved", kString, "the overflow policy used: async, sync or refuse"},
    {"env_ignored", kString,
     "only when the program's own value overrode environment variables that were set: "
     "their names"},
    {"backend_fallback", kString,
     "only when AUTO fell back to the host although a device was counted: why"},
    {"memory_free_bytes", kUint,
     "the device's (or the host's) free memory after the region was reserved; only when the "
     "backend knows it"},
    {"memory_total_bytes", kUint, "the device's (or the host's) memory; likewise"},
    {"warning<N>", kString,
     "each problem the environment had (each also has its config.invalid_value or "
     "config.unknown_variable record)"},
    {"region_managed", kBool, "the region is CUDA managed memory"},
    {"managed_fallback", kString,
     "only when ZARENA_FLAG_MANAGED was set but the region is not managed: why (the device "
     "has no managed memory, the region is expandable, or the backend is the host's, whose "
     "memory the CPU reads directly)"},
};
inline constexpr LogEvent kArenaConfig = log_event(
    "arena.config", ZARENA_LOG_INFO, kNeverDropped,
    "at zarena_create, once the region is reserved. Its stderr line names the values that are "
    "not a default and where each came from",
    kConfigRecordFields);

inline constexpr LogFieldSpec kInvalidValueFields[] = {
    {"variable", kString, "the environment variable"},
    {"value", kString, "its text"},
    {"reason", kString, "why it was ignored"},
    {"example", kString, "a valid value"},
};
inline constexpr LogEvent kConfigInvalidValue = log_event(
    "config.invalid_value", ZARENA_LOG_WARN, kNeverDropped,
    "at zarena_create, once per process per variable and text: an environment value was "
    "ignored (the default stays; with ZARENA_FLAG_STRICT_CONFIG the create fails instead)",
    kInvalidValueFields);

inline constexpr LogFieldSpec kUnknownVariableFields[] = {
    {"variable", kString, "the environment variable"},
    {"value", kString, "its text"},
    {"closest", kString, "the known variable nearest to it"},
};
inline constexpr LogEvent kConfigUnknownVariable = log_event(
    "config.unknown_variable", ZARENA_LOG_WARN, kNeverDropped,
    "at zarena_create, once per process per variable and text: a ZARENA_* variable zarena "
    "does not know (with ZARENA_FLAG_STRICT_CONFIG the create fails instead)",
    kUnknownVariableFields);

inline constexpr LogFieldSpec kResetCadenceFields[] = {
    {"step_repeats", kUint, "steps - 1"},
    {"step_allocs", kUint, "requests per step (0: not known)"},
    {"step_bytes", kUint, "live bytes kept per step"},
    {"grown_bytes", kUint, "live bytes kept since the first step"},
    {"offset_bytes", kUint, "the top"},
    {"capacity_bytes", kUint, "the region's size"},
    {"fill_percent", kDouble, "the top as a percentage of the capacity"},
    {"steps_to_full", kUint, "steps left at the rate the top grows per step (0: unknown)"},
    {"epoch_allocs", kUint, "requests this epoch"},
    {"resets", kUint, "resets since create"},
    {"verdict", kString, "never_reset, or reset_stopped when the arena was reset before"},
    {"advice", kString, "the fix, one sentence"},
    {"steps", kUint, "steps begun so far, as the loop counts them"},
    {"steps_explicit", kBool, "the steps were counted by zarena_step_begin"},
};
// Limited: an arena warns at most once in its life, but a program that creates arena after
// arena would repeat it.
inline constexpr LogEvent kResetCadence = log_event(
    "arena.reset_cadence", ZARENA_LOG_WARN, kLimited,
    "early warning, at most once per arena: steps are running without a reset and keep "
    "memory. With zarena_step_begin: when two steps in a row began (with no reset since the "
    "one before) with more live bytes and more live blocks than the step before, and by more "
    "than any step gave back. Without it, a guess: the request sequence "
    "that opened the epoch (or followed the step boundary, or the epoch's first free) recurs, "
    "the lowest live bytes of each step rose over two consecutive steps, and by at least 1/64 "
    "of the capacity in all; after resets, an epoch that grows well past the peaks of the "
    "epochs before it is watched for their opening recurring likewise",
    kResetCadenceFields);

inline constexpr LogFieldSpec kFirstOverflowFields[] = {
    {"path", kString,
     "the overflow route: async, sync, custom, refused (REFUSE), limit or "
     "capture_refused"},
    {"requested_bytes", kUint, "the request"},
    {"aligned_bytes", kUint, "the request rounded up to the alignment"},
    {"capacity_bytes", kUint, "the region's size"},
    {"offset_bytes", kUint, "the top when the region gave up"},
    {"epoch_allocs", kUint, "requests this epoch"},
    {"epoch_max_alloc_bytes", kUint, "the largest request this epoch"},
    {"hits", kUint, "requests the region served, since create"},
    {"misses", kUint, "requests it could not serve"},
    {"reuses", kUint, "hits served by a freed block"},
    {"resets", kUint, "resets since create"},
    {"free_list_len", kUint, "free blocks in the index"},
    {"verdict", kString, "the likely cause (see Verdicts)"},
    {"advice", kString, "the fix, one sentence"},
    {"epoch", kUint, "the epoch"},
    {"steps", kUint, "steps of this epoch as the loop counts them (0: none seen)"},
    {"steps_explicit", kBool, "the steps were counted by zarena_step_begin"},
    {"kept_bytes", kUint, "live bytes the steps of this epoch kept"},
    {"top_tags", kString,
     "only when tagged blocks of the epoch are live: the three tags holding the most live "
     "bytes, \"matmul.grad 38.0 GiB, ...\" (the stderr line shows it too)"},
};
inline constexpr LogEvent kFirstOverflow = log_event(
    "arena.first_overflow", ZARENA_LOG_WARN, kNeverDropped,
    "for each of the first ZARENA_OVERFLOW_RECORDS epochs in which the region cannot serve a "
    "request, at the first such request: the diagnosis (zarena.h, \"Diagnosis\"). Emitted "
    "before the failing call returns; for an overflow that succeeds, by zarena's reporter "
    "thread (with ZARENA_FLAG_DIAGNOSE_SYNC, by the allocating call before it returns)",
    kFirstOverflowFields);

inline constexpr LogFieldSpec kOverflowSummaryFields[] = {
    {"overflow_epochs", kUint, "epochs that overflowed since create"},
    {"epochs", kUint, "epochs since create, the current one included"},
    {"unreported_epochs", kUint, "overflow epochs since the last record of this arena"},
    {"epoch", kUint, "the epoch the facts are from (the latest that overflowed)"},
    {"path", kString, "its overflow route"},
    {"requested_bytes", kUint, "its first request that overflowed"},
    {"capacity_bytes", kUint, "the region's size"},
    {"verdict", kString, "the likely cause (see Verdicts)"},
    {"advice", kString, "the fix, one sentence"},
};
inline constexpr LogEvent kOverflowSummary = log_event(
    "arena.overflow_summary", ZARENA_LOG_WARN, kNeverDropped,
    "the epochs that overflowed after the first ZARENA_OVERFLOW_RECORDS, summarised: at most "
    "once a minute, and at zarena_destroy for those not reported yet",
    kOverflowSummaryFields);

inline constexpr LogFieldSpec kStepFields[] = {
    {"epoch", kUint, "the epoch that ends"},
    {"steps", kUint, "zarena_step_begin calls in it"},
    {"allocs", kUint, "requests in it"},
    {"reuses", kUint, "of those, served by a freed block"},
    {"peak_bytes", kUint, "its highest top above the floor"},
    {"floor_bytes", kUint, "the floor"},
    {"capacity_bytes", kUint, "the region's size"},
    {"overflow_allocs", kUint, "overflow allocations in it"},
    {"overflow_peak_bytes", kUint, "its highest live overflow bytes"},
    {"needed_bytes", kUint, "its top plus overflow at their highest"},
};
inline constexpr LogEvent kStep =
    log_event("arena.step", ZARENA_LOG_INFO, kNeverDropped,
              "at every zarena_reset of an arena with ZARENA_FLAG_STEP_RECORDS: the epoch it ends",
              kStepFields);

inline constexpr LogFieldSpec kOverflowSlowFields[] = {
    {"duration_ns", kUint, "how long the backend call took"},
    {"threshold_ns", kUint, "overflow_slow_ns"},
    {"bytes", kUint, "the allocation's size"},
    {"path", kString, "the overflow route: async, sync or custom"},
};
// Limited: a wedged backend would otherwise log on every overflow call.
inline constexpr LogEvent kOverflowSlow =
    log_event("overflow.slow", ZARENA_LOG_WARN, kLimited,
              "an overflow allocation took longer than overflow_slow_ns (the watchdog; "
              "stats.overflow_max_latency_ns keeps the slowest)",
              kOverflowSlowFields);

inline constexpr LogFieldSpec kOverflowPolicyFields[] = {
    {"policy", kString, "the policy from now on: async, sync, refuse or custom"},
    {"previous", kString, "the policy it replaces"},
    {"allocator", kString, "the installed overflow allocator's name (\"\" for none)"},
    {"overflow_live_blocks", kUint, "live overflow blocks, which keep the route that made them"},
};
inline constexpr LogEvent kOverflowPolicy =
    log_event("arena.overflow_policy", ZARENA_LOG_INFO, kNeverDropped,
              "zarena_set_overflow_policy or zarena_set_overflow_allocator changed the overflow "
              "policy or the allocator",
              kOverflowPolicyFields);

inline constexpr LogFieldSpec kCommitFailedFields[] = {
    {"committed_bytes", kUint, "memory committed so far"},
    {"reason", kString, "the backend call that failed and why"},
};
// Limited: every request past the committed end tries again while the device stays full.
inline constexpr LogEvent kCommitFailed =
    log_event("arena.commit_failed", ZARENA_LOG_WARN, kLimited,
              "an expandable arena could not commit memory; the request went to the overflow "
              "route",
              kCommitFailedFields);

inline constexpr LogEvent kPoisonSkipped =
    log_event("poison.skipped", ZARENA_LOG_WARN, kNeverDropped,
              "once per capture: a poison fill was skipped because a capture was active "
              "(stats.poison_skipped counts them)");

// Backend failures that no call returns: the call that met them still succeeds.
inline constexpr LogFieldSpec kReasonFields[] = {
    {"reason", kString, "the backend's message"},
};
inline constexpr LogEvent kOverflowGiveFailed = log_event(
    "overflow.give_failed", ZARENA_LOG_WARN, kLimited,
    "an overflow block could not be given back to the backend (free, reset, unpin, destroy); "
    "it waits with the deferred gives (stats.overflow_deferred_gives) and is tried again at "
    "the next overflow call, free, reset or capture end, and at destroy",
    kReasonFields);
inline constexpr LogEvent kPoisonFailed =
    log_event("poison.failed", ZARENA_LOG_WARN, kLimited,
              "a poison fill failed; the block is freed unpoisoned (stats.poison_fills counts "
              "fills attempted)",
              kReasonFields);
inline constexpr LogEvent kCaptureQueryFailed =
    log_event("arena.capture_query_failed", ZARENA_LOG_WARN, kLimited,
              "the backend could not say whether a capture is active; the arena acts as if "
              "one were",
              kReasonFields);
inline constexpr LogEvent kTrimFailed =
    log_event("arena.trim_failed", ZARENA_LOG_WARN, kLimited,
              "a decommit of an expandable arena at a reset, or when a step plan engaged, "
              "failed; the memory stays committed and the next one tries again",
              kReasonFields);
inline constexpr LogEvent kReleaseFailed =
    log_event("arena.release_failed", ZARENA_LOG_WARN, kLimited,
              "giving back the memory of an arena destroyed during a capture failed at its "
              "safe point; it stays with the process",
              kReasonFields);

// An arena destroyed during a capture (zarena_destroy): its device memory waits for a safe
// point.
inline constexpr LogFieldSpec kDeferredReleaseFields[] = {
    {"region_bytes", kUint, "the destroyed arena's region memory"},
    {"overflow_blocks", kUint, "its overflow blocks that were live"},
};
inline constexpr LogEvent kDestroyDeferred = log_event(
    "arena.destroy_deferred", ZARENA_LOG_WARN, kNeverDropped,
    "at zarena_destroy during a capture: the arena is gone, its device memory goes back once "
    "the capture has ended, from zarena's release thread (within about 0.1 s) or at the next "
    "zarena_create, zarena_destroy, zarena_set_capture_active(x, 0) or zarena_capture_end, "
    "whichever comes first (see zarena_destroy)",
    kDeferredReleaseFields);
inline constexpr LogEvent kReleased = log_event(
    "arena.released", ZARENA_LOG_INFO, kNeverDropped,
    "the memory of an arena destroyed during a capture went back (from the call that found "
    "the capture over, or from zarena's release thread)",
    kDeferredReleaseFields);

// The device was reset under a live arena (or one destroyed during a capture).
inline constexpr LogFieldSpec kDeviceResetFields[] = {
    {"call", kString,
     "what found it: \"zarena_destroy\", \"zarena_reset\", \"zarena_alloc (overflow)\", "
     "\"an overflow give-back\" (zarena_free, zarena_unpin, ...), or \"the release of an "
     "arena destroyed during a capture\""},
    {"region_bytes", kUint, "the region memory that went with the reset"},
    {"overflow_blocks", kUint, "the overflow blocks live or waiting to go back then"},
};
inline constexpr LogEvent kDeviceReset = log_event(
    "arena.device_reset", ZARENA_LOG_WARN, kNeverDropped,
    "once per arena, at the first call that finds the device's context reset "
    "(cudaDeviceReset, cuDevicePrimaryCtxReset) since the arena was created: its memory went "
    "with the reset, and zarena frees or touches none of it from then on (see zarena_destroy)",
    kDeviceResetFields);

inline constexpr LogFieldSpec kTraceFailedFields[] = {
    {"trace_file", kString, "the trace file"},
    {"reason", kString, "why it could not be opened, or why the trace stopped"},
};
inline constexpr LogEvent kTraceFailed = log_event(
    "arena.trace_failed", ZARENA_LOG_WARN, kNeverDropped,
    "at zarena_create, when the configured trace file cannot be opened (the arena runs "
    "without a trace); or later, at once from the trace's thread, when the trace stopped (a "
    "write failed, host memory for its buffers ran out; see zarena_trace_status)",
    kTraceFailedFields);

inline constexpr LogFieldSpec kTraceRenamedFields[] = {
    {"trace_file", kString, "the file asked for"},
    {"trace_path", kString, "the file written"},
};
inline constexpr LogEvent kTraceRenamed =
    log_event("arena.trace_renamed", ZARENA_LOG_WARN, kNeverDropped,
              "at zarena_create, when the trace file asked for is written by another open "
              "trace: this arena's goes to a numbered name (\"<stem>.2<ext>\", ...)",
              kTraceRenamedFields);

inline constexpr LogFieldSpec kDestroyFields[] = {
    {"allocs", kUint, "allocation requests over the arena's life"},
    {"resets", kUint, "resets"},
    {"high_water_bytes", kUint, "the highest top"},
    {"capacity_bytes", kUint, "the region's size"},
    {"hits", kUint, "requests the region served"},
    {"misses", kUint, "requests it could not serve"},
    {"reuses", kUint, "hits served by a freed block"},
    {"overflow_allocs", kUint, "overflow allocations"},
    {"overflow_peak_bytes", kUint, "the highest live overflow bytes"},
    {"overflow_epochs", kUint, "epochs in which the region was exhausted"},
    {"stale_frees", kUint, "frees answered ZARENA_E_STALE"},
    {"invalid_frees", kUint, "frees answered ZARENA_E_NOT_OWNED or ZARENA_E_DOUBLE_FREE"},
    {"live_allocs", kUint, "blocks still live"},
    {"needed_bytes", kUint, "the capacity the workload needed (as zarena_stats.needed_bytes)"},
    {"log_suppressed", kUint,
     "only when the limiter dropped records that no later record reported: how many"},
};
inline constexpr LogEvent kDestroy =
    log_event("arena.destroy", ZARENA_LOG_INFO, kNeverDropped,
              "at zarena_destroy: a lifetime summary", kDestroyFields);

inline constexpr LogFieldSpec kPlanLearnedFields[] = {
    {"items", kUint, "allocations per step"},
    {"planned", kUint, "of those, the ones the plan places (the rest outlive a step)"},
    {"period", kUint, "steps after which the plan's offsets repeat (1 or 2)"},
    {"plan_bytes", kUint, "the plan's peak less the live blocks it lies around"},
    {"lower_bound_bytes", kUint, "the most bytes the step has live at once"},
    {"plan_ns", kUint, "how long laying it out took"},
};
inline constexpr LogEvent kPlanLearned =
    log_event("arena.plan_learned", ZARENA_LOG_INFO, kNeverDropped,
              "step plans (on by default): two steps in a row were the same and a plan was laid out for "
              "the next ones",
              kPlanLearnedFields);

inline constexpr LogFieldSpec kPlanAbandonedFields[] = {
    {"reason", kString, "size, tag, extra, short, late or floor (ZARENA_PLAN_MISS_*)"},
    {"index", kUint, "the allocation of the step at which it left the plan"},
    {"expected_bytes", kUint, "the size the plan expected there"},
    {"expected_tag", kUint, "the tag the plan expected there"},
};
// Limited: a program whose steps keep changing leaves its plan often.
inline constexpr LogEvent kPlanAbandoned =
    log_event("arena.plan_abandoned", ZARENA_LOG_INFO, kLimited,
              "step plans (on by default): a step left its plan (the rest of it went to the dynamic "
              "engine; the next steps are learned again)",
              kPlanAbandonedFields);

inline constexpr LogFieldSpec kPlanFailedFields[] = {
    {"reason", kString, "no_room, or why the planner refused"},
};
inline constexpr LogEvent kPlanFailed =
    log_event("arena.plan_failed", ZARENA_LOG_WARN, kLimited,
              "step plans (on by default): a learned step could not be planned, or its plan found no "
              "room in the region; the steps stay dynamic",
              kPlanFailedFields);

}  // namespace log_events

// Every event, in the order docs/LOGGING.md lists them.
inline constexpr const LogEvent* kLogEvents[] = {
    &log_events::kArenaConfig,
    &log_events::kConfigInvalidValue,
    &log_events::kConfigUnknownVariable,
    &log_events::kResetCadence,
    &log_events::kFirstOverflow,
    &log_events::kOverflowSummary,
    &log_events::kStep,
    &log_events::kOverflowSlow,
    &log_events::kOverflowPolicy,
    &log_events::kCommitFailed,
    &log_events::kPoisonSkipped,
    &log_events::kOverflowGiveFailed,
    &log_events::kPoisonFailed,
    &log_events::kCaptureQueryFailed,
    &log_events::kTrimFailed,
    &log_events::kReleaseFailed,
    &log_events::kDestroyDeferred,
    &log_events::kReleased,
    &log_events::kDeviceReset,
    &log_events::kTraceFailed,
    &log_events::kTraceRenamed,
    &log_events::kPlanLearned,
    &log_events::kPlanAbandoned,
    &log_events::kPlanFailed,
    &log_events::kDestroy,
};

}  // namespace zarena_core
