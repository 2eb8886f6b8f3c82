// Host backend: the region is page-backed host memory (mmap, so untouched pages cost
// nothing until used); an expandable region is reserved PROT_NONE and committed by
// changing the protection, so touching memory beyond the committed end faults exactly as
// an unmapped GPU address would. Overflow blocks come from posix_memalign with the arena's
// alignment. Both overflow routes behave alike on the host. Fault injection is not here:
// FaultInjectingBackend (backend_faults.h) wraps this backend for that.
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/backend.h"
#include "backend/backend_checks.h"
#include "backend/commit_map.h"
#include "zarena/zarena.h"

namespace zarena_core {

namespace {

// Larger sizes are refused before any call: no host has that much address space, and a
// size near 2^64 must not wrap when the alignment slack is added.
constexpr uint64_t kMaxHostBytes = 1ull << 56;

uint64_t round_up(uint64_t x, uint64_t to) { return (x + to - 1) & ~(to - 1); }
std::string errno_text(int e) { return fmt::format("{} ({})", std::strerror(e), e); }

class HostBackend final : public Backend {
 public:
  explicit HostBackend(bool managed_asked)
      : page_(static_cast<uint64_t>(sysconf(_SC_PAGESIZE))), managed_asked_(managed_asked) {}
  // Normally release_region ran at destroy; this covers a create that failed after the
  // region was reserved.
  ~HostBackend() override { (void)release_region(); }

  int32_t kind() const noexcept override { return ZARENA_BACKEND_HOST; }
  std::string describe() const override {
    return expandable_ ? fmt::format("host (page-backed memory, expandable, {}-byte pages)", page_)
                       : "host (page-backed memory)";
  }

  Result reserve_region(const RegionRequest& req, RegionInfo* out) noexcept override {
    if (map_base_ != nullptr) {
      return Result::fail(Status::kInternal, "host backend: the region is already reserved");
    }
    Result checked = check_region_request("host", req);
    if (!checked.is_ok()) return checked;
    const uint64_t align = std::max(req.alignment, page_);
    if (req.bytes > kMaxHostBytes || align > kMaxHostBytes) {
      return Result::fail(Status::kOutOfMemory,
                          fmt::format("host backend cannot reserve {} bytes aligned to {}",
                                      req.bytes, req.alignment));
    }
    const uint64_t usable = round_up(req.bytes, page_);
    // mmap returns page-aligned addresses; a larger alignment needs slack to slide into.
    const uint64_t len = usable + (align > page_ ? align : 0);
    const int prot = req.expandable ? PROT_NONE : PROT_READ | PROT_WRITE;
    void* p = mmap(nullptr, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      return Result::fail(
          Status::kOutOfMemory,
          fmt::format("host backend: mmap of {} bytes failed: {}", len, errno_text(e)));
    }
    const uintptr_t raw = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = (raw + align - 1) & ~static_cast<uintptr_t>(align - 1);
    map_base_ = p;
    map_len_ = len;
    base_ = reinterpret_cast<char*>(aligned);
    expandable_ = req.expandable;
    commits_.reset(expandable_ ? usable : 0, page_);
    RegionInfo info;
    info.base = base_;
    info.bytes = req.bytes;
    info.commit_granularity = expandable_ ? page_ : 0;
    // Managed memory is there so that the CPU can read device memory; host memory needs
    // no such thing. Accepted (with or without the fallback flag) and said so.
    if (managed_asked_) {
      info.managed_fallback =
          "ZARENA_FLAG_MANAGED has no effect on the host backend: the region is host memory, "
          "which the CPU reads directly";
    }
    *out = std::move(info);
    return Result::ok();
  }

  Result commit(uint64_t offset, uint64_t bytes) noexcept override {
    Result r = check_commit_request("host", expandable_, commits_, offset, bytes);
    if (!r.is_ok()) return r;
    if (mprotect(base_ + offset, bytes, PROT_READ | PROT_WRITE) != 0) {
      const int e = errno;
      // mprotect may have changed part of the range before failing: put it back so that
      // a failed commit commits nothing.
      (void)mprotect(base_ + offset, bytes, PROT_NONE);
      return Result::fail(e == ENOMEM ? Status::kOutOfMemory : Status::kBackend,
                          fmt::format("host backend: commit [{}, +{}): mprotect(READ|WRITE) "
                                      "failed: {}",
                                      offset, bytes, errno_text(e)));
    }
    if (!commits_.add({offset, bytes, 0})) {
      (void)mprotect(base_ + offset, bytes, PROT_NONE);
      return Result::fail(Status::kOutOfMemory,
                          "host backend: out of host memory recording a commit");
    }
    return Result::ok();
  }

