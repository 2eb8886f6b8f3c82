#include "overflow/overflow.h"

#include <fmt/format.h>

#include <chrono>

namespace zarena_core {

OverflowPool::OverflowPool(Backend& backend, int32_t policy, uint64_t alignment,
                           uint64_t limit_bytes, uint64_t slow_ns, PinTally* pin_tally)
    : backend_(backend),
      policy_(policy),
      alignment_(alignment),
      limit_bytes_(limit_bytes),
      slow_ns_(slow_ns),
      pin_tally_(pin_tally) {}

OverflowPool::~OverflowPool() = default;

namespace {

const char* returned_status(zarena_status st) {
  switch (st) {
    case ZARENA_E_OUT_OF_MEMORY:
      return "ZARENA_E_OUT_OF_MEMORY";
    case ZARENA_E_CAPTURE_UNSAFE:
      return "ZARENA_E_CAPTURE_UNSAFE";
    case ZARENA_E_BACKEND:
      return "ZARENA_E_BACKEND";
    default:
      return "a status that is no overflow failure, read as ZARENA_E_BACKEND";
  }
}

}  // namespace

int32_t OverflowPool::policy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return policy_;
}

Result OverflowPool::set_policy(int32_t policy, int32_t* previous) {
  std::lock_guard<std::mutex> lock(mu_);
  if (policy == ZARENA_OVERFLOW_CUSTOM && custom_.allocate == nullptr) {
    return Result::fail(Status::kInvalidArgument,
                        "policy CUSTOM needs an overflow allocator, and none is installed "
                        "(zarena_set_overflow_allocator installs one and makes CUSTOM the policy)");
  }
  *previous = policy_;
  policy_ = policy;
  return Result::ok();
}

Result OverflowPool::set_custom(const CustomAllocator* alloc, int32_t fallback, int32_t* previous) {
  std::lock_guard<std::mutex> lock(mu_);
  if (custom_outstanding_ != 0) {
    return Result::fail(Status::kInvalidArgument,
                        fmt::format("{} overflow block(s) of the installed allocator '{}' are live "
                                    "or being allocated; they go back to it first (free them, "
                                    "reset, or destroy the arena)",
                                    custom_outstanding_, custom_.name));
  }
  *previous = policy_;
  if (alloc != nullptr) {
    custom_ = *alloc;
    policy_ = ZARENA_OVERFLOW_CUSTOM;
  } else {
    custom_ = CustomAllocator{};
    if (policy_ == ZARENA_OVERFLOW_CUSTOM) policy_ = fallback;
  }
  return Result::ok();
}

std::string OverflowPool::custom_name() const {
  std::lock_guard<std::mutex> lock(mu_);
  return custom_.name;
}

// No lock held; the caller counted the attempt in custom_outstanding_, so custom_ cannot
// change meanwhile (set_custom refuses) and its name is read without the lock.
Result OverflowPool::custom_alloc(const CustomAllocator& c, uint64_t size, OverflowBlock* out) {
  void* p = nullptr;
  void* const stream = backend_.stream();
  const zarena_status st = c.allocate(c.ctx, size, alignment_, stream, &p);
  const bool aligned = (reinterpret_cast<uintptr_t>(p) & (alignment_ - 1)) == 0;
  if (st == ZARENA_OK && p != nullptr && aligned) {
    out->ptr = p;
    out->base = p;
    out->bytes = size;
    out->reserved_bytes = size;
    out->route = OverflowRoute::kCustom;
    out->capture_id = 0;
    return Result::ok();
  }
  if (st == ZARENA_OK) {
    if (p != nullptr) c.deallocate(c.ctx, p, size, stream);  // misaligned: given back at once
    return Result::fail(
        Status::kBackend,
        p == nullptr
            ? fmt::format("the overflow allocator '{}' returned ZARENA_OK but no pointer for {} "
                          "bytes",
                          custom_.name, size)
            : fmt::format("the overflow allocator '{}' returned {} for {} bytes, not aligned to "
                          "the arena's {} bytes (given back to it)",
                          custom_.name, p, size, alignment_));
  }
  const Status s = st == ZARENA_E_OUT_OF_MEMORY    ? Status::kOutOfMemory
                   : st == ZARENA_E_CAPTURE_UNSAFE ? Status::kCaptureUnsafe
                                                   : Status::kBackend;
  return Result::fail(s, fmt::format("the overflow allocator '{}' could not allocate {} bytes "
                                     "(it returned {}: {})",
                                     custom_.name, size, st, returned_status(st)));
}

