// libzarena_torch's failure path as PyTorch meets it: a failed malloc throws a C++
// exception carrying zarena's message and verdict (PyTorch turns it into a Python
// RuntimeError), the library stays usable after it, and the failure is counted. On the
// host backend, with the library loaded the way PyTorch loads it (dlopen).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "zarena_torch/zarena_torch.h"

namespace {

using MallocFn = void* (*)(size_t, int, void*);
using FreeFn = void (*)(void*, size_t, int, void*);
using InfoFn = zarena_status (*)(int, zarena_torch_info*);

struct Shim {
  void* handle = nullptr;
  MallocFn malloc_fn = nullptr;
  FreeFn free_fn = nullptr;
  InfoFn info_fn = nullptr;
};

// The device's arena is created at its first malloc from the environment: set it first.
const Shim& shim() {
  static const Shim s = [] {
    setenv("ZARENA_BACKEND", "host", 1);
    setenv("ZARENA_CAPACITY_BYTES", "1MiB", 1);
    setenv("ZARENA_OVERFLOW_POLICY", "refuse", 1);
    setenv("ZARENA_LOG_LEVEL", "off", 1);
    Shim out;
    out.handle = dlopen(ZARENA_TORCH_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
    if (out.handle != nullptr) {
      out.malloc_fn = reinterpret_cast<MallocFn>(dlsym(out.handle, "zarena_torch_malloc"));
      out.free_fn = reinterpret_cast<FreeFn>(dlsym(out.handle, "zarena_torch_free"));
      out.info_fn = reinterpret_cast<InfoFn>(dlsym(out.handle, "zarena_torch_get_info"));
    }
    return out;
  }();
  return s;
}

TEST(TorchShim, FailedMallocThrowsTheDiagnosisAndTheShimStaysUsable) {
  const Shim& s = shim();
  ASSERT_NE(s.handle, nullptr) << dlerror();
  ASSERT_NE(s.malloc_fn, nullptr);
  void* p = s.malloc_fn(4096, 0, nullptr);
  ASSERT_NE(p, nullptr);
  std::string what;
  try {
    s.malloc_fn(2 << 20, 0, nullptr);  // more than the 1 MiB arena, overflow refused
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("zarena_torch: malloc(2097152) on device 0 failed: out of memory"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("verdict="), std::string::npos) << "the diagnosis: " << what;
  EXPECT_NE(what.find("; fix: "), std::string::npos) << what;

  // The process goes on: later requests that fit are served, frees work.
  void* q = s.malloc_fn(8192, 0, nullptr);
  ASSERT_NE(q, nullptr);
  s.free_fn(q, 8192, 0, nullptr);
  s.free_fn(p, 4096, 0, nullptr);
  zarena_torch_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(s.info_fn(0, &info), ZARENA_OK);
  EXPECT_EQ(info.failed_mallocs, 1u);
  EXPECT_EQ(info.mallocs, 2u);
  EXPECT_EQ(info.frees, 2u);
  EXPECT_EQ(info.failed_frees, 0u);
}

// zarena_torch_info.live_peak_bytes is max_memory_allocated's measure: the most bytes of
// blocks handed out and not given back at once, each its size rounded to the alignment
// (256), exact when another thread frees what this one allocated, as PyTorch's autograd
// thread frees the forward's activations (the library's used_peak_bytes is a bound then).
TEST(TorchShim, LivePeakIsExactWhenAnotherThreadFrees) {
  const Shim& s = shim();
  ASSERT_NE(s.malloc_fn, nullptr) << dlerror();
  zarena_torch_info before{};
  before.struct_size = sizeof before;
  ASSERT_EQ(s.info_fn(0, &before), ZARENA_OK);
  ASSERT_EQ(before.struct_size, sizeof before);
  for (int round = 0; round < 50; ++round) {
    std::vector<void*> held;
    for (int i = 0; i < 4; ++i) {
      void* p = s.malloc_fn(1000 + static_cast<size_t>(round), 0, nullptr);
      ASSERT_NE(p, nullptr);
      held.push_back(p);
    }
    std::thread other([&] {
      for (void* p : held) s.free_fn(p, 1000 + static_cast<size_t>(round), 0, nullptr);
    });
    other.join();
  }
  zarena_torch_info after{};
  after.struct_size = sizeof after;
  ASSERT_EQ(s.info_fn(0, &after), ZARENA_OK);
  EXPECT_EQ(after.live_bytes, before.live_bytes);
  EXPECT_EQ(after.live_peak_bytes,
            std::max<uint64_t>(before.live_peak_bytes, before.live_bytes + 4 * 1024));
  EXPECT_EQ(after.mallocs - before.mallocs, 200u);
  EXPECT_EQ(after.frees - before.frees, 200u);

  // A caller compiled before the two fields gets the fields it knows, the rest untouched.
  zarena_torch_info old{};
  old.live_bytes = 7;
  old.live_peak_bytes = 7;
  old.struct_size = offsetof(zarena_torch_info, live_bytes);
  ASSERT_EQ(s.info_fn(0, &old), ZARENA_OK);
  EXPECT_EQ(old.struct_size, offsetof(zarena_torch_info, live_bytes));
  EXPECT_EQ(old.live_bytes, 7u);
  EXPECT_EQ(old.live_peak_bytes, 7u);
}

TEST(TorchShim, ADeviceOutOfRangeThrows) {
  const Shim& s = shim();
  ASSERT_NE(s.malloc_fn, nullptr) << dlerror();
  EXPECT_THROW(s.malloc_fn(16, ZARENA_TORCH_MAX_DEVICES, nullptr), std::runtime_error);
  EXPECT_THROW(s.malloc_fn(16, -1, nullptr), std::runtime_error);
}

}  // namespace
