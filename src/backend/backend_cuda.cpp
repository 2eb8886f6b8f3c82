// CUDA backend: the region comes from cudaMalloc (or cudaMallocManaged) on the configured
// device, or, when expandable, from an address range reserved with the driver's virtual
// memory management and backed chunk by chunk; overflow blocks come either from a
// stream-ordered pool of our own (ASYNC) or from cudaMalloc (SYNC). The only backend file
// that includes CUDA headers.
//
// Linked against the static CUDA runtime and never against libcuda, so libzarena loads on
// machines without a driver: the runtime looks for libcuda only at its first call, and
// driver calls are resolved through it (cuda_driver.h); without a driver both fail with an
// error code, never at load time. A stream created by the host program through its own
// copy of the runtime is a driver CUstream underneath (cudaStream_t and CUstream are
// interchangeable), and both runtimes use the device's primary context, so such a stream
// works as the arena's stream.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_checks.h"
#include "backend/backend_cuda_testing.h"
#include "backend/backend_faults.h"
#include "backend/commit_map.h"
#include "backend/cuda_context_guard.h"
#include "backend/cuda_driver.h"
#include "zarena/zarena.h"

namespace zarena_core {

namespace {

// cudaMalloc and the stream-ordered pools return at least this alignment; a larger one
// costs an over-allocation of (alignment - kNativeAlignment).
constexpr uint64_t kNativeAlignment = 256;
// No device has this much memory; a larger request (up to 2^64) is refused before any
// CUDA call, so sizes never wrap when alignment slack is added.
constexpr uint64_t kMaxBytes = 1ull << 56;

struct AtomicCounters {
  std::atomic<uint64_t> mallocs{0}, frees{0}, pool_allocs{0}, pool_frees{0}, pools_created{0},
      pools_destroyed{0}, vmm_creates{0}, vmm_releases{0};
};
AtomicCounters g_counters;

uint64_t round_up(uint64_t x, uint64_t to) { return (x + to - 1) & ~(to - 1); }

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

Status status_of(CUresult r) {
  switch (r) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      return Status::kOutOfMemory;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
      return Status::kCaptureUnsafe;
    default:
      return Status::kBackend;
  }
}

bool is_legacy(cudaStream_t s) { return s == nullptr || s == cudaStreamLegacy; }

// The calling thread's stream-capture interaction mode is relaxed while it lives: a
// synchronous call (cudaFree of the region or of a SYNC block) made while another thread
// captures in global mode is not refused, and so does not invalidate that thread's capture
// (which the call is no part of). Used where zarena gives memory back.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() {
    if (cudaThreadExchangeStreamCaptureMode(&mode_) != cudaSuccess) {
      forget_error();
      restore_ = false;
    }
  }
  ~RelaxedCaptureMode() {
    if (restore_ && cudaThreadExchangeStreamCaptureMode(&mode_) != cudaSuccess) forget_error();
  }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
  bool restore_ = true;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(const BackendOptions& opts, const DriverApi& d)
      : opts_(opts), d_(d), device_(opts.device) {}

  // Everything that can fail at create; runs after construction so that the destructor
  // gives back what was taken when a later step fails.
  Result init() noexcept {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      forget_error();
      return Result::fail(
          Status::kNoDevice,
          fmt::format("no usable CUDA device: cudaGetDeviceCount failed ({})", cuda_text(e)));
    }
    if (device_ < 0 || device_ >= count) {
      return Result::fail(Status::kNoDevice,
                          fmt::format("no usable CUDA device: device {} requested, {} present "
                                      "(cudaErrorInvalidDevice)",
                                      device_, count));
    }
    CUresult r = d_.cuDeviceGet(&cudev_, device_);
    if (r == CUDA_SUCCESS) r = d_.cuDevicePrimaryCtxRetain(&ctx_, cudev_);
    if (r != CUDA_SUCCESS) {
      return Result::fail(Status::kNoDevice,
                          fmt::format("no usable CUDA device: device {}'s primary context "
                                      "cannot be retained ({})",
                                      device_, cu_text(d_, r)));
    }
    retained_ = true;
    // The context's id, to tell it from the one a device reset and a later use make anew
    // (context_lost).
    r = d_.cuCtxGetId(ctx_, &ctx_id_);
    if (r != CUDA_SUCCESS) {
      return Result::fail(Status::kNoDevice,
                          fmt::format("no usable CUDA device: the id of device {}'s primary "
                                      "context cannot be read ({})",
                                      device_, cu_text(d_, r)));
    }
    CudaContextGuard g(d_, ctx_);
    if (g.error() != CUDA_SUCCESS) return context_failure(g.error());
    cudaDeviceProp prop;
    std::memset(&prop, 0, sizeof prop);
    if ((e = cudaGetDeviceProperties(&prop, device_)) != cudaSuccess) {
      forget_error();
      return Result::fail(Status::kNoDevice, fmt::format("no usable CUDA device: "
                                                         "cudaGetDeviceProperties({}) failed ({})",
                                                         device_, cuda_text(e)));
    }
    name_ = prop.name;
    cc_major_ = prop.major;
    cc_minor_ = prop.minor;
    pools_supported_ = attribute(cudaDevAttrMemoryPoolsSupported) != 0;
    managed_supported_ = attribute(cudaDevAttrManagedMemory) != 0;
    int vmm = 0;
    if (d_.cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                cudev_) != CUDA_SUCCESS) {
      vmm = 0;
    }
    vmm_supported_ = vmm != 0;
    const cudaStream_t s = static_cast<cudaStream_t>(opts_.stream);
    Result v = validate_stream(s);
    if (!v.is_ok()) return v;
    stream_.store(s);
    if (opts_.need_async_pool) return create_pool();
    return Result::ok();
  }

  ~CudaBackend() override {
    // Normally release_region ran at destroy; this covers a create that failed after the
    // region was reserved.
    (void)release_region();
    if (join_event_ != nullptr) {
      CudaContextGuard g(d_, ctx_);
      if (cudaEventDestroy(join_event_) != cudaSuccess) forget_error();
    }
    if (retained_) (void)d_.cuDevicePrimaryCtxRelease(cudev_);
  }

  int32_t kind() const noexcept override { return ZARENA_BACKEND_CUDA; }

  std::string describe() const override {
    return fmt::format(
        "cuda device {} ({}, cc {}.{}){}{}{}", device_, name_, cc_major_, cc_minor_,
        region_managed_ ? ", managed region" : "",
        vmm_ ? fmt::format(", expandable region (granularity {} bytes)", commits_.granularity())
             : std::string(),
        pool_ != nullptr
            ? fmt::format(", own overflow pool retaining {} bytes", opts_.overflow_retain_bytes)
            : std::string());
  }

  // --- the region -----------------------------------------------------------------------

  Result reserve_region(const RegionRequest& req, RegionInfo* out) noexcept override {
    if (region_raw_ != nullptr || vmm_) {
      return Result::fail(Status::kInternal, "cuda backend: the region is already reserved");
    }
    Result checked = check_region_request("cuda", req);
    if (!checked.is_ok()) return checked;
    if (req.bytes > kMaxBytes || req.alignment > kMaxBytes) {
      return Result::fail(Status::kOutOfMemory,
                          fmt::format("cuda backend cannot reserve {} bytes aligned to {} on "
                                      "device {}",
                                      req.bytes, req.alignment, device_));
    }
    CudaContextGuard g(d_, ctx_);
    if (g.error() != CUDA_SUCCESS) return context_failure(g.error());
    RegionInfo info;
    bool managed = opts_.managed;
    if (managed && req.expandable) {
      const std::string why =
          "an expandable region is device memory mapped through CUDA's virtual memory "
          "management, which cannot map managed memory";
      if (!opts_.managed_fallback) {
        return Result::fail(Status::kUnsupported, "ZARENA_FLAG_MANAGED: " + why);
      }
      info.managed_fallback = why + "; the region is device memory";
      managed = false;
    }
    if (managed && !managed_supported_) {
      const std::string why = fmt::format(
          "device {} ({}) does not support managed memory (cudaDevAttrManagedMemory is 0)", device_,
          name_);
      if (!opts_.managed_fallback) {
        return Result::fail(Status::kUnsupported, "ZARENA_FLAG_MANAGED: " + why);
      }
      info.managed_fallback = why + "; the region is device memory (cudaMalloc)";
      managed = false;
    }
    Result r = req.expandable ? reserve_vmm(req, &info) : reserve_malloc(req, managed, &info);
    if (!r.is_ok()) return r;
    info.bytes = req.bytes;
    *out = std::move(info);
    return Result::ok();
  }

  Result commit(uint64_t offset, uint64_t bytes) noexcept override {
    Result r = check_commit_request("cuda", vmm_, commits_, offset, bytes);
    if (!r.is_ok()) return r;
    if (context_lost()) return lost_failure(fmt::format("commit of [{}, +{})", offset, bytes));
    CudaContextGuard g(d_, ctx_);
    if (g.error() != CUDA_SUCCESS) return context_failure(g.error());
    const CUdeviceptr at = vmm_base_ + offset;
    auto failed = [&](const char* call, CUresult e) {
      return Result::fail(status_of(e),
                          fmt::format("commit of [{}, +{}) on device {} failed: {} of {} bytes "
                                      "returned {}; nothing was committed",
                                      offset, bytes, device_, call, bytes, cu_text(d_, e)));
    };
    CUmemGenericAllocationHandle handle = 0;
    CUresult e = d_.cuMemCreate(&handle, bytes, &alloc_prop_, 0);
    if (e != CUDA_SUCCESS) return failed("cuMemCreate", e);
    ++g_counters.vmm_creates;
    e = d_.cuMemMap(at, bytes, 0, handle, 0);
    if (e != CUDA_SUCCESS) {
      release_handle(handle);
      return failed("cuMemMap", e);
    }
    CUmemAccessDesc access;
    std::memset(&access, 0, sizeof access);
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device_;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    e = d_.cuMemSetAccess(at, bytes, &access, 1);
    if (e != CUDA_SUCCESS) {
      (void)d_.cuMemUnmap(at, bytes);
      release_handle(handle);
      return failed("cuMemSetAccess", e);
    }
    if (!commits_.add({offset, bytes, static_cast<uint64_t>(handle)})) {
      (void)d_.cuMemUnmap(at, bytes);
      release_handle(handle);
      return Result::fail(Status::kOutOfMemory,
                          "cuda backend: out of host memory recording a commit");
    }
    return Result::ok();
  }

  Result decommit(uint64_t offset, uint64_t bytes) noexcept override {
    std::vector<CommitMap::Range> covered;
    Result r = check_decommit_request("cuda", vmm_, commits_, offset, bytes, &covered);
    if (!r.is_ok()) return r;
    if (context_lost()) return lost_failure(fmt::format("decommit of [{}, +{})", offset, bytes));
    CudaContextGuard g(d_, ctx_);
    if (g.error() != CUDA_SUCCESS) return context_failure(g.error());
    // cuMemUnmap is not stream-ordered: work already queued on the arena's stream may
    // still use the range, so it must finish first.
    const cudaError_t se = cudaStreamSynchronize(stream_.load());
    if (se != cudaSuccess) {
      forget_error();
      return Result::fail(status_of(se),
                          fmt::format("decommit of [{}, +{}) on device {}: waiting for the "
                                      "arena's stream failed ({}); nothing was decommitted",
                                      offset, bytes, device_, cuda_text(se)));
    }
    for (const auto& c : covered) {
      const CUresult e = d_.cuMemUnmap(vmm_base_ + c.offset, c.bytes);
      if (e != CUDA_SUCCESS) {
        return Result::fail(Status::kBackend,
                            fmt::format("decommit of [{}, +{}) on device {}: cuMemUnmap of "
                                        "[{}, +{}) failed ({})",
                                        offset, bytes, device_, c.offset, c.bytes, cu_text(d_, e)));
      }
      release_handle(static_cast<CUmemGenericAllocationHandle>(c.handle));
      commits_.remove(c.offset);
    }
    return Result::ok();
  }

  const CommitMap* commit_map() const noexcept override { return vmm_ ? &commits_ : nullptr; }

  // The backend's teardown at destroy: the region and also the overflow pool (every
  // overflow block was given back by then), so that destroy returns all device memory
  // zarena took. After a device reset all of it is gone already, and its addresses may be
  // the program's new allocations: nothing is freed.
  Result release_region() noexcept override {
    if (region_raw_ == nullptr && !vmm_ && pool_ == nullptr) return Result::ok();
    if (context_lost()) return Result::ok();
    Result first;
    CudaContextGuard g(d_, ctx_);
    if (g.error() != CUDA_SUCCESS) return context_failure(g.error());
    // The engine releases only when no capture of the arena's stream (or the legacy
    // stream) is running; another thread's capture elsewhere is left alone.
    RelaxedCaptureMode relaxed;
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
    if (vmm_) {
      if (commits_.committed_bytes() != 0 && cudaStreamSynchronize(stream_.load()) != cudaSuccess) {
        forget_error();  // unmapping below still gives the memory back
      }
      commits_.drain([&](const CommitMap::Range& c) {
        const CUresult e = d_.cuMemUnmap(vmm_base_ + c.offset, c.bytes);
        if (e != CUDA_SUCCESS && first.is_ok()) {
          first = Result::fail(Status::kBackend, fmt::format("cuMemUnmap of [{}, +{}) failed ({})",
                                                             c.offset, c.bytes, cu_text(d_, e)));
        }
        release_handle(static_cast<CUmemGenericAllocationHandle>(c.handle));
      });
      const CUresult e = d_.cuMemAddressFree(vmm_base_, vmm_len_);
      if (e != CUDA_SUCCESS && first.is_ok()) {
        first = Result::fail(Status::kBackend,
                             fmt::format("cuMemAddressFree failed ({})", cu_text(d_, e)));
      }
      vmm_ = false;
      vmm_base_ = 0;
      vmm_len_ = 0;
    }
    Result r = destroy_pool();
    if (first.is_ok()) first = r;
    return first;
  }

  // --- overflow blocks ------------------------------------------------------------------

  Result overflow_alloc(uint64_t bytes, uint64_t alignment, OverflowRoute route,
                        OverflowBlock* out) noexcept override {
    Result checked = check_overflow_request("overflow allocation", bytes, alignment, kMaxBytes,
                                            device_, "device");
    if (!checked.is_ok()) return checked;
    // Over-allocate when the arena's alignment exceeds what CUDA guarantees and hand out
    // the aligned address inside; the base is what gets freed.
    const uint64_t slack = alignment > kNativeAlignment ? alignment - kNativeAlignment : 0;
    const uint64_t len = bytes + slack;
    const bool async = route == OverflowRoute::kAsync;
    if (context_lost()) {
      return lost_failure(fmt::format("overflow allocation of {} bytes", bytes));
    }
    if (async && pool_ == nullptr) {
      return Result::fail(Status::kInternal, "ASYNC overflow without a memory pool");
    }
    CudaContextGuard g(d_, ctx_);
    if (g.error() != CUDA_SUCCESS) return context_failure(g.error());
    void* base = nullptr;
    const cudaStream_t s = stream_.load();
    // An allocation made during a capture of the stream is a node of that graph: its
    // block is freed inside the same capture, when it is (give_back), so the graph can be
    // launched again and again.
    uint64_t capture_id = 0;
    if (async) (void)capture_id_of(s, &capture_id);
    const cudaError_t e =
        async ? cudaMallocFromPoolAsync(&base, len, pool_, s) : cudaMalloc(&base, len);
    if (e != cudaSuccess) {
      forget_error();
      return Result::fail(status_of(e),
                          fmt::format("{} of {} bytes (for {} aligned to {}) on device {} "
                                      "failed ({})",
                                      async ? "cudaMallocFromPoolAsync" : "cudaMalloc", len, bytes,
                                      alignment, device_, cuda_text(e)));
    }
    ++(async ? g_counters.pool_allocs : g_counters.mallocs);
    OverflowBlock b;
    b.base = base;
    b.bytes = bytes;
    b.reserved_bytes = len;
    b.route = route;
    b.capture_id = capture_id;
    const uintptr_t raw = reinterpret_cast<uintptr_t>(base);
    const uintptr_t aligned = (raw + alignment - 1) & ~static_cast<uintptr_t>(alignment - 1);
    b.ptr = reinterpret_cast<void*>(aligned);
    if (aligned - raw > slack) {
      // CUDA returned less than its documented alignment: never hand out a block that
      // would run past what was allocated.
      (void)free_block(b);
      return Result::fail(
          Status::kInternal,
          fmt::format("{} returned {} (not {}-byte aligned)",
                      async ? "cudaMallocFromPoolAsync" : "cudaMalloc", base, kNativeAlignment));
    }
    *out = b;
    return Result::ok();
  }

  Result overflow_free(const OverflowBlock& block) noexcept override {
    if (context_lost()) {
      return lost_failure(fmt::format("giving back the overflow block {}", block.base));
    }
    CudaContextGuard g(d_, ctx_);
    if (g.error() != CUDA_SUCCESS) return context_failure(g.error());
    return free_block(block);
  }

  bool supports_async() const noexcept override { return pools_supported_; }
  Result prepare_async(bool create_allowed) noexcept override {
    if (pool_ != nullptr) return Result::ok();
    if (!pools_supported_) return create_pool();  // kUnsupported, with the reason
    if (context_lost()) return lost_failure("creating the overflow pool");
    if (!create_allowed) {
      return Result::fail(Status::kCaptureUnsafe,
                          "the overflow pool would be created now, during a CUDA graph capture; "
                          "switch to ASYNC before the capture");
    }
    CudaContextGuard g(d_, ctx_);
    if (g.error() != CUDA_SUCCESS) return context_failure(g.error());
    try {
      return create_pool();
    } catch (...) {
      return Result::fail(Status::kOutOfMemory, "out of host memory creating the overflow pool");
    }
  }

  // --- streams and capture --------------------------------------------------------------

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
  // capture error, which overflow_alloc maps to kCaptureUnsafe as well.
  Result capture_status(bool* capturing) noexcept override {
    if (context_lost()) {  // the arena's streams went with the context: nothing is captured
      *capturing = false;
      return Result::ok();
    }
    CudaContextGuard g(d_, ctx_);
    if (g.error() != CUDA_SUCCESS) return context_failure(g.error());
    const cudaStream_t s = stream_.load();
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing(s, &st);
    if (e == cudaErrorStreamCaptureImplicit) {
      forget_error();
      *capturing = true;
      return Result::ok();
    }
    if (e != cudaSuccess) {
      forget_error();
      return Result::fail(Status::kBackend,
                          fmt::format("cudaStreamIsCapturing failed ({})", cuda_text(e)));
    }
    if (st != cudaStreamCaptureStatusNone) {
      *capturing = true;
      return Result::ok();
    }
    if (!is_legacy(s)) {
      e = cudaStreamIsCapturing(cudaStreamLegacy, &st);
      if (e == cudaErrorStreamCaptureImplicit ||
          (e == cudaSuccess && st != cudaStreamCaptureStatusNone)) {
        if (e != cudaSuccess) forget_error();
        *capturing = true;
        return Result::ok();
      }
      if (e != cudaSuccess) forget_error();
    }
    e = cudaStreamIsCapturing(cudaStreamPerThread, &st);
    if (e != cudaSuccess) forget_error();
    *capturing = e == cudaSuccess && st != cudaStreamCaptureStatusNone;
    return Result::ok();
  }

  Result capture_id(uint64_t* id) noexcept override {
    if (context_lost()) {
      *id = 0;
      return Result::ok();
    }
    CudaContextGuard g(d_, ctx_);
    if (g.error() != CUDA_SUCCESS) return context_failure(g.error());
    return capture_id_of(stream_.load(), id);
  }

  bool on_legacy_stream() const noexcept override { return is_legacy(stream_.load()); }

  // The new stream waits for the work queued on the old one so far (an event recorded on
  // the old stream, waited for by the new one): a block freed after the change, which the
  // pool may hand out again on the new stream, is not reused while kernels queued on the
  // old stream still use it. Refused during a capture of either stream (recording or
  // waiting there would join the capture, or break it).
  Result set_stream(void* stream) noexcept override {
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (context_lost()) return lost_failure("changing the stream");
    CudaContextGuard g(d_, ctx_);
    if (g.error() != CUDA_SUCCESS) return context_failure(g.error());
    if (s == cudaStreamPerThread) return per_thread_stream_refused();
    const cudaStream_t old = stream_.load();
    if (old == s || (is_legacy(old) && is_legacy(s))) {
      stream_.store(s);
      return Result::ok();
    }
    // The capture checks come first: they are the only calls allowed while a stream is
    // captured in global mode (anything else, cudaStreamGetDevice included, could end
    // the capture with an error).
    for (cudaStream_t x : {old, s}) {
      cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
      const cudaError_t e = cudaStreamIsCapturing(x, &st);
      if (e != cudaSuccess) forget_error();
      if (e == cudaErrorStreamCaptureImplicit ||
          (e == cudaSuccess && st != cudaStreamCaptureStatusNone)) {
        return Result::fail(Status::kCaptureUnsafe,
                            fmt::format("the stream {} is being captured into a CUDA graph (or "
                                        "joins a capture); ordering the new stream after the "
                                        "old one now would be recorded into the graph. Change "
                                        "the stream outside the capture",
                                        static_cast<void*>(x)));
      }
      if (e != cudaSuccess) {
        return Result::fail(Status::kBackend, fmt::format("cudaStreamIsCapturing({}) failed ({})",
                                                          static_cast<void*>(x), cuda_text(e)));
      }
    }
    Result r = validate_stream(s);
    if (!r.is_ok()) return r;
    cudaEvent_t ev = nullptr;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e == cudaSuccess) {
      e = cudaEventRecord(ev, old);
      if (e == cudaSuccess) e = cudaStreamWaitEvent(s, ev, 0);
      // Destroying a recorded event is allowed: the wait keeps what it needs.
      const cudaError_t d = cudaEventDestroy(ev);
      if (e == cudaSuccess) e = d;
    }
    if (e != cudaSuccess) {
      forget_error();
      return Result::fail(
          status_of(e), fmt::format("ordering the new stream {} after the old stream {} "
                                    "failed ({}); the stream was not changed",
                                    static_cast<void*>(s), static_cast<void*>(old), cuda_text(e)));
    }
    stream_.store(s);
    return Result::ok();
  }

  void* stream() const noexcept override { return stream_.load(); }

  // One event, recorded on `stream` and waited for by the arena's stream, under a lock (a
  // wait takes the record made before it, so the event is reused). Legal during a capture
  // of both streams (the wait becomes an edge of the graph); created in relaxed capture
  // mode, so that its first use may come during a capture.
  Result wait_for(void* stream, bool* waited) noexcept override {
    *waited = false;
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    const cudaStream_t mine = stream_.load();
    if (s == mine || (is_legacy(s) && is_legacy(mine))) return Result::ok();
    CudaContextGuard g(d_, ctx_);
    if (g.error() != CUDA_SUCCESS) return context_failure(g.error());
    if (s == cudaStreamPerThread) return per_thread_stream_refused();
    std::lock_guard<std::mutex> lock(join_mu_);
    cudaError_t e = cudaSuccess;
    if (join_event_ == nullptr) {
      RelaxedCaptureMode relaxed;
      e = cudaEventCreateWithFlags(&join_event_, cudaEventDisableTiming);
      if (e != cudaSuccess) join_event_ = nullptr;
    }
    if (e == cudaSuccess) e = cudaEventRecord(join_event_, s);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(mine, join_event_, 0);
    if (e != cudaSuccess) {
      forget_error();
      return Result::fail(status_of(e),
                          fmt::format("ordering the arena's stream {} after the work queued on "
                                      "stream {} failed ({})",
                                      static_cast<void*>(mine), stream, cuda_text(e)));
    }
    *waited = true;
    return Result::ok();
  }

  // --- poison ---------------------------------------------------------------------------

  Result fill32(void* ptr, uint64_t bytes, uint32_t word) noexcept override {
    Result checked = check_fill32_args(ptr, bytes);
    if (!checked.is_ok()) return checked;
    if (bytes == 0) return Result::ok();
    if (context_lost()) return lost_failure(fmt::format("fill32({}, {} bytes)", ptr, bytes));
    CudaContextGuard g(d_, ctx_);
    if (g.error() != CUDA_SUCCESS) return context_failure(g.error());
    // Ordered after the work already queued on the arena's stream, which may still be
    // using the block the caller just freed.
    const CUresult e = d_.cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(ptr), word, bytes / 4,
                                           reinterpret_cast<CUstream>(stream_.load()));
    if (e != CUDA_SUCCESS) {
      return Result::fail(
          status_of(e), fmt::format("cuMemsetD32Async({}, {} bytes) on device {} failed ({})", ptr,
                                    bytes, device_, cu_text(d_, e)));
    }
    return Result::ok();
  }

  MemoryInfo memory_info() noexcept override {
    MemoryInfo info;
    if (context_lost()) return info;  // unknown: asking would make the context anew
    CudaContextGuard g(d_, ctx_);
    if (g.error() != CUDA_SUCCESS) return info;
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
      info.free_bytes = free_b;
      info.total_bytes = total_b;
    } else {
      forget_error();
    }
    return info;
  }

  // The primary context retained at init is still the one the backend allocated in: active
  // (a reset leaves it inactive until the device is used again) and with the id it had
  // then (cuCtxGetId is unique for the life of the process: the context a reset and a
  // later use make anew has another id, behind the same handle). The handle stays valid
  // whatever happened: a reset does not release the retain taken at init (see
  // cuDevicePrimaryCtxReset), which the destructor still releases.
  bool context_lost() noexcept override {
    if (lost_.load(std::memory_order_acquire)) return true;
    unsigned int flags = 0;
    int active = 1;
    // Cannot tell (a driver being torn down at exit): the calls that follow fail on their
    // own, touching nothing.
    if (d_.cuDevicePrimaryCtxGetState(cudev_, &flags, &active) != CUDA_SUCCESS) return false;
    bool gone = active == 0;
    if (!gone) {
      unsigned long long id = 0;
      const CUresult r = d_.cuCtxGetId(ctx_, &id);
      gone = r == CUDA_ERROR_CONTEXT_IS_DESTROYED || (r == CUDA_SUCCESS && id != ctx_id_);
    }
    if (gone) lost_.store(true, std::memory_order_release);
    return gone;
  }

  void* pool() const noexcept { return pool_; }

 private:
  int attribute(cudaDeviceAttr a) {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, a, device_) != cudaSuccess) {
      forget_error();
      return 0;
    }
    return v;
  }

  // The id of the capture sequence s is part of (0: none; the legacy stream is never
  // captured itself). The arena's context is current.
  static Result capture_id_of(cudaStream_t s, uint64_t* id) {
    *id = 0;
    if (is_legacy(s)) return Result::ok();
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    unsigned long long cid = 0;
    const cudaError_t e = cudaStreamGetCaptureInfo(s, &st, &cid);
    if (e != cudaSuccess) {
      forget_error();
      return Result::fail(Status::kBackend,
                          fmt::format("cudaStreamGetCaptureInfo failed ({})", cuda_text(e)));
    }
    if (st == cudaStreamCaptureStatusActive) *id = cid;
    return Result::ok();
  }

  Result lost_failure(const std::string& what) const {
    return Result::fail(
        Status::kBackend,
        fmt::format("{} refused: device {} was reset (cudaDeviceReset or "
                    "cuDevicePrimaryCtxReset) after the arena was created, and its memory "
                    "went with the reset; nothing was touched (its addresses may belong to new "
                    "allocations now). Destroy the arena",
                    what, device_));
  }

  Result context_failure(CUresult e) const {
    return Result::fail(Status::kBackend,
                        fmt::format("cannot make device {}'s primary context current ({})", device_,
                                    cu_text(d_, e)));
  }

  // Refuses what the backend cannot order work on; the arena's context is current.
  static Result per_thread_stream_refused() {
    return Result::fail(
        Status::kInvalidArgument,
        "cudaStreamPerThread cannot be the arena's stream: it names a different stream in "
        "every thread, so a free from another thread would be ordered on that thread's "
        "stream instead of after the work that used the block. Pass a stream you created "
        "(cudaStreamCreate), or NULL / cudaStreamLegacy for the legacy default stream");
  }

  Result validate_stream(cudaStream_t s) {
    if (s == cudaStreamPerThread) return per_thread_stream_refused();
    // NULL and cudaStreamLegacy: the device's one legacy stream, shared by every thread.
    if (is_legacy(s)) return Result::ok();
    // A stream of another device would make every stream-ordered call fail later, at a
    // worse moment; say so now.
    int stream_device = -1;
    const cudaError_t e = cudaStreamGetDevice(s, &stream_device);
    if (e != cudaSuccess) {
      forget_error();
      return Result::fail(Status::kInvalidArgument,
                          fmt::format("the stream {} cannot be used: cudaStreamGetDevice "
                                      "failed ({})",
                                      static_cast<void*>(s), cuda_text(e)));
    }
    if (stream_device != device_) {
      return Result::fail(Status::kInvalidArgument,
                          fmt::format("the stream {} belongs to device {}, the arena to "
                                      "device {}",
                                      static_cast<void*>(s), stream_device, device_));
    }
    return Result::ok();
  }

  Result reserve_malloc(const RegionRequest& req, bool managed, RegionInfo* info) {
    // cudaMalloc returns at least 256-byte aligned memory; larger alignments need slack.
    const uint64_t slack = req.alignment > kNativeAlignment ? req.alignment : 0;
    const uint64_t len = req.bytes + slack;
    void* p = nullptr;
    cudaError_t e = cudaErrorNotSupported;
    if (managed) {
      e = cudaMallocManaged(&p, len, cudaMemAttachGlobal);
      if (e == cudaErrorNotSupported) {
        forget_error();
        const std::string why =
            fmt::format("cudaMallocManaged on device {} failed ({})", device_, cuda_text(e));
        if (!opts_.managed_fallback) {
          return Result::fail(Status::kUnsupported, "ZARENA_FLAG_MANAGED: " + why);
        }
        info->managed_fallback = why + "; the region is device memory (cudaMalloc)";
        managed = false;
      }
    }
    if (!managed) e = cudaMalloc(&p, len);
    if (e != cudaSuccess) {
      forget_error();
      return Result::fail(status_of(e), fmt::format("{} of {} bytes on device {} failed ({})",
                                                    managed ? "cudaMallocManaged" : "cudaMalloc",
                                                    len, device_, cuda_text(e)));
    }
    ++g_counters.mallocs;
    region_raw_ = p;
    region_managed_ = managed;
    const uintptr_t raw = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned =
        slack ? (raw + req.alignment - 1) & ~static_cast<uintptr_t>(req.alignment - 1) : raw;
    info->base = reinterpret_cast<void*>(aligned);
    info->managed = managed;
    info->commit_granularity = 0;
    return Result::ok();
  }

  Result reserve_vmm(const RegionRequest& req, RegionInfo* info) {
    if (!vmm_supported_) {
      return Result::fail(Status::kUnsupported,
                          fmt::format("expandable region: device {} ({}) does not support "
                                      "virtual memory management "
                                      "(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED "
                                      "is 0)",
                                      device_, name_));
    }
    std::memset(&alloc_prop_, 0, sizeof alloc_prop_);
    alloc_prop_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    alloc_prop_.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    alloc_prop_.location.id = device_;
    size_t granularity = 0;
    CUresult e = d_.cuMemGetAllocationGranularity(&granularity, &alloc_prop_,
                                                  CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (e != CUDA_SUCCESS || !is_pow2(granularity)) {
      return Result::fail(
          Status::kBackend,
          fmt::format(
              "expandable region: cuMemGetAllocationGranularity on "
              "device {} failed ({})",
              device_,
              e != CUDA_SUCCESS ? cu_text(d_, e) : fmt::format("granularity {}", granularity)));
    }
    const uint64_t len = round_up(req.bytes, granularity);
    const uint64_t align = std::max<uint64_t>(req.alignment, granularity);
    CUdeviceptr base = 0;
    e = d_.cuMemAddressReserve(&base, len, align, 0, 0);
    if (e != CUDA_SUCCESS) {
      return Result::fail(status_of(e),
                          fmt::format("expandable region: cuMemAddressReserve of {} bytes "
                                      "aligned to {} on device {} failed ({})",
                                      len, align, device_, cu_text(d_, e)));
    }
    if (base % align != 0) {
      (void)d_.cuMemAddressFree(base, len);
      return Result::fail(Status::kBackend,
                          fmt::format("expandable region: cuMemAddressReserve returned {:#x}, "
                                      "not aligned to {}",
                                      static_cast<uint64_t>(base), align));
    }
    vmm_ = true;
    vmm_base_ = base;
    vmm_len_ = len;
    commits_.reset(len, granularity);
    info->base = reinterpret_cast<void*>(base);
    info->managed = false;
    info->commit_granularity = granularity;
    return Result::ok();
  }

  void release_handle(CUmemGenericAllocationHandle h) {
    if (d_.cuMemRelease(h) == CUDA_SUCCESS) ++g_counters.vmm_releases;
  }

  Result free_block(const OverflowBlock& block) {
    const bool async = block.route == OverflowRoute::kAsync;
    cudaError_t e;
    if (async) {
      // Stream-ordered: the block returns to the pool once the work already queued on
      // the stream (which may still read it) has run; the pool keeps it resident up to
      // the release threshold.
      e = cudaFreeAsync(block.base, stream_.load());
      if (e == cudaSuccess) ++g_counters.pool_frees;
    } else {
      RelaxedCaptureMode relaxed;  // see the class: another thread's capture stays whole
      e = cudaFree(block.base);
      if (e == cudaSuccess) ++g_counters.frees;
    }
    if (e == cudaSuccess) return Result::ok();
    forget_error();
    return Result::fail(status_of(e),
                        fmt::format("{}({}) failed ({})", async ? "cudaFreeAsync" : "cudaFree",
                                    block.base, cuda_text(e)));
  }

  // An own pool, not the device's default one, which the host program may be tuning
  // (and whose threshold of 0 gives freed memory back to the OS at every sync: the GB10
  // wedge). The release threshold keeps up to overflow_retain_bytes resident.
  Result create_pool() {
    if (!pools_supported_) {
      return Result::fail(Status::kUnsupported,
                          fmt::format("overflow policy ASYNC needs stream-ordered memory pools, "
                                      "which device {} ({}) does not support "
                                      "(cudaDevAttrMemoryPoolsSupported is 0)",
                                      device_, name_));
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
      return Result::fail(
          status_of(e) == Status::kOutOfMemory ? Status::kOutOfMemory : Status::kBackend,
          fmt::format("cudaMemPoolCreate on device {} failed ({})", device_, cuda_text(e)));
    }
    ++g_counters.pools_created;
    uint64_t threshold = opts_.overflow_retain_bytes;
    e = cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold);
    if (e != cudaSuccess) {
      forget_error();
      return Result::fail(Status::kBackend,
                          fmt::format("setting the overflow pool's release threshold to {} "
                                      "bytes failed ({})",
                                      threshold, cuda_text(e)));
    }
    if (opts_.overflow_prewarm && threshold > 0) return prewarm(threshold);
    return Result::ok();
  }

  // Allocates and frees the retained size once, so the pages are resident before the
  // first overflow of a training run rather than faulted in during it.
  Result prewarm(uint64_t bytes) {
    void* p = nullptr;
    const cudaStream_t s = stream_.load();
    cudaError_t e = cudaMallocFromPoolAsync(&p, bytes, pool_, s);
    if (e != cudaSuccess) {
      forget_error();
      return Result::fail(status_of(e),
                          fmt::format("ZARENA_FLAG_OVERFLOW_PREWARM: cudaMallocFromPoolAsync of "
                                      "{} bytes failed ({})",
                                      bytes, cuda_text(e)));
    }
    ++g_counters.pool_allocs;
    e = cudaFreeAsync(p, s);
    if (e == cudaSuccess) {
      ++g_counters.pool_frees;
      e = cudaStreamSynchronize(s);
    }
    if (e != cudaSuccess) {
      forget_error();
      return Result::fail(Status::kBackend,
                          fmt::format("ZARENA_FLAG_OVERFLOW_PREWARM: freeing the prewarm block "
                                      "failed ({})",
                                      cuda_text(e)));
    }
    return Result::ok();
  }

  // Waits for the stream-ordered frees already queued, gives the pool's memory back and
  // destroys the pool. The arena's stream must still exist (see zarena.h). The arena's
  // context is current.
  Result destroy_pool() noexcept {
    if (pool_ == nullptr) return Result::ok();
    Result r;
    cudaError_t e = cudaStreamSynchronize(stream_.load());
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

  const BackendOptions opts_;
  const DriverApi& d_;
  const int device_;
  CUdevice cudev_ = 0;
  CUcontext ctx_ = nullptr;
  unsigned long long ctx_id_ = 0;  // cuCtxGetId(ctx_) at init
  bool retained_ = false;
  std::atomic<bool> lost_{false};  // context_lost() found the context reset (sticky)
  // Read by overflow/fill/capture calls on any thread while set_stream may replace it.
  std::atomic<cudaStream_t> stream_{nullptr};
  std::mutex join_mu_;                // wait_for's event
  cudaEvent_t join_event_ = nullptr;  // created at the first wait_for
  std::string name_;
  int cc_major_ = 0, cc_minor_ = 0;
  bool pools_supported_ = false;
  bool managed_supported_ = false;
  bool vmm_supported_ = false;
  cudaMemPool_t pool_ = nullptr;
  // A plain region:
  void* region_raw_ = nullptr;
  bool region_managed_ = false;
  // An expandable region:
  bool vmm_ = false;
  CUdeviceptr vmm_base_ = 0;
  uint64_t vmm_len_ = 0;
  CUmemAllocationProp alloc_prop_{};
  CommitMap commits_;
};

}  // namespace

