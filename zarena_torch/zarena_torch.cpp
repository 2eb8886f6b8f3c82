// libzarena_torch: PyTorch's CUDAPluggableAllocator pair over one zarena arena per device.
// The design (streams, failures) is described in zarena_torch.h. C++ only so that a failed
// malloc can throw: PyTorch turns the exception into a Python RuntimeError, as it does
// for any allocator's.
#include "zarena_torch.h"

#include <dlfcn.h>
#include <strings.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "zarena/zarena_graph.h"
#include "zarena/zarena_plan.h"

#ifdef ZARENA_TORCH_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace {

constexpr uint64_t kReportedFreeFailures = 10;
// A default capacity (the device's memory) is rounded down to this: a commit granularity
// of every device (2 MiB on NVIDIA GPUs) and a multiple of any alignment zarena defaults to.
constexpr uint64_t kCapacityGranule = uint64_t{2} << 20;
// The overflow pool's release threshold when the capacity is the device's memory: what it
// keeps resident after overflow blocks are freed (the library's default, the capacity,
// would be the whole device).
constexpr uint64_t kPoliteRetainBytes = uint64_t{64} << 20;
// The commit step of a PyTorch arena (ZARENA_COMMIT_CHUNK_BYTES overrides it).
constexpr uint64_t kTorchCommitChunk = uint64_t{2} << 20;

struct DeviceState {
  std::atomic<zarena*> arena{nullptr};  // published after home/backend/event are set
  void* home = nullptr;
  int32_t backend = -1;
  bool create_failed = false;
  char name[32] = {};
#ifdef ZARENA_TORCH_HAVE_CUDA
  cudaEvent_t event = nullptr;
#endif
  std::atomic<uint64_t> mallocs{0}, frees{0}, failed_mallocs{0}, failed_frees{0}, stream_joins{0},
      joins_skipped{0}, capture_joins{0}, record_streams{0};
  // The bytes handed out and not given back, each block as its size rounded to `alignment`,
  // and their peak (zarena_torch_info: live_bytes, live_peak_bytes).
  std::atomic<uint64_t> live_bytes{0}, live_peak_bytes{0};
  uint64_t alignment = 256;  // the arena's, set before the arena is published
  // During zarena_torch_capture_begin/_end: the capture's stream, home to the captured ones.
  std::atomic<void*> capture_home{nullptr};
};

DeviceState g_devices[ZARENA_TORCH_MAX_DEVICES];
// Serialises arena creation and the event record+wait pairs (both rare).
std::mutex g_lock;

// tensor.record_stream: the streams each live block was declared used on (RECORD_STREAM),
// until its free. Only blocks someone recorded are here; a free looks only when any is.
std::mutex g_recorded_lock;
std::unordered_map<void*, std::vector<void*>> g_recorded;
std::atomic<bool> g_any_recorded{false};

// The streams recorded for ptr (and forgets them).
std::vector<void*> take_recorded(void* ptr) {
  if (!g_any_recorded.load(std::memory_order_acquire)) return {};
  std::lock_guard<std::mutex> lock(g_recorded_lock);
  auto it = g_recorded.find(ptr);
  if (it == g_recorded.end()) return {};
  std::vector<void*> out = std::move(it->second);
  g_recorded.erase(it);
  return out;
}

DeviceState* state_of(int device) {
  if (device < 0 || device >= ZARENA_TORCH_MAX_DEVICES) return nullptr;
  return &g_devices[device];
}

// What a failed malloc throws: PyTorch's caller sees a RuntimeError with this message.
class OutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "zarena_torch: malloc(<size>) on device <device>" and what went wrong.
std::string malloc_error(size_t size, int device, const std::string& what) {
  return "zarena_torch: malloc(" + std::to_string(size) + ") on device " + std::to_string(device) +
         what;
}

// The stream that orders reuse for `stream`: the capture's own while one runs
// (zarena_torch_capture_begin), else the arena's home stream.
void* home_for(DeviceState* d) {
  void* c = d->capture_home.load(std::memory_order_acquire);
  return c != nullptr ? c : d->home;
}