  Result decommit(uint64_t offset, uint64_t bytes) noexcept override {
    std::vector<CommitMap::Range> covered;
    Result r = check_decommit_request("host", expandable_, commits_, offset, bytes, &covered);
    if (!r.is_ok()) return r;
    // MADV_DONTNEED drops the pages (private anonymous memory reads back as zeros), and
    // PROT_NONE makes a stray access fault as it would on an unmapped GPU range.
    char* p = base_ + offset;
    if (madvise(p, bytes, MADV_DONTNEED) != 0 || mprotect(p, bytes, PROT_NONE) != 0) {
      const int e = errno;
      return Result::fail(
          Status::kBackend,
          fmt::format("host backend: decommit [{}, +{}) failed: {}", offset, bytes, errno_text(e)));
    }
    for (const auto& c : covered) commits_.remove(c.offset);
    return Result::ok();
  }

  const CommitMap* commit_map() const noexcept override {
    return expandable_ ? &commits_ : nullptr;
  }

  Result release_region() noexcept override {
    if (map_base_ == nullptr) return Result::ok();
    commits_.drain([](const CommitMap::Range&) {});  // munmap gives the pages back
    if (munmap(map_base_, map_len_) != 0) {
      const int e = errno;
      return Result::fail(Status::kBackend,
                          fmt::format("host backend: munmap failed: {}", errno_text(e)));
    }
    map_base_ = nullptr;
    map_len_ = 0;
    base_ = nullptr;
    expandable_ = false;
    return Result::ok();
  }

  Result overflow_alloc(uint64_t bytes, uint64_t alignment, OverflowRoute route,
                        OverflowBlock* out) noexcept override {
    Result checked = check_overflow_request("host overflow allocation", bytes, alignment,
                                            kMaxHostBytes, -1, "host can serve");
    if (!checked.is_ok()) return checked;
    // posix_memalign wants a multiple of sizeof(void*); free() needs no alignment back,
    // unlike aligned operator delete.
    const size_t align = std::max<size_t>(alignment, sizeof(void*));
    void* p = nullptr;
    const int e = posix_memalign(&p, align, bytes);
    if (e != 0) {
      return Result::fail(Status::kOutOfMemory,
                          fmt::format("host overflow allocation of {} bytes aligned to {} "
                                      "failed: {}",
                                      bytes, alignment, errno_text(e)));
    }
    OverflowBlock b;
    b.ptr = p;
    b.base = p;
    b.bytes = bytes;
    b.reserved_bytes = bytes;
    b.route = route;
    *out = b;
    return Result::ok();
  }

  Result overflow_free(const OverflowBlock& block) noexcept override {
    std::free(block.base);
    return Result::ok();
  }

  bool supports_async() const noexcept override { return true; }

  Result capture_status(bool* capturing) noexcept override {
    *capturing = false;  // host memory has no streams to capture
    return Result::ok();
  }
  Result capture_id(uint64_t* id) noexcept override {
    *id = 0;
    return Result::ok();
  }
  bool on_legacy_stream() const noexcept override { return false; }
  Result set_stream(void* stream) noexcept override {
    stream_ = stream;  // kept for stream(); host work is never ordered on it
    return Result::ok();
  }
  void* stream() const noexcept override { return stream_; }
  Result wait_for(void* stream, bool* waited) noexcept override {
    *waited = stream != stream_;  // host work is never ordered on a stream
    return Result::ok();
  }

  Result fill32(void* ptr, uint64_t bytes, uint32_t word) noexcept override {
    Result checked = check_fill32_args(ptr, bytes);
    if (!checked.is_ok()) return checked;
    // The word once, then doubling copies: a few memcpy calls instead of a loop per word
    // (which the fuzzing build instruments at every iteration).
    auto* p = static_cast<unsigned char*>(ptr);
    if (bytes == 0) return Result::ok();
    std::memcpy(p, &word, sizeof word);
    for (uint64_t filled = sizeof word; filled < bytes;) {
      const uint64_t n = std::min(filled, bytes - filled);
      std::memcpy(p + filled, p, n);
      filled += n;
    }
    return Result::ok();
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

 private:
  const uint64_t page_;
  const bool managed_asked_;
  void* map_base_ = nullptr;
  uint64_t map_len_ = 0;
  char* base_ = nullptr;
  bool expandable_ = false;
  CommitMap commits_;
  void* stream_ = nullptr;
};

}  // namespace

Result make_host_backend(const BackendOptions& opts, std::unique_ptr<Backend>* out) noexcept {
  // device and pool options have no meaning for host memory; managed is only reported
  std::unique_ptr<Backend> b(new (std::nothrow) HostBackend(opts.managed));
  if (!b) return Result::fail(Status::kOutOfMemory, "out of host memory creating the host backend");
  (void)b->set_stream(opts.stream);
  *out = std::move(b);
  return Result::ok();
}

}  // namespace zarena_core
