#include "trace/trace.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

#include "trace/trace_registry.h"

namespace zarena_trace {

using zarena_core::Result;
using zarena_core::Status;

__thread Tracer::TlsSlot Tracer::tls_slots_[Tracer::kTlsSlots] = {};

namespace {

// Process-unique, never 0 (an empty thread-local slot), never reused: a thread's cached
// buffer can only ever match the tracer that made it.
std::atomic<uint64_t> g_next_tracer_id{1};

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string os_error(const std::string& what, const std::string& path, int err) {
  return what + " '" + path + "': " + std::system_category().message(err);
}

}  // namespace

struct Tracer::Impl {
  struct Chunk {
    char* data;
    size_t bytes;
    uint64_t records;
  };

  int fd = -1;
  size_t chunk_bytes = 0;
  size_t max_queued_bytes = 0;
  uint64_t tick_ns = 0;
  void (*on_failure)(void*, const std::string&, const Result&) = nullptr;
  void* failure_ctx = nullptr;
  void (*on_flush_begin)(void*) = nullptr;
  void* flush_ctx = nullptr;

  mutable std::mutex mu;             // everything below
  std::condition_variable work_cv;   // writer: a chunk is queued, a failure, or stop
  std::condition_variable space_cv;  // producers: the queue went under its limit
  std::deque<Chunk> queue;
  size_t queued_bytes = 0;
  std::vector<char*> pool;  // empty chunks
  std::vector<std::unique_ptr<ThreadBuffer>> buffers;
  uint32_t next_thread = 0;
  // The writer drains what was queued and exits; chunks filled after that are dropped
  // (counted in dropped_records), so a thread that keeps tracing cannot hold up the
  // close or the exit flush, nor grow the file, however long it runs.
  bool stopping = false;
  // The first failure (a write error, or host memory for a buffer): nothing is written
  // after it, every record is dropped (counted). failure_told: on_failure ran (or runs).
  // file_broken: the failure was the file's (the end record is not even tried).
  Result failure;
  bool failed = false;
  bool failure_told = false;
  bool file_broken = false;
  uint64_t dropped_records = 0;
  bool closed = false;           // the file is final: records appended now are dropped
  uint64_t written_records = 0;  // event records written to the file
  std::thread writer;

  std::mutex close_mu;  // serialises close() / the exit flush

  ~Impl() {
    for (char* c : pool) delete[] c;
    for (auto& b : buffers) {
      if (b->data != b->spare) delete[] b->data;
    }
    for (auto& c : queue) delete[] c.data;
  }

  // Under mu. The trace stops at its first failure; the writer tells the owner.
  void fail(Result why) noexcept {
    if (failed) return;
    failure = std::move(why);
    failed = true;
    file_broken = failure.status == Status::kBackend;
    work_cv.notify_one();
    space_cv.notify_all();
  }
  void fail_out_of_memory(const std::string& path) noexcept {
    Result r;
    r.status = Status::kOutOfMemory;
    try {
      r.message = "out of host memory for a buffer of the trace '" + path +
                  "'; the trace stops here (later records are dropped)";
    } catch (...) {  // the status says it
    }
    fail(std::move(r));
  }
  // Under mu: an empty chunk back to the pool (freed when the pool cannot grow).
  void recycle(char* data) {
    try {
      pool.push_back(data);
    } catch (...) {
      delete[] data;
    }
  }
  // Under mu: a chunk of `records` whole records written (unless the trace failed), then
  // counted for the end record: written, or dropped. The write itself is unlocked when
  // `lock` is given (the writer thread: producers hand off meanwhile).
  void write_chunk(const Chunk& c, const std::string& path,
                   std::unique_lock<std::mutex>* lock = nullptr) {
    if (failed) {
      dropped_records += c.records;
      return;
    }
    if (lock != nullptr) lock->unlock();
    const Result r = write_all(c.data, c.bytes, path);
    if (lock != nullptr) lock->lock();
    if (r.is_ok()) {
      written_records += c.records;
    } else {
      dropped_records += c.records;
      fail(r);
    }
  }

