// Test-only access to the CUDA backend's internals, kept off the Backend interface.
#pragma once

#include "backend/backend.h"

namespace zarena_core {

// The stream-ordered pool behind the ASYNC route (a cudaMemPool_t) of a CUDA backend,
// also through a FaultInjectingBackend around it; nullptr for any other backend, for a
// CUDA backend without a pool, and in a build without CUDA. For gpu tests that read the
// pool's attributes.
void* cuda_backend_pool_for_testing(Backend& backend) noexcept;

}  // namespace zarena_core
