// The backend interface: where the arena's region and overflow blocks come from.
// Implementations: backend_host (page-backed host memory) and backend_cuda. The engine
// talks to memory only through this interface and never includes CUDA headers.
//
// One error convention for every method that can fail: it returns a Result (kOk or a
// status plus a message naming what failed and why) and writes its outputs only on
// success. No method throws; every method is noexcept. Methods without a Result cannot
// fail (or report "unknown" through their return value, as memory_info does).
//
// Thread rules: the engine calls overflow_alloc / overflow_free / fill32 /
// capture_status / memory_info from any thread, possibly several at once, and never
// while holding one of its own locks across a slow call where it can avoid it.
// reserve_region and release_region are called once each, at create and destroy.
// commit / decommit / set_stream are called by one thread at a time (the engine
// serialises them).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/commit_map.h"
#include "base/status.h"

namespace zarena_core {

// How an overflow allocation reaches the backend.
enum class OverflowRoute : int32_t {
  kAsync = 1,  // stream-ordered pool with a release threshold
  kSync = 2,   // plain synchronous allocation
  // The program's own allocator (zarena_overflow_allocator): the overflow pool calls it
  // and gives its blocks back to it; the backend never sees them.
  kCustom = 3,
};

struct BackendOptions {
  int32_t device = 0;
  bool managed = false;                // region from managed memory (where supported)
  bool managed_fallback = false;       // managed unsupported: use device memory instead of failing
  void* stream = nullptr;              // cudaStream_t; validated at create (see set_stream)
  uint64_t overflow_retain_bytes = 0;  // pool release threshold (ASYNC)
  bool overflow_prewarm = false;
  bool need_async_pool = false;  // the policy will use the async route
};

// What reserve_region asks for.
struct RegionRequest {
  uint64_t bytes = 0;      // the region's size (capacity); a multiple of `alignment`
  uint64_t alignment = 0;  // the region's base is aligned to at least this
  // false: the whole region is backed by memory when reserve_region returns.
  // true: only address space is reserved; commit() backs [offset, offset+bytes) on demand
  // and decommit() gives it back. Offsets and sizes passed to commit/decommit are
  // multiples of commit_granularity; the committable range is [0, bytes rounded up to
  // commit_granularity), so the last commit may end past `bytes`.
  bool expandable = false;
};

struct RegionInfo {
  void* base = nullptr;             // aligned base of the region
  uint64_t bytes = 0;               // usable size (== RegionRequest::bytes)
  bool managed = false;             // the region is managed memory (after any fallback)
  std::string managed_fallback;     // why managed was asked for but not used ("" if not)
  uint64_t commit_granularity = 0;  // expandable: commits are multiples of this (else 0)
};

// An overflow block: `ptr` is what the user gets (aligned as asked); `base` and
// `reserved_bytes` are what the backend must give back (they differ when the backend
// over-allocated to honour the alignment).
struct OverflowBlock {
  void* ptr = nullptr;
  void* base = nullptr;
  uint64_t bytes = 0;           // the size asked for
  uint64_t reserved_bytes = 0;  // what was taken from the backend
  OverflowRoute route = OverflowRoute::kSync;
  // kAsync made while the arena's stream was being captured: the id of that capture
  // sequence (the block is an allocation node of its graph); 0 otherwise.
  uint64_t capture_id = 0;
};

struct MemoryInfo {
  uint64_t free_bytes = 0;  // 0 = unknown
  uint64_t total_bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual int32_t kind() const noexcept = 0;  // ZARENA_BACKEND_HOST or ZARENA_BACKEND_CUDA
  // One line for logs ("cuda device 0 (NVIDIA H200, cc 9.0), own overflow pool ...").
  virtual std::string describe() const = 0;

