// An arena's live blocks as text for people and as JSON for programs
// (zarena_format_live_blocks).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/live_block.h"

namespace zarena_core {

// What the formats show besides the blocks: the arena, the epoch the snapshot was taken
// in, and the region's base (region blocks are also given as offsets from it).
struct LiveBlocksHeader {
  std::string_view arena_name;
  uint64_t epoch = 0;
  const void* region_base = nullptr;
};

std::string live_blocks_text(const LiveBlocksHeader& h, const std::vector<LiveBlock>& blocks);
std::string live_blocks_json(const LiveBlocksHeader& h, const std::vector<LiveBlock>& blocks);

}  // namespace zarena_core
