// The backend interface: where the arena's region and overflow blocks come from.
// Implementations: backend_host (page-backed host memory) and backend_cuda. The engine
// talks to memory only through this interface and never includes CUDA headers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "status.h"

namespace zarena_core {

// How an overflow allocation reaches the backend.
enum class OverflowRoute : int32_t {
  kAsync = 1,  // stream-ordered pool with a release threshold
  kSync = 2,   // plain synchronous allocation
};

struct BackendOptions {
  int32_t device = 0;
  bool managed = false;
  void* stream = nullptr;
  uint64_t overflow_retain_bytes = 0;  // pool release threshold (ASYNC)
  bool overflow_prewarm = false;
  bool need_async_pool = false;  // the policy will use the async route
};

struct MemoryInfo {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual int32_t kind() const = 0;  // ZARENA_BACKEND_HOST or ZARENA_BACKEND_CUDA
  virtual std::string describe() const = 0;

  // Reserves the arena's region. Throws Error on failure. The pointer is aligned to at
  // least `alignment`.
  virtual void* reserve_region(uint64_t bytes, uint64_t alignment) = 0;
  virtual Result release_region(void* base, uint64_t bytes) noexcept = 0;

  // Overflow blocks. overflow_alloc returns nullptr and fills *err when it fails.
  virtual void* overflow_alloc(uint64_t bytes, OverflowRoute route, Result* err) noexcept = 0;
  virtual Result overflow_free(void* ptr, uint64_t bytes, OverflowRoute route) noexcept = 0;

  // True when the configured stream is being captured into a CUDA graph (a
  // synchronous allocation now would break the capture). Fills *err if it cannot tell.
  virtual bool stream_capturing(Result* err) noexcept = 0;
  // True when the async (stream-ordered pool) route is available.
  virtual bool supports_async() const noexcept = 0;

  // Fills [ptr, ptr+bytes) with `byte` (ZARENA_FLAG_POISON).
  virtual void fill(void* ptr, uint64_t bytes, uint8_t byte) noexcept = 0;
  virtual MemoryInfo memory_info() noexcept = 0;

  // The stream-ordered pool behind the ASYNC route (a cudaMemPool_t for the CUDA
  // backend), or nullptr. For gpu tests that read the pool's attributes.
  virtual void* native_pool() noexcept { return nullptr; }

  // Fault injection (host backend only; others answer kUnsupported).
  virtual Result inject_overflow_fault(uint64_t fail_nth, uint64_t delay_nth,
                                       uint64_t delay_ns) noexcept {
    (void)fail_nth;
    (void)delay_nth;
    (void)delay_ns;
    return Result::fail(Status::kUnsupported,
                        "fault injection is available on the host backend only");
  }
};

// Factories. make_cuda_backend throws Error{kNoDevice} when no usable device exists
// (or the build has no CUDA support).
std::unique_ptr<Backend> make_host_backend(const BackendOptions& opts);
std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& opts);
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
};
CudaCallCounters cuda_call_counters() noexcept;

}  // namespace zarena_core