  // Writes all of [p, p+n).
  Result write_all(const char* p, size_t n, const std::string& path) const {
    while (n > 0) {
      const ssize_t w = ::write(fd, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return Result::fail(Status::kBackend,
                            os_error("writing trace", path, errno) +
                                "; the trace stops here (later records are dropped)");
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    return Result::ok();
  }
};

namespace {

constexpr int kMaxTraceNames = 999;

// The n-th name tried for path (n >= 2): "<stem>.<n><ext>", ext being the last ".xxx" of
// the file's name ("/tmp/train.zatrace" -> "/tmp/train.2.zatrace"; "/tmp/t" -> "/tmp/t.2").
std::string numbered_path(const std::string& path, int n) {
  const size_t slash = path.rfind('/');
  const size_t name = slash == std::string::npos ? 0 : slash + 1;
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos || dot <= name) return path + "." + std::to_string(n);
  return path.substr(0, dot) + "." + std::to_string(n) + path.substr(dot);
}

// Opens path for a new trace, or the first free numbered name after it when another open
// trace holds it (an exclusive flock, held until the file is closed). A file system
// without flock, and a path that is no regular file, get the path itself. Returns the fd
// (and *actual), or -1 with *err set.
int open_trace_file(const std::string& path, std::string* actual, Result* err) {
  for (int n = 1; n <= kMaxTraceNames; ++n) {
    const std::string name = n == 1 ? path : numbered_path(path, n);
    const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      *err = Result::fail(Status::kBackend, os_error("cannot create trace file", name, errno));
      return -1;
    }
    // Only a regular file is locked and truncated (a FIFO or /dev/null is used as it is).
    struct stat st;
    const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    if (regular && ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
      ::close(fd);  // another open trace writes it
      continue;
    }
    if (regular && ::ftruncate(fd, 0) != 0) {
      const int e = errno;
      ::close(fd);
      *err = Result::fail(Status::kBackend, os_error("cannot truncate trace file", name, e));
      return -1;
    }
    *actual = name;
    return fd;
  }
  *err = Result::fail(Status::kBackend,
                      "cannot create trace file '" + path + "': it and the " +
                          std::to_string(kMaxTraceNames - 1) +
                          " numbered names after it are in use by other open traces");
  return -1;
}

}  // namespace

std::unique_ptr<Tracer> Tracer::open(const std::string& path, const TraceHeader& header,
                                     Result* err, const TraceOptions& opts) {
  std::string actual;
  const int fd = open_trace_file(path, &actual, err);
  if (fd < 0) return nullptr;
  std::unique_ptr<Tracer> t;
  try {
    t.reset(new Tracer(actual, fd, opts));
  } catch (const std::bad_alloc&) {
    ::close(fd);
    *err =
        Result::fail(Status::kOutOfMemory, "out of host memory opening the trace '" + actual + "'");
    return nullptr;
  }
  while (t->granule_shift_ < 63 && (uint64_t{1} << (t->granule_shift_ + 1)) <= header.alignment) {
    ++t->granule_shift_;
  }

  FileHeader h;
  std::memset(&h, 0, sizeof h);
  std::memcpy(h.magic, kMagic, sizeof h.magic);
  h.major = kFormatMajor;
  h.minor = kFormatMinor;
  h.fixed_bytes = sizeof(FileHeader);
  h.name_bytes = static_cast<uint32_t>(header.arena_name.size());
  h.header_bytes = static_cast<uint32_t>((sizeof(FileHeader) + h.name_bytes + 7) / 8 * 8);
  h.capacity_bytes = header.capacity_bytes;
  h.alignment = header.alignment;
  h.overflow_policy = header.overflow_policy;
  h.backend = header.backend;
  h.config_flags = header.config_flags;
  h.trace_flags = opts.precise_clock ? 0 : kTraceCoarseClock;
  h.start_unix_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count());
  h.clock_resolution_ns = opts.precise_clock ? 1 : t->impl_->tick_ns;
  h.region_base = header.region_base;
  h.overflow_limit_bytes = header.overflow_limit_bytes;
  std::vector<char> bytes(h.header_bytes, 0);
  std::memcpy(bytes.data(), &h, sizeof h);
  std::memcpy(bytes.data() + sizeof h, header.arena_name.data(), header.arena_name.size());
  const Result r = t->impl_->write_all(bytes.data(), bytes.size(), actual);
  if (!r.is_ok()) {
    *err = r;
    std::lock_guard<std::mutex> lock(t->impl_->mu);
    t->impl_->fail(r);  // the destructor's close writes nothing more
    return nullptr;
  }

