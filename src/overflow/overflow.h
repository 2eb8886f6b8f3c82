// The overflow pool behind the arena: when the region cannot serve a request, the policy
// decides whether and how the backend provides a separate block. Blocks are tracked so
// zarena_free routes them back, a reset reclaims the epoch's live ones, pins keep them
// across resets, and a step boundary makes the live ones persistent.
//
// Epochs: a block belongs to the epoch in which it was *tracked* (track() runs under the
// caller's slot lock, where no reset can run), never to the epoch read before the backend
// call; so a reset can never reclaim a block allocated after the epoch it opened became
// visible.
//
// Captures: giving a block back during a CUDA graph capture would be recorded into the
// user's graph (ASYNC) or refused by CUDA and break the capture (SYNC). Blocks freed or
// reclaimed while a capture is active wait in a deferred list and are given back at the
// next safe point (an overflow call, reset or destroy outside the capture).
//
// Policy and routes: the policy can change at run time (set_policy), and the program can
// install its own allocator (route kCustom). Each block remembers its route and goes back
// by it. The allocator's functions are the program's: they are called with no lock of the
// pool held, and the allocator can be replaced only when none of its blocks is live or
// being allocated (custom_outstanding_ counts them), so a block always goes back to the
// functions that made it.
//
// Backend calls are made without the pool's lock held.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "base/live_block.h"
#include "base/outcomes.h"
#include "base/pin_tally.h"
#include "base/status.h"
#include "zarena/zarena.h"

namespace zarena_core {

struct OverflowAttempt {
  Result result;  // kOk, kOutOfMemory, kCaptureUnsafe, kBackend
  OverflowBlock block;
  const char* path = "";    // async | sync | custom | capture_refused | refused | limit
  uint64_t latency_ns = 0;  // time spent in the backend call (0 if none was made)
  bool slow = false;        // latency above the watchdog threshold
};

struct OverflowStats {
  uint64_t allocs = 0;
  uint64_t live_count = 0;
  uint64_t live_bytes = 0;
  uint64_t peak_bytes = 0;
  uint64_t epoch_peak_bytes = 0;  // highest live_bytes since the last reset (or create)
  uint64_t max_latency_ns = 0;
  uint64_t reclaimed = 0;
  uint64_t failures = 0;
  uint64_t deferred_gives = 0;  // blocks waiting for a capture to end before going back
  uint64_t pinned_bytes = 0, pinned_blocks = 0;
  uint64_t deferred_frees = 0;  // frees of pinned blocks waiting for the last unpin
};

// The program's overflow allocator (zarena_overflow_allocator, copied).
struct CustomAllocator {
  void* ctx = nullptr;
  zarena_overflow_alloc_fn allocate = nullptr;
  zarena_overflow_free_fn deallocate = nullptr;
  std::string name;  // for messages ("custom" when the program gave none)
};

class OverflowPool {
 public:
  // policy: ZARENA_OVERFLOW_* already resolved from DEFAULT; blocks are aligned to
  // `alignment` (the arena's); limit_bytes: cap on live overflow bytes (0 = none);
  // pin_tally: told of every pin transition (may be null).
  OverflowPool(Backend& backend, int32_t policy, uint64_t alignment, uint64_t limit_bytes,
               uint64_t slow_ns, PinTally* pin_tally = nullptr);
  ~OverflowPool();
  OverflowPool(const OverflowPool&) = delete;
  OverflowPool& operator=(const OverflowPool&) = delete;

  // The policy in force (DEFAULT resolved).
  int32_t policy() const;
  // Makes `policy` (ASYNC, SYNC, REFUSE or CUSTOM; the caller resolved DEFAULT and made the
  // async route ready) the policy of the allocations that begin from now on; *previous
  // gets the one it replaces. kInvalidArgument for CUSTOM with no allocator installed.
  Result set_policy(int32_t policy, int32_t* previous);
  // Installs `alloc` and makes CUSTOM the policy; null removes the allocator (a CUSTOM
  // policy becomes `fallback`). kInvalidArgument, changing nothing, while blocks of the
  // installed allocator are live or being allocated. *previous: the policy before.
  Result set_custom(const CustomAllocator* alloc, int32_t fallback, int32_t* previous);
  // The installed allocator's name ("" for none).
  std::string custom_name() const;

  // Step 1, with no arena lock held: the route, the cap and the backend call.
  // capture_active: the engine said a capture is running (SYNC is refused before any
  // call then).
  OverflowAttempt allocate(uint64_t size, bool capture_active);
  // Step 2, under the caller's slot lock (the epoch cannot move): the block becomes a
  // tracked block of `epoch`. Throws std::bad_alloc (host memory); the caller gives the
  // block back then.
  void track(const OverflowAttempt& a, uint64_t size, uint64_t epoch, uint32_t tag);
  // Gives back a block that could not be tracked (and un-reserves its bytes).
  void untrack_failed(const OverflowAttempt& a, uint64_t size);

