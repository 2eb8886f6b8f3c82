/* libzarena_torch: PyTorch's CUDAPluggableAllocator pair over one zarena arena per device.
 * The design (streams, failures) is described in zarena_torch.h. */
#include "zarena_torch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ZARENA_TORCH_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

enum { kReportedFreeFailures = 10 };

typedef struct device_state {
  _Atomic(zarena*) arena; /* published after home/backend/event are set */
  void* home;
  int32_t backend;
  int create_failed;
  char name[32];
#ifdef ZARENA_TORCH_HAVE_CUDA
  cudaEvent_t event;
#endif
  atomic_uint_fast64_t mallocs, frees, failed_mallocs, failed_frees, stream_joins, joins_skipped;
} device_state;

static device_state g_devices[ZARENA_TORCH_MAX_DEVICES];
/* Serialises arena creation and the event record+wait pairs (both rare). */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static device_state* state_of(int device) {
  if (device < 0 || device >= ZARENA_TORCH_MAX_DEVICES) return NULL;
  return &g_devices[device];
}

#ifdef ZARENA_TORCH_HAVE_CUDA
static int capturing(cudaStream_t s) {
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(s, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1; /* e.g. the legacy stream while another stream captures: do not touch it */
  }
  return status != cudaStreamCaptureStatusNone;
}

/* Makes `waiter` wait for the work enqueued on `waited` so far. */
static void join(device_state* d, int device, void* waiter, void* waited) {
  cudaStream_t w = (cudaStream_t)waiter, on = (cudaStream_t)waited;
  if (capturing(w) || capturing(on)) {
    atomic_fetch_add_explicit(&d->joins_skipped, 1, memory_order_relaxed);
    return;
  }
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  if (previous != device) (void)cudaSetDevice(device);
  pthread_mutex_lock(&g_lock);
  cudaError_t e = cudaEventRecord(d->event, on);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(w, d->event, 0);
  pthread_mutex_unlock(&g_lock);
  if (previous >= 0 && previous != device) (void)cudaSetDevice(previous);
  if (e != cudaSuccess) {
    /* Without the wait, reuse could race the block's last use: stop here, loudly. */
    fprintf(stderr, "zarena_torch: ordering stream %p after %p on device %d failed: %s\n", waiter,
            waited, device, cudaGetErrorString(e));
    abort();
  }
  atomic_fetch_add_explicit(&d->stream_joins, 1, memory_order_relaxed);
}
#endif

static zarena* create_arena(device_state* d, int device, void* stream) {
  pthread_mutex_lock(&g_lock);
  zarena* a = atomic_load_explicit(&d->arena, memory_order_acquire);
  if (a == NULL && !d->create_failed) {
    zarena_config cfg;
    zarena_config_init(&cfg);
    cfg.device = device;
    cfg.stream = stream;
    if (getenv("ZARENA_NAME") == NULL) {
      snprintf(d->name, sizeof d->name, "torch:cuda:%d", device);
      cfg.name = d->name;
    }
    zarena_status st = zarena_create(&cfg, &a);
    if (st != ZARENA_OK) {
      fprintf(stderr, "zarena_torch: creating the arena of device %d failed: %s\n", device,
              zarena_last_error());
      d->create_failed = 1;
      a = NULL;
    } else {
      d->home = stream;
      d->backend = zarena_backend(a);
#ifdef ZARENA_TORCH_HAVE_CUDA
      if (d->backend == ZARENA_BACKEND_CUDA) {
        int previous = -1;
        if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
        (void)cudaSetDevice(device);
        cudaError_t e = cudaEventCreateWithFlags(&d->event, cudaEventDisableTiming);
        if (previous >= 0 && previous != device) (void)cudaSetDevice(previous);
        if (e != cudaSuccess) {
          fprintf(stderr, "zarena_torch: cudaEventCreate on device %d failed: %s\n", device,
                  cudaGetErrorString(e));
          (void)zarena_destroy(a);
          d->create_failed = 1;
          a = NULL;
        }
      }
#endif
      if (a != NULL) atomic_store_explicit(&d->arena, a, memory_order_release);
    }
  }
  pthread_mutex_unlock(&g_lock);
  return a;
}

