// Trace capture: the engine records every arena event into a file (format in
// trace_format.h, specified in docs/TRACE.md) through a Tracer.
//
// Hot path: the engine holds a `Tracer*` that is null when tracing is off, so an untraced
// arena pays one predictable branch. The engine's two common events, an allocation the
// region served and a region free, go into the lane of the slot whose lock the engine
// holds (slot_alloc, slot_free): no atomic read-modify-write, no thread-local lookup, no
// lock, no syscall, no allocation; the order key reads the trace's order counter (a
// cache line that is written only when blocks change hands between slots) and, for a
// free, a small per-slot table that says whether this slot allocated the block since the
// counter last moved. Every other event (the generic on_* calls, usable from any thread)
// takes its own number from the order counter (one atomic increment) and goes into the
// calling thread's buffer (a thread-local cache lookup). A full buffer is handed to the
// tracer's background writer thread (a short lock) and replaced from a pool.
//
// Ordering: a key is taken where the operation is ordered: inside the engine's critical
// section; for an operation that can give space back (a free, the unpin that completes a
// deferred free) before the operation, for an allocation after it. Sorting by key then
// gives an order the engine could have executed, which is what replay needs. The engine
// also advances the order counter whenever it takes its central lock (the only way a
// block passes from one slot to another): order_counter().
//
// Completeness: close() (the engine calls it at destroy) writes everything and an end
// record. A tracer still open when the process exits normally (exit(), return from
// main) is flushed by an atexit handler, whose end record says so. The close and the
// exit flush take what was recorded when they began and end in bounded time: a thread
// that keeps tracing meanwhile has its later records dropped, and the end record counts
// them (EndRecord::dropped). A crash or _exit() loses what was still buffered; the file
// then ends without an end record, and readers say "truncated".
//
// Failures: the first write error, or host memory for a buffer running out, stops the
// trace: from then on nothing more is written (records are dropped and counted), the
// owner hears of it at once through TraceOptions::on_failure, and status() says so. No
// tracer call throws: events are noexcept, whatever memory does.
//
// Files: the path is locked (flock) while the trace is open. A path another open trace
// holds, in this process or another, is never truncated: open() takes the first free of
// "<stem>.2<ext>", "<stem>.3<ext>", ... instead (path() says which).
//
// Fork: a child inherits the parent's tracers but never writes them (not at its exit
// either): they are the parent's (trace_registry.cpp).
//
// Threads: every generic on_* may be called from any number of threads at once; a slot_*
// call only by the holder of that slot's lock (the engine's region slot). close() and the
// destructor need the engine's exclusive use (no call in flight or after), as
// zarena_destroy does.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "base/checks.h"
#include "base/status.h"
#include "trace/trace_format.h"

