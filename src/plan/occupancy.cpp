// The time x space occupancy of placed instances (occupancy.h).
#include "plan/occupancy.h"

#include <algorithm>
#include <limits>

namespace zarena_core {
namespace plan {

bool SpanUnion::add(uint64_t begin, uint64_t end) {
  // The first span that ends at or after `begin`: the first that overlaps or touches.
  auto lo = std::lower_bound(spans_.begin(), spans_.end(), begin,
                             [](const Span& s, uint64_t v) { return s.end < v; });
  if (lo == spans_.end() || lo->begin > end) {
    spans_.insert(lo, Span{begin, end});
    return true;
  }
  if (lo->begin <= begin && lo->end >= end) return false;  // already covered: the common case
  auto hi = std::upper_bound(lo, spans_.end(), end,
                             [](uint64_t v, const Span& s) { return v < s.begin; });
  lo->begin = std::min(lo->begin, begin);
  lo->end = std::max((hi - 1)->end, end);
  spans_.erase(lo + 1, hi);
  return true;
}

SpanUnion::Fit SpanUnion::first_fit(uint64_t y, uint64_t size) const {
  auto it = std::upper_bound(spans_.begin(), spans_.end(), y,
                             [](uint64_t v, const Span& s) { return v < s.end; });
  for (; it != spans_.end() && it->begin < y + size; ++it) y = it->end;
  return {y, it == spans_.end() ? std::numeric_limits<uint64_t>::max() : it->begin};
}

Occupancy::Occupancy(uint32_t ticks) : leaves_(1) {
  while (leaves_ < ticks) leaves_ *= 2;
  own_.assign(2 * size_t{leaves_}, 0);
  sub_.assign(2 * size_t{leaves_}, 0);
  stamp_.assign(2 * size_t{leaves_}, 0);
  unions_.emplace_back();
}

uint32_t Occupancy::slot(uint32_t* index) {
  if (*index == 0) {
    *index = static_cast<uint32_t>(unions_.size());
    unions_.emplace_back();
  }
  return *index;
}

void Occupancy::select(const TickRange* ranges, int count) {
  canonical_.clear();
  ancestors_.clear();
  if (++select_count_ == 0) {  // the stamps wrapped: forget them all
    std::fill(stamp_.begin(), stamp_.end(), 0);
    select_count_ = 1;
  }
  for (int x = 0; x < count; ++x) {
    for (uint32_t l = ranges[x].begin + leaves_, r = ranges[x].end + leaves_; l < r;
         l >>= 1, r >>= 1) {
      if (l & 1) canonical_.push_back(l++);
      if (r & 1) canonical_.push_back(--r);
    }
  }
  // Canonical nodes head disjoint subtrees, so none is another's ancestor; a walk up stops
  // where an earlier one already went.
  for (uint32_t c : canonical_) {
    for (uint32_t p = c >> 1; p != 0 && stamp_[p] != select_count_; p >>= 1) {
      stamp_[p] = select_count_;
      ancestors_.push_back(p);
    }
  }
}

void Occupancy::collect_queried(const SpanUnion* also) {
  queried_.clear();
  for (uint32_t c : canonical_) {
    if (sub_[c] != 0) queried_.push_back(&unions_[sub_[c]]);
  }
  for (uint32_t u : ancestors_) {
    if (own_[u] != 0) queried_.push_back(&unions_[own_[u]]);
  }
  if (also != nullptr && !also->spans().empty()) queried_.push_back(also);
}

uint64_t Occupancy::lowest_fit(uint64_t size, const SpanUnion* also) {
  collect_queried(also);
  // Raise y to each union's first fit in turn until every union agrees: each step only
  // skips offsets one union rules out, so the first y all accept is the lowest. A union's
  // last answer also says how far above it stays clear; while y still fits below that,
  // it agrees without being asked again.
  const size_t m = queried_.size();
  clear_.assign(m, SpanUnion::Fit{0, 0});
  uint64_t y = 0;
  for (size_t agree = 0, i = 0; agree < m; i = (i + 1 == m) ? 0 : i + 1) {
    SpanUnion::Fit& known = clear_[i];
    if (y < known.at || y + size > known.clear_to) {
      known = queried_[i]->first_fit(y, size);
      if (known.at != y) {
        y = known.at;
        agree = 1;
        continue;
      }
    }
    ++agree;
  }
  return y;
}

uint64_t Occupancy::best_fit(uint64_t size, const SpanUnion* also) {
  collect_queried(also);
  scratch_.clear();
  for (const SpanUnion* u : queried_) {
    const auto& spans = u->spans();
    scratch_.insert(scratch_.end(), spans.begin(), spans.end());
  }
  std::sort(scratch_.begin(), scratch_.end(),
            [](const SpanUnion::Span& a, const SpanUnion::Span& b) { return a.begin < b.begin; });
  uint64_t covered_to = 0;  // the union of the spans so far ends here
  uint64_t best = 0, best_gap = std::numeric_limits<uint64_t>::max();
  bool found = false;
  for (const auto& s : scratch_) {
    if (s.begin > covered_to) {
      const uint64_t gap = s.begin - covered_to;
      if (gap >= size && gap < best_gap) {
        best = covered_to;
        best_gap = gap;
        found = true;
      }
    }
    covered_to = std::max(covered_to, s.end);
  }
  return found ? best : covered_to;
}

void Occupancy::take(uint64_t offset, uint64_t size) {
  const uint64_t end = offset + size;
  for (uint32_t c : canonical_) {
    // A leaf's own union equals its sub union; only inner nodes' own unions are read.
    if (c < leaves_) own(c).add(offset, end);
    // sub(parent) contains sub(child): once a union up the path already holds the bytes,
    // every one above it does too.
    for (uint32_t v = c; v != 0 && sub(v).add(offset, end); v >>= 1) {
    }
  }
}

}  // namespace plan
}  // namespace zarena_core