  try {
    t->impl_->writer = std::thread([p = t.get()] { p->writer_loop(); });
    registry_add(t->id_, t.get());
  } catch (const std::system_error& e) {
    *err =
        Result::fail(Status::kBackend, std::string("cannot start the trace writer: ") + e.what());
    return nullptr;
  } catch (const std::bad_alloc&) {
    *err =
        Result::fail(Status::kOutOfMemory, "out of host memory opening the trace '" + actual + "'");
    return nullptr;
  }
  return t;
}

Tracer::Tracer(const std::string& path, int fd, const TraceOptions& opts)
    : id_(g_next_tracer_id.fetch_add(1)),
      precise_(opts.precise_clock),
      start_steady_ns_(steady_ns()),
      path_(path),
      impl_(new Impl) {
  impl_->fd = fd;
  impl_->on_failure = opts.on_failure;
  impl_->failure_ctx = opts.failure_ctx;
  impl_->on_flush_begin = opts.on_flush_begin;
  impl_->flush_ctx = opts.flush_ctx;
  // A chunk must hold the largest record (a tag), and whole 64-byte alloc records.
  const size_t min_chunk = 4096;
  impl_->chunk_bytes = (std::max(opts.buffer_bytes, min_chunk) + 63) / 64 * 64;
  impl_->max_queued_bytes = std::max(opts.max_queued_bytes, impl_->chunk_bytes);
  impl_->tick_ns = opts.tick_ns == 0 ? 1'000'000 : opts.tick_ns;
  // Slot lanes: buffers the tracer owns (their chunk is taken at the first event), each
  // with its table of blocks the slot allocated.
  lane_count_ = std::min<uint32_t>(opts.slots, 128);
  if (lane_count_ > 0) {
    lanes_.reset(new Lane[lane_count_]);
    for (uint32_t i = 0; i < lane_count_; ++i) {
      Lane& l = lanes_[i];
      l.owned = new Owned[kOwnedEntries];
      for (size_t k = 0; k < kOwnedEntries; ++k) l.owned[k] = Owned{kNotOwned, 0};
      l.buf.thread = static_cast<uint16_t>(kLaneThread | i);
    }
  }
}

Tracer::~Tracer() {
  registry_remove(id_);
  (void)close();
  for (uint32_t i = 0; i < lane_count_; ++i) {
    delete[] lanes_[i].owned;
    if (lanes_[i].buf.data != lanes_[i].buf.spare) delete[] lanes_[i].buf.data;
  }
}

uint64_t Tracer::events() const {
  uint64_t n = 0;
  for (uint32_t i = 0; i < lane_count_; ++i) n += lane_records(lanes_[i]);
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (const auto& b : impl_->buffers) n += b->records;
  return n;
}

Result Tracer::status() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->failure;
}

uint64_t Tracer::dropped_records() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->dropped_records;
}

char* Tracer::take_chunk() noexcept {
  if (!impl_->pool.empty()) {
    char* c = impl_->pool.back();
    impl_->pool.pop_back();
    return c;
  }
  return new (std::nothrow) char[impl_->chunk_bytes];
}

Tracer::ThreadBuffer* Tracer::attach_thread() noexcept {
  ThreadBuffer* b = registry_find_thread_buffer(id_);
  if (b == nullptr) {
    std::lock_guard<std::mutex> lock(impl_->mu);
    try {
      auto owned = std::make_unique<ThreadBuffer>();
      owned->data = take_chunk();
      owned->cap = impl_->chunk_bytes;
      if (owned->data == nullptr) {
        impl_->fail_out_of_memory(path_);
        owned->data = owned->spare;
        owned->cap = sizeof owned->spare;
      }
      // Saturates rather than wraps, below kLaneThread (the field's top bit marks lanes).
      owned->thread =
          static_cast<uint16_t>(std::min<uint32_t>(impl_->next_thread, kLaneThread - 1));
      b = owned.get();
      try {
        impl_->buffers.push_back(std::move(owned));
      } catch (...) {
        if (b->data != b->spare) impl_->recycle(b->data);
        throw;
      }
      ++impl_->next_thread;
    } catch (...) {  // host memory: this record has nowhere to go
      impl_->fail_out_of_memory(path_);
      return nullptr;
    }
  }
  // Without the note the buffer is written at close rather than at the thread's exit.
  try {
    registry_note_thread_buffer(id_, b);
  } catch (...) {
  }
  tls_slots_[id_ & (kTlsSlots - 1)] = TlsSlot{id_, b};
  return b;
}

