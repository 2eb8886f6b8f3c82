// Host backend: the region is page-backed host memory (mmap, so untouched pages cost
// nothing until used), overflow blocks come from aligned operator new. Both overflow
// routes behave alike on the host; fault injection lets tests drive every overflow
// policy, the cap, the watchdog and reset reclaim without a GPU.
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <new>
#include <thread>

#include "backend.h"
#include "zarena/zarena.h"

namespace zarena_core {

namespace {

class HostBackend final : public Backend {
 public:
  HostBackend() = default;
  // Normally release_region ran at destroy; this covers a create that failed after the
  // region was reserved.
  ~HostBackend() override { (void)release_region(nullptr, 0); }

  int32_t kind() const override { return ZARENA_BACKEND_HOST; }
  std::string describe() const override { return "host (page-backed memory)"; }

  void* reserve_region(uint64_t bytes, uint64_t alignment) override {
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    const uint64_t align = alignment > page ? alignment : page;
    if (bytes > (1ull << 56) || bytes + align < bytes) {
      throw Error{Status::kOutOfMemory, fmt::format("host backend cannot reserve {} bytes", bytes)};
    }
    const uint64_t len = bytes + (align > page ? align : 0);
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      throw Error{Status::kOutOfMemory,
                  fmt::format("mmap of {} bytes failed: {}", len, std::strerror(errno))};
    }
    const uintptr_t raw = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = (raw + align - 1) & ~static_cast<uintptr_t>(align - 1);
    map_base_ = p;
    map_len_ = len;
    return reinterpret_cast<void*>(aligned);
  }

  Result release_region(void* base, uint64_t bytes) noexcept override {
    (void)base;
    (void)bytes;
    if (map_base_ != nullptr && munmap(map_base_, map_len_) != 0) {
      return Result::fail(Status::kBackend, fmt::format("munmap failed: {}", std::strerror(errno)));
    }
    map_base_ = nullptr;
    return Result::ok();
  }

  void* overflow_alloc(uint64_t bytes, OverflowRoute route, Result* err) noexcept override {
    (void)route;
    const uint64_t n = ++overflow_calls_;
    if (delay_ns_.load() != 0) {
      const uint64_t dnth = delay_nth_.load();
      if (dnth == 0 || n == dnth) {
        std::this_thread::sleep_for(std::chrono::nanoseconds(delay_ns_.load()));
      }
    }
    const uint64_t fnth = fail_nth_.load();
    if (fnth != 0 && n == fnth) {
      *err = Result::fail(
          Status::kBackend,
          fmt::format("injected fault: overflow allocation #{} of {} bytes failed", n, bytes));
      return nullptr;
    }
    void* p = ::operator new (bytes, std::align_val_t{256}, std::nothrow);
    if (p == nullptr) {
      *err = Result::fail(Status::kOutOfMemory,
                          fmt::format("host overflow allocation of {} bytes failed", bytes));
    }
    return p;
  }

  Result overflow_free(void* ptr, uint64_t bytes, OverflowRoute route) noexcept override {
    (void)bytes;
    (void)route;
    ::operator delete (ptr, std::align_val_t{256});
    return Result::ok();
  }

  bool stream_capturing(Result* err) noexcept override {
    (void)err;
    return false;  // host memory has no streams to capture
  }
  bool supports_async() const noexcept override { return true; }

  void fill(void* ptr, uint64_t bytes, uint8_t byte) noexcept override {
    std::memset(ptr, byte, bytes);
  }

  MemoryInfo memory_info() noexcept override {
    MemoryInfo info;
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long avail = sysconf(_SC_AVPHYS_PAGES);
    const long page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) info.total_bytes = static_cast<uint64_t>(pages) * page;
    if (avail > 0 && page > 0) info.free_bytes = static_cast<uint64_t>(avail) * page;
    return info;
  }

  Result inject_overflow_fault(uint64_t fail_nth, uint64_t delay_nth,
                               uint64_t delay_ns) noexcept override {
    // Counting restarts so that "1" means the next overflow allocation.
    const uint64_t base = overflow_calls_.load();
    fail_nth_.store(fail_nth == 0 ? 0 : base + fail_nth);
    delay_nth_.store(delay_nth == 0 ? 0 : base + delay_nth);
    delay_ns_.store(delay_ns);
    return Result::ok();
  }

 private:
  void* map_base_ = nullptr;
  uint64_t map_len_ = 0;
  std::atomic<uint64_t> overflow_calls_{0};
  std::atomic<uint64_t> fail_nth_{0};
  std::atomic<uint64_t> delay_nth_{0};
  std::atomic<uint64_t> delay_ns_{0};
};

}  // namespace

std::unique_ptr<Backend> make_host_backend(const BackendOptions& opts) {
  (void)opts;  // device, stream, pool and managed options have no meaning for host memory
  return std::make_unique<HostBackend>();
}

}  // namespace zarena_core
