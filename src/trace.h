// Trace capture: the engine records every arena event into a file (format in
// trace_format.h, specified in docs/TRACE.md) through a Tracer.
//
// Hot path: the engine holds a `Tracer*` that is null when tracing is off, so an untraced
// arena pays one predictable branch. A traced event costs one atomic increment (the
// global sequence number: the order of events across threads), one clock read (by
// default a relaxed load of a ticker the writer thread advances; see TraceOptions) and a
// fixed-size store into the calling thread's own buffer: no lock, no syscall, no
// allocation. A full buffer is handed to the tracer's background writer thread (a short
// lock) and replaced from a pool; only then, and on a thread's first event, does the
// calling thread take a lock.
//
// Ordering: sequence numbers are taken when the record is written, so the engine calls a
// hook at the point where the operation is ordered (inside its critical section, or right
// after the atomic step that decided it); then the sequence order is an order the engine
// could have executed, which is what replay needs.
//
// Completeness: close() (the engine calls it at destroy) writes everything and an end
// record. A tracer still open when the process exits normally (exit(), return from
// main) is flushed by an atexit handler, whose end record says so. A crash or _exit()
// loses what was still buffered; the file then ends without an end record, and readers
// say "truncated".
//
// Threads: every on_* may be called from any number of threads at once. close() and the
// destructor need the engine's exclusive use (no on_* in flight or after), as
// zarena_destroy does.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "status.h"
#include "trace_format.h"

namespace zarena_trace {

// What the trace header says about the arena.
struct TraceHeader {
  std::string arena_name;
  uint64_t capacity_bytes = 0;
  uint64_t alignment = 0;
  int32_t overflow_policy = 0;  // resolved ZARENA_OVERFLOW_*
  int32_t backend = 0;          // resolved ZARENA_BACKEND_*
  uint32_t config_flags = 0;    // ZARENA_FLAG_*
  uint64_t region_base = 0;     // the region's address, for reading raw pointers; 0 = unknown
  uint64_t overflow_limit_bytes = 0;  // the resolved cap (ZARENA_OVERFLOW_UNLIMITED: none)
};

struct TraceOptions {
  // Bytes per thread buffer (rounded up to a multiple of 64); a full one goes to the
  // writer thread.
  size_t buffer_bytes = 256 * 1024;
  // The writer blocks producers (in their buffer hand-off) while this much is queued and
  // not yet written, rather than dropping events: a trace is only useful whole.
  size_t max_queued_bytes = 64 * 1024 * 1024;
  // false (default): time_ns is read from a clock the writer thread advances every
  // tick_ns (a relaxed load on the hot path; resolution tick_ns).
  // true: a steady_clock read per event (resolution 1 ns; costs a clock read, 20-35 ns
  // on a virtual machine, see docs/TRACE.md).
  bool precise_clock = false;
  uint64_t tick_ns = 1'000'000;
};

// An address in a record: an offset in the region, or a raw pointer (overflow blocks).
struct TraceAddr {
  uint64_t value = 0;
  bool raw = false;
  static TraceAddr region(uint64_t offset) { return {offset, false}; }
  static TraceAddr pointer(const void* p) { return {reinterpret_cast<uintptr_t>(p), true}; }
};

// Writes a tag registration into every open tracer (tags are process-wide).
void broadcast_tag(uint32_t id, std::string_view name);

class Tracer {
 public:
  // Creates (truncates) path, writes the header and starts the writer thread. On failure
  // returns null and fills *err (kBackend with the OS's reason).
  static std::unique_ptr<Tracer> open(const std::string& path, const TraceHeader& header,
                                      zarena_core::Result* err, const TraceOptions& opts = {});
  // Closes when still open (the result is then lost: call close() to see it).
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // An allocation request of request_bytes (> 0), aligned_bytes after alignment, that
  // became outcome at addr (ignored when refused). status: the zarena_status returned
  // (ZARENA_OK unless refused). epoch: the arena's epoch the block belongs to. tag: the
  // tag id passed to zarena_alloc_ex, 0 for none.
  void on_alloc(uint64_t request_bytes, uint64_t aligned_bytes, TraceAddr addr,
                AllocOutcome outcome, int32_t status, uint64_t epoch, uint32_t tag) {
    AllocRecord r;
    std::memset(&r, 0, sizeof r);
    r.request_bytes = request_bytes;
    r.aligned_bytes = aligned_bytes;
    r.addr = addr.value;
    r.epoch = epoch;
    r.outcome = static_cast<uint8_t>(outcome);
    r.flags = addr.raw ? kAddrRaw : 0;
    r.status = static_cast<int16_t>(status);
    append(&r, sizeof r, Kind::kAlloc, tag);
  }

  // A zarena_free (epoch_checked false) or zarena_free_at (true, epoch_arg its epoch
  // argument) of addr, answered status. freed_bytes: the block's aligned size when the
  // free succeeded, else 0.
  void on_free(TraceAddr addr, int32_t status, uint64_t freed_bytes, bool epoch_checked,
               uint64_t epoch_arg) {
    FreeRecord r;
    std::memset(&r, 0, sizeof r);
    r.addr = addr.value;
    r.epoch_arg = epoch_checked ? epoch_arg : 0;
    r.freed_bytes = freed_bytes;
    r.status = status;
    r.flags =
        static_cast<uint8_t>((addr.raw ? kAddrRaw : 0) | (epoch_checked ? kFreeEpochChecked : 0));
    append(&r, sizeof r, Kind::kFree, 0);
  }