#ifdef ZARENA_TORCH_HAVE_CUDA
// 0: not captured; the capture's id when it is; ~0: unknown (a query that fails, e.g. the
// legacy stream while another stream captures: do not touch it).
constexpr unsigned long long kCaptureUnknown = ~0ull;
unsigned long long capture_of(cudaStream_t s) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  if (cudaStreamGetCaptureInfo(s, &status, &id) != cudaSuccess) {
    (void)cudaGetLastError();
    return kCaptureUnknown;
  }
  if (status == cudaStreamCaptureStatusNone) return 0;
  return status == cudaStreamCaptureStatusActive && id != 0 && id != kCaptureUnknown
             ? id
             : kCaptureUnknown;
}

// Makes `waiter` wait for the work enqueued on `waited` so far. Returns the CUDA error
// (cudaSuccess also when the wait was skipped under capture). Two streams of one capture
// are joined inside it (an edge of the graph); a captured stream and one outside it
// cannot be, and the wait is skipped.
cudaError_t join(DeviceState* d, int device, void* waiter, void* waited) {
  cudaStream_t w = static_cast<cudaStream_t>(waiter), on = static_cast<cudaStream_t>(waited);
  const unsigned long long cw = capture_of(w), con = capture_of(on);
  const bool in_capture = cw != 0 || con != 0;
  if (in_capture && (cw != con || cw == kCaptureUnknown)) {
    d->joins_skipped.fetch_add(1, std::memory_order_relaxed);
    return cudaSuccess;
  }
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  if (previous != device) (void)cudaSetDevice(device);
  cudaError_t e;
  {
    std::lock_guard<std::mutex> lock(g_lock);
    e = cudaEventRecord(d->event, on);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(w, d->event, 0);
  }
  if (previous >= 0 && previous != device) (void)cudaSetDevice(previous);
  if (e == cudaSuccess) (in_capture ? d->capture_joins : d->stream_joins).fetch_add(1);
  return e;
}
#endif

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != 0;
}

// The environment names a capacity: ZARENA_CAPACITY_BYTES, or ztensor's ZERFOO_ARENA_SIZE_GB
// unless ZARENA_ZTENSOR_ENV=0 (as zarena_config_init reads them).
bool capacity_from_environment() {
  if (env_set("ZARENA_CAPACITY_BYTES")) return true;
  const char* z = std::getenv("ZARENA_ZTENSOR_ENV");
  bool ztensor = z == nullptr;
  if (!ztensor) {  // off as zarena reads a switch: 0, false, no, off, or empty
    ztensor = true;
    for (const char* off : {"0", "false", "no", "off", ""}) ztensor &= strcasecmp(z, off) != 0;
  }
  return ztensor && env_set("ZERFOO_ARENA_SIZE_GB");
}

uint64_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

// The memory of the device the arena will live on (0: not known): the GPU's total memory
// for a CUDA arena (ZARENA_BACKEND=auto with a usable device, or cuda), the host's for a
// host one.
uint64_t device_memory_bytes(int device, int32_t backend) {
#ifdef ZARENA_TORCH_HAVE_CUDA
  if (backend != ZARENA_BACKEND_HOST) {
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    size_t free_b = 0, total_b = 0;
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess) e = cudaMemGetInfo(&free_b, &total_b);
    if (previous >= 0 && previous != device) (void)cudaSetDevice(previous);
    if (e == cudaSuccess) return static_cast<uint64_t>(total_b);
    (void)cudaGetLastError();
    if (backend == ZARENA_BACKEND_CUDA) return 0;  // create will say why
  }
#else
  (void)device;
  if (backend == ZARENA_BACKEND_CUDA) return 0;
#endif
  return host_memory_bytes();
}

