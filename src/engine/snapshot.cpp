#include "engine/snapshot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "base/human_bytes.h"
#include "engine/tags.h"

namespace zarena_core {

namespace {
constexpr size_t kTopTags = 3;

// The region's live blocks include the zone's (a stats snapshot sees the blocks and the
// zone together).
bool zone_counted(const ArenaSnapshot& s) {
  return s.plan_zone_block != 0 && s.region.live_count >= s.plan_zone_blocks &&
         s.region.live_bytes >= s.plan_zone_block;
}
}  // namespace

UserLive region_user_live(const ArenaSnapshot& s) {
  UserLive u{s.region.live_bytes, s.region.live_count};
  if (zone_counted(s)) {
    u.bytes = u.bytes - s.plan_zone_block + s.plan.live_bytes;
    u.count = u.count - s.plan_zone_blocks + s.plan.live_count;
  }
  return u;
}

void fill_stats(const ArenaSnapshot& s, const DiagnosisCounters& d, zarena_stats* out) {
  const RegionSnapshot& r = s.region;
  const OverflowStats& o = s.overflow;
  std::memset(out, 0, sizeof *out);
  out->struct_size = sizeof(zarena_stats);
  out->capacity_bytes = s.capacity;
  out->used_bytes = r.live_bytes;
  out->floor_bytes = r.floor;
  out->high_water_bytes = r.sum.high_water;
  out->epoch = r.epoch;
  out->epoch_allocs = r.sum.epoch_allocs;
  out->epoch_max_alloc_bytes = r.sum.epoch_max_alloc;
  out->epoch_high_water_bytes = r.sum.epoch_high_water;
  out->hits = r.sum.hits;
  out->misses = r.sum.misses;
  out->reuses = r.sum.reuses;
  out->resets = s.resets;
  out->free_list_len = r.free_count;
  out->free_list_bytes = r.free_bytes;
  out->largest_free_block_bytes = r.largest_free;
  out->live_allocs = r.live_count + o.live_count;
  out->stale_frees = r.sum.stale_frees;
  out->invalid_frees = r.sum.invalid_frees;
  out->overflow_allocs = o.allocs;
  out->overflow_live_bytes = o.live_bytes;
  out->overflow_peak_bytes = o.peak_bytes;
  out->overflow_max_latency_ns = o.max_latency_ns;
  out->overflow_reclaimed = o.reclaimed;
  out->overflow_failures = o.failures;
  out->pinned_bytes = r.pinned_bytes + o.pinned_bytes;
  out->pinned_blocks = r.pinned_blocks + o.pinned_blocks;
  out->pin_retained_bytes = r.pin_retained_bytes;
  out->deferred_frees = r.deferred_frees + o.deferred_frees;
  out->overflow_deferred_gives = o.deferred_gives;
  out->poison_fills = r.sum.poison_fills + s.overflow_fills;
  out->poison_skipped = r.sum.poison_skipped;
  out->top_bytes = r.top;
  out->committed_bytes = s.committed_bytes;
  out->commit_events = s.commit_events;
  out->trim_events = s.trim_events;
  out->commit_failures = s.commit_failures;
  out->steps = s.steps;
  out->epoch_steps = s.epoch_steps;
  out->overflow_epochs = d.overflow_epochs;
  out->overflow_records = d.overflow_records;
  out->overflow_summaries = d.overflow_summaries;
  // The ended epochs' highest need, or this one's so far.
  out->needed_bytes = std::max(d.needed_bytes, r.sum.epoch_high_water + o.epoch_peak_bytes);
  out->used_peak_bytes = r.used_peak;
  out->pinned_peak_bytes = s.pinned_peak;
  // Rounding up keeps the order of sizes, so the largest aligned block is the largest
  // request's (overflow blocks are aligned the same way).
  out->epoch_max_alloc_aligned_bytes =
      (r.sum.epoch_max_alloc + s.alignment - 1) / s.alignment * s.alignment;
  out->overflow_live_blocks = o.live_count;
  // The zone is pinned region blocks; to the user, the planned blocks live in it are.
  const PlanStats& p = s.plan;
  const uint64_t zb = s.plan_zone_blocks;
  if (zone_counted(s) && out->pinned_bytes >= s.plan_zone_block && out->pinned_blocks >= zb) {
    const UserLive u = region_user_live(s);
    out->used_bytes = u.bytes;
    out->live_allocs = u.count + o.live_count;
    out->pinned_bytes -= s.plan_zone_block;
    out->pinned_blocks -= zb;
  }
  // The planned blocks the user pinned (the zone's own pin, above, is none of the user's).
  out->pinned_bytes += p.pinned_bytes;
  out->pinned_blocks += p.pinned_count;
  out->poison_fills += s.plan_fills;
  out->poison_skipped += s.poison_skips;
  out->deferred_frees += p.deferred;
  out->plan_steps = p.steps;
  out->plan_hits = p.hits;
  out->plan_misses = p.misses;
  out->plan_first_miss = p.first_miss;
  out->plans_learned = p.learned;
  out->plan_bytes = p.peak_bytes;
  out->plan_lower_bound_bytes = p.lower_bound_bytes;
  out->plan_zone_bytes = s.plan_zone_block;
  out->plan_live_bytes = p.live_bytes;
}

ExhaustionFacts exhaustion_facts(const ArenaSnapshot& s, const char* path, uint64_t size,
                                 uint64_t aligned, bool commit_failed,
                                 const std::string& commit_error) {
  const RegionSnapshot& r = s.region;
  ExhaustionFacts f;
  f.path = path;
  f.requested_bytes = size;
  f.aligned_bytes = aligned;
  f.capacity_bytes = s.capacity;
  f.offset_bytes = r.top;
  f.floor_bytes = r.floor;
  const UserLive u = region_user_live(s);
  f.used_bytes = u.bytes;
  f.overflow_live_bytes = s.overflow.live_bytes;
  f.live_count = u.count + s.overflow.live_count;
  f.epoch = r.epoch;
  f.epoch_allocs = r.sum.epoch_allocs;
  f.plan_hits = s.plan.hits;
  f.epoch_max_alloc_bytes = r.sum.epoch_max_alloc;
  f.step_max_alloc_bytes = r.sum.step_max_alloc;
  f.hits = r.sum.hits;
  f.misses = r.sum.misses;
  f.reuses = r.sum.reuses;
  f.resets = s.resets;
  f.free_list_len = r.free_count;
  f.free_list_bytes = r.free_bytes;
  f.largest_free_block_bytes = r.largest_free;
  f.epoch_peak_bytes = r.sum.epoch_high_water > r.floor ? r.sum.epoch_high_water - r.floor : 0;
  f.committed_bytes = s.committed_bytes;
  if (commit_failed) {
    f.commit_failed = true;
    const size_t n = std::min(commit_error.size(), sizeof f.commit_error - 1);
    std::memcpy(f.commit_error, commit_error.data(), n);
    f.commit_error[n] = 0;
  }
  return f;
}

EpochEnd epoch_end(const ArenaSnapshot& s) {
  EpochEnd e;
  e.epoch = s.region.epoch;
  e.allocs = s.region.sum.epoch_allocs;
  e.high_water = s.region.sum.epoch_high_water;
  e.floor = s.region.floor;
  e.reuses_total = s.region.sum.reuses;
  e.overflow_allocs_total = s.overflow.allocs;
  e.overflow_peak = s.overflow.epoch_peak_bytes;
  e.steps = s.epoch_steps;
  e.plan_hits_total = s.plan.hits;
  return e;
}

StepCounters step_counters(const ArenaSnapshot& s) {
  StepCounters c;
  c.epoch = s.region.epoch;
  c.epoch_allocs = s.region.sum.epoch_allocs;
  c.plan_hits = s.plan.hits;
  c.resets = s.resets;
  const UserLive u = region_user_live(s);
  c.live_bytes = u.bytes + s.overflow.live_bytes;
  c.live_count = u.count + s.overflow.live_count;
  c.top = s.region.sum.epoch_high_water;
  return c;
}

std::string top_tags_text(const ArenaSnapshot& s) {
  std::vector<std::pair<uint32_t, uint64_t>> top = s.tag_bytes;
  std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::string out;
  for (size_t i = 0; i < top.size() && i < kTopTags; ++i) {
    out += fmt::format("{}{} {}", i == 0 ? "" : ", ", tag_name(top[i].first),
                       human_bytes(top[i].second));
  }
  return out;
}

}  // namespace zarena_core
