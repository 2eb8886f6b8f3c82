#include "backend/cuda_driver.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

namespace zarena_core {

namespace {

constexpr unsigned int kAbiVersion = 12000;

struct Resolved {
  DriverApi api;
  std::string error;  // "" when every symbol was found
};

template <class Fn>
bool resolve(const char* symbol, Fn* fn, std::string* error) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e =
      cudaGetDriverEntryPointByVersion(symbol, &p, kAbiVersion, cudaEnableLegacyStream, &q);
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || p == nullptr) {
    (void)cudaGetLastError();  // our failure, reported below; not the host program's
    *error = fmt::format("the CUDA driver entry point {} (ABI {}.{}) is not available ({}{})",
                         symbol, kAbiVersion / 1000, kAbiVersion % 1000 / 10,
                         e != cudaSuccess ? cudaGetErrorName(e) : "cudaSuccess",
                         q == cudaDriverEntryPointVersionNotSufficent ? ", driver too old"
                         : q == cudaDriverEntryPointSymbolNotFound    ? ", symbol not found"
                                                                      : "");
    return false;
  }
  *fn = reinterpret_cast<Fn>(p);
  return true;
}

Resolved resolve_all() {
  Resolved r;
  DriverApi& d = r.api;
  std::string& err = r.error;
#define ZARENA_RESOLVE(name) \
  if (!resolve(#name, &d.name, &err)) return r
  ZARENA_RESOLVE(cuGetErrorName);
  ZARENA_RESOLVE(cuGetErrorString);
  ZARENA_RESOLVE(cuDeviceGet);
  ZARENA_RESOLVE(cuDeviceGetAttribute);
  ZARENA_RESOLVE(cuDevicePrimaryCtxRetain);
  ZARENA_RESOLVE(cuDevicePrimaryCtxRelease);
  ZARENA_RESOLVE(cuDevicePrimaryCtxGetState);
  ZARENA_RESOLVE(cuCtxGetId);
  ZARENA_RESOLVE(cuCtxGetCurrent);
  ZARENA_RESOLVE(cuCtxSetCurrent);
  ZARENA_RESOLVE(cuMemGetAllocationGranularity);
  ZARENA_RESOLVE(cuMemAddressReserve);
  ZARENA_RESOLVE(cuMemAddressFree);
  ZARENA_RESOLVE(cuMemCreate);
  ZARENA_RESOLVE(cuMemRelease);
  ZARENA_RESOLVE(cuMemMap);
  ZARENA_RESOLVE(cuMemUnmap);
  ZARENA_RESOLVE(cuMemSetAccess);
  ZARENA_RESOLVE(cuMemsetD32Async);
#undef ZARENA_RESOLVE
  return r;
}

}  // namespace

const DriverApi* driver_api(std::string* why) {
  // Resolved once: a function-local static is initialised thread-safely, and the table
  // is read-only afterwards.
  static const Resolved resolved = resolve_all();
  if (!resolved.error.empty()) {
    if (why != nullptr) *why = resolved.error;
    return nullptr;
  }
  return &resolved.api;
}

std::string cu_text(const DriverApi& d, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.cuGetErrorName(r, &name) != CUDA_SUCCESS || name == nullptr) name = "CUDA_ERROR_?";
  if (d.cuGetErrorString(r, &text) != CUDA_SUCCESS || text == nullptr) text = "unknown error";
  return fmt::format("{} ({}): {}", name, static_cast<int>(r), text);
}

}  // namespace zarena_core
