// Step plans, the pure planner: one step's allocations in, an offset for each of them out,
// with the data that lets a runtime hand those offsets out safely without any search.
// Depends on src/base/ and the standard library only; nothing here touches an arena.
//
// THE MODEL
// A step makes n allocations, numbered i = 0..n-1 in order ("items"). Each item has a
// size (bytes, > 0, a multiple of the request's granule) and a free point, one of:
//   SameStep(k)  freed in its own step before allocation k of that step, k in [i+1, n]
//                (k = n: after the step's last allocation, before the next step's first);
//   NextStep(k)  freed in the following step before allocation k of that step, k in [0, n];
//   NotPlanned   lives longer than into the next step, or is excluded for another reason
//                (pinned, below the floor): it gets no offset, the runtime serves it
//                dynamically, and nothing below counts it.
//
// Ticks. The plan repeats with a period of P = 1 or 2 steps. Instance (q, i), q in [0, P),
// is item i in the q-th step of the period; its id is q*n + i, which is also the tick at
// which it is allocated. It is live on the ticks [q*n + i, end), its arc, with
// end = q*n + k (SameStep) or (q+1)*n + k (NextStep); a free "before allocation k" means the
// instance is dead at tick k. Ticks lie on a circle of length L = P*n (the plan repeats), so
// an arc may wrap past L; no arc is longer than L. P = 1 is valid exactly when every
// NextStep item has k <= i (it is dead before its own next incarnation is allocated);
// otherwise P = 2: an item still live when its next incarnation is allocated (PyTorch's
// rebinding `loss = model(x)` frees the old loss only after the new one exists) needs two
// offsets, used in alternate steps. The planner picks the smallest valid P.
// Two instances conflict when their arcs share a tick (on the circle). A plan gives every
// instance of a planned item an offset such that conflicting instances never overlap in
// space, and tries to keep the peak (max offset + size) low. The lower bound of any plan is
// the most planned bytes live at one tick.
//
// CHECK LISTS: WHAT MAKES A PLAN SAFE TO REPLAY
// A program does not always free where the plan assumed. The runtime protocol:
//   - one live bit per instance, set when the instance is handed out, cleared at its free;
//   - before handing out planned instance Y (at its tick), every instance in Y's check list
//     must be dead; if one is live, the plan is abandoned for the rest of the step (this
//     and later allocations go to the dynamic engine, outside the plan's bytes);
//   - the plan is taken up (again) only at a step boundary at which no planned instance is
//     live, at either phase q of the period; from there it follows consecutive ticks.
// Definition. Unroll the circle. For a planned instance X with arc [s, e) (s < L, e <= s+L),
// its deadline is the first tick T in [e, s+L] at which a planned instance whose bytes
// overlap X's is allocated (X's own next incarnation, at s+L, always qualifies). X is in the
// check list of the instance allocated at tick T mod L. Every planned instance is in exactly
// one list: checking costs one live-bit read per planned allocation on average.
// Why it suffices. Take a run (the ticks since the plan was taken up) and a tick T at which
// Y's check passes; suppose some live instance Z overlaps Y's bytes. Z was handed out in this
// run, since nothing was live at its start, at its tick t, and T - L <= t < T (a slot is
// handed out once per L ticks; t = T - L only when Z is Y's own slot). Z's arc is [t, u) with
// u <= t + L. If T < u, Z and Y are different instances whose arcs share tick T, so the plan
// put them in disjoint bytes: impossible. So u <= T <= t + L, and Y is a planned allocation
// in that window over Z's bytes: Z's deadline D is in [u, T], inside this run. At D, Z was in
// the checked list and was dead (else the run would have ended at D; D = T is Y's own check).
// Once dead, Z's slot becomes live again only when handed out again, at t + L >= T, that is
// after Y's check. So Z is not live at T. Nothing here depends on where the run starts on
// the circle: the wrap and either phase of a period of 2 are covered, and frees earlier than
// planned or in another order only make instances dead sooner. The one assumption is that
// a run starts with nothing planned live: an instance live across an abandoned stretch may
// have missed its deadline's check (tests/test_plan.cpp shows such a replay going wrong).
// docs/PLANS.md has the longer version, and what the dynamic engine must stay clear of.
//
// THE INTERFACE
// All functions are pure: no global state, reentrant, safe from any thread; none throws
// (an allocation failure comes back as Status::kOutOfMemory). Outputs are written only on
// success. Time: per planned instance, plan_step reads and writes O(log N) byte-range unions
// (N = P*n instances); docs/PERFORMANCE.md has measured times (100k allocations: 0.34 s
// with a period of 1, 0.92 s with 2, on the 2-core development machine). PlanLimits bounds n.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace zarena_core {
namespace plan {

enum class FreeKind : uint8_t { kSameStep = 0, kNextStep = 1, kNotPlanned = 2 };

// One allocation of the step. `free_before` is k of SameStep(k)/NextStep(k), unused for
// NotPlanned.
struct StepItem {
  uint64_t size = 0;
  uint32_t free_before = 0;
  FreeKind free_kind = FreeKind::kNotPlanned;

