/*
 * zarena — a GPU memory arena behind a stable C ABI.
 *
 * This header is the manual: one section per topic, each function with its contract (what
 * it does, what it returns, who owns what, which threads may call it). The lists that live
 * in tables in the code are in docs/: the environment variables (docs/CONFIG.md), the log
 * events and the verdicts (docs/LOGGING.md), the statistics (docs/STATS.md). Test hooks
 * are in zarena/zarena_testing.h, outside this contract (and not installed).
 *
 *   1. Versions, status codes, errors     7. Statistics, live blocks, text formats
 *   2. Configuration and lifetime         8. Diagnosis
 *   3. Allocation and free                9. Logging
 *   4. Reset, floors and steps           10. Trace
 *   5. Pins                              11. Expandable arenas
 *   6. Capture, stream and poison
 *   6b. The overflow route at run time
 *
 * WHAT IT IS
 *   An arena reserves one large region from a backend (CUDA device memory, or host
 *   memory) at create. zarena_alloc hands out aligned blocks of it: first from blocks
 *   freed earlier in the same epoch (good fit from an O(1) two-level segregated-fit
 *   index; freed neighbours coalesce), otherwise by bumping a top offset. zarena_reset
 *   rewinds the arena to its floor in O(1) and starts a new epoch: every block allocated
 *   above the floor since the last reset is reclaimed at once. zarena_mark_step_boundary
 *   raises the floor to the current top, so what was allocated so far (weights, uploaded
 *   samples) survives later resets. When the region is exhausted, an allocation spills
 *   into an overflow pool according to the overflow policy, or fails with
 *   ZARENA_E_OUT_OF_MEMORY.
 *
 *   A training loop therefore looks like:
 *       upload weights (zarena_alloc ...); zarena_mark_step_boundary(a);
 *       for each step: zarena_step_begin(a); allocations and frees ...; zarena_reset(a);
 *   A loop that never resets grows until it overflows; zarena says so in its log
 *   (event "arena.reset_cadence" before, at the third step, "arena.first_overflow" with
 *   verdict "never_reset" when it happens), on stderr when no log callback is registered,
 *   and in the error: the failing call's zarena_last_error() ends with
 *   "verdict=never_reset; fix: call zarena_reset after every step ..." (see "Diagnosis").
 *
 * CONVENTIONS
 *   - Every function that can fail returns zarena_status. ZARENA_OK is 0. On failure a
 *     thread-local message describing the failure is available from zarena_last_error()
 *     until the next failing call on the same thread, and no state has changed: a
 *     failed call leaves the arena exactly as it was, except the counters in
 *     zarena_stats that exist to count such failures (invalid_frees, stale_frees,
 *     misses, overflow_failures, and epoch_allocs for a request that failed), the
 *     diagnosis counters a refused request feeds (overflow_epochs, overflow_records,
 *     overflow_summaries; the diagnosis itself, zarena_diagnose), and
 *     overflow_max_latency_ns when the failed request reached the backend (the watchdog
 *     times every backend call, failed ones too).
 *   - No C++ exception ever leaves this library; allocation failures inside the library
 *     are reported as ZARENA_E_OUT_OF_MEMORY or ZARENA_E_INTERNAL.
 *   - Output pointers are written only on ZARENA_OK (out_ptr of zarena_alloc is set to
 *     NULL on failure when it is non-NULL).
 *   - Pointers returned by zarena_alloc are device pointers for the CUDA backend and
 *     host pointers for the host backend. zarena never reads or writes them, except
 *     when ZARENA_FLAG_POISON asks it to fill freed and reclaimed blocks.
 *   - Strings zarena returns are owned by zarena (static storage, or as each function
 *     says); strings and structs the caller passes are read during the call only, unless
 *     the function says it copies them.
 *
 * THREADS
 *   zarena_alloc, zarena_free, zarena_get_stats, zarena_epoch and zarena_mark_step_boundary
 *   may be called on one arena from any number of threads at once (and every other call
 *   whose comment says "Thread-safe"). Allocations and frees of different threads do not
 *   wait for each other: each thread works in its own slot (free blocks, a span of the
 *   region, counters); a block may be freed by any thread. Calls that act on the whole
 *   arena (reset, stats, region info, live-block walks, boundaries, floors) take every
 *   slot in turn, so what they see is one consistent instant. docs/CONCURRENCY.md.
 *   zarena_reset may be called concurrently with the others (it is serialised
 *   internally), but the caller must make sure no other thread still uses a block that
 *   the reset reclaims: the reset invalidates every block allocated above the floor.
 *   zarena_destroy requires exclusive use: no other call on that arena may be in flight
 *   or start afterwards.
 *   Different arenas are fully independent.
 *
 * FORK
 *   A child created by fork() inherits the parent's arenas as they were at that instant,
 *   possibly with locks held by parent threads that do not exist in the child, with
 *   memory that is the parent's (and, on a GPU, no CUDA context the child may use). So in
 *   the child every call on an arena created before the fork is refused with
 *   ZARENA_E_INVALID_ARGUMENT at once, changing nothing (zarena_last_error says "fork");
 *   zarena_destroy of it too: it releases nothing (the child's copy of host memory goes
 *   with the child). The child may create, use and destroy arenas of its own (the host
 *   backend; CUDA's own rules apply to a CUDA backend), and may exit in any way: its exit
 *   writes nothing into the parent's traces and waits for nothing of the parent's.
 *   zarena's handle, trace and log-sink locks and its reporter's are taken around fork()
 *   so that the child finds them free. Anything a parent thread was inside at that instant
 *   beyond those (a log line being written to stderr, the program's log callback, a tag
 *   being registered) is, as POSIX says for a child of a multithreaded process, the
 *   program's to avoid: fork while no other thread is inside zarena, or exec.
 *
 * STABILITY
 *   Every function in this header is the stable ABI of major version 1 unless it sits
 *   in a section marked EXPERIMENTAL: names, numeric values and struct layouts do not
 *   change within a major version; new status codes, enum values and trailing struct
 *   fields may be added by minor versions. Versioned structs begin with struct_size: set
 *   it to sizeof() as you compiled it; the library reads and writes only that many bytes.
 *   Each stable function carries the symbol version of the release that added it
 *   (ZARENA_1 for 1.0.0's, ZARENA_1.1 for 1.1's, ...; cmake/zarena.map lists them), so a
 *   program that needs a newer function refuses to start on an older library instead of
 *   failing at the call. Functions of an EXPERIMENTAL section (zarena_trim; and the
 *   headers zarena/zarena_plan.h, zarena/zarena_graph.h, zarena/zarena_kept.h and
 *   zarena/zarena_lane.h, for bindings and engines, experimental as a whole) carry the
 *   symbol version ZARENA_EXPERIMENTAL and may change or go in any minor version.
 *   docs/ABI.md has the rules and the checks that hold them.
 */
#ifndef ZARENA_ZARENA_H
#define ZARENA_ZARENA_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define ZARENA_API_EXPORT __declspec(dllexport)
#define ZARENA_API_IMPORT __declspec(dllimport)
#else
#define ZARENA_API_EXPORT __attribute__((visibility("default")))
#define ZARENA_API_IMPORT
#endif
#if defined(ZARENA_STATIC)
#define ZARENA_API
#elif defined(ZARENA_BUILDING_LIBRARY)
#define ZARENA_API ZARENA_API_EXPORT
#else
#define ZARENA_API ZARENA_API_IMPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* =================================================================================
 * 1. Versions, status codes, errors
 * ================================================================================= */
/* generated: version, from CMakeLists.txt (tools/gen) */
#define ZARENA_VERSION_MAJOR 1
#define ZARENA_VERSION_MINOR 2
#define ZARENA_VERSION_PATCH 0
/* end of generated version */
#define ZARENA_VERSION_NUMBER \
  (ZARENA_VERSION_MAJOR * 10000 + ZARENA_VERSION_MINOR * 100 + ZARENA_VERSION_PATCH)

/* The version of the library actually loaded (compare with ZARENA_VERSION_NUMBER to
 * detect a header/library mismatch). Never fails; thread-safe. */
ZARENA_API uint32_t zarena_version_number(void);
/* "MAJOR.MINOR.PATCH" of the loaded library; static storage, never NULL. Thread-safe. */
ZARENA_API const char* zarena_version_string(void);

/* Status codes. Values are fixed forever; new codes are added after the last one. */
typedef int32_t zarena_status;
/* generated: status codes, from src/base/status_codes.h (tools/gen) */
#define ZARENA_OK 0
#define ZARENA_E_INVALID_ARGUMENT 1 /* NULL handle/out pointer, bad config value */
#define ZARENA_E_OUT_OF_MEMORY 2    /* region full and overflow refused/failed/capped */
#define ZARENA_E_NOT_OWNED 3        /* pointer not handed out by this arena (or interior) */
#define ZARENA_E_DOUBLE_FREE 4      /* block already freed */
#define ZARENA_E_STALE 5            /* block reclaimed by an earlier reset; dropped */
#define ZARENA_E_CAPTURE_UNSAFE 6   /* sync overflow refused: stream is being captured */
#define ZARENA_E_NO_DEVICE 7        /* CUDA backend asked for but no usable device */
#define ZARENA_E_BACKEND 8          /* the backend (CUDA runtime, OS) reported an error */
#define ZARENA_E_UNSUPPORTED 9      /* valid request this build or device cannot do */
#define ZARENA_E_INTERNAL 10        /* a bug in zarena; please report with the message */
#define ZARENA_E_NOT_PINNED 11      /* zarena_unpin of a block that holds no pin */
#define ZARENA_E_TOO_MANY_PINS 12   /* zarena_pin of a block that holds 65535 pins already */
/* A call on an arena the binding closed (Go's Close, Python's close): the bindings answer
 * it before any call into the library. The C library itself never returns it: a handle
 * used after zarena_destroy is undefined behaviour (see zarena_destroy). */
#define ZARENA_E_CLOSED 13
/* end of generated status codes */

/* A short constant description of a status ("out of memory"); static, never NULL.
 * Unknown values yield "unknown status". Thread-safe. */
ZARENA_API const char* zarena_status_string(zarena_status s);
/* Detail of the most recent failure on the calling thread (names sizes, pointers,
 * CUDA error text). Thread-local; valid until the next zarena call on this thread;
 * never NULL ("" when no failure happened yet). Successful calls do not clear it. */
ZARENA_API const char* zarena_last_error(void);