  // A zarena_reset that started epoch new_epoch.
  void on_reset(uint64_t new_epoch) { value(Kind::kReset, new_epoch, 0); }
  // A zarena_mark_step_boundary; top: the top offset, which became the floor.
  void on_boundary(uint64_t top) { value(Kind::kBoundary, top, 0); }
  // A zarena_set_floor(offset), answered status.
  void on_set_floor(uint64_t offset, int32_t status) {
    value(Kind::kSetFloor, offset, static_cast<uint32_t>(status));
  }
  // zarena_pin / zarena_unpin of addr, answered status.
  void on_pin(TraceAddr addr, int32_t status) { pin(Kind::kPin, addr, status); }
  void on_unpin(TraceAddr addr, int32_t status) { pin(Kind::kUnpin, addr, status); }
  // zarena_step_begin: the engine marks the start of a step.
  void on_step_begin() { bare(Kind::kStepBegin, 0); }
  // A tag that allocations may name: id as zarena_tag_register returned it. Tags are
  // process-wide, so the engine writes each registered tag into every open trace (at
  // open for those registered before). Names longer than kMaxTagNameBytes are cut.
  void on_tag(uint32_t id, std::string_view name);
  // The arena's CUDA-graph capture flag changed (zarena_set_capture_active).
  void on_capture(bool active) { bare(Kind::kCapture, active ? 1u : 0u); }

  // Writes every buffered record and the end record, stops the writer thread and closes
  // the file. Idempotent: later calls return the first result. Returns the first write
  // error (kBackend), if any.
  zarena_core::Result close();

  // Records written so far by the hot path (sequence numbers handed out).
  uint64_t events() const { return seq_.load(std::memory_order_relaxed); }
  const std::string& path() const { return path_; }

  // One per (tracer, thread that traced through it). Owned by the tracer, so a thread
  // that exits leaves its last records for close() to write.
  struct ThreadBuffer {
    char* data = nullptr;
    size_t pos = 0;  // the owner thread's write position
    size_t cap = 0;
    std::atomic<size_t> committed{0};  // bytes of data that hold complete records
    uint16_t thread = 0;
  };

 private:
  Tracer(const std::string& path, int fd, const TraceOptions& opts);

  // The calling thread's buffer for this tracer: a thread-local cache hit in the common
  // case (keyed by a process-unique tracer id, so a new tracer at a reused address never
  // sees an old tracer's buffer), attach_thread() otherwise.
  ThreadBuffer* local_buffer() {
    TlsSlot& s = tls_slots_[id_ & (kTlsSlots - 1)];
    if (__builtin_expect(s.tracer_id == id_, 1)) return s.buffer;
    return attach_thread();
  }

  uint64_t now_ns() const {
    if (!precise_) return coarse_now_ns_.load(std::memory_order_relaxed);
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count() -
                                 start_steady_ns_);
  }

  // Stamps the record's header (record points at its first byte, bytes is its size, a
  // multiple of 8) and copies it into the calling thread's buffer.
  void append(void* record, size_t bytes, Kind kind, uint32_t aux) {
    ThreadBuffer* b = local_buffer();
    if (__builtin_expect(b->pos + bytes > b->cap, 0)) rotate(b);
    RecordHeader* h = static_cast<RecordHeader*>(record);
    h->seq = seq_.fetch_add(1, std::memory_order_relaxed);
    h->time_ns = now_ns();
    h->thread = b->thread;
    h->kind = static_cast<uint8_t>(kind);
    h->words = static_cast<uint8_t>(bytes / 8);
    h->aux = aux;
    std::memcpy(b->data + b->pos, record, bytes);
    b->pos += bytes;
    // Release: a final flush on another thread (close, exit) reads up to here.
    b->committed.store(b->pos, std::memory_order_release);
  }
  void value(Kind kind, uint64_t v, uint32_t aux) {
    ValueRecord r;
    std::memset(&r, 0, sizeof r);
    r.value = v;
    append(&r, sizeof r, kind, aux);
  }
  void pin(Kind kind, TraceAddr addr, int32_t status) {
    PinRecord r;
    std::memset(&r, 0, sizeof r);
    r.addr = addr.value;
    r.status = status;
    r.flags = addr.raw ? kAddrRaw : 0;
    append(&r, sizeof r, kind, 0);
  }
  void bare(Kind kind, uint32_t aux) {
    BareRecord r;
    std::memset(&r, 0, sizeof r);
    append(&r, sizeof r, kind, aux);
  }

  // Out of line, off the common path: a full buffer goes to the writer and is replaced.
  void rotate(ThreadBuffer* b);
  ThreadBuffer* attach_thread();

  friend class TracerAccess;  // the process-wide registry (trace_registry.cpp)

  // close(), with at_exit recorded in the end record.
  zarena_core::Result finish(bool at_exit);
  // The calling thread is exiting: its buffer's records go to the writer and its memory
  // back to the pool.
  void detach(ThreadBuffer* b);
  void writer_loop();
  char* take_chunk();  // with impl_->mu held

  struct TlsSlot {
    uint64_t tracer_id;
    ThreadBuffer* buffer;
  };
  static constexpr uint64_t kTlsSlots = 4;  // arenas a thread traces without a lookup
  // __thread, not thread_local: a POD needs no per-access check for a TLS init
  // function. The default TLS model, not initial-exec: one initial-exec variable marks
  // the whole of libzarena STATIC_TLS, and dlopen (Python, Go's run-time loading) then
  // fails because the static CUDA runtime's thread-locals do not fit the static TLS
  // space glibc keeps for dlopen'ed libraries.
  static __thread TlsSlot tls_slots_[kTlsSlots];

  const uint64_t id_;
  const bool precise_;
  int64_t start_steady_ns_ = 0;
  alignas(64) std::atomic<uint64_t> seq_{0};
  alignas(64) std::atomic<uint64_t> coarse_now_ns_{0};
  alignas(64) std::string path_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zarena_trace
