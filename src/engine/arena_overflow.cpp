// The overflow route at run time: the policy and the program's overflow allocator
// (zarena.h, "The overflow route at run time"). The pool checks and applies each change
// under its own lock; the arena resolves DEFAULT, makes the async route ready and logs.
#include <fmt/format.h>

#include "engine/arena.h"
#include "log/reporter.h"

namespace zarena_core {

Result Arena::set_overflow_policy(int32_t policy) {
  if (policy < ZARENA_OVERFLOW_DEFAULT || policy > ZARENA_OVERFLOW_CUSTOM) {
    return Result::fail(Status::kInvalidArgument,
                        fmt::format("zarena_set_overflow_policy (arena '{}'): {} is no overflow "
                                    "policy (ZARENA_OVERFLOW_DEFAULT 0, ASYNC 1, SYNC 2, REFUSE 3, "
                                    "CUSTOM 4); the policy stays {}",
                                    name(), policy, policy_name(overflow_.policy())));
  }
  int32_t previous = 0, resolved = 0;
  {
    std::lock_guard<std::mutex> g(policy_mu_);
    resolved = policy != ZARENA_OVERFLOW_DEFAULT ? policy
               : backend_->stream() != nullptr   ? ZARENA_OVERFLOW_ASYNC
                                                 : ZARENA_OVERFLOW_SYNC;
    Result r;
    if (resolved == ZARENA_OVERFLOW_ASYNC) r = backend_->prepare_async(!capturing());
    if (r.is_ok()) r = overflow_.set_policy(resolved, &previous);
    if (!r.is_ok()) {
      r.message = fmt::format("zarena_set_overflow_policy (arena '{}'): {}; the policy stays {}",
                              name(), r.message, policy_name(overflow_.policy()));
      return r;
    }
    // Successful overflows leave their records to the reporter (started at create unless
    // the policy was REFUSE).
    if (resolved != ZARENA_OVERFLOW_REFUSE) Reporter::start();
  }
  emit_queued_warnings();  // a capture query that failed (capturing())
  if (previous != resolved) log_policy_change(previous, resolved);
  return Result::ok();
}

Result Arena::set_overflow_allocator(const CustomAllocator* alloc) {
  int32_t previous = 0, now = 0;
  {
    std::lock_guard<std::mutex> g(policy_mu_);
    const int32_t fallback = backend_->stream() != nullptr && backend_->prepare_async(false).is_ok()
                                 ? ZARENA_OVERFLOW_ASYNC
                                 : ZARENA_OVERFLOW_SYNC;
    Result r = overflow_.set_custom(alloc, fallback, &previous);
    if (!r.is_ok()) {
      r.message = fmt::format("zarena_set_overflow_allocator (arena '{}'): {}; nothing changed",
                              name(), r.message);
      return r;
    }
    now = overflow_.policy();
    if (now != ZARENA_OVERFLOW_REFUSE) Reporter::start();
  }
  log_policy_change(previous, now);
  return Result::ok();
}

void Arena::log_policy_change(int32_t previous, int32_t now) {
  if (!log_enabled(ZARENA_LOG_INFO)) return;
  const std::string allocator = overflow_.custom_name();
  const uint64_t live = overflow_.stats().live_count;
  LogRecord rec(log_events::kOverflowPolicy, source_);
  rec.message(fmt::format(
      "overflow policy {}{}{}; the {} live overflow block(s) go back by the "
      "route that made them",
      previous == now ? "stays " : fmt::format("changed from {} to ", policy_name(previous)),
      policy_name(now),
      allocator.empty() ? std::string() : fmt::format(" (allocator '{}')", allocator), live));
  rec.add_string("policy", policy_name(now));
  rec.add_string("previous", policy_name(previous));
  rec.add_string("allocator", allocator);
  rec.add_uint("overflow_live_blocks", live);
  log_emit(rec);
}

}  // namespace zarena_core
