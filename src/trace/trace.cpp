#include "trace/trace.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
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

  std::mutex mu;                     // everything below
  std::condition_variable work_cv;   // writer: a chunk is queued, or stop
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
  uint64_t dropped_records = 0;
  bool closed = false;           // the file is final: records appended now are dropped
  Result write_result;           // the first write error
  uint64_t written_records = 0;  // event records written to the file
  std::thread writer;

  std::mutex close_mu;  // serialises close() / the exit flush

  ~Impl() {
    for (char* c : pool) delete[] c;
    for (auto& b : buffers) delete[] b->data;
    for (auto& c : queue) delete[] c.data;
  }

  // Writes a chunk of `records` whole records (counted for the end record).
  void write_chunk(const Chunk& c, const std::string& path) {
    written_records += c.records;
    write_all(c.data, c.bytes, path);
  }

  // Writes all of [p, p+n) unless an earlier write failed; records the first error.
  void write_all(const char* p, size_t n, const std::string& path) {
    while (n > 0 && write_result.is_ok()) {
      const ssize_t w = ::write(fd, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        write_result = Result::fail(Status::kBackend, os_error("writing trace", path, errno));
        return;
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
  }
};

std::unique_ptr<Tracer> Tracer::open(const std::string& path, const TraceHeader& header,
                                     Result* err, const TraceOptions& opts) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *err = Result::fail(Status::kBackend, os_error("cannot create trace file", path, errno));
    return nullptr;
  }
  std::unique_ptr<Tracer> t(new Tracer(path, fd, opts));
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
  t->impl_->write_all(bytes.data(), bytes.size(), path);
  if (!t->impl_->write_result.is_ok()) {
    *err = t->impl_->write_result;
    return nullptr;
  }

  try {
    t->impl_->writer = std::thread([p = t.get()] { p->writer_loop(); });
  } catch (const std::system_error& e) {
    *err =
        Result::fail(Status::kBackend, std::string("cannot start the trace writer: ") + e.what());
    return nullptr;
  }
  registry_add(t->id_, t.get());
  return t;
}

Tracer::Tracer(const std::string& path, int fd, const TraceOptions& opts)
    : id_(g_next_tracer_id.fetch_add(1)),
      precise_(opts.precise_clock),
      start_steady_ns_(steady_ns()),
      path_(path),
      impl_(new Impl) {
  impl_->fd = fd;
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
    delete[] lanes_[i].buf.data;
  }
}

uint64_t Tracer::events() const {
  uint64_t n = 0;
  for (uint32_t i = 0; i < lane_count_; ++i) n += lane_records(lanes_[i]);
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (const auto& b : impl_->buffers) n += b->records;
  return n;
}

char* Tracer::take_chunk() {
  if (!impl_->pool.empty()) {
    char* c = impl_->pool.back();
    impl_->pool.pop_back();
    return c;
  }
  return new char[impl_->chunk_bytes];
}

Tracer::ThreadBuffer* Tracer::attach_thread() {
  ThreadBuffer* b = registry_find_thread_buffer(id_);
  if (b == nullptr) {
    {
      std::lock_guard<std::mutex> lock(impl_->mu);
      auto owned = std::make_unique<ThreadBuffer>();
      owned->data = take_chunk();
      owned->cap = impl_->chunk_bytes;
      // Saturates rather than wraps, below kLaneThread (the field's top bit marks lanes).
      owned->thread =
          static_cast<uint16_t>(std::min<uint32_t>(impl_->next_thread++, kLaneThread - 1));
      b = owned.get();
      impl_->buffers.push_back(std::move(owned));
    }
    registry_note_thread_buffer(id_, b);
  }
  tls_slots_[id_ & (kTlsSlots - 1)] = TlsSlot{id_, b};
  return b;
}

