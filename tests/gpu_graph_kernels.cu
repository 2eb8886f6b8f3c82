// Kernels of tests/gpu_test_graphs.cpp: integer arithmetic only, so that a step's results are
// bitwise the same however often and however it runs (eager, or replayed from a graph).
// Compiled to PTX at build time (tests/gpu_graphs.cmake) and loaded with cudaLibraryLoadData,
// so the test binary needs no GPU code of its own and the GPU machine no compiler.
#include <stdint.h>

// p[i] = seed[0] * 2654435761 + i: a step's input, from a static buffer the host sets
// before each launch (a graph bakes in kernel arguments, not the values they point to).
extern "C" __global__ void zt_init(uint32_t* p, const uint32_t* seed, uint32_t n) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = seed[0] * 2654435761u + i;
}

// out[i] = a[i] * 3 + (b[i] ^ (a[i] >> 7))
extern "C" __global__ void zt_mix(uint32_t* out, const uint32_t* a, const uint32_t* b,
                                  uint32_t n) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] * 3u + (b[i] ^ (a[i] >> 7));
}

// acc[i] = acc[i] * 5 + x[i]: the state a step leaves for the next (a model's weights).
extern "C" __global__ void zt_accum(uint32_t* acc, const uint32_t* x, uint32_t n) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) acc[i] = acc[i] * 5u + x[i];
}
