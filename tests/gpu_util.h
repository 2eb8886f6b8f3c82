// Helpers shared by the gpu-labelled suites written against the C API (capture,
// expandable, multi-device, edges): device counting with a clear skip line, CUDA_OK, a CUDA
// arena config, the driver table, the backend's call counters, and tests that run in a
// child process of their own. Include only where <cuda_runtime_api.h> is available.
#pragma once

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda_driver.h"
#include "support.h"
#include "zarena/zarena.h"

namespace zarena_gpu {

inline constexpr uint64_t kMiB = 1ull << 20;
inline constexpr uint64_t kGiB = 1ull << 30;
// How far cudaMemGetInfo may move for reasons other than the arena (other processes on a
// shared GPU, the driver's own page tables).
inline constexpr int64_t kTolerance = 256 * static_cast<int64_t>(kMiB);

inline std::string cuda_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

inline int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    *why = "cudaGetDeviceCount failed (" + cuda_text(e) + ")";
    return 0;
  }
  if (n == 0) *why = "cudaGetDeviceCount reports 0 devices";
  return n;
}

#define REQUIRE_DEVICES(n)                                                                        \
  do {                                                                                            \
    std::string why_;                                                                             \
    const int have_ = zarena_gpu::device_count(&why_);                                            \
    if (have_ == 0) GTEST_SKIP() << "no CUDA device, skipping: " << why_;                         \
    if (have_ < (n)) GTEST_SKIP() << "needs " << (n) << " CUDA devices, " << have_ << " present"; \
  } while (0)
#define REQUIRE_DEVICE() REQUIRE_DEVICES(1)

#define CUDA_OK(expr)                                                           \
  do {                                                                          \
    const cudaError_t e_ = (expr);                                              \
    ASSERT_EQ(e_, cudaSuccess) << #expr << " -> " << zarena_gpu::cuda_text(e_); \
  } while (0)

// A stream of the test's (blocking unless flags say otherwise) and a device buffer, both
// released at scope exit.
struct Stream {
  cudaStream_t s = nullptr;
  explicit Stream(unsigned flags = cudaStreamDefault) {
    EXPECT_EQ(cudaStreamCreateWithFlags(&s, flags), cudaSuccess);
  }
  ~Stream() { EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess); }
  operator cudaStream_t() const { return s; }
};

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(uint64_t n) { EXPECT_EQ(cudaMalloc(&p, n), cudaSuccess); }
  ~DeviceBuffer() { EXPECT_EQ(cudaFree(p), cudaSuccess); }
};

// The node types of a graph, in its order.
inline std::vector<cudaGraphNodeType> node_types(cudaGraph_t g) {
  size_t n = 0;
  EXPECT_EQ(cudaGraphGetNodes(g, nullptr, &n), cudaSuccess);
  std::vector<cudaGraphNode_t> nodes(n);
  std::vector<cudaGraphNodeType> types;
  if (n == 0) return types;
  EXPECT_EQ(cudaGraphGetNodes(g, nodes.data(), &n), cudaSuccess);
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType t = cudaGraphNodeTypeEmpty;
    EXPECT_EQ(cudaGraphNodeGetType(node, &t), cudaSuccess);
    types.push_back(t);
  }
  return types;
}

// Instantiates the graph, launches it once on s, waits for it, destroys both.
inline void run_once_and_destroy(cudaGraph_t graph, cudaStream_t s) {
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphLaunch(exec, s));
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
}

inline zarena_config cuda_config(uint64_t capacity, int32_t policy, void* stream,
                                 int32_t device = 0) {
  zarena_config c;
  zarena_config_init(&c);
  c.backend = ZARENA_BACKEND_CUDA;
  c.device = device;
  c.capacity_bytes = capacity;
  c.alignment = 256;
  c.overflow_policy = policy;
  c.overflow_retain_bytes = 0;
  c.overflow_limit_bytes = ZARENA_OVERFLOW_UNLIMITED;
  c.stream = stream;
  c.flags = 0;
  c.name = "gpu";
  return c;
}

inline zarena_stats stats_of(const zarena* a) {
  zarena_stats s;
  std::memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  EXPECT_EQ(zarena_get_stats(a, &s), ZARENA_OK) << zarena_last_error();
  return s;
}