/* =================================================================================
 * 2. Configuration and lifetime
 *
 * An arena is configured by a zarena_config: zarena_config_init fills the defaults and
 * the environment's overrides, the caller changes what it wants, zarena_create reads it.
 *
 * OVERFLOW AND CUDA
 *   The CUDA backend takes the region from cudaMalloc (cudaMallocManaged with
 *   ZARENA_FLAG_MANAGED) on cfg->device. The arena is bound to that device: every call
 *   makes it current for its duration and restores the calling thread's current device
 *   afterwards, so any thread may use the arena whatever device it is bound to.
 *   libzarena carries CUDA's runtime statically: it loads without a driver, and then
 *   AUTO picks the host backend and CUDA fails with ZARENA_E_NO_DEVICE (message with the
 *   CUDA error). A cudaStream_t made by the host program's own CUDA runtime is a valid
 *   cfg->stream. The stream must belong to cfg->device (else ZARENA_E_INVALID_ARGUMENT at
 *   create) and must outlive the arena: frees and the destroy are ordered on it.
 *
 *   ASYNC: overflow blocks come from a memory pool the arena creates for itself (never
 *   the device's default pool, which the host program may be tuning), with
 *   cudaMallocFromPoolAsync / cudaFreeAsync on cfg->stream (NULL = the legacy stream).
 *   The pool keeps up to overflow_retain_bytes of freed memory resident across
 *   synchronisations instead of giving it back to the OS and faulting it in again.
 *   The pool maps memory in chunks larger than the requests (32 MiB on an H200): a
 *   threshold below one chunk keeps nothing, so the default retain is the capacity but
 *   at least 64 MiB. ZARENA_FLAG_OVERFLOW_PREWARM allocates and frees the retained size
 *   once at create (and synchronises the stream), so the first overflow does not pay for
 *   mapping it (milliseconds for a fresh pool). An ASYNC overflow made while cfg->stream
 *   is being captured into a CUDA graph becomes an allocation node of that graph and
 *   belongs to it: freed (zarena_free, or a reset that reclaims it) within the same
 *   capture, it becomes a free node of the graph too, so the graph allocates and frees it
 *   at every launch and can be launched any number of times; freed later, its free is
 *   ordered on the stream after the capture ends (see "Capture, stream and poison"), so
 *   launch the graph before that. An arena on the legacy (NULL) stream has no stream of
 *   its own to capture: its ASYNC overflow is refused with ZARENA_E_CAPTURE_UNSAFE, before
 *   any call, whenever a SYNC one would be (below), since a stream-ordered call on the
 *   legacy stream joins a blocking stream's capture and breaks it.
 *
 *   SYNC: cudaMalloc / cudaFree. A synchronous allocation during graph capture breaks
 *   the capture (CUDA refuses it and invalidates the capture; some drivers hang), so it
 *   is refused with ZARENA_E_CAPTURE_UNSAFE, before any call, when cfg->stream is
 *   capturing (or its capture was invalidated), when a blocking stream of the device is
 *   capturing (the legacy stream's rules: it reports an implicit capture, which covers
 *   an arena on the NULL stream), or when the calling thread's per-thread stream is.
 *   Not visible beforehand: a global-mode capture on another non-blocking stream. CUDA
 *   then refuses the cudaMalloc itself (ZARENA_E_CAPTURE_UNSAFE too, path
 *   "capture_refused") and that capture is invalidated. Use ASYNC with a stream when
 *   overflow may happen during capture.
 *
 *   Both: overflow_limit_bytes caps live overflow bytes (ZARENA_E_OUT_OF_MEMORY beyond
 *   it; by default the cap is the capacity, so overflow at most doubles what the arena
 *   takes, ZARENA_OVERFLOW_UNLIMITED lifts it); zarena_free returns a block to its route;
 *   zarena_reset frees every overflow block of the epoch still live; blocks live at
 *   zarena_mark_step_boundary survive resets like the region below the floor. Overflow
 *   blocks are aligned to cfg->alignment on every route, like region blocks (above
 *   CUDA's own 256 bytes the backend allocates alignment - 256 bytes more and hands out
 *   the aligned address inside). An overflow backend call slower than overflow_slow_ns
 *   logs "overflow.slow"; stats.overflow_max_latency_ns keeps the slowest. The
 *   "arena.first_overflow" record names the route in "path": async, sync, custom,
 *   capture_refused, refused (REFUSE) or limit.
 *
 *   The policy can change at run time (zarena_set_overflow_policy), and the program can
 *   route overflow to its own allocator (zarena_set_overflow_allocator, policy CUSTOM);
 *   every block goes back by the route that made it (see "The overflow route at run
 *   time").
 * ================================================================================= */
#define ZARENA_BACKEND_AUTO 0 /* CUDA when a device is usable, else host */
#define ZARENA_BACKEND_HOST 1 /* page-backed host memory: CPU engines, tests */
#define ZARENA_BACKEND_CUDA 2 /* cudaMalloc'ed device memory on cfg->device */

#define ZARENA_OVERFLOW_DEFAULT 0 /* ASYNC when a stream is configured, else SYNC */
#define ZARENA_OVERFLOW_ASYNC 1   /* stream-ordered pool (cudaMallocFromPoolAsync) */
#define ZARENA_OVERFLOW_SYNC 2    /* cudaMalloc; refused while the stream is captured */
#define ZARENA_OVERFLOW_REFUSE 3  /* region full => ZARENA_E_OUT_OF_MEMORY */
/* (1.1) the program's own allocator (zarena_set_overflow_allocator); never in a config */
#define ZARENA_OVERFLOW_CUSTOM 4

/* generated: config flags, from src/config/config_fields.h (tools/gen) */
#define ZARENA_FLAG_MANAGED 0x1u /* region from cudaMallocManaged (where supported) */
#define ZARENA_FLAG_POISON 0x2u  /* fill freed/reclaimed blocks with poison_word (debugging) */
/* at create, allocate+free the retained overflow size once so pages are resident */
#define ZARENA_FLAG_OVERFLOW_PREWARM 0x4u
/* capacity_bytes becomes the maximum: the region's address range is reserved at create
 * and memory is committed on demand, commit_chunk_bytes at a time (see "Expandable
 * arenas") */
#define ZARENA_FLAG_EXPANDABLE 0x8u
/* with ZARENA_FLAG_MANAGED on a device without managed memory: use device memory (and say
 * so in "arena.config") instead of failing zarena_create with ZARENA_E_UNSUPPORTED */
#define ZARENA_FLAG_MANAGED_FALLBACK 0x10u
/* invalid configuration fails zarena_create with ZARENA_E_INVALID_ARGUMENT (the message
 * lists every problem) instead of a warning: this includes invalid environment values and
 * unknown ZARENA_* environment variables (see zarena_config_init) */
#define ZARENA_FLAG_STRICT_CONFIG 0x20u
/* log an "arena.step" record (info) at every zarena_reset: the epoch's peak, allocations,
 * reuse and overflow. Off by default: a training loop resets thousands of times */
#define ZARENA_FLAG_STEP_RECORDS 0x40u
/* the program frees every block it allocates and never resets: the arena is a
 * general-purpose pool (zarena.torch sets this). The diagnosis then makes no guess about
 * steps that are never reset: no "arena.reset_cadence" warning, and an overflow is never
 * diagnosed never_reset or reset_stopped (see zarena_diagnose) */
#define ZARENA_FLAG_NO_RESETS 0x80u
/* (1.2) step plans on. Since 1.3 they are on by default (ZARENA_FLAG_NO_PLAN turns them
 * off), so this flag changes nothing; kept for programs that set it */
#define ZARENA_FLAG_PLAN 0x100u
/* (1.1) the "arena.first_overflow" (or "arena.overflow_summary") record of an overflow
 * that succeeds is built and handed to the log callback (or stderr) by the allocating
 * call itself, before it returns, instead of by zarena's reporter thread: an engine whose
 * contract is "the diagnosis is logged before Alloc returns" needs no zarena_log_flush
 * (which waits for every arena's records). Costs the record's building on that one call
 * (the epoch's first overflow; later overflows of the epoch log nothing). No lock is held
 * while the callback runs (see "Logging"). Off by default */
#define ZARENA_FLAG_DIAGNOSE_SYNC 0x200u
/* (1.3) step plans off. Plans are on by default: the arena learns a repeating step
 * (zarena_step_begin or zarena_reset marks where steps begin) and serves it from a packed
 * plan, with no allocator work per block (see "Step plans" and docs/PLANS.md). A program
 * whose steps never repeat pays for the learning now and then only. ZARENA_PLAN=0 sets
 * this flag, ZARENA_PLAN=1 clears it. A trace file records what the plans serve (trace
 * format 2.2) */
#define ZARENA_FLAG_NO_PLAN 0x400u
/* end of generated config flags */

/* overflow_limit_bytes: no cap at all on live overflow bytes (0 means the default cap) */
#define ZARENA_OVERFLOW_UNLIMITED UINT64_MAX

typedef struct zarena_config {
  uint32_t struct_size;           /* sizeof(zarena_config) as the caller compiled it */
  int32_t backend;                /* ZARENA_BACKEND_*; default AUTO */
  int32_t device;                 /* CUDA device ordinal; default 0 */
  uint64_t capacity_bytes;        /* region size; default 1 GiB; must be > 0 (a pool whose
                                     size comes later: ZARENA_FLAG_EXPANDABLE with the most
                                     it may take reserves address space only, and commits
                                     memory as the first allocations need it) */
  uint64_t alignment;             /* power of two in [8, 1 GiB]; default 256 */
  int32_t overflow_policy;        /* ZARENA_OVERFLOW_*; default DEFAULT */
  uint64_t overflow_retain_bytes; /* overflow pool release threshold; 0 = default:
                                     the capacity, but at least 64 MiB (see above) */
  uint64_t overflow_limit_bytes;  /* cap on live overflow bytes; 0 = default: the
                                     capacity (a loop that never resets fails with its
                                     diagnosis instead of eating the device);
                                     ZARENA_OVERFLOW_UNLIMITED = no cap */
  void* stream;                   /* cudaStream_t the memory is used on; NULL = legacy */
  uint32_t flags;                 /* ZARENA_FLAG_* */
  const char* name;               /* label in log lines; copied at create; NULL = "zarena" */
  /* --- after the 1.0.0 layout (88 bytes): a struct_size that ends before a field below
   *     means "default" for it --- */
  uint64_t overflow_slow_ns;   /* watchdog: overflow calls slower than this log
                                  "overflow.slow"; 0 = default 10 ms */
  uint32_t poison_word;        /* 32-bit poison pattern (ZARENA_FLAG_POISON); 0 = default
                                  0x7FF80000 (a quiet NaN read as float32 and as float64) */
  uint32_t reserved0;          /* must be 0 */
  uint64_t commit_chunk_bytes; /* ZARENA_FLAG_EXPANDABLE: commit step; 0 = default 64 MiB */
  uint64_t trim_keep_bytes;    /* ZARENA_FLAG_EXPANDABLE: at reset, decommit what lies above
                                  max(this, what is in use); 0 = never trim at a reset (a
                                  step plan engaging trims all the same: section 11) */
  const char* trace_file;      /* record every event to this file (see "Trace");
                                  NULL = none; copied at create. A path another open
                                  trace writes (another arena, another process) is not
                                  truncated: the trace goes to "<stem>.2<ext>", ... and
                                  "arena.trace_renamed" says so. See zarena_trace_status */
} zarena_config;

