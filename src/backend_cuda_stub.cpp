// Built when the CUDA Toolkit is absent: the CUDA backend does not exist in this build.
#include <fmt/format.h>

#include "backend.h"

namespace zarena_core {

std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& opts) {
  throw Error{Status::kNoDevice,
              fmt::format("CUDA backend requested for device {}, but this zarena was built "
                          "without the CUDA Toolkit (host backend only)",
                          opts.device)};
}

bool cuda_device_usable(int32_t device) noexcept {
  (void)device;
  return false;
}

CudaCallCounters cuda_call_counters() noexcept { return {}; }

}  // namespace zarena_core