inline int64_t free_bytes() {
  size_t free_b = 0, total_b = 0;
  EXPECT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  return static_cast<int64_t>(free_b);
}

inline const zarena_core::DriverApi& driver() {
  std::string why;
  const zarena_core::DriverApi* d = zarena_core::driver_api(&why);
  EXPECT_NE(d, nullptr) << why;
  return *d;
}

// Every cudaMalloc has its cudaFree, every pool allocation its cudaFreeAsync, every pool
// and every VMM handle its release, between two snapshots (taken before create and after
// destroy): nothing leaked.
inline void expect_balanced(const zarena_core::CudaCallCounters& a,
                            const zarena_core::CudaCallCounters& b) {
  EXPECT_EQ(b.mallocs - a.mallocs, b.frees - a.frees) << "cudaMalloc without cudaFree";
  EXPECT_EQ(b.pool_allocs - a.pool_allocs, b.pool_frees - a.pool_frees)
      << "pool allocation without cudaFreeAsync";
  EXPECT_EQ(b.pools_created - a.pools_created, b.pools_destroyed - a.pools_destroyed);
  EXPECT_EQ(b.vmm_creates - a.vmm_creates, b.vmm_releases - a.vmm_releases);
}

// --- tests in a process of their own ------------------------------------------------------

// Some tests cannot share a process with the others: one that resets the device (every
// context, stream and allocation of the process goes with it), one that needs a process in
// which no context exists yet. They run in a child: this binary again (CTest and gpu-run.sh
// name it in ZTEST_HELPER; run by hand, /proc/self/exe), with ZTEST_HELPER_MODE=mode and a
// gtest filter that selects them. Each such test starts with
//   if (!zarena_gpu::in_child(kMode)) GTEST_SKIP() << "runs in the child process ...";
inline bool in_child(const char* mode) {
  const char* m = std::getenv("ZTEST_HELPER_MODE");
  return m != nullptr && std::string(m) == mode;
}

// Runs the child and returns its output (also printed, each line prefixed with
// "[child <mode>] "). The calling test fails unless the child exits 0 having passed at
// least one test and failed none; a child still running after `watchdog` is killed and
// fails it.
inline std::string run_child_tests(const char* mode, const std::string& filter,
                                   std::chrono::seconds watchdog = std::chrono::seconds(240)) {
  const char* self = std::getenv("ZTEST_HELPER");
  std::string exe = self != nullptr ? self : "";
  if (exe.empty()) {
    char path[4096];
    const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) {
      ADD_FAILURE() << "cannot name this binary";
      return "";
    }
    exe.assign(path, static_cast<size_t>(n));
  }
  char out_path[] = "/tmp/zarena_gpu_child_XXXXXX";
  const int fd = mkstemp(out_path);
  if (fd < 0) {
    ADD_FAILURE() << "mkstemp failed";
    return "";
  }
  const std::string filter_arg = "--gtest_filter=" + filter;
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("ZTEST_HELPER_MODE", mode, 1);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(exe.c_str(), exe.c_str(), filter_arg.c_str(), "--gtest_color=no",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fd);
  const int status = pid > 0 ? zarena_test::wait_child(pid, watchdog) : -1;
  std::stringstream text;
  text << std::ifstream(out_path).rdbuf();
  unlink(out_path);
  const std::string out = text.str();
  // Each line prefixed, so that a summary that greps "[  PASSED  ]" at the start of a line
  // (scripts/gpu-run.sh) counts the parent's tests only.
  std::string line;
  for (std::istringstream lines(out); std::getline(lines, line);) {
    std::printf("[child %s] %s\n", mode, line.c_str());
  }
  EXPECT_GT(pid, 0) << "fork failed";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child failed (wait status " << status << ")";
  EXPECT_TRUE(out.find("[  PASSED  ] ") != std::string::npos &&
              out.find("[  PASSED  ] 0 tests") == std::string::npos)
      << "the child passed no test";
  EXPECT_EQ(out.find("[  FAILED  ] "), std::string::npos) << "a test failed in the child";
  return out;
}

}  // namespace zarena_gpu