void Tracer::drop_unbuffered() noexcept {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->closed) ++impl_->dropped_records;
}

void Tracer::rotate(ThreadBuffer* b) noexcept {
  std::unique_lock<std::mutex> lock(impl_->mu);
  Impl& m = *impl_;
  // A chunk for the records that follow; without one, these cannot be handed off.
  char* fresh = nullptr;
  if (!m.closed && !m.stopping && !m.failed) {
    fresh = take_chunk();
    if (fresh == nullptr) m.fail_out_of_memory(path_);
  }
  if (fresh == nullptr) {
    // Dropped: the flush has begun, the trace failed, or the file is final (a caller
    // broke the close contract, or threads outlive the exit flush). The process keeps
    // running; the records are counted until the file is final.
    if (!m.closed) {
      m.dropped_records += b->records - b->queued_records;
      b->queued_records = b->records;
      b->dropped = true;
    }
    if (b->data == nullptr) {
      b->data = take_chunk();
      b->cap = m.chunk_bytes;
      if (b->data == nullptr) {
        b->data = b->spare;
        b->cap = sizeof b->spare;
      }
    }
    b->pos = 0;
    b->committed.store(0, std::memory_order_release);
    return;
  }
  if (b->data != nullptr) {  // nullptr: a lane's first chunk, or a detached buffer's
    try {
      m.queue.push_back({b->data, b->pos, b->records - b->queued_records});
    } catch (...) {
      m.recycle(fresh);
      m.fail_out_of_memory(path_);
      lock.unlock();
      return rotate(b);  // dropped now
    }
    b->queued_records = b->records;
    m.queued_bytes += b->pos;
    m.work_cv.notify_one();
    m.space_cv.wait(lock,
                    [&] { return m.queued_bytes <= m.max_queued_bytes || m.stopping || m.failed; });
  }
  b->data = fresh;
  b->cap = m.chunk_bytes;
  b->pos = 0;
  b->committed.store(0, std::memory_order_release);
}

void Tracer::detach(ThreadBuffer* b) noexcept {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl& m = *impl_;
  if (m.closed || b->data == nullptr) return;
  const uint64_t records = b->records - b->queued_records;
  b->queued_records = b->records;
  bool handed = false;
  if (b->pos > 0 && b->data != b->spare && !b->dropped && !m.failed) {
    try {
      m.queue.push_back({b->data, b->pos, records});
      m.queued_bytes += b->pos;
      m.work_cv.notify_one();
      handed = true;
    } catch (...) {
      m.fail_out_of_memory(path_);
    }
  }
  if (!handed) {
    m.dropped_records += records;
    if (b->data != b->spare) m.recycle(b->data);
  }
  b->data = nullptr;
  b->pos = 0;
  b->cap = 0;
  b->committed.store(0, std::memory_order_release);
  // The thread is gone, so no cache slot can name b again: a new thread attaches anew.
}

void Tracer::on_tag(uint32_t id, std::string_view name) {
  alignas(8) char rec[kMaxRecordBytes];
  const size_t n = std::min(name.size(), kMaxTagNameBytes);
  const size_t bytes = (sizeof(TagRecordHead) + n + 7) / 8 * 8;
  std::memset(rec, 0, bytes);
  TagRecordHead head;
  std::memset(&head, 0, sizeof head);
  head.name_bytes = static_cast<uint32_t>(n);
  std::memcpy(rec, &head, sizeof head);
  std::memcpy(rec + sizeof head, name.data(), n);
  append(rec, bytes, Kind::kTag, id);
}