// The configuration of a device's arena: zarena_config_init (the environment), then what
// PyTorch's allocator needs (see zarena_torch.h, ONE ARENA PER DEVICE).
void torch_config(zarena_config* cfg, int device, void* stream) {
  zarena_config_init(cfg);
  cfg->device = device;
  cfg->stream = stream;
  // PyTorch frees every tensor and never resets: no reset warnings or verdicts.
  cfg->flags |= ZARENA_FLAG_NO_RESETS;
  // The capacity is a maximum committed on demand, so the device footprint follows the
  // high water instead of the capacity (ZARENA_EXPANDABLE=0 reserves it whole up front).
  if (std::getenv("ZARENA_EXPANDABLE") == nullptr) cfg->flags |= ZARENA_FLAG_EXPANDABLE;
  // Committed on demand, the capacity costs address space only: unless the environment
  // names one, it is the device's memory, so a model is never stopped by a guess (a fixed
  // default of 1 GiB was a trap for any real model). A region reserved whole keeps the
  // library's default.
  if ((cfg->flags & ZARENA_FLAG_EXPANDABLE) != 0 && !capacity_from_environment()) {
    const uint64_t total =
        device_memory_bytes(device, cfg->backend) / kCapacityGranule * kCapacityGranule;
    if (total != 0) {
      cfg->capacity_bytes = total;
      if (cfg->overflow_retain_bytes == 0) cfg->overflow_retain_bytes = kPoliteRetainBytes;
    }
  }
  // Committed in small steps: the footprint is the high water rounded up to 2 MiB (the
  // granularity CUDA maps memory in, as PyTorch's expandable segments), not to the
  // library's 64 MiB chunk (a measured 576 MiB committed for a 549 MiB high water).
  if ((cfg->flags & ZARENA_FLAG_EXPANDABLE) != 0 &&
      std::getenv("ZARENA_COMMIT_CHUNK_BYTES") == nullptr) {
    cfg->commit_chunk_bytes = kTorchCommitChunk;
  }
}

zarena* create_arena(DeviceState* d, int device, void* stream) {
  std::lock_guard<std::mutex> lock(g_lock);
  zarena* a = d->arena.load(std::memory_order_acquire);
  if (a != nullptr || d->create_failed) return a;
  zarena_config cfg;
  torch_config(&cfg, device, stream);
  if (std::getenv("ZARENA_NAME") == nullptr) {
    std::snprintf(d->name, sizeof d->name, "torch:cuda:%d", device);
    cfg.name = d->name;
  }
  if (zarena_create(&cfg, &a) != ZARENA_OK) {
    std::fprintf(stderr, "zarena_torch: creating the arena of device %d failed: %s\n", device,
                 zarena_last_error());
    d->create_failed = true;
    return nullptr;
  }
  d->home = stream;
  d->backend = zarena_backend(a);
  if (cfg.alignment != 0) d->alignment = cfg.alignment;
#ifdef ZARENA_TORCH_HAVE_CUDA
  if (d->backend == ZARENA_BACKEND_CUDA) {
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    (void)cudaSetDevice(device);
    const cudaError_t e = cudaEventCreateWithFlags(&d->event, cudaEventDisableTiming);
    if (previous >= 0 && previous != device) (void)cudaSetDevice(previous);
    if (e != cudaSuccess) {
      std::fprintf(stderr, "zarena_torch: cudaEventCreate on device %d failed: %s\n", device,
                   cudaGetErrorString(e));
      (void)zarena_destroy(a);
      d->create_failed = true;
      return nullptr;
    }
  }
#endif
  d->arena.store(a, std::memory_order_release);
  return a;
}

// The bytes a block of `size` takes in the arena (what max_memory_allocated counts of it).
uint64_t block_bytes(const DeviceState* d, size_t size) {
  const uint64_t al = d->alignment;
  return (static_cast<uint64_t>(size) + al - 1) / al * al;
}