void Tracer::rotate(ThreadBuffer* b) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  if (impl_->stopping && !impl_->closed && b->data != nullptr) {
    impl_->dropped_records += b->records - b->queued_records;
    b->queued_records = b->records;
    b->dropped = true;
  }
  if (impl_->closed || impl_->stopping || b->data == nullptr) {
    // The file is final (a caller broke the close contract, or threads outlive the exit
    // flush): keep the process running, drop what cannot be written any more.
    if (b->data == nullptr) {
      b->data = take_chunk();
      b->cap = impl_->chunk_bytes;
    }
    b->pos = 0;
    b->committed.store(0, std::memory_order_release);
    return;
  }
  impl_->queue.push_back({b->data, b->pos, b->records - b->queued_records});
  b->queued_records = b->records;
  impl_->queued_bytes += b->pos;
  impl_->work_cv.notify_one();
  impl_->space_cv.wait(
      lock, [this] { return impl_->queued_bytes <= impl_->max_queued_bytes || impl_->stopping; });
  b->data = take_chunk();
  b->pos = 0;
  b->committed.store(0, std::memory_order_release);
}

void Tracer::detach(ThreadBuffer* b) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->closed || b->data == nullptr) return;
  if (b->pos > 0) {
    impl_->queue.push_back({b->data, b->pos, b->records - b->queued_records});
    b->queued_records = b->records;
    impl_->queued_bytes += b->pos;
    impl_->work_cv.notify_one();
  } else {
    impl_->pool.push_back(b->data);
  }
  b->data = nullptr;
  b->pos = 0;
  b->cap = 0;
  b->committed.store(0, std::memory_order_release);
  // The thread is gone, so no cache slot can name b again: a new thread attaches anew.
}

void Tracer::on_tag(uint32_t id, std::string_view name) {
  alignas(8) char rec[255 * 8];
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
  for (;;) {
    const auto ready = [this] { return !impl_->queue.empty() || impl_->stopping; };
    if (precise_) {
      impl_->work_cv.wait(lock, ready);
    } else {
      impl_->work_cv.wait_for(lock, std::chrono::nanoseconds(impl_->tick_ns), ready);
      coarse_now_ns_.store(static_cast<uint64_t>(steady_ns() - start_steady_ns_),
                           std::memory_order_relaxed);
    }
    while (!impl_->queue.empty()) {
      const Impl::Chunk c = impl_->queue.front();
      impl_->queue.pop_front();
      // Written without the lock, so producers can hand off meanwhile.
      lock.unlock();
      impl_->write_chunk(c, path_);
      lock.lock();
      impl_->queued_bytes -= c.bytes;
      impl_->pool.push_back(c.data);
      impl_->space_cv.notify_all();
    }
    if (impl_->stopping) return;
  }
}

Result Tracer::close() { return finish(false); }

Result Tracer::finish(bool at_exit) {
  std::lock_guard<std::mutex> close_lock(impl_->close_mu);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->closed) return impl_->write_result;
    impl_->stopping = true;
  }
  impl_->work_cv.notify_all();
  impl_->space_cv.notify_all();
  if (impl_->writer.joinable()) impl_->writer.join();

  std::lock_guard<std::mutex> lock(impl_->mu);
  // The writer is gone, so write_result and the file are this thread's now. A buffer
  // handed off while it was stopping is still queued.
  for (const auto& c : impl_->queue) impl_->write_chunk(c, path_);
  // Records beyond a buffer's committed mark are being written right now by a thread
  // that outlives the exit flush; they are not complete, so they are not written.
  const auto write_buffer = [&](ThreadBuffer& b) {
    if (b.data == nullptr || b.dropped) return;
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
    impl_->write_chunk(Impl::Chunk{b.data, n, records}, path_);
  };
  for (auto& b : impl_->buffers) write_buffer(*b);
  for (uint32_t i = 0; i < lane_count_; ++i) write_buffer(lanes_[i].buf);
  EndRecord end;
  std::memset(&end, 0, sizeof end);
  end.events = impl_->written_records;
  end.h.seq = own_key(order_.load(std::memory_order_relaxed) + 1);
  end.h.time_ns = static_cast<uint64_t>(steady_ns() - start_steady_ns_);
  end.h.kind = static_cast<uint8_t>(Kind::kEnd);
  end.h.words = sizeof end / 8;
  end.h.aux = at_exit ? kEndAtExit : 0;
  impl_->write_all(reinterpret_cast<const char*>(&end), sizeof end, path_);
  if (::close(impl_->fd) != 0 && impl_->write_result.is_ok()) {
    impl_->write_result = Result::fail(Status::kBackend, os_error("closing trace", path_, errno));
  }
  impl_->fd = -1;
  impl_->closed = true;
  return impl_->write_result;
}

}  // namespace zarena_trace