void OverflowPool::custom_free(const OverflowBlock* blocks, size_t n) {
  if (n == 0) return;
  zarena_overflow_free_fn free_fn;
  void* ctx;
  {
    std::lock_guard<std::mutex> lock(mu_);
    free_fn = custom_.deallocate;
    ctx = custom_.ctx;
  }
  void* const stream = backend_.stream();
  for (size_t i = 0; i < n; ++i) free_fn(ctx, blocks[i].ptr, blocks[i].bytes, stream);
  std::lock_guard<std::mutex> lock(mu_);
  custom_outstanding_ -= n;
}

size_t OverflowPool::split_custom(std::vector<OverflowBlock>& blocks,
                                  std::vector<OverflowBlock>* custom) {
  size_t kept = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].route == OverflowRoute::kCustom) {
      custom->push_back(blocks[i]);
    } else {
      blocks[kept++] = blocks[i];
    }
  }
  return kept;
}

OverflowAttempt OverflowPool::allocate(uint64_t size, bool capture_active) {
  OverflowAttempt a;
  CustomAllocator custom;  // the functions of the installed allocator (CUSTOM)
  int32_t policy;
  {
    std::lock_guard<std::mutex> lock(mu_);
    policy = policy_;  // read once: a change made meanwhile applies to the next call
    if (policy == ZARENA_OVERFLOW_REFUSE) {
      ++stats_.failures;
    } else if (limit_bytes_ != 0 &&
               (size > limit_bytes_ || reserved_bytes_ > limit_bytes_ - size)) {
      a.path = "limit";
      a.result = Result::fail(
          Status::kOutOfMemory,
          fmt::format("overflow limit reached: {} live + {} requested > limit {} bytes "
                      "(ZARENA_OVERFLOW_LIMIT_BYTES; by default the capacity)",
                      reserved_bytes_, size, limit_bytes_));
      ++stats_.failures;
      return a;
    } else {
      reserved_bytes_ += size;  // hold the bytes while the backend call runs unlocked
      if (policy == ZARENA_OVERFLOW_CUSTOM) {
        custom.ctx = custom_.ctx;
        custom.allocate = custom_.allocate;
        custom.deallocate = custom_.deallocate;
        ++custom_outstanding_;
      }
    }
  }
  if (policy == ZARENA_OVERFLOW_REFUSE) {
    a.path = "refused";
    a.result = Result::fail(Status::kOutOfMemory, "overflow policy is REFUSE");
    return a;
  }
  if (policy == ZARENA_OVERFLOW_CUSTOM) {
    // The program's allocator decides what a capture means for its memory: no pre-check.
    a.path = "custom";
    const auto t0 = std::chrono::steady_clock::now();
    a.result = custom_alloc(custom, size, &a.block);
    const auto t1 = std::chrono::steady_clock::now();
    a.latency_ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    a.slow = a.latency_ns > slow_ns_;
    std::lock_guard<std::mutex> lock(mu_);
    if (a.latency_ns > stats_.max_latency_ns) stats_.max_latency_ns = a.latency_ns;
    if (!a.result.is_ok()) {
      reserved_bytes_ -= size;
      ++stats_.failures;
      --custom_outstanding_;
    }
    return a;
  }
  const OverflowRoute route =
      policy == ZARENA_OVERFLOW_ASYNC ? OverflowRoute::kAsync : OverflowRoute::kSync;
  auto unreserve_failure = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    reserved_bytes_ -= size;
    ++stats_.failures;
  };
  // Decide before calling: a synchronous allocation during graph capture fails and
  // invalidates the host program's capture (or hangs some drivers); so does a stream-
  // ordered one on the legacy stream, which joins any blocking stream's capture. (On a
  // stream of its own an ASYNC allocation during its capture is a node of the graph.)
  if (route == OverflowRoute::kSync || backend_.on_legacy_stream()) {
    bool capturing = capture_active;
    Result qerr;
    if (!capturing) qerr = backend_.capture_status(&capturing);
    if (!qerr.is_ok() || capturing) {
      unreserve_failure();
      a.path = "capture_refused";
      const char* what = route == OverflowRoute::kSync
                             ? "a synchronous overflow allocation"
                             : "a stream-ordered overflow allocation on the legacy (NULL) "
                               "stream, which joins every blocking stream's capture,";
      a.result =
          capturing
              ? Result::fail(Status::kCaptureUnsafe,
                             capture_active
                                 ? fmt::format("the engine marked a CUDA graph capture as "
                                               "active; {} now would break it",
                                               what)
                                 : fmt::format("the arena's stream is being captured into a "
                                               "CUDA graph (or joins a capture); {} now would "
                                               "break the capture",
                                               what))
              : Result::fail(Status::kCaptureUnsafe,
                             "could not query the stream's capture status: " + qerr.message);
      return a;
    }
  }
  a.path = route == OverflowRoute::kAsync ? "async" : "sync";
  const auto t0 = std::chrono::steady_clock::now();
  const Result r = backend_.overflow_alloc(size, alignment_, route, &a.block);
  const auto t1 = std::chrono::steady_clock::now();
  a.latency_ns =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
  a.slow = a.latency_ns > slow_ns_;
  std::lock_guard<std::mutex> lock(mu_);
  if (a.latency_ns > stats_.max_latency_ns) stats_.max_latency_ns = a.latency_ns;
  if (!r.is_ok()) {
    reserved_bytes_ -= size;
    ++stats_.failures;
    a.result = r;
    // A capture the pre-check could not see (another thread's global-mode capture)
    // still makes the backend refuse; name it as the refusal it is.
    if (a.result.status == Status::kCaptureUnsafe) a.path = "capture_refused";
  }
  return a;
}

