// What the block stores answer (the region and the overflow pool alike): the outcome of a
// free and of a pin or unpin, and the "any epoch" wildcard of an epoch-checked free. The
// engine turns each outcome into a status and a message.
#pragma once

#include <cstdint>

namespace zarena_core {

// want_epoch of a free that names no epoch: any live incarnation of the block.
inline constexpr uint64_t kAnyEpoch = ~0ull;

enum class FreeOutcome {
  kOk,          // freed
  kDeferred,    // pinned: freed at its last unpin
  kNotOwned,    // not the start of a block of this store
  kDoubleFree,  // freed before
  kStale,       // a reset reclaimed it, or the epoch named is not the block's
};

enum class PinOutcome {
  kOk,
  kNotOwned,   // not the start of a live block
  kFreed,      // freed before
  kStale,      // a reset reclaimed it
  kNotPinned,  // unpin of a block with no pin
  kTooMany,    // the block holds the most pins it can
};

}  // namespace zarena_core
