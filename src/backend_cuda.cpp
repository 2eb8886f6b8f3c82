// CUDA backend: the region comes from cudaMalloc (or cudaMallocManaged) on the configured
// device; overflow blocks come either from a stream-ordered pool of our own (ASYNC) or
// from cudaMalloc (SYNC). The only file that includes CUDA headers.
//
// Linked against the static CUDA runtime, so libzarena loads on machines without a
// driver: the runtime looks for libcuda only at its first call, and that call fails with
// an error code (cudaErrorInsufficientDriver / cudaErrorNoDevice), never at load time.
// A stream created by the host program through its own copy of the runtime is a driver
// CUstream underneath (cudaStream_t and CUstream are interchangeable), and both runtimes
// use the device's primary context, so such a stream works as the arena's stream.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <atomic>
#include <cstring>

#include "backend.h"
#include "zarena/zarena.h"

namespace zarena_core {

namespace {

struct AtomicCounters {
  std::atomic<uint64_t> mallocs{0}, frees{0}, pool_allocs{0}, pool_frees{0}, pools_created{0},
      pools_destroyed{0};
};
AtomicCounters g_counters;

std::string cuda_text(cudaError_t e) {
  return fmt::format("{}: {}", cudaGetErrorName(e), cudaGetErrorString(e));
}

// A failed call sets the runtime's per-thread last error; that failure was ours and has
// been reported as a zarena status, so clear it rather than let it surface in the host
// program's next cudaGetLastError (it shares the runtime when it links zarena statically).
// The slot held at most our error by then, so nothing of the caller's is lost.
void forget_error() { (void)cudaGetLastError(); }

Status status_of(cudaError_t e) {
  switch (e) {
    case cudaErrorMemoryAllocation:
      return Status::kOutOfMemory;
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorStreamCaptureWrongThread:
      return Status::kCaptureUnsafe;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
      return Status::kNoDevice;
    default:
      return Status::kBackend;
  }
}

// Makes `device` current for the duration of one backend call and restores the caller's
// device afterwards, so an arena used from a thread bound to another device still
// allocates and frees on its own device and leaves the thread as it found it.
// (A thread whose current context is a driver-API context, not a primary context, gets
// the primary context of that device back: the runtime API cannot restore more.)
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) : device_(device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      forget_error();
      previous_ = -1;
    }
    if (previous_ != device_) {
      const cudaError_t e = cudaSetDevice(device_);
      if (e != cudaSuccess) {
        error_ = e;
        forget_error();
      } else {
        switched_ = true;
      }
    }
  }
  ~DeviceGuard() {
    if (switched_ && previous_ >= 0 && cudaSetDevice(previous_) != cudaSuccess) forget_error();
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

  cudaError_t error() const { return error_; }

 private:
  int device_;
  int previous_ = -1;
  bool switched_ = false;
  cudaError_t error_ = cudaSuccess;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const BackendOptions& opts)
      : opts_(opts), device_(opts.device), stream_(static_cast<cudaStream_t>(opts.stream)) {}

  // Everything that can fail at create; runs after construction so that the destructor
  // gives back what was taken when a later step throws.
  void init() {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      forget_error();
      throw Error{
          Status::kNoDevice,
          fmt::format("no usable CUDA device: cudaGetDeviceCount failed ({})", cuda_text(e))};
    }
    if (device_ >= count) {
      throw Error{Status::kNoDevice,
                  fmt::format("no usable CUDA device: device {} requested, {} present "
                              "(cudaErrorInvalidDevice)",
                              device_, count)};
    }
    DeviceGuard g(device_);
    if (g.error() != cudaSuccess) {
      throw Error{Status::kNoDevice, fmt::format("no usable CUDA device: cudaSetDevice({}) "
                                                 "failed ({})",
                                                 device_, cuda_text(g.error()))};
    }
    cudaDeviceProp prop;
    std::memset(&prop, 0, sizeof prop);
    if ((e = cudaGetDeviceProperties(&prop, device_)) != cudaSuccess) {
      forget_error();
      throw Error{Status::kNoDevice, fmt::format("no usable CUDA device: "
                                                 "cudaGetDeviceProperties({}) failed ({})",
                                                 device_, cuda_text(e))};
    }
    name_ = prop.name;
    cc_major_ = prop.major;
    cc_minor_ = prop.minor;
    pools_supported_ = attribute(cudaDevAttrMemoryPoolsSupported) != 0;
    managed_supported_ = attribute(cudaDevAttrManagedMemory) != 0;
    if (opts_.managed && !managed_supported_) {
      throw Error{Status::kUnsupported,
                  fmt::format("ZARENA_FLAG_MANAGED: device {} ({}) does not support managed "
                              "memory (cudaDevAttrManagedMemory is 0)",
                              device_, name_)};
    }
    if (stream_ != nullptr) {
      // A stream of another device would make every stream-ordered call fail later,
      // at a worse moment; say so at create.
      int stream_device = -1;
      e = cudaStreamGetDevice(stream_, &stream_device);
      if (e != cudaSuccess) {
        forget_error();
        throw Error{Status::kInvalidArgument,
                    fmt::format("the configured stream {} cannot be used: "
                                "cudaStreamGetDevice failed ({})",
                                static_cast<void*>(stream_), cuda_text(e))};
      }
      if (stream_device != device_) {
        throw Error{Status::kInvalidArgument,
                    fmt::format("the configured stream belongs to device {}, the arena to "
                                "device {}",
                                stream_device, device_)};
      }
    }
    if (opts_.need_async_pool) create_pool();
  }

  // Normally release_region ran at destroy; this covers a create that failed after the
  // region was reserved.
  ~CudaBackend() override { (void)release_region(nullptr, 0); }

  int32_t kind() const override { return ZARENA_BACKEND_CUDA; }

  std::string describe() const override {
    return fmt::format("cuda device {} ({}, cc {}.{}){}{}", device_, name_, cc_major_, cc_minor_,
                       opts_.managed ? ", managed region" : "",
                       pool_ != nullptr ? fmt::format(", own overflow pool retaining {} bytes",
                                                      opts_.overflow_retain_bytes)
                                        : std::string());
  }

  void* reserve_region(uint64_t bytes, uint64_t alignment) override {
    // cudaMalloc returns at least 256-byte aligned memory; larger alignments need slack.
    constexpr uint64_t kNative = 256;
    const uint64_t slack = alignment > kNative ? alignment : 0;
    if (bytes + slack < bytes) {
      throw Error{Status::kOutOfMemory, fmt::format("cannot reserve {} bytes", bytes)};
    }
    const uint64_t len = bytes + slack;
    DeviceGuard g(device_);
    void* p = nullptr;
    const cudaError_t e =
        opts_.managed ? cudaMallocManaged(&p, len, cudaMemAttachGlobal) : cudaMalloc(&p, len);
    if (e != cudaSuccess) {
      forget_error();
      throw Error{e == cudaErrorMemoryAllocation ? Status::kOutOfMemory : status_of(e),
                  fmt::format("{} of {} bytes on device {} failed ({})",
                              opts_.managed ? "cudaMallocManaged" : "cudaMalloc", len, device_,
                              cuda_text(e))};
    }
    ++g_counters.mallocs;
    region_raw_ = p;
    const uintptr_t raw = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned =
        slack ? (raw + alignment - 1) & ~static_cast<uintptr_t>(alignment - 1) : raw;
    return reinterpret_cast<void*>(aligned);
  }

  Result release_region(void* base, uint64_t bytes) noexcept override {
    (void)base;
    (void)bytes;
    Result first;
    {
      DeviceGuard g(device_);
      if (region_raw_ != nullptr) {
        const cudaError_t e = cudaFree(region_raw_);
        if (e != cudaSuccess) {
          forget_error();
          first = Result::fail(Status::kBackend,
                               fmt::format("cudaFree of the region failed ({})", cuda_text(e)));
        } else {
          ++g_counters.frees;
        }
        region_raw_ = nullptr;
      }
    }
    // The region goes at destroy; the pool goes with it (everything was freed into it
    // by then), so that destroy gives back all device memory zarena took.
    Result r = destroy_pool();
    if (first.is_ok()) first = r;
    return first;
  }

  void* overflow_alloc(uint64_t bytes, OverflowRoute route, Result* err) noexcept override {
    DeviceGuard g(device_);
    if (g.error() != cudaSuccess) {
      *err = Result::fail(Status::kBackend, fmt::format("cudaSetDevice({}) failed ({})", device_,
                                                        cuda_text(g.error())));
      return nullptr;
    }
    void* p = nullptr;
    cudaError_t e;
    if (route == OverflowRoute::kAsync) {
      if (pool_ == nullptr) {
        *err = Result::fail(Status::kInternal, "ASYNC overflow without a memory pool");
        return nullptr;
      }
      e = cudaMallocFromPoolAsync(&p, bytes, pool_, stream_);
      if (e == cudaSuccess) {
        ++g_counters.pool_allocs;
        return p;
      }
    } else {
      e = cudaMalloc(&p, bytes);
      if (e == cudaSuccess) {
        ++g_counters.mallocs;
        return p;
      }
    }
    forget_error();
    *err = Result::fail(
        status_of(e),
        fmt::format("{} of {} bytes on device {} failed ({})",
                    route == OverflowRoute::kAsync ? "cudaMallocFromPoolAsync" : "cudaMalloc",
                    bytes, device_, cuda_text(e)));
    return nullptr;
  }

  Result overflow_free(void* ptr, uint64_t bytes, OverflowRoute route) noexcept override {
    (void)bytes;
    DeviceGuard g(device_);
    cudaError_t e;
    if (route == OverflowRoute::kAsync) {
      // Stream-ordered: the block returns to the pool once the work already queued on
      // the stream (which may still read it) has run; the pool keeps it resident up to
      // the release threshold.
      e = cudaFreeAsync(ptr, stream_);
      if (e == cudaSuccess) ++g_counters.pool_frees;
    } else {
      e = cudaFree(ptr);
      if (e == cudaSuccess) ++g_counters.frees;
    }
    if (e == cudaSuccess) return Result::ok();
    forget_error();
    return Result::fail(status_of(e),
                        fmt::format("{}({}) failed ({})",
                                    route == OverflowRoute::kAsync ? "cudaFreeAsync" : "cudaFree",
                                    ptr, cuda_text(e)));
  }

  // A synchronous cudaMalloc is a "potentially unsafe" call for stream capture: during a
  // global-mode capture (the default mode) it fails with
  // cudaErrorStreamCaptureUnsupported AND invalidates the capture (H200), or hangs the
  // driver (GB10). So this answers "would it hit a capture" before the call is made:
  //   1. the configured stream (NULL = the legacy default stream) is capturing, or its
  //      capture was already invalidated;
  //   2. the legacy stream reports cudaErrorStreamCaptureImplicit: a blocking stream on
  //      the device is capturing (the legacy stream synchronises with every blocking
  //      stream, so the legacy rules cover an arena configured with NULL), or the legacy
  //      stream itself is;
  //   3. the calling thread's per-thread default stream is capturing.
  // Not visible through the runtime API without making an unsafe call: a global-mode
  // capture on another thread's non-blocking stream. cudaMalloc then fails with a
  // capture error, which overflow_alloc maps to ZARENA_E_CAPTURE_UNSAFE as well.
  bool stream_capturing(Result* err) noexcept override {
    DeviceGuard g(device_);
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing(stream_, &st);
    if (e == cudaErrorStreamCaptureImplicit) {
      forget_error();
      return true;
    }
    if (e != cudaSuccess) {
      forget_error();
      *err = Result::fail(Status::kBackend,
                          fmt::format("cudaStreamIsCapturing failed ({})", cuda_text(e)));
      return false;
    }
    if (st != cudaStreamCaptureStatusNone) return true;
    if (stream_ != nullptr && stream_ != cudaStreamLegacy) {
      e = cudaStreamIsCapturing(cudaStreamLegacy, &st);
      if (e == cudaErrorStreamCaptureImplicit) {
        forget_error();
        return true;
      }
      if (e == cudaSuccess && st != cudaStreamCaptureStatusNone) return true;
      if (e != cudaSuccess) forget_error();
    }
    e = cudaStreamIsCapturing(cudaStreamPerThread, &st);
    if (e == cudaSuccess && st != cudaStreamCaptureStatusNone) return true;
    if (e != cudaSuccess) forget_error();
    return false;
  }

  bool supports_async() const noexcept override { return pools_supported_; }

  void fill(void* ptr, uint64_t bytes, uint8_t byte) noexcept override {
    // Ordered after the work already queued on the arena's stream, which may still be
    // using the block the caller just freed.
    DeviceGuard g(device_);
    if (cudaMemsetAsync(ptr, byte, bytes, stream_) != cudaSuccess) forget_error();
  }

  MemoryInfo memory_info() noexcept override {
    MemoryInfo info;
    DeviceGuard g(device_);
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
      info.free_bytes = free_b;
      info.total_bytes = total_b;
    } else {
      forget_error();
    }
    return info;
  }

  void* native_pool() noexcept override { return pool_; }

 private:
  int attribute(cudaDeviceAttr a) {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, a, device_) != cudaSuccess) {
      forget_error();
      return 0;
    }
    return v;
  }

  // An own pool, not the device's default one, which the host program may be tuning
  // (and whose threshold of 0 gives freed memory back to the OS at every sync: the GB10
  // wedge). The release threshold keeps up to overflow_retain_bytes resident.
  void create_pool() {
    if (!pools_supported_) {
      throw Error{Status::kUnsupported,
                  fmt::format("overflow policy ASYNC needs stream-ordered memory pools, which "
                              "device {} ({}) does not support "
                              "(cudaDevAttrMemoryPoolsSupported is 0)",
                              device_, name_)};
    }
    cudaMemPoolProps props;
    std::memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device_;
    cudaError_t e = cudaMemPoolCreate(&pool_, &props);
    if (e != cudaSuccess) {
      forget_error();
      pool_ = nullptr;
      throw Error{status_of(e) == Status::kOutOfMemory ? Status::kOutOfMemory : Status::kBackend,
                  fmt::format("cudaMemPoolCreate on device {} failed ({})", device_, cuda_text(e))};
    }
    ++g_counters.pools_created;
    uint64_t threshold = opts_.overflow_retain_bytes;
    e = cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold);
    if (e != cudaSuccess) {
      forget_error();
      throw Error{Status::kBackend,
                  fmt::format("setting the overflow pool's release threshold to {} bytes "
                              "failed ({})",
                              threshold, cuda_text(e))};
    }
    if (opts_.overflow_prewarm && threshold > 0) prewarm(threshold);
  }

  // Allocates and frees the retained size once, so the pages are resident before the
  // first overflow of a training run rather than faulted in during it.
  void prewarm(uint64_t bytes) {
    void* p = nullptr;
    cudaError_t e = cudaMallocFromPoolAsync(&p, bytes, pool_, stream_);
    if (e != cudaSuccess) {
      forget_error();
      throw Error{status_of(e),
                  fmt::format("ZARENA_FLAG_OVERFLOW_PREWARM: cudaMallocFromPoolAsync of {} "
                              "bytes failed ({})",
                              bytes, cuda_text(e))};
    }
    ++g_counters.pool_allocs;
    e = cudaFreeAsync(p, stream_);
    if (e == cudaSuccess) {
      ++g_counters.pool_frees;
      e = cudaStreamSynchronize(stream_);
    }
    if (e != cudaSuccess) {
      forget_error();
      throw Error{Status::kBackend,
                  fmt::format("ZARENA_FLAG_OVERFLOW_PREWARM: freeing the prewarm block "
                              "failed ({})",
                              cuda_text(e))};
    }
  }

  // Waits for the stream-ordered frees already queued, gives the pool's memory back and
  // destroys the pool. The configured stream must still exist (see zarena.h).
  Result destroy_pool() noexcept {
    if (pool_ == nullptr) return Result::ok();
    DeviceGuard g(device_);
    Result r;
    cudaError_t e = cudaStreamSynchronize(stream_);
    if (e == cudaSuccess) e = cudaMemPoolTrimTo(pool_, 0);
    if (e != cudaSuccess) {
      forget_error();
      r = Result::fail(Status::kBackend,
                       fmt::format("draining the overflow pool failed ({})", cuda_text(e)));
    }
    e = cudaMemPoolDestroy(pool_);
    if (e != cudaSuccess) {
      forget_error();
      if (r.is_ok()) {
        r = Result::fail(Status::kBackend,
                         fmt::format("cudaMemPoolDestroy failed ({})", cuda_text(e)));
      }
    } else {
      ++g_counters.pools_destroyed;
    }
    pool_ = nullptr;
    return r;
  }

  BackendOptions opts_;
  const int device_;
  const cudaStream_t stream_;
  std::string name_;
  int cc_major_ = 0, cc_minor_ = 0;
  bool pools_supported_ = false;
  bool managed_supported_ = false;
  cudaMemPool_t pool_ = nullptr;
  void* region_raw_ = nullptr;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& opts) {
  auto b = std::make_unique<CudaBackend>(opts);
  b->init();
  return b;
}

bool cuda_device_usable(int32_t device) noexcept {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    forget_error();
    return false;
  }
  return device >= 0 && device < count;
}

CudaCallCounters cuda_call_counters() noexcept {
  CudaCallCounters c;
  c.mallocs = g_counters.mallocs.load();
  c.frees = g_counters.frees.load();
  c.pool_allocs = g_counters.pool_allocs.load();
  c.pool_frees = g_counters.pool_frees.load();
  c.pools_created = g_counters.pools_created.load();
  c.pools_destroyed = g_counters.pools_destroyed.load();
  return c;
}

}  // namespace zarena_core