namespace zarena_trace {

// What the trace header says about the arena.
struct TraceHeader {
  std::string arena_name;
  uint64_t capacity_bytes = 0;
  uint64_t alignment = 0;
  int32_t overflow_policy = 0;        // resolved ZARENA_OVERFLOW_*
  int32_t backend = 0;                // resolved ZARENA_BACKEND_*
  uint32_t config_flags = 0;          // ZARENA_FLAG_*
  uint64_t region_base = 0;           // the region's address, for reading raw pointers; 0 = unknown
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
  // Slot lanes (slot_alloc, slot_free): the engine's slot count (at most 128); 0: none.
  uint32_t slots = 0;
  // Called once, soon after the trace's first failure (see "Failures" above), from the
  // tracer's writer thread with no tracer lock held. Null: nobody is told (status() is).
  void (*on_failure)(void* ctx, const std::string& path, const zarena_core::Result& why) = nullptr;
  void* failure_ctx = nullptr;
  // Called by close() and the exit flush once chunks filled from then on are dropped and
  // before the writer drains what was queued: tests trace from another thread there.
  void (*on_flush_begin)(void* ctx) = nullptr;
  void* flush_ctx = nullptr;
};

// An address in a record: an offset in the region, or a raw pointer (overflow blocks); a
// planned block is named by its region offset and flagged (kAddrPlanned).
struct TraceAddr {
  uint64_t value = 0;
  bool raw = false;
  bool planned = false;
  static TraceAddr region(uint64_t offset) { return {offset, false, false}; }
  static TraceAddr pointer(const void* p) { return {reinterpret_cast<uintptr_t>(p), true, false}; }
  static TraceAddr planned_block(uint64_t offset) { return {offset, false, true}; }
  uint8_t flags() const {
    return static_cast<uint8_t>((raw ? kAddrRaw : 0) | (planned ? kAddrPlanned : 0));
  }
};

// Writes a tag registration into every open tracer (tags are process-wide).
void broadcast_tag(uint32_t id, std::string_view name);

class Tracer {
 public:
  // Creates (truncates) path, or the first free name after it when another open trace
  // holds it (see "Files" above), writes the header and starts the writer thread. On
  // failure returns null and fills *err (kBackend with the OS's reason, kOutOfMemory).
  static std::unique_ptr<Tracer> open(const std::string& path, const TraceHeader& header,
                                      zarena_core::Result* err, const TraceOptions& opts = {});
  // Closes when still open (the result is then lost: call close() to see it).
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // --- the engine's hot path: under the lock of region slot `slot` ---------------------
  // An allocation the region served (bump or reuse) at region offset `offset`; call it
  // after the allocation, before the slot lock is released. (The record leaves out what a
  // reader derives: the aligned size, the epoch, the status.)
  __attribute__((always_inline)) void slot_alloc(uint32_t slot, uint64_t request_bytes,
                                                 uint64_t offset, bool reused, uint32_t tag) {
    Lane& l = lanes_[slot];
    const uint64_t g = order_.load(std::memory_order_relaxed);
    l.owned[(offset >> granule_shift_) & kOwnedMask] = Owned{offset, g};
    LaneAllocRecord* r = lane_space<LaneAllocRecord>(l, lane_key(g, slot));
    r->offset = offset;
    r->request = request_bytes | (reused ? kLaneReused : 0);
    set_tail(&r->t, l, Kind::kLaneAlloc, sizeof(LaneAllocRecord), tag);
    lane_commit(l, r, sizeof(LaneAllocRecord));
  }
  // The key of a free of region offset `offset`: call it before the free (which may give
  // the space to other slots), and pass the result to slot_free.
  __attribute__((always_inline)) uint64_t slot_free_key(uint32_t slot, uint64_t offset) {
    Lane& l = lanes_[slot];
    const Owned& o = l.owned[(offset >> granule_shift_) & kOwnedMask];
    const uint64_t g = order_.load(std::memory_order_relaxed);
    // A block this slot allocated since the counter last moved is still the one it
    // allocated, or this slot freed it since (a double free, ordered in this lane after
    // the first): no other slot can have seen it, reading the counter is enough.
    const bool mine = o.offset == offset && o.g == g;
    if (ZARENA_LIKELY(mine)) return lane_key(g, slot);
    return take_key();
  }
  // The free of region offset `offset`, keyed by slot_free_key; arguments as on_free's.
  __attribute__((always_inline)) void slot_free(uint32_t slot, uint64_t key, uint64_t offset,
                                                int32_t status, uint64_t freed_bytes,
                                                bool epoch_checked, uint64_t epoch_arg) {
    Lane& l = lanes_[slot];
    if (ZARENA_UNLIKELY(epoch_checked)) {
      LaneFreeAtRecord* r = lane_space<LaneFreeAtRecord>(l, key);
      fill_free(&r->f, l, offset, status, freed_bytes, sizeof(LaneFreeAtRecord));
      r->epoch_arg = epoch_arg;
      ++l.long_frees;
      lane_commit(l, r, sizeof(LaneFreeAtRecord));
      return;
    }
    LaneFreeRecord* r = lane_space<LaneFreeRecord>(l, key);
    fill_free(r, l, offset, status, freed_bytes, sizeof(LaneFreeRecord));
    lane_commit(l, r, sizeof(LaneFreeRecord));
  }
  // A key of its own, for a generic event whose operation must be ordered before it is
  // recorded (the unpin that completes a deferred free): take it before the operation
  // and pass it to the event.
  uint64_t take_key() { return own_key(order_.fetch_add(1, std::memory_order_relaxed) + 1); }
  // The order counter: the engine advances it (fetch_add) whenever it takes its central
  // lock, where blocks pass between slots.
  std::atomic<uint64_t>* order_counter() { return &order_; }