  bool owns(void* ptr) const;
  // Whether ptr lies strictly inside a live block (its start below ptr): for error paths,
  // where a free or pin found no live block at ptr but an older one there said "freed" or
  // "stale" (the backend handed that address out again inside a larger block). O(blocks).
  bool inside_live_block(const void* ptr) const;
  // Under the caller's slot lock. On kOk, *out is the block to give back (with give_back
  // once no lock is held); *size its size. kDeferred: pinned, freed at the last unpin.
  FreeOutcome free(void* ptr, uint64_t want_epoch, uint64_t epoch, OverflowBlock* out,
                   uint64_t* size);
  // Pins: of the block that starts at ptr, or else of the live block ptr lies inside
  // (O(blocks)); *start (may be null) gets the start of the block found.
  PinOutcome pin(void* ptr, uint64_t epoch, void** start = nullptr);
  // A last unpin of a block freed while pinned frees it: *out (to give back) and
  // *freed_size are set then.
  PinOutcome unpin(void* ptr, uint64_t epoch, OverflowBlock* out, uint64_t* freed_size,
                   void** start = nullptr);

  // Under the writer lock, with new_epoch already current: live blocks of earlier epochs
  // that are neither persistent nor pinned are reclaimed (appended to *doomed, to give
  // back after unlocking); pinned ones are kept through new_epoch. Forgets history older
  // than the previous epoch.
  void reclaim(uint64_t new_epoch, std::vector<OverflowBlock>* doomed);
  void mark_step_boundary();

  // Gives blocks back to the backend (no lock held): at once, or, while `capturing`,
  // into the deferred list, except the blocks allocated during the capture running now
  // (capture_id, the backend's: 0 none), which are freed into it (a free node, so the
  // graph frees what it allocated and can be launched again). fill (may be null) poisons
  // each block first when not capturing. Returns the first backend error; a block the
  // backend refused joins the deferred list (tried again at the next give-back point, and
  // at destroy), never dropped. `blocks` is used up (its contents are left unspecified).
  using FillFn = Result (*)(void* ctx, void* ptr, uint64_t bytes);
  Result give_back(std::vector<OverflowBlock>& blocks, bool capturing, uint64_t capture_id,
                   FillFn fill, void* ctx);
  bool has_deferred() const;
  // Gives back the deferred blocks (call when no capture is active).
  Result flush_deferred(FillFn fill, void* ctx);
  // Frees everything (destroy); a block the backend refuses is tried once more. Returns
  // the error of a block that failed twice (it is lost); *recovered (may be null) gets
  // the first failure's message when the second try gave everything back.
  Result release_all(std::string* recovered = nullptr);
  // Every block the backend must still take back (live ones, deferred gives), forgotten
  // here: for a release made elsewhere (an arena destroyed during a capture).
  std::vector<OverflowBlock> take_all();
  // After a device reset (Backend::context_lost): the backend's blocks in `blocks` and
  // those waiting to go back are forgotten, not given back (the reset took them); the
  // program's own (custom route) go back to its allocator. Returns how many were forgotten.
  // `blocks` is used up.
  size_t abandon(std::vector<OverflowBlock>& blocks);

  OverflowStats stats() const;
  // peak_bytes restarts from live_bytes.
  void reset_peak();
  // Appends the live blocks (overflow set), in no particular order.
  void live_blocks(std::vector<LiveBlock>* out) const;

 private:
  enum class State : uint8_t { kLive, kDeferred, kFreed, kReclaimed };
  struct Entry {
    OverflowBlock block;  // what the backend needs to give it back
    uint64_t size;        // the aligned size (what the cap and the stats count)
    uint64_t epoch;       // the epoch it was tracked in (handed out)
    uint64_t keep_epoch;  // live: valid through this epoch; else: when it left
    State state;
    bool persistent;
    uint32_t pins;
    uint32_t tag;
  };

  // The start of the live block ptr lies strictly inside, or nullptr. Under mu_.
  void* live_block_containing(const void* ptr) const;
  // The live entry of the block that starts at ptr, or else of the live block ptr lies
  // inside, or else the (dead) entry at ptr; end() for none. Under mu_.
  std::unordered_map<void*, Entry>::iterator find_for_pin(void* ptr);
  // The lookup pin and unpin share: the entry find_for_pin finds (its start into *start,
  // when start is not null), or nullptr and why in *refused (kNotOwned: none; kStale:
  // reclaimed). Under mu_.
  Entry* pin_target(void* ptr, void** start, PinOutcome* refused);

  // The allocation by the program's allocator (step 1's call; no lock held).
  Result custom_alloc(const CustomAllocator& c, uint64_t size, OverflowBlock* out);
  // Gives custom blocks back to the installed allocator (no lock held) and un-counts them.
  void custom_free(const OverflowBlock* blocks, size_t n);
  // Moves the custom blocks of blocks[0..n) to *custom; returns how many others remain,
  // moved to the front.
  static size_t split_custom(std::vector<OverflowBlock>& blocks,
                             std::vector<OverflowBlock>* custom);

  Backend& backend_;
  int32_t policy_;  // under mu_
  const uint64_t alignment_;
  const uint64_t limit_bytes_;
  const uint64_t slow_ns_;
  PinTally* const pin_tally_;
  mutable std::mutex mu_;
  std::unordered_map<void*, Entry> blocks_;
  std::vector<OverflowBlock> deferred_;  // given back when no capture is active
  uint64_t reserved_bytes_ = 0;          // live bytes + bytes of allocations in flight
  CustomAllocator custom_;               // allocate null: none installed
  uint64_t custom_outstanding_ = 0;      // its blocks live, deferred or being allocated
  OverflowStats stats_;
};

}  // namespace zarena_core