Result make_cuda_backend(const BackendOptions& opts, std::unique_ptr<Backend>* out) noexcept {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    forget_error();
    return Result::fail(
        Status::kNoDevice,
        fmt::format("no usable CUDA device: cudaGetDeviceCount failed ({})", cuda_text(e)));
  }
  std::string why;
  const DriverApi* d = driver_api(&why);
  if (d == nullptr) return Result::fail(Status::kNoDevice, "no usable CUDA device: " + why);
  std::unique_ptr<CudaBackend> b(new (std::nothrow) CudaBackend(opts, *d));
  if (!b) return Result::fail(Status::kOutOfMemory, "out of host memory creating the backend");
  Result r = b->init();
  if (!r.is_ok()) return r;  // the destructor gives back what init took
  *out = std::move(b);
  return Result::ok();
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
  c.vmm_creates = g_counters.vmm_creates.load();
  c.vmm_releases = g_counters.vmm_releases.load();
  return c;
}

void* cuda_backend_pool_for_testing(Backend& backend) noexcept {
  Backend* b = &backend;
  if (auto* f = dynamic_cast<FaultInjectingBackend*>(b)) b = &f->inner();
  auto* c = dynamic_cast<CudaBackend*>(b);
  return c != nullptr ? c->pool() : nullptr;
}

}  // namespace zarena_core