/* Fills *cfg with the defaults, then applies the environment's overrides, and sets
 * cfg->struct_size. Never fails; NULL is ignored. Thread-safe (it reads the environment,
 * which no thread may change meanwhile).
 * zarena_config_init(cfg) is a macro for zarena_config_init_sized(cfg, sizeof *cfg): the
 * library writes exactly the struct the caller compiled, never past it, whatever
 * version of zarena is loaded (a newer caller's unknown tail is zeroed). The exported
 * function of the same name (for dlopen users and function pointers) fills the 1.0.0
 * layout, 88 bytes, forever.
 * The environment: a ZARENA_* variable per field (ZARENA_CAPACITY_BYTES,
 * ZARENA_OVERFLOW_POLICY, ZARENA_POISON=1, ...) and ztensor's names
 * (ZERFOO_ARENA_SIZE_GB, ZERFOO_OVERFLOW_POOL_RETAIN_GB, ZTENSOR_ARENA_POISON,
 * ZERFOO_ENABLE_MANAGED_MEM, which is on when set to anything but "", as ztensor reads it);
 * ZARENA_ZTENSOR_ENV=0 leaves ztensor's names unread (an engine that owns those switches).
 * docs/CONFIG.md has the table and how values are read (strictly: a typo cannot pass for
 * a setting). An invalid value is ignored (the default
 * stays) and logged at warn when an arena is created ("config.invalid_value"), as is
 * every ZARENA_* variable zarena does not know ("config.unknown_variable", with the
 * closest known name); with ZARENA_FLAG_STRICT_CONFIG these problems fail zarena_create
 * instead. The "arena.config" record names each value's source. */
ZARENA_API void zarena_config_init_sized(zarena_config* cfg, uint32_t struct_size);
ZARENA_API void zarena_config_init(zarena_config* cfg);
#define zarena_config_init(cfg) zarena_config_init_sized((cfg), (uint32_t)sizeof(*(cfg)))

/* Reads `text` as the environment variable of a configuration field is read (docs/CONFIG.md):
 * the one syntax for sizes, names and switches that bindings and tools reuse
 * (Python's Arena(capacity_bytes="1.5GiB"), zarena-replay --capacity 64MiB).
 * field: a zarena_config member's name ("capacity_bytes", "overflow_policy", "backend",
 *   "alignment", "overflow_slow_ns", ...) or a flag's ("flags.poison", "flags.expandable").
 * out: receives the value as the struct stores it: bytes, the enum's value
 *   (ZARENA_OVERFLOW_REFUSE for "refuse"), 0/1 for a flag, nanoseconds for
 *   overflow_slow_ns (given in milliseconds, as ZARENA_OVERFLOW_SLOW_MS); untouched on
 *   failure.
 * Returns: ZARENA_OK; ZARENA_E_INVALID_ARGUMENT (NULL argument, unknown field, a text
 *   field such as name, or a value that is invalid or out of range: zarena_last_error()
 *   says why and gives a valid example). Thread-safe; reads no environment. */
ZARENA_API zarena_status zarena_config_parse(const char* field, const char* text, uint64_t* out);

typedef struct zarena zarena; /* opaque */

/* Creates an arena and reserves its whole region from the backend.
 * cfg: required; start from zarena_config_init. A cfg whose struct_size is smaller
 * than this header's (an older caller) is read up to struct_size, the rest defaults;
 * a larger one (a newer caller) is accepted when its unknown tail is all zero. The
 * strings it points to are copied.
 * out: receives the handle on success; untouched on failure. The caller owns the arena
 * and releases it with zarena_destroy.
 * Returns: ZARENA_OK; ZARENA_E_INVALID_ARGUMENT (NULL cfg/out, struct_size too small or
 *   with a non-zero unknown tail, capacity 0, bad alignment, unknown backend or policy);
 *   ZARENA_E_NO_DEVICE (BACKEND_CUDA without a usable device, or a build without CUDA
 *   support: the message says which); ZARENA_E_OUT_OF_MEMORY (the backend could not
 *   reserve the region); ZARENA_E_UNSUPPORTED (e.g. MANAGED on a device without managed
 *   memory, ASYNC overflow without memory-pool support); ZARENA_E_BACKEND.
 * Logs "arena.config" with the resolved configuration and each value's source.
 * Any thread may create arenas, several at once (see THREADS). */
ZARENA_API zarena_status zarena_create(const zarena_config* cfg, zarena** out);

/* Releases the region, every live overflow block and the arena itself (CUDA: waits for
 * the stream-ordered frees on cfg->stream, trims and destroys the overflow pool, so all
 * device memory the arena took is given back). Every pointer the arena handed out
 * becomes invalid. NULL is accepted and returns ZARENA_OK.
 * TEARDOWN DURING A CAPTURE. During a capture (cfg->stream or the legacy stream being
 * captured, the calling thread's per-thread stream, or zarena_set_capture_active(a, 1) in
 * force) no CUDA call that could touch the capture is made: the arena is destroyed at once
 * (the handle is invalid, "arena.destroy" is logged) but its device memory (the region,
 * its overflow blocks and pool) waits, with an "arena.destroy_deferred" warning, until
 * that stream is no longer captured, then goes back ("arena.released"), ordered on
 * cfg->stream: keep the stream alive until then. No further call is needed for that:
 * while memory waits, a thread of zarena's ("zarena-release") asks CUDA whether the
 * capture is over (cudaStreamIsCapturing and the context queries, which a capture allows:
 * it stays whole) 5 ms after the destroy, then less and less often, at least every 100 ms,
 * and gives the memory back once it is; the thread ends when nothing waits. So the memory
 * is back within about 0.1 s of cudaStreamEndCapture. Sooner at a zarena_create,
 * zarena_destroy, zarena_set_capture_active(x, 0) or zarena_capture_end of any arena:
 * each gives back, before it returns, what can go back (waiting for a release the thread
 * is making, and for its records to be delivered, as zarena_destroy waits for the arena's
 * own). "arena.released" (and a failure's "arena.release_failed") may therefore come from
 * that thread, after the destroy returned (route records by arena_id). The memory goes back when the capture ends, not when the
 * graph is destroyed: like any freed memory, a block of the destroyed arena must not be
 * used by a graph launched after that (the program destroyed the arena). A capture
 * declared only by zarena_set_capture_active(a, 1) on the destroyed arena ends with it:
 * its memory goes back as soon as CUDA reports no capture of the stream (a capture on
 * another non-blocking stream is left whole, see below). So a destroy from any thread at
 * any moment (a Go finalizer) never breaks a capture. Memory given back while another
 * thread captures some other stream is freed in CUDA's relaxed capture mode, which leaves
 * that capture whole. If the thread cannot be started (no threads left), the calls named
 * above are the only ones that release.
 * TEARDOWN AFTER A DEVICE RESET. A cudaDeviceReset (or cuDevicePrimaryCtxReset) of the
 * arena's device frees all of the arena's device memory, and CUDA may hand its addresses
 * to the program's next allocations. So once the context the arena allocated in is found
 * gone (the primary context inactive, or active with another cuCtxGetId), zarena frees and
 * touches nothing of it: zarena_destroy makes no free, returns ZARENA_OK (the reset already
 * gave everything back) and logs "arena.device_reset" (warn, once per arena, at the first
 * call that finds it); an arena destroyed during a capture whose memory still waited is
 * forgotten the same way. Before the destroy, every call that would need the device fails
 * with ZARENA_E_BACKEND and a message saying so: zarena_reset (the arena is rewound all the
 * same; no trim, no overflow free), zarena_free and zarena_unpin of an overflow block (it is
 * forgotten), overflow allocations, zarena_set_stream, a switch to ASYNC; poison fills are
 * skipped ("poison.failed"). Frees and allocations served by the region make no backend
 * call and cannot see it: they keep working on addresses that are no longer the arena's.
 * Destroy the arena after a device reset. A reset made while a zarena call on that device
 * is in flight is the program's race.
 * Requires exclusive use (see THREADS). Logs "arena.destroy" with a lifetime summary,
 * after delivering the arena's records still queued.
 * Using the handle afterwards is undefined behaviour: it is not reliably detected (memory
 * not yet reused reads as "not a live arena handle", ZARENA_E_INVALID_ARGUMENT, by luck).
 * Returns ZARENA_OK, or ZARENA_E_BACKEND when the backend reported an error while
 * releasing (an overflow block it refuses is tried once more; the arena is destroyed
 * anyway; the handle is invalid afterwards), or the status of the arena's trace failure
 * when its trace is incomplete (see zarena_trace_status; the arena is destroyed anyway). */
ZARENA_API zarena_status zarena_destroy(zarena* a);

/* The backend the arena actually uses (ZARENA_BACKEND_HOST or _CUDA; AUTO resolves at
 * create), or -1 for NULL. Thread-safe. */
ZARENA_API int32_t zarena_backend(const zarena* a);

/* =================================================================================
 * 3. Allocation and free
 *
 * EPOCH-CHECKED FREES. Every block belongs to the epoch it was handed out in. An engine
 * that frees tensors from garbage-collector finalizers may free long after a reset: by
 * then the same address may belong to a live block of the current epoch, and a plain
 * zarena_free would free that one. So zarena_alloc_ex returns the block's epoch with the
 * pointer (one call), and zarena_free_at(a, ptr, epoch) frees only if the block at ptr
 * was handed out in that epoch; otherwise it returns ZARENA_E_STALE and changes nothing.
 * The check and the free are one atomic step: a reset on another thread cannot come in
 * between.
 *
 * BATCHES. Bindings that cross a costly boundary per call (cgo) make many frees and
 * allocations in one call: zarena_free_batch, zarena_alloc_batch, zarena_free_then_alloc.
 *
 * TAGS. A block may carry a tag (a registered name, process-wide): it is shown in
 * live-block dumps, traces and the "top_tags" of an overflow's record.
 *
 * All calls of this section are thread-safe, like zarena_alloc and zarena_free.
 * ================================================================================= */

/* Allocates size bytes, aligned to cfg.alignment, and writes the pointer to *out_ptr.
 * size 0 succeeds, allocates nothing and writes NULL (freeing NULL is a no-op).
 * The block lives until zarena_free, or until a zarena_reset if it lies above the
 * floor, or until zarena_destroy. Its contents are undefined (not zeroed).
 * When the region cannot serve the request, the overflow policy decides (see
 * ZARENA_OVERFLOW_*); overflow blocks are freed with zarena_free like any other, and a
 * reset reclaims those allocated in the epoch.
 * Returns: ZARENA_OK; ZARENA_E_INVALID_ARGUMENT (NULL a or out_ptr);
 *   ZARENA_E_OUT_OF_MEMORY (region full and overflow refused, capped or failed; the
 *   message names requested size, used, capacity and the overflow route);
 *   ZARENA_E_CAPTURE_UNSAFE (SYNC overflow needed while the stream is being captured);
 *   ZARENA_E_BACKEND (overflow allocation failed in the backend). A failure because the
 *   region was full carries the diagnosis in its message (see "Diagnosis").
 * Thread-safe. The region path makes no backend call and takes only the calling thread's
 * slot lock (uncontended unless threads outnumber the slots). */
ZARENA_API zarena_status zarena_alloc(zarena* a, uint64_t size, void** out_ptr);

/* What zarena_alloc_ex hands out. */
typedef struct zarena_block {
  void* ptr;      /* the block (NULL for a size-0 request) */
  uint64_t epoch; /* the epoch the block belongs to: pass it to zarena_free_at */
  uint64_t size;  /* bytes the block holds (the request rounded up to the alignment) */
  uint32_t flags; /* ZARENA_BLOCK_* */
  uint32_t tag;   /* the tag it was allocated with */
} zarena_block;
/* generated: block flags, from src/base/block_flags.h (tools/gen) */
#define ZARENA_BLOCK_OVERFLOW 0x1u /* the block comes from the overflow pool */
#define ZARENA_BLOCK_REUSED 0x2u   /* a freed block was reused (no new bump space used) */
#define ZARENA_BLOCK_PLANNED 0x4u  /* served by a step plan (on by default) */
/* end of generated block flags */

