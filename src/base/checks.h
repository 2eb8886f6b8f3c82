// Invariants stated in code, and branch hints, each behind one macro.
//
// ZARENA_ASSERT(cond) / ZARENA_ASSERT_MSG(cond, detail): in debug builds (no NDEBUG: the
// Debug configuration, which the sanitizer builds of scripts/test.sh use) a false cond
// prints where and why to stderr and aborts; in release builds (RelWithDebInfo, Release)
// the condition is not evaluated and costs nothing, but still has to compile. detail is a
// const char*, evaluated only when the check fails.
//
// kDebugChecks says the same to code: an O(n) check (Region::check_invariants_w, say)
// sits under `if constexpr (kDebugChecks)`, and a DebugSampler keeps its share of a long
// run bounded.
//
// ZARENA_LIKELY(x) / ZARENA_UNLIKELY(x): the branch hint (__builtin_expect) for the hot
// paths; x is any condition (it is converted to bool).
#pragma once

#include <cstdint>

#define ZARENA_LIKELY(x) __builtin_expect(!!(x), 1)
#define ZARENA_UNLIKELY(x) __builtin_expect(!!(x), 0)

#if !defined(NDEBUG) || defined(ZARENA_FORCE_DEBUG_CHECKS)
#define ZARENA_DEBUG_CHECKS 1
#else
#define ZARENA_DEBUG_CHECKS 0
#endif

namespace zarena_core {

inline constexpr bool kDebugChecks = ZARENA_DEBUG_CHECKS != 0;

namespace checks {
// Prints "zarena: check failed at file:line: cond (detail)" to stderr and aborts.
[[noreturn]] void fail(const char* file, int line, const char* cond, const char* detail) noexcept;
}  // namespace checks

// Which calls of a frequent operation an O(n) debug check runs after: every one of the
// first 256, then one in 16, and from the 4096th on one in 256, so that the check stays a
// bounded share of a long run (a fuzz replay, a sanitizer suite). Not thread-safe: keep
// one per lock-protected object.
class DebugSampler {
 public:
  bool take() noexcept {
    const uint64_t n = n_++;
    return n < 256 || (n < 4096 ? n % 16 == 0 : n % 256 == 0);
  }

 private:
  uint64_t n_ = 0;
};

}  // namespace zarena_core

#if ZARENA_DEBUG_CHECKS
#define ZARENA_ASSERT(cond)                   \
  (ZARENA_LIKELY(cond) ? static_cast<void>(0) \
                       : ::zarena_core::checks::fail(__FILE__, __LINE__, #cond, nullptr))
#define ZARENA_ASSERT_MSG(cond, detail)       \
  (ZARENA_LIKELY(cond) ? static_cast<void>(0) \
                       : ::zarena_core::checks::fail(__FILE__, __LINE__, #cond, (detail)))
#else
#define ZARENA_ASSERT(cond) static_cast<void>(sizeof(!(cond)))
#define ZARENA_ASSERT_MSG(cond, detail) static_cast<void>(sizeof(!(cond)))
#endif
