#include "engine/expandable.h"

#include <algorithm>

namespace zarena_core {

namespace {
uint64_t round_up(uint64_t x, uint64_t to) { return (x + to - 1) / to * to; }
}  // namespace

ExpandableCommits::ExpandableCommits(Backend& backend, Region& region, bool enabled,
                                     uint64_t capacity, uint64_t granularity, uint64_t chunk)
    : backend_(backend),
      region_(region),
      enabled_(enabled),
      granularity_(granularity != 0 ? granularity : 1),
      chunk_(round_up(chunk != 0 ? chunk : granularity_, granularity_)),
      limit_(round_up(capacity, granularity_)),
      committed_bytes_(enabled ? 0 : capacity) {}

bool ExpandableCommits::commit_up_to(uint64_t end, std::string* failure) {
  uint64_t have = backend_.commit_map()->end();
  if (end <= have) return true;
  const uint64_t want = std::min(limit_, round_up(end, chunk_));
  // One backend range per chunk: a trim gives back whole ranges from the top down, so a
  // growth committed as one range (one large allocation) could go back only whole, and
  // not at all while its lowest byte lies under the top (a plan's zone, say).
  Result r;
  bool any = false;
  while (have < want) {
    const uint64_t piece_end = std::min(want, round_up(have + 1, chunk_));
    r = backend_.commit(have, piece_end - have);
    if (!r.is_ok()) break;
    have = piece_end;
    any = true;
  }
  if (!r.is_ok() && have < end) {
    // Less than a whole chunk may still be there.
    const uint64_t exact = std::min(limit_, round_up(end, granularity_));
    if (exact < std::min(want, round_up(have + 1, chunk_))) {  // less than the piece refused
      r = backend_.commit(have, exact - have);
      if (r.is_ok()) {
        have = exact;
        any = true;
      }
    }
  }
  committed_bytes_.store(backend_.commit_map()->end(), std::memory_order_relaxed);
  if (any) commit_events_.fetch_add(1, std::memory_order_relaxed);
  if (have < end) {
    commit_failures_.fetch_add(1, std::memory_order_relaxed);
    if (failure->empty()) *failure = r.message;
    std::lock_guard<SpinLock> lock(failure_mu_);
    last_failure_ = r.message;
    return false;
  }
  return true;
}

bool ExpandableCommits::grow(uint64_t want, uint64_t least, std::string* failure) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool ok = commit_up_to(want, failure) || (least < want && commit_up_to(least, failure));
  // Raised even when both failed: a commit another thread made may cover part of it.
  region_.raise_ceiling(backend_.commit_map()->end());
  return ok;
}

std::string ExpandableCommits::last_failure() const {
  std::lock_guard<SpinLock> lock(failure_mu_);
  return last_failure_;
}

Result ExpandableCommits::trim(uint64_t keep) {
  std::lock_guard<std::mutex> lock(mu_);
  const CommitMap& map = *backend_.commit_map();
  if (map.end() <= keep) return Result::ok();
  const uint64_t floor = region_.lower_ceiling(keep);
  Result failed;
  bool trimmed = false;
  CommitMap::Range top;
  while (map.highest(&top) && top.offset >= floor) {
    failed = backend_.decommit(top.offset, top.bytes);
    if (!failed.is_ok()) break;
    trimmed = true;
  }
  committed_bytes_.store(map.end(), std::memory_order_relaxed);
  if (trimmed) trim_events_.fetch_add(1, std::memory_order_relaxed);
  region_.raise_ceiling(map.end());
  return failed;
}

}  // namespace zarena_core