/* zarena_alloc, plus the block's epoch, size and flags, in one call. tag: 0, or an id
 * from zarena_tag_register (kept with the block, shown in live-block dumps and traces).
 * out: required; written on ZARENA_OK only. Returns as zarena_alloc. Thread-safe. */
ZARENA_API zarena_status zarena_alloc_ex(zarena* a, uint64_t size, uint32_t tag, zarena_block* out);

/* Returns a block to the arena; the size is tracked, not passed. NULL is a no-op (OK).
 * Freed blocks are reused by later allocations of the same epoch and coalesce with
 * free neighbours; freeing the topmost block lowers the top. A pinned block is freed at
 * its last unpin (see "Pins").
 * Returns: ZARENA_OK; ZARENA_E_INVALID_ARGUMENT (NULL a);
 *   ZARENA_E_NOT_OWNED (ptr was never returned by this arena, or points inside a
 *     block rather than at its start: always so for a pointer inside a live block,
 *     region or overflow, also where an older block once started);
 *   ZARENA_E_DOUBLE_FREE (ptr's block was already freed and not handed out again);
 *   ZARENA_E_STALE (ptr's block was reclaimed by a reset; the call is dropped and
 *     counted in stats.stale_frees). A pointer whose address was handed out again
 *     after the reset denotes the new block: zarena cannot tell the two apart (use
 *     zarena_free_at).
 *   None of the three errors changes any state (they count in stats).
 *   ZARENA_E_BACKEND: an overflow block freed after a device reset (the block is freed in
 *     the arena's books, but not given back: the reset took it; see zarena_destroy).
 * Thread-safe. */
ZARENA_API zarena_status zarena_free(zarena* a, void* ptr);

/* zarena_free_at with this epoch checks nothing (it is zarena_free). */
#define ZARENA_ANY_EPOCH UINT64_MAX

/* Frees ptr if and only if the block at ptr was handed out in `epoch` (see above);
 * ZARENA_ANY_EPOCH: as zarena_free. NULL is a no-op (OK).
 * Returns: ZARENA_OK; ZARENA_E_STALE (the block at ptr belongs to another epoch, or the
 *   block was reclaimed: nothing changed, counted in stats.stale_frees; an epoch before
 *   the current one gets it whatever lies at ptr now, since the caller's block is gone);
 *   and the errors of zarena_free. Thread-safe. */
ZARENA_API zarena_status zarena_free_at(zarena* a, void* ptr, uint64_t epoch);

typedef struct zarena_free_item {
  void* ptr;      /* NULL: skipped (OK) */
  uint64_t epoch; /* as for zarena_free_at; ZARENA_ANY_EPOCH: unchecked */
} zarena_free_item;

/* Frees items[0..n) in order, each exactly as zarena_free_at would. statuses (may be NULL)
 * receives each item's status. Returns ZARENA_OK when every item succeeded; else the
 * status of the first item that failed (zarena_last_error describes it; the others were
 * still attempted). ZARENA_E_INVALID_ARGUMENT for NULL a, or NULL items with n > 0.
 * Thread-safe. */
ZARENA_API zarena_status zarena_free_batch(zarena* a, const zarena_free_item* items, size_t n,
                                           zarena_status* statuses);

/* Allocates sizes[0..n) (tag for all of them) into out[0..n), each as zarena_alloc_ex.
 * statuses (may be NULL) receives each item's status; out[i] is zeroed for a failed item.
 * Returns ZARENA_OK when every item succeeded, else the first failure's status (the
 * items after it were still attempted). Thread-safe. */
ZARENA_API zarena_status zarena_alloc_batch(zarena* a, const uint64_t* sizes, size_t n,
                                            uint32_t tag, zarena_block* out,
                                            zarena_status* statuses);

/* The frees first (so their space is reused exactly as if they had been made one by one
 * before), then one allocation: zarena_free_batch(a, frees, nfrees, free_statuses) then
 * zarena_alloc_ex(a, size, tag, out). Returns the allocation's status; the frees' errors
 * are in free_statuses (may be NULL; they are counted in stats either way). Thread-safe. */
ZARENA_API zarena_status zarena_free_then_alloc(zarena* a, const zarena_free_item* frees,
                                                size_t nfrees, zarena_status* free_statuses,
                                                uint64_t size, uint32_t tag, zarena_block* out);

/* Registers a tag name (process-wide, for every arena) and writes its id (>= 1) to *id;
 * registering a name again returns the same id. Names are copied; up to 63 bytes are kept.
 * Returns ZARENA_OK, ZARENA_E_INVALID_ARGUMENT (NULL name/id, empty name), or
 * ZARENA_E_OUT_OF_MEMORY (more than 65535 tags). Thread-safe. */
ZARENA_API zarena_status zarena_tag_register(const char* name, uint32_t* id);
/* The name of a registered tag, or "" for 0 and unknown ids. Static storage (valid for
 * the life of the process). Thread-safe. */
ZARENA_API const char* zarena_tag_name(uint32_t id);

/* =================================================================================
 * 4. Reset, floors and steps
 *
 * FLOORS. Every live block below the floor survives resets. zarena_mark_step_boundary
 * raises the floor to the current top; zarena_set_floor moves it to any block boundary
 * between 0 and the top (zarena_region_info says where they are): raising the floor keeps
 * what lies under it, lowering it gives the blocks between the new and the old floor back
 * to the current epoch (the next reset reclaims them).
 *
 * STEPS. zarena_step_begin marks where each training step starts: it turns the diagnosis
 * of a loop that forgot to reset from a guess into a fact (see "Diagnosis").
 *
 * STEP PLANS (1.2; on by default since 1.3: ZARENA_FLAG_NO_PLAN or ZARENA_PLAN=0 turn them
 * off; docs/PLANS.md). A step is what
 * happens between two boundaries: zarena_step_begin and zarena_reset are both boundaries
 * (a boundary with no allocation since the last one is not a step, so a loop may call
 * both). When two steps in a row are the same (the same number of allocations, each with
 * the same rounded size and tag, none pinned, each freed before the same allocation of
 * its step or the next one), the arena lays out a plan: an offset for every allocation
 * that outlives no step, packed to within a few percent of the most bytes the step has
 * live at once ("arena.plan_learned"). The plan is served from one zone of the region (a
 * block the arena holds pinned; stats count the planned blocks live in it instead):
 * allocation i of a planned step is zone + offset[i], handed out only after every
 * planned block that shares its space has been freed (zarena_block.flags has
 * ZARENA_BLOCK_PLANNED). Any deviation (another size or tag, an extra allocation, a step
 * that ends early, a block the plan would reuse still live) ends the plan for the rest of
 * that step: later requests go to the dynamic engine, which never hands out zone space,
 * and the next steps are learned again ("arena.plan_abandoned"; stats plan_misses,
 * plan_first_miss = ZARENA_PLAN_MISS_*). Planned blocks obey every rule of this header,
 * under every interleaving it allows:
 *   - frees and pins from any thread; a pin or unpin of a planned block is ordered with
 *     resets as one of a region block is (a pin that returns ZARENA_OK keeps its block
 *     across every reset after it);
 *   - views: a pin or unpin of an address inside a live planned block acts on that block;
 *     a free of one is ZARENA_E_NOT_OWNED (also where another planned block once started);
 *   - epoch-checked and stale frees: a pointer to a planned block a reset reclaimed is
 *     ZARENA_E_STALE, also once the plan's zone went back to the region or another zone
 *     covers its address (and a pointer to a region block reclaimed before a zone was
 *     laid over it is STALE, not NOT_OWNED);
 *   - resets (ZARENA_FLAG_POISON fills the planned blocks a reset reclaims), floors (a
 *     floor raised over the zone ends its plan and its live blocks then survive resets;
 *     lowered below the zone again, the next reset reclaims them), poison (skipped during
 *     a capture and counted in poison_skipped, as for region blocks);
 *   - one instant: stats, the live-block walk (ZARENA_LIVE_FREED marks a planned block
 *     freed while pinned, counted in deferred_frees) and a reset see each planned block in
 *     one state. A reset stays O(slots + pins + borrowed blocks) while plans learn.
 * The plans an arena made keep their host memory (at most 64 MiB: bindings read a plan's
 * memory without a call, zarena_plan.h); once a new plan would go beyond that, no new
 * plan is learned ("arena.plan_failed", reason "budget") and the ones made keep serving.
 * Threads: a plan follows the threads that made the learned steps' allocations (up to 4;
 * more, and it follows every thread); other threads' requests go to the dynamic engine.
 * Lanes (experimental, zarena/zarena_lane.h): a stream or worker that makes its requests
 * through a lane of its own has its own slot and its own plan (one stream = one lane = one
 * slot = one plan); the zones of several lanes' plans never overlap, and a reset is every
 * lane's step boundary.
 * Traced (cfg.trace_file): the plans stay on and the trace records what they serve
 * (planned allocations, frees, pins and unpins of planned blocks; docs/TRACE.md), so a
 * replay of the trace (zarena-replay replays a planned run under plans) serves the same
 * steps from the same plans.
 * GRAPH-STABLE STEPS (experimental, zarena/zarena_graph.h): a planned step captured into a
 * CUDA graph once and replayed in the plan's zone. While such a graph exists the zone is
 * held still, and a floor that would move over it is refused (see the two floor calls).
 *
 * zarena_set_floor, zarena_step_begin and zarena_region_info take the arena's whole-arena
 * lock briefly (as zarena_reset and zarena_get_stats do); all calls of this section are
 * thread-safe, with zarena_reset's condition (see THREADS).
 * ================================================================================= */

/* Rewinds the arena to its floor and starts a new epoch (epoch += 1): every block
 * allocated above the floor, and every overflow block allocated since the last reset
 * that is still live, is reclaimed (pinned blocks excepted, see "Pins"). Cost is O(1) in
 * the region whatever was allocated, plus one backend free per reclaimed overflow block.
 * Blocks below the floor stay.
 * Resetting never fails on a valid handle: returns ZARENA_OK, or
 * ZARENA_E_INVALID_ARGUMENT for NULL; the one exception is a reset after the device was
 * reset (cudaDeviceReset): ZARENA_E_BACKEND, the arena rewound all the same, nothing
 * freed (see "TEARDOWN AFTER A DEVICE RESET" at zarena_destroy). See THREADS for what the
 * caller must ensure. */
ZARENA_API zarena_status zarena_reset(zarena* a);

/* The current epoch: 0 after create, +1 at every reset. 0 for NULL. Thread-safe. */
ZARENA_API uint64_t zarena_epoch(const zarena* a);

/* Sets the floor to the current top: everything allocated so far (and still live,
 * overflow blocks included) survives later resets; it can still be freed individually.
 * Does not start an epoch. Cost: O(blocks allocated since the last boundary or reset),
 * once per call — a boundary is marked after loading weights, not per allocation.
 * Space freed below the floor is reused: by allocations of any epoch once the space
 * above the floor cannot serve them (such blocks are still reclaimed by the next
 * reset), and by the bump top when the blocks just under the floor are all free and
 * nothing lies above it (the floor then comes down).
 * Returns ZARENA_OK, or ZARENA_E_INVALID_ARGUMENT for NULL; and, only while a captured graph
 * holds a step plan's zone (zarena/zarena_graph.h: the top lies above the zone),
 * ZARENA_E_CAPTURE_UNSAFE with nothing changed. Thread-safe. */