  // --- the region -------------------------------------------------------------------
  // Reserves the region once. Fails with kOutOfMemory (no memory / address space, or a
  // size no backend could serve), kUnsupported (managed or expandable asked for where the
  // device cannot), kInvalidArgument (zero bytes, alignment not a power of two), kInternal
  // (already reserved), kBackend.
  virtual Result reserve_region(const RegionRequest& req, RegionInfo* out) noexcept = 0;
  // Expandable regions only (kUnsupported otherwise): back [offset, offset+bytes) of the
  // region with memory, readable and writable from the device (host: from the CPU).
  // Fails with kOutOfMemory when the memory is not there; nothing is committed then, and
  // the message names the call that failed and why. kInvalidArgument for a range that is
  // not granular, reaches past the region, or overlaps a committed range.
  virtual Result commit(uint64_t offset, uint64_t bytes) noexcept = 0;
  // Expandable regions only: unbacks a committed range; the addresses stay reserved and
  // can be committed again. Contents are lost. The range must be made of whole ranges
  // that commit() backed (one or several adjacent ones), because CUDA can unmap only a
  // whole mapping; anything else is kInvalidArgument and changes nothing. The host
  // backend enforces the same rule so that engine bugs show up in CI. CUDA: unmapping
  // is not stream-ordered, so decommit first waits for the work queued on the arena's
  // stream; the caller has checked that no capture is active (waiting would break it).
  virtual Result decommit(uint64_t offset, uint64_t bytes) noexcept = 0;
  // Expandable regions: which ranges commit() backed (null for a fixed region). Read it
  // only where commit and decommit are serialised (the engine's commit mutex).
  virtual const CommitMap* commit_map() const noexcept { return nullptr; }
  // Gives back everything reserve_region and commit took (idempotent; also run by the
  // destructor, which covers a create that fails after reserving). After a device reset
  // it frees nothing (see context_lost).
  virtual Result release_region() noexcept = 0;

  // --- overflow blocks ----------------------------------------------------------------
  // A block of `bytes` (> 0) whose ptr is aligned to `alignment` (a power of two, the
  // arena's alignment), by the given route. kAsync is ordered on the arena's stream.
  // Fails with kOutOfMemory (also for sizes no allocator could serve, before any call),
  // kCaptureUnsafe (CUDA refused because of a capture), kInvalidArgument, kBackend.
  virtual Result overflow_alloc(uint64_t bytes, uint64_t alignment, OverflowRoute route,
                                OverflowBlock* out) noexcept = 0;
  // Gives a block back by its route (kAsync: ordered after the work queued on the
  // stream). The caller decides beforehand whether this is safe during a capture.
  virtual Result overflow_free(const OverflowBlock& block) noexcept = 0;
  // True when the async (stream-ordered pool) route is available.
  virtual bool supports_async() const noexcept = 0;
  // Makes the async route ready for a policy that switches to it at run time (CUDA: the
  // arena's own pool, created once; the caller serialises calls and has checked that no
  // capture is active when `create_allowed`; kCaptureUnsafe when a pool is needed and it
  // is not). kUnsupported where the async route cannot exist.
  virtual Result prepare_async(bool create_allowed) noexcept {
    (void)create_allowed;
    return supports_async() ? Result::ok()
                            : Result::fail(Status::kUnsupported,
                                           "overflow policy ASYNC needs stream-ordered memory "
                                           "pools, which this backend does not support");
  }

