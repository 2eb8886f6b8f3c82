#include "backend/commit_map.h"

#include <fmt/format.h>

#include <iterator>
#include <new>
#include <string>
#include <utility>

namespace zarena_core {

void CommitMap::reset(uint64_t limit, uint64_t granularity) {
  ranges_.clear();
  limit_ = limit;
  granularity_ = granularity == 0 ? 1 : granularity;
  committed_ = 0;
}

Result CommitMap::check_commit(uint64_t offset, uint64_t bytes) const {
  if (bytes == 0 || offset % granularity_ != 0 || bytes % granularity_ != 0) {
    return Result::fail(Status::kInvalidArgument,
                        fmt::format("commit [{}, +{}) is not a non-empty multiple of the "
                                    "commit granularity {}",
                                    offset, bytes, granularity_));
  }
  if (offset > limit_ || bytes > limit_ - offset) {
    return Result::fail(Status::kInvalidArgument,
                        fmt::format("commit [{}, +{}) reaches past the region's {} "
                                    "committable bytes",
                                    offset, bytes, limit_));
  }
  // The first range at or after offset, and the one before it, are the only candidates
  // for an overlap.
  auto next = ranges_.lower_bound(offset);
  if (next != ranges_.end() && next->first < offset + bytes) {
    return Result::fail(Status::kInvalidArgument,
                        fmt::format("commit [{}, +{}) overlaps the committed range [{}, +{})",
                                    offset, bytes, next->first, next->second.bytes));
  }
  if (next != ranges_.begin()) {
    const Range& prev = std::prev(next)->second;
    if (prev.offset + prev.bytes > offset) {
      return Result::fail(Status::kInvalidArgument,
                          fmt::format("commit [{}, +{}) overlaps the committed range [{}, +{})",
                                      offset, bytes, prev.offset, prev.bytes));
    }
  }
  return Result::ok();
}

Result CommitMap::check_decommit(uint64_t offset, uint64_t bytes,
                                 std::vector<Range>* covered) const {
  auto refuse = [&](const std::string& why) {
    return Result::fail(Status::kInvalidArgument,
                        fmt::format("decommit [{}, +{}): {} (a decommit must consist of whole "
                                    "committed ranges)",
                                    offset, bytes, why));
  };
  if (bytes == 0) return refuse("empty range");
  if (offset > limit_ || bytes > limit_ - offset) return refuse("reaches past the region");
  std::vector<Range> run;
  uint64_t at = offset;
  const uint64_t end = offset + bytes;
  auto it = ranges_.find(offset);
  if (it == ranges_.end()) return refuse(fmt::format("no committed range starts at {}", offset));
  while (at < end) {
    if (it == ranges_.end() || it->first != at) {
      return refuse(fmt::format("offset {} is not committed", at));
    }
    if (it->second.bytes > end - at) {
      return refuse(
          fmt::format("it would split the committed range [{}, +{})", it->first, it->second.bytes));
    }
    run.push_back(it->second);
    at += it->second.bytes;
    ++it;
  }
  *covered = std::move(run);
  return Result::ok();
}

bool CommitMap::add(const Range& r) noexcept {
  try {
    ranges_.emplace(r.offset, r);
  } catch (const std::bad_alloc&) {
    return false;
  }
  committed_ += r.bytes;
  return true;
}

uint64_t CommitMap::end() const {
  if (ranges_.empty()) return 0;
  const Range& r = ranges_.rbegin()->second;
  return r.offset + r.bytes;
}

bool CommitMap::highest(Range* out) const {
  if (ranges_.empty()) return false;
  *out = ranges_.rbegin()->second;
  return true;
}

void CommitMap::remove(uint64_t offset) noexcept {
  auto it = ranges_.find(offset);
  if (it == ranges_.end()) return;
  committed_ -= it->second.bytes;
  ranges_.erase(it);
}

}  // namespace zarena_core