ZARENA_API zarena_status zarena_mark_step_boundary(zarena* a);

/* Moves the floor to `offset` bytes from the region's base (see FLOORS above). Unlike
 * zarena_mark_step_boundary, it leaves overflow blocks as they are. Cost: O(blocks
 * between the old and the new floor).
 * Returns: ZARENA_OK; ZARENA_E_INVALID_ARGUMENT (NULL a, offset not a multiple of the
 *   alignment, above the top, or inside a block; the message says which) with nothing
 *   changed; ZARENA_E_OUT_OF_MEMORY (host memory for block records ran out; nothing
 *   changed); ZARENA_E_CAPTURE_UNSAFE (a captured graph holds a step plan's zone and the
 *   floor would move over it: zarena/zarena_graph.h; nothing changed). Thread-safe. */
ZARENA_API zarena_status zarena_set_floor(zarena* a, uint64_t offset);

/* Marks the start of a step (an engine calls it at the top of every training step; Go's
 * Arena.Step does). When steps begin with no zarena_reset between them and keep memory
 * (two steps in a row began with more live bytes and more live blocks, region and
 * overflow, than the step before, and by more than any step gave back), the early warning
 * "arena.reset_cadence" is logged at once (verdict never_reset, or reset_stopped when the
 * arena was reset before): at the third step of a loop that keeps a block per step. Steps
 * that give back what they allocate are not warned about, whatever their shapes: a block
 * carried into the next step and freed there (of another size each step), or state
 * created once in the first step, is no pile. Planned blocks count as the blocks they are
 * (a plan's zone is not live memory of the program), and allocations a plan served count
 * as requests. Once an arena has seen
 * zarena_step_begin, the guessing detector (which recognises steps by their repeating
 * request sizes) is switched off for it, and the steps in "arena.first_overflow",
 * zarena_diagnose and zarena_stats are the counted ones. A zarena_mark_step_boundary
 * before the second step of an epoch ends the set-up: the step after it is compared with
 * the ones that follow (weights uploaded after the first call are not what a step kept).
 * Returns ZARENA_OK, or ZARENA_E_INVALID_ARGUMENT for NULL. Thread-safe; takes the
 * whole-arena lock briefly (as zarena_get_stats does). */
ZARENA_API zarena_status zarena_step_begin(zarena* a);

/* Where the region is and how far it is used (zarena_region_info). */
typedef struct zarena_region {
  uint32_t struct_size;     /* set by the caller to sizeof(zarena_region) */
  void* base;               /* the region's first byte (aligned to cfg.alignment) */
  uint64_t capacity_bytes;  /* the region's size (the maximum, for an expandable arena) */
  uint64_t top_bytes;       /* offset of the top: everything at or above it is unused */
  uint64_t floor_bytes;     /* offset of the floor */
  uint64_t committed_bytes; /* bytes backed by memory (the capacity unless expandable) */
  uint32_t managed;         /* 1 when the region is managed memory */
  uint32_t expandable;      /* 1 when the arena is expandable */
} zarena_region;

/* Fills *out (set out->struct_size first; at most that many bytes are written).
 * Returns ZARENA_OK, or ZARENA_E_INVALID_ARGUMENT (NULL a/out, struct_size too small
 * for the fields up to floor_bytes). Thread-safe; O(threads that used the arena). */
ZARENA_API zarena_status zarena_region_info(const zarena* a, zarena_region* out);

/* 1 when ptr lies inside the arena's region ([base, base + capacity)), else 0 (also for
 * NULL a, and for overflow blocks). O(1), no lock. Thread-safe. */
ZARENA_API int zarena_contains(const zarena* a, const void* ptr);

/* =================================================================================
 * 5. Pins
 *
 * zarena_pin keeps a block alive across resets (an engine's saved-for-backward
 * activations): a reset leaves every pinned block where it is and rewinds the top to just
 * above the highest pinned block above the floor (not to the floor); the space below it
 * that no pin covers is reclaimed as free holes that later allocations reuse (stats:
 * pin_retained_bytes). Freeing the topmost of those blocks (or its last unpin, after a
 * free) lowers the top again, through the holes under it. A zarena_free of a pinned block
 * returns ZARENA_OK at once and takes effect at its last zarena_unpin (stats:
 * deferred_frees). A block unpinned but not freed
 * is reclaimed by the next reset, like any other. Overflow blocks are pinned the same way.
 * Pins are counted: each zarena_pin needs one zarena_unpin (at most 65535 at once per
 * block). A block that is neither pinned nor below the floor is never retained by a reset.
 * Both calls are thread-safe, like zarena_alloc and zarena_free.
 * ================================================================================= */

/* Adds a pin to the live block that starts at ptr, or that ptr points into (a view of a
 * tensor): region or overflow. An address inside a block costs a look down the region's
 * map to the block's start (O(the distance)), or a walk of the live overflow blocks.
 * Returns: ZARENA_OK; ZARENA_E_NOT_OWNED (no live block of this arena starts at or holds
 *   ptr); ZARENA_E_DOUBLE_FREE (the block was freed); ZARENA_E_STALE (reclaimed by a reset);
 *   ZARENA_E_TOO_MANY_PINS (the block already holds 65535 pins);
 *   ZARENA_E_INVALID_ARGUMENT (NULL a or ptr). Nothing changes on failure. Thread-safe. */
ZARENA_API zarena_status zarena_pin(zarena* a, void* ptr);

/* Removes a pin from the block that starts at ptr or holds it (as zarena_pin: a view
 * pinned may be unpinned through any address inside the same block). The last one
 * completes a zarena_free made while the block was pinned (poisoning it, with
 * ZARENA_FLAG_POISON, exactly as the free would have).
 * Returns: ZARENA_OK; ZARENA_E_NOT_PINNED (the block holds no pin); ZARENA_E_INVALID_ARGUMENT
 *   (NULL a or ptr); and the errors of zarena_pin but ZARENA_E_TOO_MANY_PINS. Nothing
 *   changes on failure. Thread-safe. */
ZARENA_API zarena_status zarena_unpin(zarena* a, void* ptr);

/* =================================================================================
 * 6. Capture, stream and poison
 *
 * CAPTURE. Engines that capture CUDA graphs know when a capture runs; the arena's own
 * stream queries see only its stream. While a capture is active (zarena_set_capture_active,
 * a capture scope covering the arena (zarena_capture_begin), or the backend reports that the arena's stream, the legacy stream or the calling
 * thread's per-thread stream is capturing): SYNC overflow is refused with
 * ZARENA_E_CAPTURE_UNSAFE before any CUDA call; poison fills are skipped (counted in
 * stats.poison_skipped; one "poison.skipped" warning per capture); and overflow blocks
 * freed or reclaimed are not given back to CUDA (a free during a capture would be recorded
 * into the graph, or break it): they wait (stats.overflow_deferred_gives) and go back,
 * poisoned first when poison is on, at the next overflow allocation, overflow free, reset
 * or zarena_set_capture_active(a, 0) made outside a capture, or at destroy. A block the
 * backend refuses to take back (a capture no query could see) waits the same way and is
 * retried; zarena_free answers OK for it, and destroy returns ZARENA_E_BACKEND if the last
 * try fails too. zarena_free itself always answers at once.
 *
 * POISON. While poison is on, freed blocks (when freed), blocks a reset reclaims (at the
 * reset) and overflow blocks (before they go back to the backend) are filled with the
 * 32-bit word, repeated; word 0 selects the default 0x7FF80000, a quiet NaN whether read
 * as float32 or float64 (so a kernel that reads a stale activation produces NaN, not a
 * tiny number). CUDA: cuMemsetD32Async on the arena's stream. Never touches pinned blocks
 * or the live blocks below the floor; skipped during captures (see above). Costs one
 * backend call per free: a debugging mode.
 * ================================================================================= */

/* Tells the arena that a capture is running (active != 0) until called again with 0
 * (see CAPTURE above); the call with 0, made outside a capture, gives back the overflow
 * blocks that waited. Returns ZARENA_OK, or ZARENA_E_INVALID_ARGUMENT for NULL.
 * Thread-safe. */
ZARENA_API zarena_status zarena_set_capture_active(zarena* a, int active);

/* Capture scopes: a capture declared once for many arenas. Engines keep their capture
 * state per process or per stream, not per arena; a scope tells every arena it covers
 * that a capture runs, with the effects of zarena_set_capture_active(a, 1) (CAPTURE
 * above: SYNC overflow refused, poison skipped, overflow gives and arena releases
 * deferred).
 *   ZARENA_CAPTURE_PROCESS: every arena of the process; stream is ignored.
 *   ZARENA_CAPTURE_STREAM:  every arena whose stream (cfg->stream, or the last
 *     zarena_set_stream) is `stream`; NULL and cudaStreamLegacy are the same stream.
 * Rules:
 *   - Scopes nest: each begin is matched by one end with the same scope and stream; the
 *     capture is active while the begins of a scope outnumber its ends. An end without
 *     its begin is refused (ZARENA_E_INVALID_ARGUMENT), nothing changes.
 *   - Coverage is decided at each use, not copied: an arena created during a scope, or
 *     moved onto the scope's stream by zarena_set_stream, is covered at once; an arena
 *     whose stream moves away is no longer covered by that stream's scope.
 *   - A scope adds to the arena's own flag and the backend's queries; it never clears
 *     them (zarena_set_capture_active(a, 0) leaves a scope in force).
 *   - The end that closes a scope gives back what arenas destroyed during it left
 *     waiting (as zarena_set_capture_active(a, 0) does). Overflow blocks freed during it
 *     by live arenas go back, poisoned first when poison is on, at each arena's next
 *     overflow allocation, overflow free, reset, zarena_set_capture_active(a, 0) or
 *     destroy made outside a capture.
 *   - One "poison.skipped" warning per arena per scope begun (as per capture).
 *   - Thread-safe; any thread may begin and end (the engine orders them with its
 *     captures). Make the begin before cudaStreamBeginCapture and the end after
 *     cudaStreamEndCapture. An arena checks the scopes only on the paths that already
 *     check for captures (poison, overflow, give-back, destroy; never the region's
 *     allocation fast path): one atomic load when no scope is open.
 * Returns ZARENA_OK; ZARENA_E_INVALID_ARGUMENT (an unknown scope; cudaStreamPerThread,
 * which is a different stream in every thread; an end without its begin; 2^32-1 begins
 * of one scope); ZARENA_E_OUT_OF_MEMORY (host memory for a new stream's scope). */
#define ZARENA_CAPTURE_PROCESS 0
#define ZARENA_CAPTURE_STREAM 1
ZARENA_API zarena_status zarena_capture_begin(int32_t scope, void* stream);
ZARENA_API zarena_status zarena_capture_end(int32_t scope, void* stream);

