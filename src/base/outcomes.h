// What the block stores answer (the region and the overflow pool alike): the outcome of a
// free and of a pin or unpin, and the "any epoch" wildcard of an epoch-checked free. The
// engine turns each outcome into a status and a message.
#pragma once

#include <cstdint>

#include "base/status.h"

namespace zarena_core {

// want_epoch of a free that names no epoch: any live incarnation of the block.
inline constexpr uint64_t kAnyEpoch = ~0ull;

enum class FreeOutcome {
  kOk,          // freed
  kDeferred,    // pinned: freed at its last unpin
  kNotOwned,    // not the start of a block of this store
  kDoubleFree,  // freed before
  kStale,       // a reset reclaimed it, or the epoch named is not the block's
  kZone,        // region: a piece of a step plan's zone (the plan answers; never a status)
};

// The status a free reports for its outcome (a deferred free is accepted). The table
// follows the enum's order.
static_assert(static_cast<int>(FreeOutcome::kZone) == 5, "free_status's table order");
inline Status free_status(FreeOutcome o) {
  constexpr Status kStatus[] = {Status::kOk,         Status::kOk,    Status::kNotOwned,
                                Status::kDoubleFree, Status::kStale, Status::kNotOwned};
  return kStatus[static_cast<int>(o)];
}

enum class PinOutcome {
  kOk,
  kNotOwned,   // no live block starts at the address or holds it
  kFreed,      // freed before
  kStale,      // a reset reclaimed it
  kNotPinned,  // unpin of a block with no pin
  kTooMany,    // the block holds the most pins it can
  kZone,       // region: a piece of a step plan's zone (the plan answers)
};

}  // namespace zarena_core
