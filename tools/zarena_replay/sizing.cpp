#include "sizing.h"

#include <algorithm>
#include <string>

namespace zarena_replay {

namespace {

// The host backend maps the region with MAP_NORESERVE, so an "unlimited" region costs
// address space only; 32 TiB stays well inside a 47-bit user address space.
constexpr uint64_t kUnlimitedCap = 1ull << 45;

}  // namespace

bool smallest_capacity(const zarena_trace::Trace& t, const ReplayConfig& base, SizingResult* out,
                       std::string* error) {
  *out = SizingResult{};
  const uint64_t align = base.alignment;
  uint64_t total = align, largest = align;
  for (const auto& e : t.events) {
    if (e.kind != zarena_trace::Kind::kAlloc) continue;
    const uint64_t a = align_up(e.size, align);
    total = std::min(kUnlimitedCap, total + a);
    largest = std::max(largest, a);
  }

  ReplayConfig c = base;
  c.collect = false;
  c.timeline = false;
  c.stop_at_first_miss = true;
  c.overflow_policy = ZARENA_OVERFLOW_REFUSE;
  c.progress_label = nullptr;
  ReplayResult r;
  auto fits = [&](uint64_t capacity, bool* ok) {
    c.capacity_bytes = capacity;
    ++out->replays;
    if (!replay(t, c, &r, error)) return false;
    *ok = r.misses == 0;
    return true;
  };

  bool ok = false;
  if (!fits(total, &ok)) return false;
  if (!ok) return true;  // not even the sum of every request fits (beyond 32 TiB)
  out->unlimited_top = std::max(r.final_stats.high_water_bytes, align);

  // Invariant: hi fits; every capacity below lo is known not to (or is below the
  // largest request, which cannot fit).
  uint64_t lo = std::min(largest, out->unlimited_top) / align;
  uint64_t hi = out->unlimited_top / align;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (!fits(mid * align, &ok)) return false;
    if (ok) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  out->found = true;
  out->capacity_bytes = hi * align;
  return true;
}

}  // namespace zarena_replay