/* Replaces cfg->stream (engines often create their stream after the arena). The stream
 * must belong to the arena's device; cudaStreamPerThread is refused (a different stream
 * in every thread: a free from another thread would not be ordered after the work that
 * used the block); NULL and cudaStreamLegacy mean the legacy default stream. What it
 * changes: overflow blocks given back from now on (ASYNC: cudaFreeAsync) and poison fills
 * are ordered on the new stream; ASYNC overflow allocations are made on it. Blocks
 * already handed out stay valid. The change itself orders the new stream after the work
 * queued on the old one until then (CUDA: an event recorded on the old stream, which the
 * new stream waits for), so a block still used by kernels queued on the old stream, freed
 * after the change, is neither poisoned nor handed out again before they finish. Later
 * work queued on the old stream is not waited for: free a block only once the work using
 * it is ordered before the arena's current stream. The host backend keeps the handle and
 * orders nothing.
 * Returns ZARENA_OK; ZARENA_E_INVALID_ARGUMENT (NULL a, or a refused stream; nothing
 * changed); ZARENA_E_CAPTURE_UNSAFE (a capture is running on the old or the new stream:
 * the wait would join the capture or break it; nothing changed); ZARENA_E_BACKEND.
 * Thread-safe (takes the whole-arena lock). */
ZARENA_API zarena_status zarena_set_stream(zarena* a, void* stream);

/* Switches ZARENA_FLAG_POISON at run time (see POISON above): enabled != 0 turns it on
 * with `word` (0 = the default 0x7FF80000), 0 turns it off. Returns ZARENA_OK, or
 * ZARENA_E_INVALID_ARGUMENT for NULL. Thread-safe. */
ZARENA_API zarena_status zarena_set_poison(zarena* a, int enabled, uint32_t word);

/* =================================================================================
 * 6b. The overflow route at run time
 *
 * ROUTES. Every overflow block remembers the route that made it (ASYNC: the arena's
 * pool; SYNC: cudaMalloc; CUSTOM: the allocator installed then) and goes back by that
 * route, whatever the policy is when it is freed, reclaimed by a reset or released by
 * zarena_destroy. So changing the policy never moves, frees or re-routes a live block.
 * ================================================================================= */

/* Makes `policy` the overflow policy from now on (an engine whose fallback becomes
 * capture-aware switches SYNC -> ASYNC once its stream exists, say).
 * policy: ZARENA_OVERFLOW_ASYNC, _SYNC, _REFUSE, _CUSTOM (an allocator must be installed,
 *   see zarena_set_overflow_allocator) or _DEFAULT, resolved now as at create: ASYNC when
 *   the arena has a stream (cfg->stream or zarena_set_stream), else SYNC.
 * The rules are create's: ASYNC needs stream-ordered memory pools (on CUDA an arena made
 * with another policy creates its own pool at the first switch to ASYNC, which is refused
 * with ZARENA_E_CAPTURE_UNSAFE while a capture is active); ASYNC on the legacy (NULL)
 * stream is allowed and refused per call during captures, as at create.
 * Live overflow blocks keep their route (see ROUTES). Allocations that begin after the
 * call returns use the new policy; one running on another thread meanwhile uses the old
 * one or the new one (it reads the policy once), and its block goes back by the route it
 * took. The change makes no CUDA call (but ASYNC's first pool) and may be made during a
 * capture. Logs "arena.overflow_policy" (info) when the policy changes.
 * Returns ZARENA_OK; ZARENA_E_INVALID_ARGUMENT (NULL a, a value that is no policy, CUSTOM
 *   with no allocator installed); ZARENA_E_UNSUPPORTED (ASYNC on a device without memory
 *   pools); ZARENA_E_CAPTURE_UNSAFE, ZARENA_E_BACKEND (creating the pool failed). On
 *   failure nothing changes and zarena_last_error() says why. Thread-safe: may run while
 *   other threads allocate and free (it takes the overflow pool's lock, briefly). */
ZARENA_API zarena_status zarena_set_overflow_policy(zarena* a, int32_t policy);

/* The overflow policy in force (ZARENA_OVERFLOW_ASYNC, _SYNC, _REFUSE or _CUSTOM: DEFAULT is
 * resolved), or -1 for NULL. Thread-safe. */
ZARENA_API int32_t zarena_overflow_policy(const zarena* a);

/* The program's own overflow allocator (an engine with its own pool, as ztensor's MemPool,
 * routes zarena's overflow to it). zarena calls:
 *   allocate(ctx, bytes, alignment, stream, &ptr): one overflow block of `bytes` (> 0; the
 *     request rounded up to the arena's alignment). *ptr must be aligned to `alignment`
 *     (cfg->alignment, a power of two) and usable as the arena's memory (device memory
 *     of cfg->device for CUDA, host memory for the host backend), for `bytes` bytes.
 *     stream: the arena's stream now, as the program gave it (cfg->stream or
 *     zarena_set_stream; NULL or cudaStreamLegacy: the legacy stream): the block is used
 *     in stream order on it, as ASYNC blocks are. Returns ZARENA_OK with *ptr set,
 *     or a failure: ZARENA_E_OUT_OF_MEMORY, ZARENA_E_CAPTURE_UNSAFE (it will not allocate
 *     during a capture), ZARENA_E_BACKEND; any other value reads as ZARENA_E_BACKEND.
 *     A failure is an overflow failure like any other: the allocating call returns that
 *     status, counts it in stats.overflow_failures, and its message and diagnosis
 *     (path "custom") name the allocator and the status it returned. ZARENA_OK with a
 *     NULL or misaligned pointer fails the call with ZARENA_E_BACKEND (a misaligned
 *     block is given back first).
 *   deallocate(ctx, ptr, bytes, stream): gives back a block allocate made (ptr and bytes
 *     as they were), when the program frees it, a reset reclaims it or the arena is
 *     destroyed. stream: the arena's stream now (it may differ from allocate's after
 *     zarena_set_stream,
 *     which orders the new stream after the old one). Poison, when on, has filled the
 *     block first (on that stream), except during a capture. Custom blocks are never
 *     held back for a capture: deallocate is called at once also during one (the
 *     allocator decides what a free during a capture means for its memory), and at
 *     zarena_destroy also when the region's release is deferred.
 * Both may be called from any thread, several at once, and only from inside the zarena
 * call that needs them, with no zarena lock held (deallocate: but a shared hold of the
 * arena's stream lock, which only zarena_set_stream waits for). They must not call zarena
 * functions on this arena, nor throw or longjmp out. zarena does not check the memory.
 * name: a label for messages, records and the diagnosis ("ztensor.MemPool"); copied;
 *   NULL or "" = "custom".
 */
typedef zarena_status (*zarena_overflow_alloc_fn)(void* ctx, uint64_t bytes, uint64_t alignment,
                                                  void* stream, void** ptr);
typedef void (*zarena_overflow_free_fn)(void* ctx, void* ptr, uint64_t bytes, void* stream);
typedef struct zarena_overflow_allocator {
  uint32_t struct_size; /* sizeof(zarena_overflow_allocator) as the caller compiled it */
  uint32_t reserved;    /* must be 0 */
  void* ctx;            /* passed back as is; zarena never reads it */
  zarena_overflow_alloc_fn allocate;  /* named so that a free() macro cannot touch it */
  zarena_overflow_free_fn deallocate;
  const char* name;
} zarena_overflow_allocator;

/* Installs `alloc` (copied) and makes ZARENA_OVERFLOW_CUSTOM the policy; NULL removes the
 * installed allocator (and a CUSTOM policy becomes what DEFAULT resolves to now: ASYNC
 * with a stream, but SYNC where ASYNC would first need a pool the arena has not made).
 * Its ctx and functions must stay valid until every block it made has gone back: until
 * it is removed or replaced (which is refused while such blocks live) or the arena is
 * destroyed. Blocks made by the other routes are unaffected (see ROUTES); so is an
 * allocation running meanwhile on another thread, which takes the route it read.
 * Install it before the first overflow (right after create) or whenever no block of the
 * current allocator is live: reset, free them, or zarena_destroy.
 * Returns ZARENA_OK; ZARENA_E_INVALID_ARGUMENT (NULL a; struct_size smaller than this
 *   1.1 layout or a non-zero reserved; NULL allocate or deallocate; or blocks of the
 *   installed allocator are live or being allocated: the message says how many). On failure
 *   nothing changes. Logs "arena.overflow_policy" (info). Thread-safe, as
 *   zarena_set_overflow_policy. */
ZARENA_API zarena_status zarena_set_overflow_allocator(zarena* a,
                                                       const zarena_overflow_allocator* alloc);

/* =================================================================================
 * 7. Statistics, live blocks, text formats
 *
 * zarena_stats is one consistent snapshot of an arena's counters (all fields from one
 * instant). docs/STATS.md says what each field means, grouped as the TEXT format prints
 * them; the JSON format, the Go and the Python bindings use the field names below as keys.
 *
 * FORMATS. TEXT is for people (aligned columns, sizes also in KiB/MiB/GiB); JSON is for
 * programs. The caller passes buf/cap; the text and its terminating NUL are written when
 * they fit. *needed (may be NULL, except for a size query) receives the bytes required,
 * NUL included. A size query (buf NULL, cap 0) returns ZARENA_OK and only sets *needed.
 * When the text does not fit, buf gets "" (when cap > 0), *needed is set and the call
 * returns ZARENA_E_INVALID_ARGUMENT. Each call takes a new snapshot, so the size can grow
 * between a size query and the call that follows (other threads allocate): loop until
 * ZARENA_OK, with some room to spare (see examples/training_loop.c).
 * ================================================================================= */
