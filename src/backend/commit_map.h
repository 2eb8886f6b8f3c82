// Which ranges of an expandable region are committed, and the rules every backend applies
// to commit and decommit requests. Both backends share it so that the host backend refuses
// exactly what the CUDA backend must refuse (a decommit that would split a mapping), and
// an engine that breaks the contract fails in CI rather than only on a GPU.
// Not thread-safe: commit/decommit are serialised by the engine (see backend.h), which
// reads the map (Backend::commit_map) under the same serialisation.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "base/status.h"

namespace zarena_core {

class CommitMap {
 public:
  struct Range {
    uint64_t offset = 0;
    uint64_t bytes = 0;
    uint64_t handle = 0;  // what the backend needs to give the range back (CUDA: the handle)
  };

  // Starts over for a region whose committable range is [0, limit); limit is a multiple
  // of granularity (a power of two).
  void reset(uint64_t limit, uint64_t granularity);

  // kInvalidArgument (with the reason) unless [offset, offset+bytes) is non-empty,
  // granular, inside the region and overlaps no committed range.
  Result check_commit(uint64_t offset, uint64_t bytes) const;
  // kInvalidArgument unless [offset, offset+bytes) is exactly a run of adjacent committed
  // ranges; on success *covered holds them in address order.
  Result check_decommit(uint64_t offset, uint64_t bytes, std::vector<Range>* covered) const;

  // Records a range check_commit accepted. Returns false (nothing recorded) when the host
  // is out of memory.
  bool add(const Range& r) noexcept;
  void remove(uint64_t offset) noexcept;
  // Calls release(range) for every committed range in address order, then forgets them
  // all (release_region). Allocates nothing, so it is safe on noexcept paths.
  template <class F>
  void drain(F&& release) noexcept {
    for (const auto& kv : ranges_) release(kv.second);
    ranges_.clear();
    committed_ = 0;
  }

  uint64_t committed_bytes() const { return committed_; }
  // The end of the highest committed range (0: none). The engine commits upwards from 0
  // and decommits from the top, so [0, end()) is committed.
  uint64_t end() const;
  // The highest committed range; false when none.
  bool highest(Range* out) const;
  uint64_t limit() const { return limit_; }
  uint64_t granularity() const { return granularity_; }

 private:
  std::map<uint64_t, Range> ranges_;  // by offset
  uint64_t limit_ = 0;
  uint64_t granularity_ = 1;
  uint64_t committed_ = 0;
};

}  // namespace zarena_core