void OverflowPool::track(const OverflowAttempt& a, uint64_t size, uint64_t epoch, uint32_t tag) {
  std::lock_guard<std::mutex> lock(mu_);
  blocks_[a.block.ptr] = Entry{a.block, size, epoch, epoch, State::kLive, false, 0, tag};
  ++stats_.allocs;
  ++stats_.live_count;
  stats_.live_bytes += size;
  if (stats_.live_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.live_bytes;
  if (stats_.live_bytes > stats_.epoch_peak_bytes) stats_.epoch_peak_bytes = stats_.live_bytes;
}

void OverflowPool::untrack_failed(const OverflowAttempt& a, uint64_t size) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    reserved_bytes_ -= size;
    ++stats_.failures;
  }
  if (a.block.route == OverflowRoute::kCustom) {
    custom_free(&a.block, 1);
  } else {
    (void)backend_.overflow_free(a.block);
  }
}

bool OverflowPool::owns(void* ptr) const {
  std::lock_guard<std::mutex> lock(mu_);
  return blocks_.count(ptr) != 0;
}

void* OverflowPool::live_block_containing(const void* ptr) const {
  const char* p = static_cast<const char*>(ptr);
  for (const auto& [start, e] : blocks_) {
    if (e.state != State::kLive && e.state != State::kDeferred) continue;
    const char* s = static_cast<const char*>(start);
    if (s < p && p < s + e.size) return start;
  }
  return nullptr;
}

bool OverflowPool::inside_live_block(const void* ptr) const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_block_containing(ptr) != nullptr;
}

FreeOutcome OverflowPool::free(void* ptr, uint64_t want_epoch, uint64_t epoch, OverflowBlock* out,
                               uint64_t* size) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.find(ptr);
  if (it == blocks_.end()) return FreeOutcome::kNotOwned;
  Entry& e = it->second;
  // An epoch-checked free names one incarnation: another block at this address is not
  // the caller's, whatever state it is in.
  if (want_epoch != kAnyEpoch && e.epoch != want_epoch) return FreeOutcome::kStale;
  switch (e.state) {
    case State::kFreed:
    case State::kDeferred:
      return FreeOutcome::kDoubleFree;
    case State::kReclaimed:
      return FreeOutcome::kStale;
    case State::kLive:
      break;
  }
  if (!e.persistent && e.keep_epoch != epoch) return FreeOutcome::kStale;
  *size = e.size;
  if (e.pins > 0) {
    e.state = State::kDeferred;
    ++stats_.deferred_frees;
    return FreeOutcome::kDeferred;
  }
  // The backend may hand this address out again; until then a second free is "double".
  e.state = State::kFreed;
  e.keep_epoch = epoch;
  *out = e.block;
  --stats_.live_count;
  stats_.live_bytes -= e.size;
  reserved_bytes_ -= e.size;
  return FreeOutcome::kOk;
}