typedef struct zarena_stats {
  uint32_t struct_size;              /* set by the caller to sizeof(zarena_stats) */
  uint64_t capacity_bytes;           /* region size */
  uint64_t used_bytes;               /* bytes in live region blocks (aligned sizes) */
  uint64_t floor_bytes;              /* floor offset (survives resets below it) */
  uint64_t high_water_bytes;         /* highest top offset since create (or the last
                                        zarena_reset_peak_stats) */
  uint64_t epoch;                    /* resets since create */
  uint64_t epoch_allocs;             /* allocation requests (size > 0) this epoch */
  uint64_t epoch_max_alloc_bytes;    /* largest request this epoch */
  uint64_t epoch_high_water_bytes;   /* highest top offset this epoch */
  uint64_t hits;                     /* requests served by the region (since create) */
  uint64_t misses;                   /* requests the region could not serve */
  uint64_t reuses;                   /* hits served by a freed block (subset of hits) */
  uint64_t resets;                   /* zarena_reset calls (== epoch) */
  uint64_t free_list_len;            /* free blocks in the index (not the space above top) */
  uint64_t free_list_bytes;          /* bytes in those blocks */
  uint64_t largest_free_block_bytes; /* largest block in the index */
  uint64_t live_allocs;              /* live blocks, region and overflow */
  uint64_t stale_frees;              /* zarena_free calls answered ZARENA_E_STALE */
  uint64_t invalid_frees;            /* ... answered NOT_OWNED or DOUBLE_FREE */
  uint64_t overflow_allocs;          /* successful overflow allocations since create */
  uint64_t overflow_live_bytes;      /* bytes in live overflow blocks */
  uint64_t overflow_peak_bytes;      /* highest overflow_live_bytes since create (or
                                        the last zarena_reset_peak_stats) */
  uint64_t overflow_max_latency_ns;  /* slowest overflow backend allocation */
  /* --- after the 1.0.0 layout: written only when the caller's struct_size covers them --- */
  uint64_t overflow_reclaimed;      /* overflow blocks reclaimed by resets */
  uint64_t overflow_failures;       /* overflow attempts refused, capped or failed */
  uint64_t pinned_bytes;            /* bytes in pinned blocks, region and overflow */
  uint64_t pinned_blocks;           /* blocks with at least one pin */
  uint64_t pin_retained_bytes;      /* at the last reset: bytes between the floor and the top
                                       that pins raised it to, not pinned themselves (free
                                       holes, reusable; the price of the pins) */
  uint64_t deferred_frees;          /* frees of pinned blocks waiting for their last unpin */
  uint64_t overflow_deferred_gives; /* overflow blocks freed or reclaimed during a capture,
                                       given back to the backend once it ends */
  uint64_t poison_fills;            /* poison fills made */
  uint64_t poison_skipped;          /* fills skipped because a capture was active */
  uint64_t top_bytes;               /* the top now (highest end of the tiled part) */
  uint64_t committed_bytes;         /* memory backing the region (expandable: committed so
                                       far; else the capacity) */
  uint64_t commit_events;           /* expandable: successful commits */
  uint64_t trim_events;             /* expandable: decommits at reset */
  uint64_t commit_failures;         /* expandable: commits the backend refused */
  uint64_t steps;                   /* zarena_step_begin calls since create */
  uint64_t epoch_steps;             /* zarena_step_begin calls since the last reset */
  uint64_t overflow_epochs;         /* epochs in which the region was exhausted at least once */
  uint64_t overflow_records;        /* of those, the ones reported one by one
                                       ("arena.first_overflow": the first
                                       ZARENA_OVERFLOW_RECORDS) */
  uint64_t overflow_summaries;      /* "arena.overflow_summary" records (the later epochs) */
  uint64_t needed_bytes;            /* the capacity the workload needed so far: the highest, over
                                       the epochs, of the top plus the live overflow bytes */
  uint64_t used_peak_bytes;         /* highest used_bytes since create or the last
                                       zarena_reset_peak_stats (see there) */
  uint64_t pinned_peak_bytes;       /* highest pinned_bytes since create or the last
                                       zarena_reset_peak_stats (exact, also with threads) */
  uint64_t epoch_max_alloc_aligned_bytes; /* largest request this epoch, rounded up to the
                                             alignment: the bytes its block took */
  uint64_t overflow_live_blocks;    /* live overflow blocks (their bytes: overflow_live_bytes) */
  /* --- 1.2: step plans (on by default since 1.3; docs/PLANS.md) --- */
  uint64_t plan_steps;             /* steps served whole under a plan */
  uint64_t plan_hits;              /* allocations a plan served (not in hits or epoch_allocs) */
  uint64_t plan_misses;            /* steps a deviation took off their plan */
  uint64_t plan_first_miss;        /* why the first one did: ZARENA_PLAN_MISS_* (0: none) */
  uint64_t plans_learned;          /* plans laid out */
  uint64_t plan_bytes;             /* the latest plan's peak less the live blocks it lies around */
  uint64_t plan_lower_bound_bytes; /* ... and the most bytes its step has live at once */
  uint64_t plan_zone_bytes;        /* the zone held now (its region blocks; 0: none) */
  uint64_t plan_live_bytes;        /* bytes of planned blocks live now (in used_bytes) */
} zarena_stats;

/* Fills *out with a consistent snapshot (all fields from one instant). Set
 * out->struct_size first; at most that many bytes are written, and a struct_size
 * larger than this library knows gets its unknown tail zeroed.
 * Returns ZARENA_OK, or ZARENA_E_INVALID_ARGUMENT (NULL a/out, struct_size smaller than
 * the 1.0 layout). Thread-safe, and safe to call from inside a log callback. */
ZARENA_API zarena_status zarena_get_stats(const zarena* a, zarena_stats* out);

/* Restarts the epoch-independent peaks from the arena's state now, as PyTorch's
 * reset_peak_memory_stats does: high_water_bytes becomes the current top,
 * overflow_peak_bytes the current overflow_live_bytes, used_peak_bytes the current
 * used_bytes, pinned_peak_bytes the current pinned_bytes; each then rises again as the arena is used. Epoch figures (epoch_*) are
 * left alone (a reset restarts them). Use: measure one step's peak with a peak reset
 * before it and a snapshot after it.
 * used_peak_bytes is kept without a shared counter (each thread's slot records its own
 * maximum; a snapshot combines them): it is exact when one thread makes all allocations
 * and frees; with several threads it can read higher than the true peak (each slot's own
 * maximum counts, though they may come from different instants), never lower, and never
 * above high_water_bytes. Returns ZARENA_OK or ZARENA_E_INVALID_ARGUMENT (NULL or closed
 * arena). Thread-safe (whole-arena lock). */
ZARENA_API zarena_status zarena_reset_peak_stats(zarena* a);

#define ZARENA_FORMAT_TEXT 0 /* a table for people; ends with a newline */
#define ZARENA_FORMAT_JSON 1 /* one JSON object on one line (no trailing newline) */

/* Formats one consistent stats snapshot (as zarena_get_stats takes it) into buf (see
 * FORMATS above).
 * TEXT: a titled table, one field a line, grouped (region, requests, free index,
 *   overflow, pins and poison, expandable); `name  value  (human value)`.
 * JSON: {"capacity_bytes": ..., "used_bytes": ..., ...}: every zarena_stats field
 *   (struct_size left out), in struct order, with integer values.
 * Returns as described above; ZARENA_E_INVALID_ARGUMENT also for a NULL or closed arena,
 * an unknown format, or buf NULL with cap > 0. Thread-safe (takes the whole-arena lock
 * briefly, as zarena_get_stats does); allocates host memory for the text. */
ZARENA_API zarena_status zarena_format_stats(const zarena* a, int32_t format, char* buf, size_t cap,
                                             size_t* needed);

typedef struct zarena_live_block {
  void* ptr;
  uint64_t size;
  uint64_t epoch; /* the epoch it was handed out in */
  uint32_t pins;  /* pins held now */
  uint32_t tag;   /* 0 = untagged */
  uint32_t flags; /* ZARENA_LIVE_* */
  uint32_t reserved;
} zarena_live_block;
/* generated: live block flags, from src/base/block_flags.h (tools/gen) */
#define ZARENA_LIVE_OVERFLOW 0x1u   /* an overflow block */
#define ZARENA_LIVE_PERSISTENT 0x2u /* below the floor (or kept by a step boundary) */
#define ZARENA_LIVE_FREED 0x4u      /* freed while pinned: goes at its last unpin */
/* end of generated live block flags */

/* Calls fn(user_data, block) for every live block, region blocks in address order then
 * overflow blocks, from one snapshot taken at the start (other threads may allocate and
 * free meanwhile; the walk does not see that). fn is called with no arena lock held and
 * may call any zarena function except zarena_destroy on this arena; a nonzero return
 * stops the walk. The block passed to fn is valid during the call only.
 * Returns ZARENA_OK, ZARENA_E_INVALID_ARGUMENT (NULL a or fn), ZARENA_E_OUT_OF_MEMORY (the
 * snapshot's host memory). Thread-safe; O(live blocks). */
typedef int (*zarena_live_block_fn)(void* user_data, const zarena_live_block* block);
ZARENA_API zarena_status zarena_for_each_live_block(zarena* a, zarena_live_block_fn fn,
                                                    void* user_data);

/* Formats the live blocks (region blocks in address order, then overflow blocks) from one
 * snapshot, safe while other threads allocate and free (as zarena_for_each_live_block),
 * into buf (see FORMATS above).
 * JSON: {"arena": name, "epoch": E, "count": N, "bytes": B, "blocks": [
 *          {"address": "0x7f3a00000000", "offset": 0 (region) or null (overflow),
 *           "size": S, "epoch": E, "pins": P, "pinned": bool, "overflow": bool,
 *           "persistent": bool, "freed": bool, "tag_id": T, "tag": "name" or null}, ...]}
 *   address is a hexadecimal string (exact in every JSON reader); size is the block's
 *   aligned size; persistent: below the floor or kept by a step boundary; freed: freed
 *   while pinned, goes at its last unpin.
 * TEXT: a title line (count, bytes, epoch), then one line per block: address, offset
 *   (or "overflow"), size, epoch, pins, flags, tag.
 * Returns as described above. Thread-safe; O(live blocks); allocates host memory. */
ZARENA_API zarena_status zarena_format_live_blocks(zarena* a, int32_t format, char* buf, size_t cap,
                                                   size_t* needed);

/* =================================================================================
 * 8. Diagnosis
 *
 * When the region cannot serve a request, zarena names the likely cause (a verdict, such
 * as never_reset, runaway_buffer, working_set_full, fragmentation, capture_refused) and
 * the fix (one sentence of advice) from its counters. docs/LOGGING.md lists every verdict
 * and when it is given. Steps that give back what they allocate (every block freed, live
 * bytes flat) are never told to reset.
 *
 * THE ERROR CARRIES IT. The zarena_last_error() message of every call that fails because
 * the region was full (ZARENA_E_OUT_OF_MEMORY, ZARENA_E_CAPTURE_UNSAFE, ZARENA_E_BACKEND
 * from zarena_alloc, zarena_alloc_ex, the batches) ends with
 *     ". verdict=<name>; fix: <advice>"
 * <name> is a verdict ([a-z_]+); <advice> is the sentence, up to the end of the message
 * (it contains no ';'). The regular expression
 *     verdict=([a-z_]+); fix: (.*)$
 * extracts both; this format is stable. When the call is the epoch's first overflow and a
 * record is due, its "arena.first_overflow" record is emitted before the call returns.
 *
 * OFF THE LATENCY. An overflow that succeeds (ASYNC, SYNC or CUSTOM) only captures the
 * facts (one snapshot, like zarena_get_stats); the record is built and emitted by a
 * process-wide thread that zarena starts for arenas whose policy is not REFUSE. With
 * ZARENA_FLAG_DIAGNOSE_SYNC (ZARENA_DIAGNOSE_SYNC=1) the allocating call builds and emits
 * it itself, after this arena's records still queued, before it returns. Records are never lost:
 * zarena_destroy delivers the arena's records first, zarena_log_flush waits for all, and
 * the process exit delivers what is queued (for up to 2 seconds: a callback that never
 * returns cannot hang the exit).
 *
 * REPEATED OVERFLOW. The first ZARENA_OVERFLOW_RECORDS epochs whose region is exhausted get
 * an "arena.first_overflow" record each; later ones are counted and summarised in an
 * "arena.overflow_summary" record at most once a minute ("overflowed in 200 of 200
 * epochs, verdict ..."), and at zarena_destroy for the epochs not reported yet. Counts:
 * zarena_stats.overflow_epochs, overflow_records, overflow_summaries.
 * ================================================================================= */
#define ZARENA_OVERFLOW_RECORDS 3