void* zarena_torch_malloc(size_t size, int device, void* stream) {
  device_state* d = state_of(device);
  if (d == NULL) {
    fprintf(stderr, "zarena_torch: malloc(%zu) for device %d: outside [0, %d)\n", size, device,
            ZARENA_TORCH_MAX_DEVICES);
    abort();
  }
  zarena* a = atomic_load_explicit(&d->arena, memory_order_acquire);
  if (a == NULL) a = create_arena(d, device, stream);
  if (a == NULL) {
    atomic_fetch_add_explicit(&d->failed_mallocs, 1, memory_order_relaxed);
    fprintf(stderr, "zarena_torch: malloc(%zu) on device %d: no arena (see above)\n", size, device);
    abort();
  }
  if (size == 0) return NULL;
#ifdef ZARENA_TORCH_HAVE_CUDA
  if (stream != d->home && d->backend == ZARENA_BACKEND_CUDA) join(d, device, stream, d->home);
#endif
  void* p = NULL;
  zarena_status st = zarena_alloc(a, (uint64_t)size, &p);
  if (st != ZARENA_OK) {
    atomic_fetch_add_explicit(&d->failed_mallocs, 1, memory_order_relaxed);
    fprintf(stderr,
            "zarena_torch: malloc(%zu) on device %d failed: %s (%s). PyTorch cannot take a "
            "failed pluggable malloc; aborting. zarena's diagnosis (arena.first_overflow) says "
            "why; a larger ZARENA_CAPACITY_BYTES, ZARENA_OVERFLOW_LIMIT_BYTES (overflow is "
            "capped at the capacity by default) or an overflow policy other than refuse may "
            "help.\n",
            size, device, zarena_status_string(st), zarena_last_error());
    abort();
  }
  atomic_fetch_add_explicit(&d->mallocs, 1, memory_order_relaxed);
  return p;
}

void zarena_torch_free(void* ptr, size_t size, int device, void* stream) {
  if (ptr == NULL) return;
  device_state* d = state_of(device);
  zarena* a = d != NULL ? atomic_load_explicit(&d->arena, memory_order_acquire) : NULL;
  zarena_status st = ZARENA_E_NOT_OWNED;
  const char* detail = "no zarena arena exists for this device";
  if (a != NULL) {
#ifdef ZARENA_TORCH_HAVE_CUDA
    if (stream != d->home && d->backend == ZARENA_BACKEND_CUDA) join(d, device, d->home, stream);
#endif
    st = zarena_free(a, ptr);
    detail = zarena_last_error();
  }
  if (st == ZARENA_OK) {
    atomic_fetch_add_explicit(&d->frees, 1, memory_order_relaxed);
    return;
  }
  uint_fast64_t n = 0;
  if (d != NULL) n = atomic_fetch_add_explicit(&d->failed_frees, 1, memory_order_relaxed);
  if (n < kReportedFreeFailures)
    fprintf(stderr, "zarena_torch: free(%p, %zu) on device %d refused: %s (%s)%s\n", ptr, size,
            device, zarena_status_string(st), detail,
            n + 1 == kReportedFreeFailures ? "; further failed frees are only counted" : "");
}

zarena* zarena_torch_arena(int device) {
  device_state* d = state_of(device);
  return d != NULL ? atomic_load_explicit(&d->arena, memory_order_acquire) : NULL;
}

zarena_status zarena_torch_get_info(int device, zarena_torch_info* out) {
  device_state* d = state_of(device);
  if (d == NULL || out == NULL || out->struct_size < sizeof(uint32_t))
    return ZARENA_E_INVALID_ARGUMENT;
  zarena_torch_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  info.backend = -1;
  if (atomic_load_explicit(&d->arena, memory_order_acquire) != NULL) {
    info.backend = d->backend;
    info.home_stream = (uint64_t)(uintptr_t)d->home;
  }
  info.mallocs = atomic_load_explicit(&d->mallocs, memory_order_relaxed);
  info.frees = atomic_load_explicit(&d->frees, memory_order_relaxed);
  info.failed_mallocs = atomic_load_explicit(&d->failed_mallocs, memory_order_relaxed);
  info.failed_frees = atomic_load_explicit(&d->failed_frees, memory_order_relaxed);
  info.stream_joins = atomic_load_explicit(&d->stream_joins, memory_order_relaxed);
  info.joins_skipped = atomic_load_explicit(&d->joins_skipped, memory_order_relaxed);
  size_t n = out->struct_size < sizeof info ? out->struct_size : sizeof info;
  uint32_t caller_size = out->struct_size;
  memcpy(out, &info, n);
  out->struct_size = caller_size < sizeof info ? caller_size : (uint32_t)sizeof info;
  return ZARENA_OK;
}

const void* zarena_torch_zarena_alloc_address(void) {
  zarena_status (*fn)(zarena*, uint64_t, void**) = zarena_alloc;
  const void* address;
  memcpy(&address, &fn, sizeof address);
  return address;
}
