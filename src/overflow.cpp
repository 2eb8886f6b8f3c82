#include "overflow.h"

#include <fmt/format.h>

#include <chrono>

namespace zarena_core {

OverflowPool::OverflowPool(Backend& backend, int32_t policy, uint64_t alignment,
                           uint64_t limit_bytes, uint64_t slow_ns)
    : backend_(backend),
      policy_(policy),
      alignment_(alignment),
      limit_bytes_(limit_bytes),
      slow_ns_(slow_ns) {}

OverflowAttempt OverflowPool::alloc(uint64_t size, uint64_t epoch) {
  OverflowAttempt a;
  if (policy_ == ZARENA_OVERFLOW_REFUSE) {
    a.path = "refused";
    a.result = Result::fail(Status::kOutOfMemory, "overflow policy is REFUSE");
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.failures;
    return a;
  }
  const OverflowRoute route =
      policy_ == ZARENA_OVERFLOW_ASYNC ? OverflowRoute::kAsync : OverflowRoute::kSync;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (limit_bytes_ != 0 && (size > limit_bytes_ || reserved_bytes_ > limit_bytes_ - size)) {
      a.path = "limit";
      a.result = Result::fail(
          Status::kOutOfMemory,
          fmt::format("overflow limit reached: {} live + {} requested > limit {} bytes",
                      reserved_bytes_, size, limit_bytes_));
      ++stats_.failures;
      return a;
    }
    reserved_bytes_ += size;  // hold the bytes while the backend call runs unlocked
  }
  auto unreserve_failure = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    reserved_bytes_ -= size;
    ++stats_.failures;
  };
  if (route == OverflowRoute::kSync) {
    // Decide before calling: a synchronous allocation during graph capture fails and
    // invalidates the host program's capture (or hangs some drivers).
    bool capturing = false;
    const Result qerr = backend_.capture_status(&capturing);
    if (!qerr.is_ok() || capturing) {
      unreserve_failure();
      a.path = "capture_refused";
      a.result = capturing
                     ? Result::fail(Status::kCaptureUnsafe,
                                    "the arena's stream is being captured into a CUDA "
                                    "graph; a synchronous overflow allocation now would "
                                    "break the capture")
                     : Result::fail(Status::kCaptureUnsafe,
                                    "could not query the stream's capture status: " + qerr.message);
      return a;
    }
  }
  a.path = route == OverflowRoute::kAsync ? "async" : "sync";
  OverflowBlock block;
  const auto t0 = std::chrono::steady_clock::now();
  const Result err = backend_.overflow_alloc(size, alignment_, route, &block);
  void* p = err.is_ok() ? block.ptr : nullptr;
  const auto t1 = std::chrono::steady_clock::now();
  a.latency_ns =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
  a.slow = a.latency_ns > slow_ns_;
  std::lock_guard<std::mutex> lock(mu_);
  if (a.latency_ns > stats_.max_latency_ns) stats_.max_latency_ns = a.latency_ns;
  if (p == nullptr) {
    reserved_bytes_ -= size;
    ++stats_.failures;
    a.result = err;
    // A capture the pre-check could not see (another thread's global-mode capture)
    // still makes the backend refuse; name it as the refusal it is.
    if (a.result.status == Status::kCaptureUnsafe) a.path = "capture_refused";
    return a;
  }
  try {
    blocks_[p] = Entry{size, epoch, State::kLive, false, block};
  } catch (...) {
    reserved_bytes_ -= size;
    ++stats_.failures;
    (void)backend_.overflow_free(block);
    a.result = Result::fail(Status::kOutOfMemory, "out of host memory tracking overflow block");
    return a;
  }
  ++stats_.allocs;
  ++stats_.live_count;
  stats_.live_bytes += size;
  if (stats_.live_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.live_bytes;
  a.ptr = p;
  return a;
}

FreeOutcome OverflowPool::free(void* ptr, uint64_t* size) {
  OverflowBlock block;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(ptr);
    if (it == blocks_.end()) return FreeOutcome::kNotOwned;
    Entry& e = it->second;
    if (e.state == State::kFreed) return FreeOutcome::kDoubleFree;
    if (e.state == State::kReclaimed) return FreeOutcome::kStale;
    // The backend may hand this address out again; until then a second free is "double".
    e.state = State::kFreed;
    *size = e.size;
    block = e.block;
    --stats_.live_count;
    stats_.live_bytes -= e.size;
    reserved_bytes_ -= e.size;
  }
  (void)backend_.overflow_free(block);
  return FreeOutcome::kOk;
}

uint64_t OverflowPool::reclaim(uint64_t new_epoch) {
  std::vector<std::pair<void*, Entry>> doomed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = blocks_.begin(); it != blocks_.end();) {
      Entry& e = it->second;
      if (e.state == State::kLive && !e.persistent) {
        doomed.emplace_back(it->first, e);
        e.state = State::kReclaimed;
        e.epoch = new_epoch;  // remembered as stale through the next epoch
        --stats_.live_count;
        stats_.live_bytes -= e.size;
        reserved_bytes_ -= e.size;
        ++stats_.reclaimed;
        ++it;
      } else if (e.state != State::kLive && e.epoch + 1 < new_epoch) {
        it = blocks_.erase(it);  // old history: forget it
      } else {
        ++it;
      }
    }
  }
  for (auto& [p, e] : doomed) (void)backend_.overflow_free(e.block);
  return doomed.size();
}

void OverflowPool::mark_step_boundary() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [p, e] : blocks_) {
    if (e.state == State::kLive) e.persistent = true;
  }
}

Result OverflowPool::release_all() {
  std::vector<std::pair<void*, Entry>> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [p, e] : blocks_) {
      if (e.state == State::kLive) live.emplace_back(p, e);
    }
    blocks_.clear();
    stats_.live_count = 0;
    stats_.live_bytes = 0;
    reserved_bytes_ = 0;
  }
  Result first;
  for (auto& [p, e] : live) {
    Result r = backend_.overflow_free(e.block);
    if (!r.is_ok() && first.is_ok()) first = r;
  }
  return first;
}

OverflowStats OverflowPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace zarena_core
