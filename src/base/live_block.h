// One live block as the walks report it (zarena_format_live_blocks, the C API's block
// list, the diagnosis's top tags): the region and the overflow pool fill the same type.
#pragma once

#include <cstdint>

namespace zarena_core {

struct LiveBlock {
  void* ptr = nullptr;  // what the user holds (region blocks: the region's base + offset)
  uint64_t size = 0;    // aligned size
  uint64_t epoch = 0;   // the epoch it was handed out in
  uint32_t pins = 0;
  uint32_t tag = 0;
  bool persistent = false;  // survives resets (below the floor, or made so at a boundary)
  bool borrowed = false;    // region: an epoch block in a hole below the floor
  bool overflow = false;    // an overflow block (not in the region)
  bool deferred = false;    // freed while pinned: freed at its last unpin
};

}  // namespace zarena_core
