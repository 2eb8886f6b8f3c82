// Built when the CUDA Toolkit is absent: the CUDA backend does not exist in this build.
#include <fmt/format.h>

#include "backend/backend.h"
#include "backend/backend_cuda_testing.h"

namespace zarena_core {

Result make_cuda_backend(const BackendOptions& opts, std::unique_ptr<Backend>* out) noexcept {
  (void)out;
  return Result::fail(Status::kNoDevice,
                      fmt::format("CUDA backend requested for device {}, but this zarena was "
                                  "built without the CUDA Toolkit (host backend only)",
                                  opts.device));
}

bool cuda_device_usable(int32_t device) noexcept {
  (void)device;
  return false;
}

CudaCallCounters cuda_call_counters() noexcept { return {}; }

void* cuda_backend_pool_for_testing(Backend& backend) noexcept {
  (void)backend;
  return nullptr;
}

}  // namespace zarena_core
