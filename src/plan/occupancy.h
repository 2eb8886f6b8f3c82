// Where placed instances sit in time and space, for the placement loop of plan_step: which
// offsets are free over a range of ticks, without visiting every conflicting instance.
//
// A segment tree over the ticks of the circle. A placed instance's arc is split into its
// canonical nodes (O(log L) of them); each node keeps two unions of byte ranges:
//   own(v): the instances with v among their canonical nodes (they cover v's whole range);
//   sub(v): the instances with a canonical node in v's subtree (they touch v's range).
// The bytes occupied at some tick of an arc are then the union of sub(c) over the arc's
// canonical nodes c and own(u) over their ancestors u: an instance that touches the arc
// either has a canonical node under some c or covers a whole c from an ancestor. So a query
// reads O(log L) unions. Unions merge touching ranges, and a packing being dense, they stay
// short: the work per placement does not grow with the number of conflicting instances.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/instances.h"

namespace zarena_core {
namespace plan {

// Byte ranges [begin, end), sorted, disjoint and not touching.
class SpanUnion {
 public:
  struct Span {
    uint64_t begin;
    uint64_t end;
  };
  // Offsets [at, clear_to) touch no span.
  struct Fit {
    uint64_t at;
    uint64_t clear_to;
  };
  // Returns false when the union already held [begin, end).
  bool add(uint64_t begin, uint64_t end);
  // The lowest offset at >= y with [at, at + size) clear of every span, and how far above
  // it the union stays clear.
  Fit first_fit(uint64_t y, uint64_t size) const;
  const std::vector<Span>& spans() const { return spans_; }

 private:
  std::vector<Span> spans_;
};

class Occupancy {
 public:
  explicit Occupancy(uint32_t ticks);

  // Selects the tick ranges (an arc's, plan/instances.h) the next calls query and fill.
  void select(const TickRange* ranges, int count);
  // The lowest offset clear of every instance placed over the selected ticks (and of
  // `also`'s spans, when given: the leftovers the instance must avoid).
  uint64_t lowest_fit(uint64_t size, const SpanUnion* also = nullptr);
  // The smallest gap between the instances placed over the selected ticks (and `also`'s
  // spans) that fits (lowest of equals), else the offset just above them all.
  uint64_t best_fit(uint64_t size, const SpanUnion* also = nullptr);
  // Records bytes [offset, offset + size) as taken over the selected ticks.
  void take(uint64_t offset, uint64_t size);

 private:
  SpanUnion& own(uint32_t node) { return unions_[slot(&own_[node])]; }
  SpanUnion& sub(uint32_t node) { return unions_[slot(&sub_[node])]; }
  uint32_t slot(uint32_t* index);
  void collect_queried(const SpanUnion* also);

  uint32_t leaves_;                // a power of two >= the ticks; leaf of tick t: leaves_ + t
  std::vector<uint32_t> own_;      // node -> index in unions_, 0 = empty
  std::vector<uint32_t> sub_;      // likewise
  std::vector<SpanUnion> unions_;  // [0] stays empty
  std::vector<uint32_t> stamp_;    // per node: the select() call that last listed it
  uint32_t select_count_ = 0;
  std::vector<uint32_t> canonical_;        // the selected ranges' canonical nodes
  std::vector<uint32_t> ancestors_;        // their strict ancestors, each once
  std::vector<const SpanUnion*> queried_;  // the non-empty unions a query reads
  std::vector<SpanUnion::Fit> clear_;      // per queried union, its last answer
  std::vector<SpanUnion::Span> scratch_;
};

}  // namespace plan
}  // namespace zarena_core
