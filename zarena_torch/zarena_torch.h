/*
 * libzarena_torch — zarena as PyTorch's CUDA allocator.
 *
 * A small shared library, separate from libzarena so that libzarena's exported symbols stay
 * exactly the C ABI of zarena.h. PyTorch loads it through
 * torch.cuda.memory.CUDAPluggableAllocator(path, "zarena_torch_malloc", "zarena_torch_free");
 * python/zarena/torch.py does that (zarena.torch.enable()) and reads the state below.
 *
 * ONE ARENA PER DEVICE, created at the first zarena_torch_malloc for that device with
 * zarena_config_init (so the usual environment configures it: ZARENA_CAPACITY_BYTES,
 * ZERFOO_ARENA_SIZE_GB, ZARENA_OVERFLOW_POLICY, ZARENA_BACKEND, ...), cfg.device = device,
 * cfg.stream = the stream of that first call (the arena's "home" stream),
 * ZARENA_FLAG_NO_RESETS, ZARENA_FLAG_EXPANDABLE unless ZARENA_EXPANDABLE is set (the capacity
 * is a maximum, committed on demand) and, unless ZARENA_NAME is set, the name
 * "torch:cuda:<device>".
 *
 * CAPACITY. Unless the environment names one (ZARENA_CAPACITY_BYTES, or ZERFOO_ARENA_SIZE_GB
 * while ztensor's variables are read), an expandable arena's capacity is the device's whole
 * memory (cudaMemGetInfo's total; the host's memory for a host arena), rounded down to
 * 2 MiB: it reserves address space only. It stays polite to other processes: memory is
 * committed on demand, commit_chunk_bytes at a time (2 MiB unless ZARENA_COMMIT_CHUNK_BYTES
 * names another), so the footprint follows the high water of what PyTorch holds, not the
 * capacity; once a step plan engages (the steps marked with zarena_step_begin repeat), what
 * the first steps committed above the plan's zone and the live blocks goes back (zarena.h,
 * "Expandable arenas"); torch.cuda.empty_cache() gives back what is committed above the
 * region's top (zarena_torch_empty_cache, zarena_trim), as the caching allocator gives back
 * its cached segments; the overflow pool, used only when a commit fails (the device is
 * full), keeps at most 64 MiB resident after its blocks are freed (overflow_retain_bytes,
 * unless the environment sets it). A region reserved whole
 * (ZARENA_EXPANDABLE=0) keeps the library's default capacity (1 GiB): size it.
 * The arenas live until the process exits; they are never reset (PyTorch frees every
 * block itself), which ZARENA_FLAG_NO_RESETS tells the diagnosis: no reset warning, and a
 * full arena is diagnosed working_set_full (or fragmentation, runaway_buffer).
 *
 * STREAMS. PyTorch calls malloc with its current stream and calls free, once the tensor's
 * last use has been enqueued, with the stream the block was allocated on (not the stream
 * of the last use). A block freed into the arena is handed out again at once, on whatever
 * stream the next malloc names, so:
 *   - home stream: nothing to do; stream order makes reuse safe;
 *   - a malloc on another stream S first makes S wait for the home stream's work enqueued
 *     so far (event recorded on home, cudaStreamWaitEvent(S)): the block may have been
 *     freed by home-stream work still pending;
 *   - a free of a block allocated on another stream S first makes the home stream wait for
 *     S's work enqueued so far: later users (home, or other streams that wait for home) run
 *     after the block's last use.
 * The waits are stream-ordered (no host synchronisation). While either stream is being
 * captured into a CUDA graph the wait is skipped and counted (joins_skipped), unless both
 * are captured together during zarena_torch_capture_begin/_end (see CAPTURE). Uses of a
 * block on a stream other than its allocation stream must be ordered by the program, or
 * declared with tensor.record_stream once zarena_torch_hook_record_stream installed the
 * hook PyTorch keeps for it (see RECORD_STREAM).
 *
 * FAILURES. A failed malloc of a non-zero size THROWS a C++ exception (a
 * std::runtime_error whose what() is "zarena_torch: malloc(<size>) on device <d> failed:
 * out of memory (<zarena's message, ending in its verdict and fix>)"); zarena has logged
 * arena.first_overflow before. PyTorch calls the pair from C++ and turns the exception
 * into a Python RuntimeError carrying that text, which the program may catch: the process
 * and its GPU state stay usable. Why not NULL: PyTorch's CUDAPluggableAllocator::malloc
 * (torch/csrc/cuda/CUDAPluggableAllocator.cpp) records and returns whatever the function
 * returns without checking it, so NULL would become a tensor at address 0 and fail later
 * as an illegal memory access (only the caching allocator's own path, e.g. a MemPool
 * over a pluggable allocator, maps NULL to torch.cuda.OutOfMemoryError). A C caller that
 * cannot take exceptions ends in std::terminate (abort) with the same text. A failed free
 * (not owned, double, stale) is counted (failed_frees; zarena_stats counts
 * invalid_frees/stale_frees), its message printed on stderr for the first 10, and
 * otherwise ignored; a stream wait that cannot be enqueued on a free aborts (frees run in
 * destructors, which cannot throw, and an unordered reuse could race the block's last use).
 */
