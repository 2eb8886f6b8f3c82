#include "epoch_stats.h"

#include <tuple>

namespace zarena_replay {

bool EpochStats::operator==(const EpochStats& o) const {
  auto t = [](const EpochStats& e) {
    return std::tie(e.epoch, e.first_event, e.events, e.allocs, e.peak_top, e.peak_live,
                    e.overflow_allocs, e.overflow_bytes, e.refused, e.free_bytes_at_peak,
                    e.largest_free_at_peak);
  };
  return t(*this) == t(o);
}

EpochCollector::EpochCollector(const zarena_stats& initial) : prev_(initial) {
  EpochStats e;
  e.epoch = initial.epoch;
  e.peak_top = top_of(initial);
  e.peak_live = live_of(initial);
  epochs_.push_back(e);
}

void EpochCollector::observe(const zarena_stats& s) {
  EpochStats& e = epochs_.back();
  ++e.events;
  ++calls_;
  const uint64_t top = top_of(s);
  if (top > e.peak_top) {
    e.peak_top = top;
    e.free_bytes_at_peak = s.free_list_bytes;
    e.largest_free_at_peak = s.largest_free_block_bytes;
  }
  const uint64_t live = live_of(s);
  if (live > e.peak_live) e.peak_live = live;
  prev_ = s;
}

Outcome EpochCollector::after_alloc(const zarena_stats& s, zarena_status status, uint64_t aligned) {
  EpochStats& e = epochs_.back();
  ++e.allocs;
  Outcome o;
  if (status != ZARENA_OK) {
    ++e.refused;
    o = Outcome::kRefused;
  } else if (s.overflow_allocs > prev_.overflow_allocs) {
    ++e.overflow_allocs;
    e.overflow_bytes += aligned;
    o = Outcome::kOverflow;
  } else if (s.reuses > prev_.reuses) {
    o = Outcome::kReuse;
  } else {
    o = Outcome::kBump;
  }
  observe(s);
  return o;
}

void EpochCollector::after_reset(const zarena_stats& s) {
  ++epochs_.back().events;
  ++calls_;
  EpochStats e;
  e.epoch = s.epoch;
  e.first_event = calls_;
  e.peak_top = top_of(s);
  e.peak_live = live_of(s);
  epochs_.push_back(e);
  prev_ = s;
}

void EpochCollector::after_other(const zarena_stats& s) { observe(s); }

}  // namespace zarena_replay