  // --- streams and capture ------------------------------------------------------------
  // *capturing := whether a stream-ordered or synchronous call now would hit a CUDA graph
  // capture (the arena's stream, the legacy stream's implicit rules, the calling thread's
  // per-thread stream). Host: always false. Fails when the state cannot be queried.
  virtual Result capture_status(bool* capturing) noexcept = 0;
  // *id := the id of the capture sequence the arena's stream is part of now (a
  // stream-ordered call on it would be recorded into that graph), 0 when it is not being
  // captured. Host: always 0.
  virtual Result capture_id(uint64_t* id) noexcept = 0;
  // True when the arena's stream is the legacy default stream (NULL): a stream-ordered
  // call on it joins the capture of any blocking stream (implicit synchronization), so it
  // is as unsafe during a capture as a synchronous call. Host: false.
  virtual bool on_legacy_stream() const noexcept = 0;
  // Replaces the arena's stream (validated as at create: the stream must belong to the
  // arena's device; special handles the backend cannot order work on are refused with
  // kInvalidArgument). Later work on the new stream is ordered after the work queued on
  // the old one so far (CUDA: an event recorded on the old stream, waited for by the new
  // one; the host does nothing); kCaptureUnsafe while either stream is captured.
  // CUDA: NULL and cudaStreamLegacy both mean the device's legacy default stream (one
  // stream per device, so every thread orders on the same one); cudaStreamPerThread is
  // refused (a different stream in every thread: a free from another thread would not be
  // ordered after the work that used the block).
  virtual Result set_stream(void* stream) noexcept = 0;
  virtual void* stream() const noexcept = 0;
  // The arena's stream waits for the work queued on `stream` so far (CUDA: an event
  // recorded on `stream` and waited for by the arena's stream: stream-ordered, no host
  // wait; while both streams are captured into one graph it is recorded as an edge of that
  // graph). *waited := false when `stream` is the arena's own (nothing to order). Host:
  // nothing runs on streams; *waited says whether it would have waited.
  virtual Result wait_for(void* stream, bool* waited) noexcept = 0;

  // --- poison ---------------------------------------------------------------------------
  // Fills [ptr, ptr+bytes) with the 32-bit word (bytes is a multiple of 4; ptr 4-aligned;
  // else kInvalidArgument), ordered on the arena's stream (CUDA: cuMemsetD32Async). The
  // caller has checked that no capture is active.
  virtual Result fill32(void* ptr, uint64_t bytes, uint32_t word) noexcept = 0;

  // --- facts ------------------------------------------------------------------------------
  virtual MemoryInfo memory_info() noexcept = 0;

  // --- the device's lifetime --------------------------------------------------------------
  // True once the context the backend allocated in is gone (CUDA: the device was reset,
  // cudaDeviceReset or cuDevicePrimaryCtxReset, after the backend was made). The region,
  // the pool and every overflow block went with it, and their addresses may already belong
  // to the program's new allocations, so from then on no method touches memory: those that
  // would fail with kBackend (saying so), release_region returns kOk having freed nothing,
  // capture queries answer "no capture" (nothing of the old context is captured). Asks the
  // driver each time until it is true, then stays true (CUDA: two driver queries, which a
  // capture allows). Host: never.
  virtual bool context_lost() noexcept { return false; }
};

// Factories. Fail with kNoDevice when no usable device exists (or the build has no CUDA
// support), with the reason in the message.
Result make_host_backend(const BackendOptions& opts, std::unique_ptr<Backend>* out) noexcept;
Result make_cuda_backend(const BackendOptions& opts, std::unique_ptr<Backend>* out) noexcept;
// True when this build has the CUDA backend and a device is usable (AUTO's choice).
// Safe and quick without a driver: it asks the runtime for the device count only.
bool cuda_device_usable(int32_t device) noexcept;

// What the CUDA backend took from and gave back to CUDA, process-wide since load
// (all zero in a build without CUDA). gpu tests compare these before create and after
// destroy, because cudaMemGetInfo sees other processes on a shared GPU.
struct CudaCallCounters {
  uint64_t mallocs = 0;      // successful cudaMalloc / cudaMallocManaged
  uint64_t frees = 0;        // cudaFree of those
  uint64_t pool_allocs = 0;  // successful cudaMallocFromPoolAsync
  uint64_t pool_frees = 0;   // cudaFreeAsync of those
  uint64_t pools_created = 0;
  uint64_t pools_destroyed = 0;
  uint64_t vmm_creates = 0;  // cuMemCreate (expandable commits)
  uint64_t vmm_releases = 0;
};
CudaCallCounters cuda_call_counters() noexcept;

}  // namespace zarena_core