std::unordered_map<void*, OverflowPool::Entry>::iterator OverflowPool::find_for_pin(void* ptr) {
  const auto at = blocks_.find(ptr);
  if (at != blocks_.end() &&
      (at->second.state == State::kLive || at->second.state == State::kDeferred)) {
    return at;
  }
  // Also where an older block once started: the backend may have handed its memory out
  // again inside a larger block.
  void* start = live_block_containing(ptr);
  return start != nullptr ? blocks_.find(start) : at;
}

OverflowPool::Entry* OverflowPool::pin_target(void* ptr, void** start, PinOutcome* refused) {
  auto it = find_for_pin(ptr);
  if (it == blocks_.end()) {
    *refused = PinOutcome::kNotOwned;
    return nullptr;
  }
  if (start != nullptr) *start = it->first;
  if (it->second.state == State::kReclaimed) {
    *refused = PinOutcome::kStale;
    return nullptr;
  }
  return &it->second;
}

PinOutcome OverflowPool::pin(void* ptr, uint64_t epoch, void** start) {
  std::lock_guard<std::mutex> lock(mu_);
  PinOutcome refused = PinOutcome::kNotOwned;
  Entry* target = pin_target(ptr, start, &refused);
  if (target == nullptr) return refused;
  Entry& e = *target;
  if (e.state != State::kLive) return PinOutcome::kFreed;
  if (!e.persistent && e.keep_epoch != epoch) return PinOutcome::kStale;
  if (e.pins == 0xFFFF) return PinOutcome::kTooMany;
  if (e.pins++ == 0) {
    ++stats_.pinned_blocks;
    stats_.pinned_bytes += e.size;
    if (pin_tally_ != nullptr) pin_tally_->add(e.size);
  }
  return PinOutcome::kOk;
}

PinOutcome OverflowPool::unpin(void* ptr, uint64_t epoch, OverflowBlock* out, uint64_t* freed_size,
                               void** start) {
  *freed_size = 0;
  std::lock_guard<std::mutex> lock(mu_);
  PinOutcome refused = PinOutcome::kNotOwned;
  Entry* target = pin_target(ptr, start, &refused);
  if (target == nullptr) return refused;
  Entry& e = *target;
  if (e.state == State::kFreed) return PinOutcome::kFreed;
  if (!e.persistent && e.keep_epoch != epoch) return PinOutcome::kStale;
  if (e.pins == 0) return PinOutcome::kNotPinned;
  if (--e.pins > 0) return PinOutcome::kOk;
  --stats_.pinned_blocks;
  stats_.pinned_bytes -= e.size;
  if (pin_tally_ != nullptr) pin_tally_->sub(e.size);
  if (e.state == State::kDeferred) {
    e.state = State::kFreed;
    e.keep_epoch = epoch;
    *out = e.block;
    *freed_size = e.size;
    --stats_.deferred_frees;
    --stats_.live_count;
    stats_.live_bytes -= e.size;
    reserved_bytes_ -= e.size;
  }
  return PinOutcome::kOk;
}

void OverflowPool::reclaim(uint64_t new_epoch, std::vector<OverflowBlock>* doomed) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    Entry& e = it->second;
    if (e.state == State::kLive || e.state == State::kDeferred) {
      if (e.pins > 0) {
        e.keep_epoch = new_epoch;  // pinned: kept, valid in the new epoch too
      } else if (!e.persistent && e.keep_epoch < new_epoch) {
        doomed->push_back(e.block);
        e.state = State::kReclaimed;
        e.keep_epoch = new_epoch;  // remembered as stale through the new epoch
        --stats_.live_count;
        stats_.live_bytes -= e.size;
        reserved_bytes_ -= e.size;
        ++stats_.reclaimed;
      }
      ++it;
    } else if (e.keep_epoch + 1 < new_epoch) {
      // History older than the previous epoch: forget it. A pointer reclaimed or freed
      // by the reset before the last one reads "not owned", as region pointers may.
      it = blocks_.erase(it);
    } else {
      ++it;
    }
  }
  stats_.epoch_peak_bytes = stats_.live_bytes;
}

void OverflowPool::mark_step_boundary() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [p, e] : blocks_) {
    if (e.state == State::kLive || e.state == State::kDeferred) e.persistent = true;
  }
}