void Tracer::writer_loop() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  Impl& m = *impl_;
  for (;;) {
    const auto ready = [&] {
      return !m.queue.empty() || m.stopping || (m.failed && !m.failure_told);
    };
    if (precise_) {
      m.work_cv.wait(lock, ready);
    } else {
      m.work_cv.wait_for(lock, std::chrono::nanoseconds(m.tick_ns), ready);
      coarse_now_ns_.store(static_cast<uint64_t>(steady_ns() - start_steady_ns_),
                           std::memory_order_relaxed);
    }
    while (!m.queue.empty()) {
      const Impl::Chunk c = m.queue.front();
      m.queue.pop_front();
      m.write_chunk(c, path_, &lock);  // unlocked while it writes
      m.queued_bytes -= c.bytes;
      m.recycle(c.data);
      m.space_cv.notify_all();
    }
    if (m.failed && !m.failure_told) {
      m.failure_told = true;
      if (m.on_failure != nullptr) {
        const Result why = m.failure;
        lock.unlock();
        m.on_failure(m.failure_ctx, path_, why);
        lock.lock();
      }
    }
    if (m.stopping) return;
  }
}

Result Tracer::close() { return finish(false); }

Result Tracer::finish(bool at_exit) {
  std::lock_guard<std::mutex> close_lock(impl_->close_mu);
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.closed) return m.failure;
    m.stopping = true;
  }
  m.work_cv.notify_all();
  m.space_cv.notify_all();
  if (m.on_flush_begin != nullptr) m.on_flush_begin(m.flush_ctx);
  if (m.writer.joinable()) m.writer.join();

  std::lock_guard<std::mutex> lock(m.mu);
  // The writer is gone, so the file is this thread's now. A buffer handed off while it
  // was stopping is still queued.
  for (const auto& c : m.queue) m.write_chunk(c, path_);
  for (const auto& c : m.queue) m.recycle(c.data);
  m.queue.clear();
  // Records beyond a buffer's committed mark are being written right now by a thread
  // that outlives the exit flush; they are not complete, so they are not written.
  const auto write_buffer = [&](ThreadBuffer& b) {
    if (b.data == nullptr) return;
    const size_t n = b.committed.load(std::memory_order_acquire);
    uint64_t records = 0;  // counted from the records themselves: `records` may be ahead
    for (size_t at = 0; at + sizeof(RecordHeader) <= n;) {
      const auto* h = reinterpret_cast<const RecordHeader*>(b.data + at);
      if (h->words == 0) break;
      if (h->kind != static_cast<uint8_t>(Kind::kLaneTime) &&
          h->kind != static_cast<uint8_t>(Kind::kLaneOrder)) {
        ++records;
      }
      at += size_t{h->words} * 8;
    }
    if (b.dropped || b.data == b.spare) {
      m.dropped_records += records;  // after a gap: nothing more of this buffer
    } else {
      m.write_chunk(Impl::Chunk{b.data, n, records}, path_);
    }
  };
  for (auto& b : m.buffers) write_buffer(*b);
  for (uint32_t i = 0; i < lane_count_; ++i) write_buffer(lanes_[i].buf);
  if (!m.file_broken) {
    EndRecord end;
    std::memset(&end, 0, sizeof end);
    end.events = m.written_records;
    end.dropped = m.dropped_records;
    end.h.seq = own_key(order_.load(std::memory_order_relaxed) + 1);
    end.h.time_ns = static_cast<uint64_t>(steady_ns() - start_steady_ns_);
    end.h.kind = static_cast<uint8_t>(Kind::kEnd);
    end.h.words = sizeof end / 8;
    end.h.aux = at_exit ? kEndAtExit : 0;
    const Result r = m.write_all(reinterpret_cast<const char*>(&end), sizeof end, path_);
    if (!r.is_ok()) m.fail(r);
  }
  if (::close(m.fd) != 0 && !m.file_broken) {
    m.fail(Result::fail(Status::kBackend, os_error("closing trace", path_, errno)));
  }
  m.fd = -1;
  m.closed = true;
  return m.failure;
}

}  // namespace zarena_trace