typedef struct zarena_diagnosis {
  uint32_t struct_size; /* set by the caller to sizeof(zarena_diagnosis) */
  uint32_t overflowed;  /* 1: this epoch's region was exhausted; the verdict is that one's */
  /* The verdict: a name from docs/LOGGING.md, or "ok" (no overflow in this epoch and no
   * sign of a missing reset). Before an overflow, never_reset / reset_stopped are what the
   * steps seen so far predict (the early warning's verdict). Static storage. */
  const char* verdict;
  /* One sentence naming the fix ("" for "ok"), and what the counters show. Valid until
   * the calling thread's next zarena_diagnose. */
  const char* advice;
  const char* cause;
  /* --- the facts behind them --- */
  uint64_t epoch;
  uint64_t resets;
  uint64_t steps;          /* steps of this epoch as the loop counts them (0: none seen):
                              zarena_step_begin calls, else those recognised */
  uint32_t steps_explicit; /* 1: counted by zarena_step_begin */
  uint32_t warned;         /* 1: the arena logged its early warning ("arena.reset_cadence") */
  uint64_t kept_bytes;     /* live bytes the steps of this epoch kept (growth since the first) */
  uint64_t steps_to_full;  /* at the rate the steps grow the top, steps left (0: unknown) */
  uint64_t capacity_bytes;
  uint64_t top_bytes;
  uint64_t floor_bytes;
  uint64_t live_bytes; /* region and overflow */
  uint64_t overflow_live_bytes;
  uint64_t epoch_allocs;
  uint64_t epoch_peak_bytes; /* this epoch's highest top above the floor */
  uint64_t prior_epochs;     /* earlier epochs compared (up to 8; epoch 0 not counted) */
  uint64_t prior_peak_bytes; /* the highest of their peaks above the floor */
  uint64_t prior_allocs;     /* the most requests one of them made */
  uint64_t overflow_epochs;  /* as zarena_stats.overflow_epochs */
  uint64_t needed_bytes;     /* the capacity the workload needed so far */
  uint64_t requested_bytes;  /* the request that first overflowed this epoch (0: none) */
} zarena_diagnosis;

/* Fills *out with the diagnosis now (set out->struct_size first; at most that many bytes
 * are written, a larger size gets its unknown tail zeroed; the three sentences at least
 * must fit). Any time, from any thread; also from inside a log callback.
 * Returns ZARENA_OK, or ZARENA_E_INVALID_ARGUMENT (NULL a/out, struct_size too small). */
ZARENA_API zarena_status zarena_diagnose(zarena* a, zarena_diagnosis* out);

/* =================================================================================
 * 9. Logging
 *
 * zarena reports configuration, early warnings and overflow diagnoses as structured
 * records (an event, a level, a message, the arena's name, typed fields); docs/LOGGING.md
 * lists every event with its fields, the stderr formats and the rate limiting. Without a
 * registered callback each record is written as one line to stderr, so the diagnosis
 * reaches a human even when the host program wired no logger (ZARENA_LOG_FORMAT=json: one
 * JSON object per line). With a callback, records go to the callback instead, and to
 * stderr as well when the environment has ZARENA_LOG_STDERR=1 (for host programs whose
 * logger discards them). Thresholds: the callback receives records at or above the
 * min_level it was registered with; stderr receives those at or above ZARENA_LOG_LEVEL
 * (default info), read once when zarena first logs. A record no sink wants is not built.
 * Records are emitted after the arena's lock is released, never on the allocation fast
 * path; the records of an overflow that succeeds are emitted by zarena's reporter thread
 * (see "Diagnosis"), and zarena_log_flush waits for them.
 * ================================================================================= */
#define ZARENA_LOG_TRACE 0
#define ZARENA_LOG_DEBUG 1
#define ZARENA_LOG_INFO 2
#define ZARENA_LOG_WARN 3
#define ZARENA_LOG_ERROR 4
#define ZARENA_LOG_OFF 5

#define ZARENA_FIELD_INT 0    /* value in i */
#define ZARENA_FIELD_UINT 1   /* value in i, to be read as uint64_t */
#define ZARENA_FIELD_DOUBLE 2 /* value in f */
#define ZARENA_FIELD_STRING 3 /* value in s (never NULL) */
#define ZARENA_FIELD_BOOL 4   /* value in i (0 or 1) */

typedef struct zarena_log_field {
  const char* key;
  int32_t kind; /* ZARENA_FIELD_* */
  int64_t i;
  double f;
  const char* s;
} zarena_log_field;

typedef struct zarena_log_record {
  uint32_t struct_size;   /* sizeof(zarena_log_record) of the library */
  int32_t level;          /* ZARENA_LOG_* */
  const char* event;      /* "arena.config", "arena.first_overflow", ... (docs/LOGGING.md) */
  const char* message;    /* one human-readable line */
  const char* arena_name; /* the arena's name, or "" for process-wide records */
  const zarena_log_field* fields;
  uint32_t field_count;
  /* --- after the 1.1 layout: read them only when struct_size covers them (an older
   * library delivers a shorter record), e.g.
   * rec->struct_size >= offsetof(zarena_log_record, arena_id) + sizeof(uint64_t) --- */
  const zarena* arena; /* the handle of the arena the record is about, NULL for
                        * process-wide records: an identity to compare, never to call
                        * through from the callback. Records can arrive after
                        * zarena_destroy returned (arena.released; records of the reporter
                        * thread), and a later arena may be given the same address: to
                        * route records, prefer arena_id. */
  uint64_t arena_id;   /* zarena_arena_id() of that arena: unique in the process, never
                        * reused; 0 for process-wide records */
} zarena_log_record;

typedef void (*zarena_log_fn)(void* user_data, const zarena_log_record* rec);

/* The arena's identity in log records (zarena_log_record.arena_id): a number unique in the
 * process, never reused, given by zarena_create in increasing order (a create that fails
 * uses one up too: its records carry it). 0 for NULL. Thread-safe; O(1). */
ZARENA_API uint64_t zarena_arena_id(const zarena* a);

/* Registers the process-wide log callback. fn NULL restores the default sink (stderr).
 * min_level: with fn, records below it are not delivered to fn (ZARENA_LOG_OFF: none);
 * with fn NULL, it replaces the ZARENA_LOG_LEVEL threshold of the stderr sink.
 * Registering replaces the previous callback; there is one per process. Records the
 * reporter thread still holds are delivered first, to the sink they were made under.
 * Rules for the callback:
 *   - it may be called on any thread, also threads the host program did not create,
 *     and from several threads at once;
 *   - the record and every string in it are valid only during the call: copy what you
 *     keep;
 *   - it is called with no zarena lock held. It may call zarena_get_stats,
 *     zarena_epoch, zarena_last_error and the version/status functions; it must not
 *     call zarena_alloc, zarena_free, zarena_reset, zarena_mark_step_boundary,
 *     zarena_create, zarena_destroy or zarena_set_log_callback (not checked);
 *   - it must not throw or longjmp out.
 * After zarena_set_log_callback returns, calls already in flight to the previous
 * callback may still complete; keep its user_data valid until then.
 * Returns ZARENA_OK, or ZARENA_E_INVALID_ARGUMENT for a min_level out of range.
 * Thread-safe. */
ZARENA_API zarena_status zarena_set_log_callback(zarena_log_fn fn, void* user_data,
                                                 int32_t min_level);
/* Waits until every record queued so far has been delivered (records of overflows that
 * succeeded are delivered by zarena's reporter thread, see "Diagnosis"). Call it before a
 * program exits by a path that skips exit handlers (Go's os.Exit, _exit), and where a
 * test wants the records of the calls it made. Not from inside a log callback (it returns
 * at once on the reporter thread). Thread-safe. */
ZARENA_API void zarena_log_flush(void);

/* =================================================================================
 * 10. Trace
 *
 * With cfg->trace_file (or ZARENA_TRACE_FILE), the arena records every event (allocation
 * with its outcome, free with its status, reset, step boundary, floor, pin, unpin, step
 * begin, tag, capture state) to that file, in a compact binary format. The zarena-replay
 * tool replays a trace offline through the real engine: how big the arena must be, what
 * happened across the steps, what another capacity, alignment or policy would do, and the
 * picture of the region over time. docs/TRACE.md has the format and the tool. A trace
 * file that cannot be opened does not fail the create: the arena runs without a trace and
 * logs "arena.trace_failed".
 * ================================================================================= */

/* The state of the arena's trace (cfg->trace_file, ZARENA_TRACE_FILE; see zarena-replay).
 * The trace is written by a thread of its own; the first failure stops it: a write to the
 * file failed (disk full, a file size limit, an I/O error), or host memory for its buffers
 * ran out. From then on nothing more is written and later events are dropped (counted in
 * the file's end record when one can still be written); the failure is logged at once
 * ("arena.trace_failed", warn, from the trace's thread), and zarena_destroy returns its
 * status too. The allocations themselves never fail because of the trace.
 * Returns ZARENA_OK when the arena writes no trace or has lost nothing of it so far; else
 * the status of the trace's first failure, with zarena_last_error() naming the file and
 * the reason: ZARENA_E_BACKEND (the write failed), ZARENA_E_OUT_OF_MEMORY (host memory).
 * ZARENA_E_INVALID_ARGUMENT for a NULL or closed arena. Thread-safe; O(1). */
ZARENA_API zarena_status zarena_trace_status(const zarena* a);

/* =================================================================================
 * 11. Expandable arenas
 *
 * With ZARENA_FLAG_EXPANDABLE, capacity_bytes is the maximum: the region's address range
 * is reserved at create and memory is committed on demand, commit_chunk_bytes at a time
 * (default 64 MiB), as the top grows. At a reset, an arena with trim_keep_bytes set
 * decommits what lies above max(trim_keep_bytes, what is in use), so an idle arena gives
 * memory back. At the boundary that engages a newly laid out step plan (see "STEP
 * PLANS"; its zone claimed then), the next steps need the plan's zone and the live blocks
 * only, not what the learning steps committed: the arena decommits what lies above
 * max(trim_keep_bytes, the top) then, also when trim_keep_bytes is 0 (an arena that never
 * resets, zarena.torch's, gives back what its first steps took); never during a capture.
 * A step that deviates from the plan commits what the dynamic engine needs, and that stays
 * when the plan is taken up again in its zone (no commit and decommit at each deviation).
 * Pointers stay valid across commits (the range never moves). When a commit
 * fails (the device is full) the request goes to the overflow route and
 * "arena.commit_failed" is logged; the diagnosis of such a request is the verdict
 * commit_failed. Counters: zarena_stats.committed_bytes, commit_events, trim_events,
 * commit_failures; zarena_region_info says how much is committed.
 * ================================================================================= */

/* ---- EXPERIMENTAL (symbol version ZARENA_EXPERIMENTAL; may change in a minor version) ----
 * Gives back now, as a reset with trim_keep_bytes does, the committed memory of an
 * expandable arena above max(keep_bytes, what is in use: the region's top), without a
 * reset: for an arena that never resets (a general-purpose pool, zarena.torch, whose
 * torch.cuda.empty_cache() calls it). Live blocks are untouched; the next allocations
 * above the top commit memory again. An arena that is not expandable has nothing to give
 * back: ZARENA_OK, nothing changed.
 * Returns: ZARENA_OK (zarena_stats.trim_events counts a trim that gave memory back);
 *   ZARENA_E_INVALID_ARGUMENT for NULL; ZARENA_E_CAPTURE_UNSAFE while a CUDA graph capture
 *   may run (a decommit waits for the stream), nothing changed; ZARENA_E_BACKEND when the
 *   backend refused a decommit (what lies above stays committed).
 * Thread-safe: allocations may run meanwhile (those above the top wait for it). */
ZARENA_API zarena_status zarena_trim(zarena* a, uint64_t keep_bytes);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ZARENA_ZARENA_H */