Result OverflowPool::give_back(std::vector<OverflowBlock>& blocks, bool capturing,
                               uint64_t capture_id, FillFn fill, void* ctx) {
  if (blocks.empty()) return Result::ok();
  // Custom blocks go back to the program's allocator at once, capture or not (zarena.h).
  std::vector<OverflowBlock> custom;
  blocks.resize(split_custom(blocks, &custom));
  if (!custom.empty()) {
    if (fill != nullptr && !capturing) {
      for (const OverflowBlock& b : custom) (void)fill(ctx, b.ptr, b.bytes);
    }
    custom_free(custom.data(), custom.size());
  }
  Result first;
  // The blocks that wait with the deferred ones are moved to the front of `blocks`: while
  // capturing, all but the allocation nodes of the capture running now (freed into it: a
  // free node); else those the backend refused (a capture no query could see, or a
  // transient failure: still the backend's to take back, so retried at the next give-back
  // point, and at destroy; never dropped).
  size_t kept = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const OverflowBlock& b = blocks[i];
    const bool graph_node = b.capture_id != 0 && b.capture_id == capture_id;
    if (capturing && !graph_node) {
      blocks[kept++] = b;
      continue;
    }
    if (fill != nullptr && !capturing) (void)fill(ctx, b.ptr, b.bytes);
    const Result r = backend_.overflow_free(b);
    if (r.is_ok()) continue;
    if (first.is_ok()) first = r;
    blocks[kept++] = b;
  }
  if (kept > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    try {
      deferred_.insert(deferred_.end(), blocks.begin(), blocks.begin() + kept);
    } catch (...) {
      first.message += " (and out of host memory keeping it: the block is lost)";
    }
    stats_.deferred_gives = deferred_.size();
  }
  return first;
}

bool OverflowPool::has_deferred() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !deferred_.empty();
}

Result OverflowPool::flush_deferred(FillFn fill, void* ctx) {
  std::vector<OverflowBlock> blocks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    blocks.swap(deferred_);
    stats_.deferred_gives = 0;
  }
  return give_back(blocks, false, 0, fill, ctx);
}

std::vector<OverflowBlock> OverflowPool::take_all() {
  std::vector<OverflowBlock> all, custom;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [p, e] : blocks_) {
      if (e.state == State::kLive || e.state == State::kDeferred) all.push_back(e.block);
    }
    all.insert(all.end(), deferred_.begin(), deferred_.end());
    deferred_.clear();
    blocks_.clear();
    stats_.live_count = 0;
    stats_.live_bytes = 0;
    stats_.deferred_gives = 0;
    reserved_bytes_ = 0;
  }
  // The program's blocks go back to it now, whoever releases the rest.
  all.resize(split_custom(all, &custom));
  custom_free(custom.data(), custom.size());
  return all;
}

size_t OverflowPool::abandon(std::vector<OverflowBlock>& blocks) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    try {
      blocks.insert(blocks.end(), deferred_.begin(), deferred_.end());
    } catch (...) {  // host memory: the custom ones among them are the program's loss
    }
    deferred_.clear();
    stats_.deferred_gives = 0;
  }
  std::vector<OverflowBlock> custom;
  const size_t forgotten = split_custom(blocks, &custom);
  custom_free(custom.data(), custom.size());
  blocks.clear();
  return forgotten;
}

Result OverflowPool::release_all(std::string* recovered) {
  std::vector<OverflowBlock> all = take_all();
  const Result first = give_back(all, false, 0, nullptr, nullptr);
  if (first.is_ok()) return first;
  // One more try for the blocks the backend refused (a transient failure); what still
  // fails is lost, and destroy reports it.
  const Result again = flush_deferred(nullptr, nullptr);
  {
    std::lock_guard<std::mutex> lock(mu_);
    deferred_.clear();
    stats_.deferred_gives = 0;
  }
  if (!again.is_ok()) return again;
  if (recovered != nullptr) *recovered = first.message;
  return Result::ok();
}

OverflowStats OverflowPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void OverflowPool::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_bytes = stats_.live_bytes;
}

void OverflowPool::live_blocks(std::vector<LiveBlock>* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [p, e] : blocks_) {
    if (e.state != State::kLive && e.state != State::kDeferred) continue;
    LiveBlock v;
    v.ptr = p;
    v.size = e.size;
    v.epoch = e.epoch;
    v.pins = e.pins;
    v.tag = e.tag;
    v.persistent = e.persistent;
    v.overflow = true;
    v.deferred = e.state == State::kDeferred;
    out->push_back(v);
  }
}

}  // namespace zarena_core