#ifndef ZARENA_TORCH_H
#define ZARENA_TORCH_H

#include <stddef.h>
#include <stdint.h>

#include "zarena/zarena.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZARENA_TORCH_MAX_DEVICES 64

/* PyTorch's CUDAPluggableAllocator pair; stream is a cudaStream_t. malloc throws on
 * failure (see FAILURES): call it from C++. */
ZARENA_API_EXPORT void* zarena_torch_malloc(size_t size, int device, void* stream);
ZARENA_API_EXPORT void zarena_torch_free(void* ptr, size_t size, int device, void* stream);

/* The arena of a device, or NULL before the first malloc on it (or for a bad device).
 * Owned by libzarena_torch: use it with zarena_get_stats, zarena_epoch etc.; never destroy. */
ZARENA_API_EXPORT zarena* zarena_torch_arena(int device);

typedef struct zarena_torch_info {
  uint32_t struct_size; /* sizeof(zarena_torch_info) as the caller compiled it */
  int32_t backend;      /* ZARENA_BACKEND_HOST/_CUDA; -1 before the arena exists */
  uint64_t home_stream; /* the arena's stream (cfg.stream), as an integer */
  uint64_t mallocs;     /* successful zarena_torch_malloc calls (size > 0) */
  uint64_t frees;       /* successful zarena_torch_free calls (ptr != NULL) */
  uint64_t failed_mallocs;
  uint64_t failed_frees;
  uint64_t stream_joins;   /* waits inserted between a side stream and the home stream */
  uint64_t joins_skipped;  /* waits skipped because a stream was being captured */
  uint64_t capture_joins;  /* waits recorded into a capture as graph edges (see CAPTURE) */
  uint64_t record_streams; /* tensor.record_stream calls received (see RECORD_STREAM) */
  /* Bytes of the blocks handed out through zarena_torch_malloc and not yet given back through
   * zarena_torch_free, each counted as its size rounded up to the arena's alignment (what the
   * block takes), and the most of them at once since the arena was created: the figures
   * torch.cuda.memory_allocated / max_memory_allocated give for the caching allocator (which
   * rounds to 512 bytes). Exact with any number of threads (one shared counter, kept by the
   * shim, whose calls cost far more than its atomic add). zarena_stats' used_peak_bytes is
   * not this: it counts a step plan's zone whole, and with threads that free each other's
   * blocks (PyTorch's autograd thread frees the forward's activations) it is a bound that
   * climbs to high_water_bytes (zarena.h, zarena_reset_peak_stats). */
  uint64_t live_bytes;
  uint64_t live_peak_bytes;
} zarena_torch_info;

/* Copies the state of a device's arena into out (at most out->struct_size bytes).
 * Returns ZARENA_OK, or ZARENA_E_INVALID_ARGUMENT for a NULL out or a device outside
 * [0, ZARENA_TORCH_MAX_DEVICES). Thread-safe. */
ZARENA_API_EXPORT zarena_status zarena_torch_get_info(int device, zarena_torch_info* out);

/* The capacity the arena of `device` is (or would be) created with, from the environment
 * and the device (see CAPACITY); 0 for a device outside [0, ZARENA_TORCH_MAX_DEVICES).
 * Thread-safe; reads the environment. */