// One shared counter: its modification order is the order of the mallocs and frees, so the
// peak is exact whatever thread frees what (torch frees from its autograd thread too).
void note_live(DeviceState* d, int64_t delta) {
  const uint64_t now =
      d->live_bytes.fetch_add(static_cast<uint64_t>(delta), std::memory_order_relaxed) +
      static_cast<uint64_t>(delta);
  if (delta <= 0) return;
  uint64_t peak = d->live_peak_bytes.load(std::memory_order_relaxed);
  while (now > peak &&
         !d->live_peak_bytes.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

}  // namespace

// zarena_torch_set_unplanned: this thread's mallocs bypass the step plan while set.
static thread_local bool t_unplanned = false;

extern "C" {

int zarena_torch_set_unplanned(int on) {
  const bool was = t_unplanned;
  t_unplanned = on != 0;
  return was ? 1 : 0;
}

void* zarena_torch_malloc(size_t size, int device, void* stream) {
  DeviceState* d = state_of(device);
  if (d == nullptr) {
    throw OutOfMemory(malloc_error(
        size, device, ": outside [0, " + std::to_string(ZARENA_TORCH_MAX_DEVICES) + ")"));
  }
  zarena* a = d->arena.load(std::memory_order_acquire);
  if (a == nullptr) a = create_arena(d, device, stream);
  if (a == nullptr) {
    d->failed_mallocs.fetch_add(1, std::memory_order_relaxed);
    throw OutOfMemory(malloc_error(
        size, device, ": no arena (creating it failed; the reason was printed on stderr)"));
  }
  if (size == 0) return nullptr;
#ifdef ZARENA_TORCH_HAVE_CUDA
  void* home = home_for(d);
  if (stream != home && d->backend == ZARENA_BACKEND_CUDA) {
    const cudaError_t e = join(d, device, stream, home);
    if (e != cudaSuccess) {
      // Without the wait, reuse could race the block's last use: no block.
      d->failed_mallocs.fetch_add(1, std::memory_order_relaxed);
      throw OutOfMemory(malloc_error(size, device,
                                     std::string(": ordering the stream after the arena's "
                                                 "stream failed: ") +
                                         cudaGetErrorString(e)));
    }
  }
#endif
  void* p = nullptr;
  zarena_status st;
  if (__builtin_expect(t_unplanned, 0)) {
    zarena_block b{};
    st = zarena_plan_alloc_unplanned(a, static_cast<uint64_t>(size), 0, &b);
    p = b.ptr;
  } else {
    st = zarena_alloc(a, static_cast<uint64_t>(size), &p);
  }
  if (st != ZARENA_OK) {
    d->failed_mallocs.fetch_add(1, std::memory_order_relaxed);
    // zarena logged its diagnosis (arena.first_overflow) before zarena_alloc returned; the
    // message ends with the same verdict and fix.
    throw OutOfMemory(malloc_error(
        size, device,
        std::string(" failed: ") + zarena_status_string(st) + " (" + zarena_last_error() + ")"));
  }
  d->mallocs.fetch_add(1, std::memory_order_relaxed);
  note_live(d, static_cast<int64_t>(block_bytes(d, size)));
  return p;
}

void zarena_torch_free(void* ptr, size_t size, int device, void* stream) {
  if (ptr == nullptr) return;
  DeviceState* d = state_of(device);
  zarena* a = d != nullptr ? d->arena.load(std::memory_order_acquire) : nullptr;
  zarena_status st = ZARENA_E_NOT_OWNED;
  const char* detail = "no zarena arena exists for this device";
  if (a != nullptr) {
    std::vector<void*> used_on = take_recorded(ptr);  // tensor.record_stream
#ifdef ZARENA_TORCH_HAVE_CUDA
    void* home = home_for(d);
    used_on.push_back(stream);
    for (void* s : used_on) {
      if (s == home || d->backend != ZARENA_BACKEND_CUDA) continue;
      const cudaError_t e = join(d, device, home, s);
      if (e != cudaSuccess) {
        // PyTorch frees from destructors (no exception may leave), and giving the block
        // back unordered could hand it out while its last use still runs: stop, loudly.
        std::fprintf(stderr,
                     "zarena_torch: free(%p): ordering the arena's stream after %p on device "
                     "%d failed: %s\n",
                     ptr, s, device, cudaGetErrorString(e));
        std::abort();
      }
    }
#else
    (void)stream;
#endif
    st = zarena_free(a, ptr);
    detail = zarena_last_error();
  }
  if (st == ZARENA_OK) {
    d->frees.fetch_add(1, std::memory_order_relaxed);
    note_live(d, -static_cast<int64_t>(block_bytes(d, size)));
    return;
  }
  uint64_t n = 0;
  if (d != nullptr) n = d->failed_frees.fetch_add(1, std::memory_order_relaxed);
  if (n < kReportedFreeFailures) {
    std::fprintf(stderr, "zarena_torch: free(%p, %zu) on device %d refused: %s (%s)%s\n", ptr, size,
                 device, zarena_status_string(st), detail,
                 n + 1 == kReportedFreeFailures ? "; further failed frees are only counted" : "");
  }
}

zarena* zarena_torch_arena(int device) {
  DeviceState* d = state_of(device);
  return d != nullptr ? d->arena.load(std::memory_order_acquire) : nullptr;
}

zarena_status zarena_torch_get_info(int device, zarena_torch_info* out) {
  DeviceState* d = state_of(device);
  if (d == nullptr || out == nullptr || out->struct_size < sizeof(uint32_t))
    return ZARENA_E_INVALID_ARGUMENT;
  zarena_torch_info info;
  std::memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  info.backend = -1;
  if (d->arena.load(std::memory_order_acquire) != nullptr) {
    info.backend = d->backend;
    info.home_stream = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(d->home));
  }
  info.mallocs = d->mallocs.load(std::memory_order_relaxed);
  info.frees = d->frees.load(std::memory_order_relaxed);
  info.failed_mallocs = d->failed_mallocs.load(std::memory_order_relaxed);
  info.failed_frees = d->failed_frees.load(std::memory_order_relaxed);
  info.stream_joins = d->stream_joins.load(std::memory_order_relaxed);
  info.joins_skipped = d->joins_skipped.load(std::memory_order_relaxed);
  info.capture_joins = d->capture_joins.load(std::memory_order_relaxed);
  info.record_streams = d->record_streams.load(std::memory_order_relaxed);
  info.live_bytes = d->live_bytes.load(std::memory_order_relaxed);
  info.live_peak_bytes = d->live_peak_bytes.load(std::memory_order_relaxed);
  const size_t n = out->struct_size < sizeof info ? out->struct_size : sizeof info;
  const uint32_t caller_size = out->struct_size;
  std::memcpy(out, &info, n);
  out->struct_size = caller_size < sizeof info ? caller_size : static_cast<uint32_t>(sizeof info);
  return ZARENA_OK;
}

zarena_status zarena_torch_capture_begin(int device, void* stream) {
  DeviceState* d = state_of(device);
  zarena* a = d != nullptr ? d->arena.load(std::memory_order_acquire) : nullptr;
  if (a == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  const zarena_status st = zarena_graph_capture_begin(a);
  if (st == ZARENA_OK) d->capture_home.store(stream, std::memory_order_release);
  return st;
}

zarena_status zarena_torch_capture_end(int device, int keep, uint32_t* out_graph) {
  DeviceState* d = state_of(device);
  zarena* a = d != nullptr ? d->arena.load(std::memory_order_acquire) : nullptr;
  if (a == nullptr || out_graph == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  d->capture_home.store(nullptr, std::memory_order_release);
  return zarena_graph_capture_end(a, keep, out_graph);
}

void zarena_torch_record_stream(void* ptr, void* stream) {
  if (ptr == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_recorded_lock);
    std::vector<void*>& v = g_recorded[ptr];
    for (void* s : v) {
      if (s == stream) return;
    }
    v.push_back(stream);
  }
  g_any_recorded.store(true, std::memory_order_release);
  // The device of a block is not passed: count on the first device with an arena that
  // holds it (a block belongs to one arena).
  for (DeviceState& d : g_devices) {
    zarena* a = d.arena.load(std::memory_order_acquire);
    if (a != nullptr && zarena_contains(a, ptr)) {
      d.record_streams.fetch_add(1, std::memory_order_relaxed);
      break;
    }
  }
}

uint64_t zarena_torch_default_capacity(int device) {
  if (state_of(device) == nullptr) return 0;
  zarena_config cfg;
  torch_config(&cfg, device, nullptr);
  return cfg.capacity_bytes;
}

void zarena_torch_empty_cache(void) {
  for (int device = 0; device < ZARENA_TORCH_MAX_DEVICES; ++device) {
    zarena* a = g_devices[device].arena.load(std::memory_order_acquire);
    if (a == nullptr) continue;
    const zarena_status st = zarena_trim(a, 0);
    // During a capture nothing is given back (a decommit would wait for the stream): the
    // next empty_cache tries again.
    if (st != ZARENA_OK && st != ZARENA_E_CAPTURE_UNSAFE) {
      std::fprintf(stderr, "zarena_torch: empty_cache on device %d: %s\n", device,
                   zarena_last_error());
    }
  }
}

}  // extern "C"

namespace {

void say(char* why, size_t cap, const std::string& text) {
  if (why == nullptr || cap == 0) return;
  const size_t n = text.size() < cap - 1 ? text.size() : cap - 1;
  std::memcpy(why, text.data(), n);
  why[n] = 0;
}

// The C++ names (Itanium ABI) of what zarena_torch_hook_record_stream needs, as PyTorch
// 2.x declares them (torch/csrc/cuda/CUDAPluggableAllocator.h, c10/cuda/CUDACachingAllocator.h).
constexpr const char* kAllocatorSymbol = "_ZN3c104cuda20CUDACachingAllocator9allocatorE";
constexpr const char* kCustomSymbol =
    "_ZN5torch4cuda22CUDAPluggableAllocator24current_custom_allocatorE";
constexpr const char* kSetRecordSymbol =
    "_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator20set_record_stream_"
    "fnESt8functionIFvPvP11CUstream_stEE";

}  // namespace

struct CUstream_st;

extern "C" {

zarena_status zarena_torch_hook_record_stream(const char* c10_cuda_path,
                                              const char* torch_cuda_path, char* why, size_t cap) {
  if (c10_cuda_path == nullptr || torch_cuda_path == nullptr) {
    say(why, cap, "the paths of libc10_cuda.so and libtorch_cuda.so are needed");
    return ZARENA_E_INVALID_ARGUMENT;
  }
  // Only libraries already loaded (by `import torch`): the very copies PyTorch uses.
  void* c10 = dlopen(c10_cuda_path, RTLD_NOLOAD | RTLD_LAZY);
  void* tc = dlopen(torch_cuda_path, RTLD_NOLOAD | RTLD_LAZY);
  auto fail = [&](const std::string& text) {
    say(why, cap, text);
    if (c10 != nullptr) dlclose(c10);
    if (tc != nullptr) dlclose(tc);
    return ZARENA_E_UNSUPPORTED;
  };
  if (c10 == nullptr) return fail(std::string("not loaded: ") + c10_cuda_path);
  if (tc == nullptr) return fail(std::string("not loaded: ") + torch_cuda_path);
  void* slot = dlsym(c10, kAllocatorSymbol);
  if (slot == nullptr) {
    return fail(std::string("c10::cuda::CUDACachingAllocator::allocator not found (") +
                kAllocatorSymbol + ")");
  }
  void* current = static_cast<std::atomic<void*>*>(slot)->load();
  if (current == nullptr) return fail("PyTorch's current CUDA allocator is not set");
  // The custom allocator PyTorch installed (a std::shared_ptr: its stored pointer first).
  void* custom_slot = dlsym(tc, kCustomSymbol);
  if (custom_slot == nullptr) {
    return fail(std::string("torch::cuda::CUDAPluggableAllocator::current_custom_allocator not "
                            "found (") +
                kCustomSymbol + "): cannot check that the current allocator is the custom one");
  }
  void* custom = *static_cast<void**>(custom_slot);
  if (custom != current) {
    return fail(
        "the current CUDA allocator is not the pluggable one (call "
        "change_current_allocator first)");
  }
  void* set = dlsym(tc, kSetRecordSymbol);
  if (set == nullptr) {
    return fail(std::string("CUDAPluggableAllocator::set_record_stream_fn not found (") +
                kSetRecordSymbol + ")");
  }
  // A by-value std::function parameter is passed as the address of a temporary the caller
  // owns (Itanium C++ ABI); the member moves from it.
  using RecordFn = std::function<void(void*, CUstream_st*)>;
  using SetFn = void (*)(void* self, RecordFn* fn);
  RecordFn fn = [](void* ptr, CUstream_st* stream) { zarena_torch_record_stream(ptr, stream); };
  SetFn call;
  std::memcpy(&call, &set, sizeof call);
  call(current, &fn);
  // The libraries stay loaded (torch holds them); drop the extra references.
  dlclose(c10);
  dlclose(tc);
  say(why, cap, "");
  return ZARENA_OK;
}

const void* zarena_torch_zarena_alloc_address(void) {
  zarena_status (*fn)(zarena*, uint64_t, void**) = zarena_alloc;
  const void* address;
  std::memcpy(&address, &fn, sizeof address);
  return address;
}

}  // extern "C"
