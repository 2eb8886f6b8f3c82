// Makes the arena's context (its device's primary context) current for one backend call
// and puts back exactly what the thread had: another context, or none at all.
//
// Why the driver and not cudaGetDevice/cudaSetDevice: on a thread with no current context
// cudaGetDevice answers 0, and "restoring" device 0 with cudaSetDevice creates device 0's
// primary context (hundreds of MiB) in a process whose arena lives on another device,
// every time a fresh thread (a cgo worker, a pool thread) calls in. cuCtxGetCurrent tells
// "none" apart, and cuCtxSetCurrent(NULL) leaves none. The runtime picks up whichever
// primary context is current, so runtime calls inside the guard run on the arena's device.
//
// Cost: one cuCtxGetCurrent (a thread-local read in the driver) when the arena's context
// is already current, the common case; two cuCtxSetCurrent calls otherwise. A driver-API
// context of the same device is switched too: the arena's stream, pool and memory belong
// to the primary context.
#pragma once

#include "backend/cuda_driver.h"

namespace zarena_core {

class CudaContextGuard {
 public:
  CudaContextGuard(const DriverApi& d, CUcontext ctx) noexcept : d_(d) {
    CUresult r = d.cuCtxGetCurrent(&previous_);
    if (r == CUDA_SUCCESS && previous_ != ctx) {
      r = d.cuCtxSetCurrent(ctx);
      switched_ = r == CUDA_SUCCESS;
    }
    error_ = r;
  }
  ~CudaContextGuard() {
    if (switched_) (void)d_.cuCtxSetCurrent(previous_);
  }
  CudaContextGuard(const CudaContextGuard&) = delete;
  CudaContextGuard& operator=(const CudaContextGuard&) = delete;

  // CUDA_SUCCESS when the arena's context is current for the guard's lifetime.
  CUresult error() const noexcept { return error_; }

 private:
  const DriverApi& d_;
  CUcontext previous_ = nullptr;
  bool switched_ = false;
  CUresult error_ = CUDA_SUCCESS;
};

}  // namespace zarena_core
