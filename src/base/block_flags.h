// The bits of zarena_block.flags (ZARENA_BLOCK_*) and of zarena_live_block.flags
// (ZARENA_LIVE_*): the one list of each. zarena.h's defines, Go's BlockFlags and
// LiveBlockFlags constants (go/block_flags_gen.go) and Python's BLOCK_* and LIVE_*
// (python/zarena/constants.py) are generated from them by tools/gen. Values are the C ABI's.
#pragma once

#include <cstdint>

namespace zarena_core {

struct FlagBit {
  // snake_case: "overflow" is ZARENA_BLOCK_OVERFLOW, Go's BlockOverflow, Python's
  // BLOCK_OVERFLOW (ZARENA_LIVE_OVERFLOW, LiveOverflow, LIVE_OVERFLOW in the live table).
  const char* name;
  uint32_t bit;
  const char* doc;
};

inline constexpr FlagBit kBlockFlags[] = {
    {"overflow", 0x1, "the block comes from the overflow pool"},
    {"reused", 0x2, "a freed block was reused (no new bump space used)"},
    {"planned", 0x4, "served by a step plan (on by default)"},
};

inline constexpr FlagBit kLiveBlockFlags[] = {
    {"overflow", 0x1, "an overflow block"},
    {"persistent", 0x2, "below the floor (or kept by a step boundary)"},
    {"freed", 0x4, "freed while pinned: goes at its last unpin"},
};

}  // namespace zarena_core