  static StepItem same_step(uint64_t size, uint32_t k) { return {size, k, FreeKind::kSameStep}; }
  static StepItem next_step(uint64_t size, uint32_t k) { return {size, k, FreeKind::kNextStep}; }
  static StepItem not_planned(uint64_t size) { return {size, 0, FreeKind::kNotPlanned}; }
};

// Bytes [offset, offset + size) from the plan's base that are taken at every tick (live
// blocks the plan must lay out around: a runtime's long-lived blocks in the window it gives
// the plan). No planned instance overlaps one; they count in neither the peak nor the lower
// bound.
struct ByteRange {
  uint64_t offset = 0;
  uint64_t size = 0;
};

// A block live when the plan's first step begins and freed in that step before allocation
// `until` (a runtime's block of the learned step still live at its end: a gradient freed
// early in the next step), at bytes [offset, offset + size) from the plan's base. Its bytes
// are taken for the instances the first step (phase 0) allocates before `until` only: no
// such instance overlaps it, every later one may (the runtime hands those out only once it
// has seen the block freed, docs/PLANS.md "Leftovers"). Counts in neither the peak nor the
// lower bound.
struct Leftover {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t until = 0;  // in [0, n]
};

// The step to plan: a view of the caller's items (not copied, not kept after the call).
struct StepRequest {
  const StepItem* items = nullptr;
  uint32_t count = 0;
  uint64_t granule = 256;  // a power of two; every size a multiple of it, so every offset too
  // Obstacles: sorted by offset, disjoint, offsets and sizes multiples of the granule.
  const ByteRange* obstacles = nullptr;
  uint32_t obstacle_count = 0;
  // Leftovers: sorted by offset, disjoint, offsets and sizes multiples of the granule.
  const Leftover* leftovers = nullptr;
  uint32_t leftover_count = 0;
};

// Bounds on the work a call may do. A step beyond them is refused with kUnsupported.
struct PlanLimits {
  uint32_t max_items = 1u << 20;  // n; never above kMaxItems whatever is set here
};
inline constexpr uint32_t kMaxItems = 1u << 29;  // unrolled ticks (< 2*P*n) stay below 2^31

// How each instance is placed. Both take the instances largest first (ties: longer arc,
// then earlier start, then lower id) and put each clear of every placed instance it
// conflicts with. kGreedyBySize: at the lowest offset that fits (TFLite's and Pisarchyk &
// Lee's greedy by size). kBestFitGap: in the smallest gap between the conflicting placed
// instances that fits (the lowest of equal ones), else above them all. Greedy by size is
// the default: it did better on every benchmark trace (docs/PERFORMANCE.md).
enum class Placement : uint8_t { kGreedyBySize = 0, kBestFitGap = 1 };

inline constexpr uint64_t kNoOffset = ~uint64_t{0};

// A plan: arrays indexed by instance id q*n + i (i the item, q the step in the period).
struct OffsetPlan {
  uint32_t period_steps = 0;  // P, 1 or 2
  uint32_t step_items = 0;    // n
  uint64_t peak_bytes = 0;    // max offset + size: the bytes the plan needs from its base
  uint64_t lower_bound_bytes = 0;
  // offsets[id]: bytes from the plan's base; kNoOffset for the instances of NotPlanned items.
  std::vector<uint64_t> offsets;
  // The check lists in CSR form: the instances to find dead before handing out `id` are
  // check_ids[check_begin[id] .. check_begin[id + 1]). P*n + 1 entries in check_begin;
  // each planned instance appears exactly once in check_ids, lists in ascending id order.
  std::vector<uint32_t> check_begin;
  std::vector<uint32_t> check_ids;

  uint32_t instances() const { return period_steps * step_items; }
};

// The items are well formed (sizes, free points, granule) and within the limits. kOk, or
// kInvalidArgument / kUnsupported naming the first offending item.
Result validate_request(const StepRequest& request, const PlanLimits& limits) noexcept;

// The smallest valid period of a valid request (1 or 2).
uint32_t period_steps(const StepRequest& request) noexcept;

// The most planned bytes live at one tick of the circle: no plan can need less.
Result lower_bound_bytes(const StepRequest& request, uint64_t* bytes) noexcept;

// Plans the step: period, offsets, peak, lower bound and check lists. On failure `*plan`
// is left as it was.
Result plan_step(const StepRequest& request, const PlanLimits& limits, OffsetPlan* plan,
                 Placement placement = Placement::kGreedyBySize) noexcept;

// Checks a plan against the request and the definitions above: the period, the offsets
// (granule, one per planned instance, none for the others), peak and lower bound, that no
// planned instance overlaps an obstacle, nor a leftover it is allocated before, that no two
// conflicting instances overlap in space, and that the check lists are exactly the definition's.
// Returns "" or a sentence naming the first violation found. kSweep runs in O(N log N) (100k items
// in well under a second); kBruteForce compares every pair and scans every deadline (O(N^2), for
// small N and as a second opinion on kSweep).
enum class VerifyMode : uint8_t { kSweep = 0, kBruteForce = 1 };
std::string verify_plan(const StepRequest& request, const OffsetPlan& plan,
                        VerifyMode mode = VerifyMode::kSweep) noexcept;

}  // namespace plan
}  // namespace zarena_core