  // --- generic events: any thread --------------------------------------------------------
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
    r.flags = addr.flags();
    r.status = static_cast<int16_t>(status);
    append(&r, sizeof r, Kind::kAlloc, tag);
  }

  // A zarena_free (epoch_checked false) or zarena_free_at (true, epoch_arg its epoch
  // argument) of addr, answered status. freed_bytes: the block's aligned size when the
  // free succeeded, else 0.
  void on_free(TraceAddr addr, int32_t status, uint64_t freed_bytes, bool epoch_checked,
               uint64_t epoch_arg) {
    on_free(addr, status, freed_bytes, epoch_checked, epoch_arg, take_key());
  }
  // key: take_key() taken before a free that may hand the space on at once (a planned
  // block's: the plan's next instance may take it).
  void on_free(TraceAddr addr, int32_t status, uint64_t freed_bytes, bool epoch_checked,
               uint64_t epoch_arg, uint64_t key) {
    FreeRecord r;
    std::memset(&r, 0, sizeof r);
    r.addr = addr.value;
    r.epoch_arg = epoch_checked ? epoch_arg : 0;
    r.freed_bytes = freed_bytes;
    r.status = status;
    r.flags = static_cast<uint8_t>(addr.flags() | (epoch_checked ? kFreeEpochChecked : 0));
    append(&r, sizeof r, Kind::kFree, 0, key);
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
  void on_pin(TraceAddr addr, int32_t status) { pin(Kind::kPin, addr, status, take_key()); }
  void on_pin(TraceAddr addr, int32_t status, uint64_t key) { pin(Kind::kPin, addr, status, key); }
  // key: take_key() taken before the unpin (the last one completes a deferred free).
  void on_unpin(TraceAddr addr, int32_t status, uint64_t key) {
    pin(Kind::kUnpin, addr, status, key);
  }
  void on_unpin(TraceAddr addr, int32_t status) { on_unpin(addr, status, take_key()); }
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

  // Event records made so far (exact once no call is in flight).
  uint64_t events() const;
  // The file written (the path asked for, or the free name taken instead of it).
  const std::string& path() const { return path_; }
  // OK, or the trace's first failure (kBackend: a write failed; kOutOfMemory).
  zarena_core::Result status() const;
  // Records dropped so far: after a failure, or made after the close or exit flush began.
  uint64_t dropped_records() const;

  // One per (tracer, thread that traced through it). Owned by the tracer, so a thread
  // that exits leaves its last records for close() to write.
  struct ThreadBuffer {
    char* data = nullptr;
    size_t pos = 0;  // the owner thread's write position
    size_t cap = 0;
    std::atomic<size_t> committed{0};  // bytes of data that hold complete records
    uint64_t records = 0;              // records appended (the owner's count)
    uint64_t queued_records = 0;       // ... of which handed to the writer (under its lock)
    uint16_t thread = 0;
    // A chunk of this buffer was dropped (the flush had begun, or the trace failed): the
    // rest of its records are dropped too (the file keeps no record after a gap).
    bool dropped = false;
    // Where records go, dropped, while no chunk can be had (host memory ran out before
    // the buffer had one): room for the largest record.
    alignas(8) char spare[kMaxRecordBytes];
  };

 private:
  Tracer(const std::string& path, int fd, const TraceOptions& opts);

  // The calling thread's buffer for this tracer: a thread-local cache hit in the common
  // case (keyed by a process-unique tracer id, so a new tracer at a reused address never
  // sees an old tracer's buffer), attach_thread() otherwise.
  ThreadBuffer* local_buffer() {
    TlsSlot& s = tls_slots_[id_ & (kTlsSlots - 1)];
    if (ZARENA_LIKELY(s.tracer_id == id_)) return s.buffer;
    return attach_thread();
  }

  uint64_t now_ns() const {
    if (!precise_) return coarse_now_ns_.load(std::memory_order_relaxed);
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count() -
                                 start_steady_ns_);
  }

