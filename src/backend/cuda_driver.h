// The CUDA driver calls zarena needs (virtual memory management, contexts, memset),
// resolved at run time through the runtime's cudaGetDriverEntryPointByVersion rather than
// by linking libcuda: the library must load, and the host backend work, on machines with
// no driver (CI). <cuda.h> is used for types only. Only CUDA source files include this.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

namespace zarena_core {

// Each pointer has the signature of the version named in its type: the entry points are
// requested at ABI version 12.0 (so a later driver cannot hand back a changed signature)
// with legacy-stream semantics (a NULL stream is the legacy default stream, as in the
// rest of the CUDA backend).
struct DriverApi {
  PFN_cuGetErrorName_v6000 cuGetErrorName = nullptr;
  PFN_cuGetErrorString_v6000 cuGetErrorString = nullptr;
  PFN_cuDeviceGet_v2000 cuDeviceGet = nullptr;
  PFN_cuDeviceGetAttribute_v2000 cuDeviceGetAttribute = nullptr;
  PFN_cuDevicePrimaryCtxRetain_v7000 cuDevicePrimaryCtxRetain = nullptr;
  PFN_cuDevicePrimaryCtxRelease_v11000 cuDevicePrimaryCtxRelease = nullptr;
  PFN_cuDevicePrimaryCtxGetState_v7000 cuDevicePrimaryCtxGetState = nullptr;
  PFN_cuCtxGetId_v12000 cuCtxGetId = nullptr;
  PFN_cuCtxGetCurrent_v4000 cuCtxGetCurrent = nullptr;
  PFN_cuCtxSetCurrent_v4000 cuCtxSetCurrent = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 cuMemGetAllocationGranularity = nullptr;
  PFN_cuMemAddressReserve_v10020 cuMemAddressReserve = nullptr;
  PFN_cuMemAddressFree_v10020 cuMemAddressFree = nullptr;
  PFN_cuMemCreate_v10020 cuMemCreate = nullptr;
  PFN_cuMemRelease_v10020 cuMemRelease = nullptr;
  PFN_cuMemMap_v10020 cuMemMap = nullptr;
  PFN_cuMemUnmap_v10020 cuMemUnmap = nullptr;
  PFN_cuMemSetAccess_v10020 cuMemSetAccess = nullptr;
  PFN_cuMemsetD32Async_v3020 cuMemsetD32Async = nullptr;
};

// The process-wide table, resolved on first use (thread-safe). nullptr when a symbol
// cannot be resolved (no driver, or one too old); *why then says which and why.
const DriverApi* driver_api(std::string* why);

// "CUDA_ERROR_OUT_OF_MEMORY: out of memory" for logs and zarena_last_error.
std::string cu_text(const DriverApi& d, CUresult r);

}  // namespace zarena_core
