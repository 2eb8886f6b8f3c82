#include "steps.h"

#include <set>
#include <unordered_map>

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

StepPlan find_plan_steps(const zarena_trace::Trace& t, uint64_t* period) {
  *period = 0;
  StepPlan steps = find_steps(t);
  if (steps.method == "step_begin" || steps.method == "boundaries") return steps;
  const auto& ev = t.events;
  // The requests, and the bytes live just before each.
  std::vector<uint64_t> sizes, where, live_before;
  std::unordered_map<uint64_t, uint64_t> live;
  uint64_t live_bytes = 0;
  for (uint64_t i = 0; i < ev.size(); ++i) {
    const Event& e = ev[i];
    const uint64_t key = (e.addr << 1) | ((e.flags & zarena_trace::kAddrRaw) != 0 ? 1 : 0);
    if (e.kind == Kind::kAlloc && e.size > 0) {
      sizes.push_back(e.size);
      where.push_back(i);
      live_before.push_back(live_bytes);
      if (e.status == 0) {  // ZARENA_OK
        live[key] = e.size;
        live_bytes += e.size;
      }
    } else if (e.kind == Kind::kFree) {
      auto it = live.find(key);
      if (it != live.end()) {
        live_bytes -= it->second;
        live.erase(it);
      }
    } else if (e.kind == Kind::kReset) {
      live.clear();
      live_bytes = 0;
    }
  }
  StepPlan none;
  none.method = "none";
  const size_t n = sizes.size();
  if (n < 32) return none;
  // The smallest period of the second half (prefix function: p = L - border).
  const size_t L = n / 2;
  const uint64_t* s = sizes.data() + (n - L);
  std::vector<size_t> pi(L, 0);
  for (size_t i = 1, k = 0; i < L; ++i) {
    while (k > 0 && s[i] != s[k]) k = pi[k - 1];
    if (s[i] == s[k]) ++k;
    pi[i] = k;
  }
  const size_t p = L - pi[L - 1];
  if (p == 0 || 3 * p > L) return none;  // fewer than three repeats: no steps to learn
  if (std::set<uint64_t>(s, s + p).size() < 2) return none;  // one size: no shape
  size_t from = n - L;
  while (from > 0 && sizes[from - 1] == sizes[from - 1 + p]) --from;
  size_t best = 0;
  for (size_t phi = 1; phi < p; ++phi) {
    if (live_before[from + phi] < live_before[from + best]) best = phi;
  }
  StepPlan out;
  out.method = "period";
  for (size_t k = from + best; k < n; k += p) out.starts.push_back(where[k]);
  *period = p;
  return out;
}

}  // namespace zarena_replay