  // Blocks a slot allocated, by granule (direct-mapped; a miss only costs a key of its
  // own): the block's offset and the order counter's value when it was allocated.
  struct Owned {
    uint64_t offset;
    uint64_t g;
  };
  static constexpr uint64_t kNotOwned = ~uint64_t{0};
  static constexpr size_t kOwnedEntries = 1024;
  static constexpr size_t kPrefetchAhead = 512;  // bytes: about eight lane pairs
  static constexpr uint64_t kOwnedMask = kOwnedEntries - 1;
  struct alignas(64) Lane {
    ThreadBuffer buf;
    Owned* owned = nullptr;           // kOwnedEntries
    uint64_t key = ~uint64_t{0};      // the order key the lane's last lane-order record gave
    uint64_t time_ns = ~uint64_t{0};  // the time the lane's last lane-time record gave
    // In the current chunk: marks (24-byte records that are no events) and epoch-checked
    // frees (8 bytes longer): what lane_records() needs to count the events.
    uint64_t marks = 0, long_frees = 0;
  };

  static void stamp(RecordHeader* h, uint64_t key, Kind kind, size_t bytes, uint32_t aux,
                    uint16_t thread) {
    h->seq = key;
    h->kind = static_cast<uint8_t>(kind);
    h->words = static_cast<uint8_t>(bytes / 8);
    h->aux = aux;
    h->thread = thread;
  }
  // thread, kind, words and aux: bytes 16-23 of every record, one store.
  static void set_tail(LaneTail* t, const Lane& l, Kind kind, size_t bytes, uint32_t aux) {
    const uint64_t w = uint64_t{l.buf.thread} | uint64_t{static_cast<uint8_t>(kind)} << 16 |
                       uint64_t{bytes / 8} << 24 | uint64_t{aux} << 32;
    std::memcpy(t, &w, sizeof w);  // little-endian: thread, kind, words, aux
  }
  static void fill_free(LaneFreeRecord* r, const Lane& l, uint64_t offset, int32_t status,
                        uint64_t freed_bytes, size_t bytes) {
    r->offset = offset;
    r->freed_bytes = freed_bytes;
    set_tail(&r->t, l, Kind::kLaneFree, bytes, static_cast<uint32_t>(status));
  }
  // Room for a record of type R with order key `key` in the lane's buffer. Lane records
  // carry neither key nor time: a lane-order record goes first when the key differs from
  // the lane's last one, a lane-time record when the clock has moved since its last one.
  // A lane's write position is its committed mark (one store per record); buf.pos is
  // brought up to date only for rotate().
  template <typename R>
  __attribute__((always_inline)) R* lane_space(Lane& l, uint64_t key) {
    const uint64_t now = now_ns();
    size_t pos = l.buf.committed.load(std::memory_order_relaxed);
    if (ZARENA_UNLIKELY(key != l.key || now != l.time_ns || pos + sizeof(R) > l.buf.cap)) {
      pos = lane_marks(l, pos, sizeof(R), key, now);
    }
    char* p = l.buf.data + pos;
    // Fetch the lines a few records ahead for writing: the engine's next lock exchange
    // waits for these stores to drain, so they should not wait for a line from memory.
    __builtin_prefetch(p + kPrefetchAhead, 1);
    return reinterpret_cast<R*>(p);
  }
  // Out of line: the marks a record needs first, and a new chunk when they or it do not fit.
  // Returns where the record goes.
  __attribute__((noinline)) size_t lane_marks(Lane& l, size_t pos, size_t bytes, uint64_t key,
                                              uint64_t now) {
    if (pos + bytes + 2 * sizeof(LaneMarkRecord) > l.buf.cap) pos = lane_rotate(l, pos);
    if (key != l.key) pos = lane_mark(l, pos, Kind::kLaneOrder, key, &l.key);
    if (now != l.time_ns) pos = lane_mark(l, pos, Kind::kLaneTime, now, &l.time_ns);
    return pos;
  }
  // A full chunk goes to the writer; a new chunk starts with both marks (a reader may
  // start there). Returns the new position (0).
  size_t lane_rotate(Lane& l, size_t pos) {
    l.buf.pos = pos;
    l.buf.records = lane_records(l);
    rotate(&l.buf);
    l.marks = l.long_frees = 0;
    l.key = l.time_ns = ~uint64_t{0};
    return 0;
  }
  size_t lane_mark(Lane& l, size_t pos, Kind kind, uint64_t value, uint64_t* state) {
    LaneMarkRecord* m = reinterpret_cast<LaneMarkRecord*>(l.buf.data + pos);
    m->value = value;
    m->reserved = 0;
    set_tail(&m->t, l, kind, sizeof(LaneMarkRecord), 0);
    *state = value;
    ++l.marks;
    return pos + sizeof(LaneMarkRecord);
  }
  // Event records a lane made: those handed to the writer, and those in its chunk (24
  // bytes each, 32 for an epoch-checked free, marks left out; no count on the hot path).
  static uint64_t lane_records(const Lane& l) {
    const size_t pos = l.buf.committed.load(std::memory_order_relaxed);
    return l.buf.queued_records + (pos - 8 * l.long_frees) / sizeof(LaneAllocRecord) - l.marks;
  }
  // r: the record lane_space returned, now complete.
  void lane_commit(Lane& l, const void* r, size_t bytes) {
    // Release: a final flush on another thread (exit) reads up to here.
    l.buf.committed.store(static_cast<size_t>(static_cast<const char*>(r) - l.buf.data) + bytes,
                          std::memory_order_release);
  }