ZARENA_API_EXPORT uint64_t zarena_torch_default_capacity(int device);

/* torch.cuda.empty_cache(): every device's arena gives back the memory committed above its
 * top (zarena_trim(a, 0); nothing during a CUDA graph capture). PyTorch calls it through the
 * pluggable allocator's reset function, which zarena.torch.enable() sets. Thread-safe. */
ZARENA_API_EXPORT void zarena_torch_empty_cache(void);

/* The address of zarena_alloc as this library resolved it: equal to the caller's own
 * zarena_alloc when both use the same libzarena (zarena.torch checks that). */
ZARENA_API_EXPORT const void* zarena_torch_zarena_alloc_address(void);

/* CAPTURE (experimental, zarena/zarena_graph.h; python/zarena/torch.py graph()). The step
 * starting now on `device` is captured into a CUDA graph on `stream` (torch.cuda.graph's
 * capture stream): zarena_graph_capture_begin on the device's arena, and, until
 * zarena_torch_capture_end, `stream` takes the home stream's part in the stream ordering
 * for streams that are captured with it: a malloc on another captured stream waits for
 * `stream`, a free of a block from another captured stream makes `stream` wait for that
 * stream, each as an event recorded and waited for inside the capture, i.e. an edge of
 * the graph (capture_joins). A wait between a captured stream and one outside the capture
 * cannot be recorded and is skipped (joins_skipped), as before. Returns what
 * zarena_graph_capture_begin / _end return; ZARENA_E_INVALID_ARGUMENT for a device with no
 * arena yet or outside [0, ZARENA_TORCH_MAX_DEVICES), or a NULL out_graph. */
ZARENA_API_EXPORT zarena_status zarena_torch_capture_begin(int device, void* stream);
ZARENA_API_EXPORT zarena_status zarena_torch_capture_end(int device, int keep, uint32_t* out_graph);

/* UNPLANNED (experimental). While on (1) for the calling thread, its zarena_torch_malloc
 * calls are served by the dynamic engine without asking the step plan
 * (zarena_plan_alloc_unplanned): they neither move the plan's cursor nor end its step. For
 * allocations PyTorch makes on its own between the user's step boundary and a capture, that
 * are no part of the step and live on (torch's CUDA generator allocates its graph seed and
 * offset when the first graph registers with it: zarena.torch.graph makes that happen
 * once, in this mode). Not during a capture (refused there as any unplanned request).
 * Returns the previous setting. */
ZARENA_API_EXPORT int zarena_torch_set_unplanned(int on);

/* RECORD_STREAM. tensor.record_stream(s) says that the tensor's block is used on s: its
 * reuse must wait for the work queued on s when it is freed. PyTorch forwards it to a
 * pluggable allocator only through CUDAPluggableAllocator::set_record_stream_fn, a C++
 * member that Python does not expose. zarena_torch_hook_record_stream installs
 * zarena_torch_record_stream there, resolving at run time (dlopen RTLD_NOLOAD of the
 * already loaded libraries named by the two paths: libc10_cuda.so and libtorch_cuda.so;
 * dlsym of their C++ symbols: c10::cuda::CUDACachingAllocator::allocator, the current
 * allocator, and CUDAPluggableAllocator::set_record_stream_fn). It checks that the
 * current allocator is the custom one (torch's current_custom_allocator) before calling.
 * Returns ZARENA_OK, or ZARENA_E_UNSUPPORTED with why (the library or symbol that could not
 * be found, or an allocator that is not the custom one) in `why` (cap bytes, NUL-ended);
 * nothing is installed then. Call it after change_current_allocator.
 * zarena_torch_record_stream(ptr, stream) records that the live block at ptr is used on
 * stream; at its free, the home stream (the capture's stream during a capture) waits for
 * every stream recorded for it (an edge during a capture, when both are captured). */
ZARENA_API_EXPORT zarena_status zarena_torch_hook_record_stream(const char* c10_cuda_path,
                                                                const char* torch_cuda_path,
                                                                char* why, size_t cap);
ZARENA_API_EXPORT void zarena_torch_record_stream(void* ptr, void* stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ZARENA_TORCH_H */
