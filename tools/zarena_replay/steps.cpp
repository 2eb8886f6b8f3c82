#include "steps.h"

#include <set>

namespace zarena_replay {

using zarena_trace::Event;
using zarena_trace::Kind;

namespace {

// Requests that open a step: long enough that a chance match among varied sizes is
// unlikely, short enough for small steps (the engine's cadence detector uses 8 too).
constexpr size_t kAnchorLen = 8;

bool any_boundary_before(const std::vector<Event>& ev, uint64_t end) {
  for (uint64_t i = 0; i < end && i < ev.size(); ++i) {
    if (ev[i].kind == Kind::kBoundary) return true;
  }
  return false;
}

// Starts of the occurrences (non-overlapping, KMP) of the request-size sequence that
// opens at allocation number first among allocs. Returns event indices.
std::vector<uint64_t> repeats_from(const std::vector<uint64_t>& sizes,
                                   const std::vector<uint64_t>& where, size_t first) {
  if (first + kAnchorLen > sizes.size()) return {};
  const uint64_t* anchor = sizes.data() + first;
  // A run of one size matches everywhere: it says nothing about steps.
  if (std::set<uint64_t>(anchor, anchor + kAnchorLen).size() < 2) return {};
  size_t fail[kAnchorLen] = {0};
  for (size_t i = 1, k = 0; i < kAnchorLen; ++i) {
    while (k > 0 && anchor[i] != anchor[k]) k = fail[k - 1];
    if (anchor[i] == anchor[k]) ++k;
    fail[i] = k;
  }
  std::vector<uint64_t> starts;
  for (size_t i = first, k = 0; i < sizes.size(); ++i) {
    while (k > 0 && sizes[i] != anchor[k]) k = fail[k - 1];
    if (sizes[i] == anchor[k]) ++k;
    if (k == kAnchorLen) {
      starts.push_back(where[i + 1 - kAnchorLen]);
      k = 0;
    }
  }
  return starts;
}

}  // namespace

StepPlan find_steps(const zarena_trace::Trace& t) {
  const auto& ev = t.events;
  StepPlan plan;
  std::vector<uint64_t> begins, boundaries;
  for (uint64_t i = 0; i < ev.size(); ++i) {
    if (ev[i].kind == Kind::kStepBegin) begins.push_back(i);
    if (ev[i].kind == Kind::kBoundary) boundaries.push_back(i);
  }
  if (begins.size() >= 2) {
    plan.method = "step_begin";
    plan.starts = begins;
    plan.boundary_before_first = !any_boundary_before(ev, begins.front());
    return plan;
  }
  if (boundaries.size() >= 3) {
    // The first boundary follows the weights; each later one ends a step.
    plan.method = "boundaries";
    for (uint64_t b : boundaries) {
      if (b + 1 < ev.size()) plan.starts.push_back(b + 1);
    }
    plan.drop_boundaries_after_first = true;
    return plan;
  }

  // Request sizes after the last boundary (what came before it survives anyway).
  const uint64_t from = boundaries.empty() ? 0 : boundaries.back() + 1;
  std::vector<uint64_t> sizes, where;
  size_t first_after_free = 0;
  bool seen_free = false;
  for (uint64_t i = from; i < ev.size(); ++i) {
    if (ev[i].kind == Kind::kFree && !seen_free) {
      seen_free = true;
      first_after_free = sizes.size();
    }
    if (ev[i].kind == Kind::kAlloc && ev[i].size > 0) {
      sizes.push_back(ev[i].size);
      where.push_back(i);
    }
  }
  std::vector<uint64_t> starts = repeats_from(sizes, where, 0);
  if (starts.size() < 2 && seen_free) {
    // Weights uploaded without a boundary never recur; the first step's requests come
    // after its first free, and recur in every later step.
    starts = repeats_from(sizes, where, first_after_free);
  }
  if (starts.size() < 2) {
    plan.method = "none";
    return plan;
  }
  plan.method = "repeats";
  plan.starts = starts;
  plan.boundary_before_first = !any_boundary_before(ev, starts.front());
  return plan;
}

}  // namespace zarena_replay