  // Stamps the record's header (record points at its first byte, bytes is its size, a
  // multiple of 8) with `key` and copies it into the calling thread's buffer.
  void append(void* record, size_t bytes, Kind kind, uint32_t aux, uint64_t key) {
    ThreadBuffer* b = local_buffer();
    if (ZARENA_UNLIKELY(b == nullptr)) return drop_unbuffered();
    if (ZARENA_UNLIKELY(b->pos + bytes > b->cap)) rotate(b);
    RecordHeader* h = static_cast<RecordHeader*>(record);
    stamp(h, key, kind, bytes, aux, b->thread);
    h->time_ns = now_ns();
    std::memcpy(b->data + b->pos, record, bytes);
    b->pos += bytes;
    ++b->records;
    // Release: a final flush on another thread (close, exit) reads up to here.
    b->committed.store(b->pos, std::memory_order_release);
  }
  void append(void* record, size_t bytes, Kind kind, uint32_t aux) {
    append(record, bytes, kind, aux, take_key());
  }
  void value(Kind kind, uint64_t v, uint32_t aux) {
    ValueRecord r;
    std::memset(&r, 0, sizeof r);
    r.value = v;
    append(&r, sizeof r, kind, aux);
  }
  void pin(Kind kind, TraceAddr addr, int32_t status, uint64_t key) {
    PinRecord r;
    std::memset(&r, 0, sizeof r);
    r.addr = addr.value;
    r.status = status;
    r.flags = addr.flags();
    append(&r, sizeof r, kind, 0, key);
  }
  void bare(Kind kind, uint32_t aux) {
    BareRecord r;
    std::memset(&r, 0, sizeof r);
    append(&r, sizeof r, kind, aux);
  }

  // Out of line, off the common path: a full buffer goes to the writer and is replaced.
  void rotate(ThreadBuffer* b) noexcept;
  // The calling thread's new buffer; null when host memory ran out (the trace stops).
  ThreadBuffer* attach_thread() noexcept;
  // A record with nowhere to go (attach_thread failed): counted, the trace stops.
  void drop_unbuffered() noexcept;

  friend class TracerAccess;  // the process-wide registry (trace_registry.cpp)

  // close(), with at_exit recorded in the end record.
  zarena_core::Result finish(bool at_exit);
  // The calling thread is exiting: its buffer's records go to the writer and its memory
  // back to the pool.
  void detach(ThreadBuffer* b) noexcept;
  void writer_loop();
  char* take_chunk() noexcept;  // with impl_->mu held; null when host memory ran out

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
  uint32_t granule_shift_ = 0;  // log2 of the arena's alignment (the owned tables' index)
  std::unique_ptr<Lane[]> lanes_;
  uint32_t lane_count_ = 0;
  alignas(64) std::atomic<uint64_t> order_{0};
  alignas(64) std::atomic<uint64_t> coarse_now_ns_{0};
  alignas(64) std::string path_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zarena_trace
