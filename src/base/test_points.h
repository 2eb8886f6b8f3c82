// Points in the library where a test may run code of its own, to drive one interleaving
// of threads on purpose (a pin between a zone's unpublishing and its return to the region,
// say) or to count what a path does. Off unless a test sets a hook: one relaxed load and
// a predictable branch, only on cold paths (never an allocation's or a free's).
#pragma once

#include <atomic>

#include "base/checks.h"

namespace zarena_core::test_points {

enum class Point {
  kZoneUnpublished,   // a zone's run no longer answers for it; its pieces are not back yet
  kRegionWalk,        // Region::live_blocks_w walks every block
  kPlanPinChecked,    // PlanRun::pin judged the instance live, before its compare-and-swap
  kPlanUnpinned,      // PlanRun::unpin took a last pin off, before the pin counters follow
  kPlanWalkInstance,  // PlanRun::live_instances between two instances
  kPlanEngaging,      // a new run is about to take its epoch and engage
  kResetEpochMoved,   // a reset moved the region's epoch; the plans' runs follow next
};

using Hook = void (*)(Point, void* ctx);

inline std::atomic<Hook> g_hook{nullptr};
inline std::atomic<void*> g_ctx{nullptr};

// Tests only: hook null removes it. Not thread-safe against a hit in flight.
inline void set(Hook hook, void* ctx) {
  g_ctx.store(ctx, std::memory_order_relaxed);
  g_hook.store(hook, std::memory_order_release);
}

inline void hit(Point p) {
  const Hook h = g_hook.load(std::memory_order_acquire);
  if (ZARENA_UNLIKELY(h != nullptr)) h(p, g_ctx.load(std::memory_order_relaxed));
}

}  // namespace zarena_core::test_points
