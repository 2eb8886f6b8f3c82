// Offset -> block record map used to validate zarena_free. Open addressing with linear
// probing, keyed by the block's start offset. An entry outlives its block: it remembers
// that the offset was handed out, in which epoch, and whether the user freed it, which
// is how a free is classified as double, stale or not owned without touching state.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace zarena_core {

struct OffsetEntry {
  uint64_t key = 0;  // offset + 1; 0 marks an empty slot
  uint64_t epoch = 0;
  uint32_t rec = 0;
  uint32_t stamp = 0;
  bool freed = false;
};

class OffsetTable {
 public:
  // keep(entry) decides, when the table must grow, whether an entry is still worth
  // remembering; the rest are dropped so the table tracks the working set.
  using KeepFn = std::function<bool(const OffsetEntry&)>;

  OffsetTable(uint64_t granule, KeepFn keep);

  OffsetEntry* find(uint64_t offset);
  // Inserts or overwrites the entry for offset; may grow (rarely allocates).
  void upsert(uint64_t offset, uint32_t rec, uint32_t stamp, uint64_t epoch);
  uint64_t size() const { return count_; }
  void clear();

 private:
  uint64_t slot_of(uint64_t offset) const;
  void grow();

  std::vector<OffsetEntry> slots_;
  uint64_t mask_ = 0;
  uint64_t count_ = 0;
  int granule_shift_;
  KeepFn keep_;
};

}  // namespace zarena_core
