#include "engine/deferred_release.h"

#include <fmt/format.h>

#include <mutex>
#include <utility>

#include "diagnosis/diagnostics.h"
#include "engine/capture_scope.h"
#include "log/log.h"

namespace zarena_core {

namespace {

struct Waiting {
  std::mutex mu;
  std::vector<DeferredRelease> list;
};

Waiting& waiting() {
  static Waiting* w = new Waiting();  // never destroyed: an exit may find entries in it
  return *w;
}

// Gives back what d holds; the first error, if any.
Result release(DeferredRelease& d) {
  Result first;
  for (const OverflowBlock& b : d.blocks) {
    Result r = d.backend->overflow_free(b);
    if (!r.is_ok()) r = d.backend->overflow_free(b);  // once more, as destroy does
    if (!r.is_ok() && first.is_ok()) first = r;
  }
  const Result r = d.backend->release_region();
  if (first.is_ok()) first = r;
  d.backend.reset();
  return first;
}

}  // namespace

bool defer_release(DeferredRelease& d) noexcept {
  Waiting& w = waiting();
  std::lock_guard<std::mutex> lock(w.mu);
  try {
    w.list.push_back(std::move(d));
  } catch (...) {
    return false;
  }
  return true;
}

void release_deferred() noexcept {
  Waiting& w = waiting();
  std::vector<DeferredRelease> mine;
  {
    std::lock_guard<std::mutex> lock(w.mu);
    if (w.list.empty()) return;
    mine.swap(w.list);
  }
  std::vector<DeferredRelease> still;
  try {
    still.reserve(mine.size());
  } catch (...) {  // host memory: try again at the next safe point (or keep it, as at exit)
    std::lock_guard<std::mutex> lock(w.mu);
    if (w.list.empty()) {
      w.list.swap(mine);
    } else {
      for (DeferredRelease& d : mine) (void)d.backend.release();
    }
    return;
  }
  for (DeferredRelease& d : mine) {
    bool capturing = capture_scope_covers(d.backend->stream());
    if (capturing || !d.backend->capture_status(&capturing).is_ok() || capturing) {
      still.push_back(std::move(d));  // reserved
      continue;
    }
    const Result r = release(d);
    try {
      if (!r.is_ok() && log_enabled(ZARENA_LOG_WARN)) {
        LogRecord rec(log_events::kReleaseFailed, d.source);
        rec.message(
            fmt::format("giving back the device memory of the arena destroyed during "
                        "a capture failed ({}); it stays with the process",
                        r.message));
        rec.add_string("reason", r.message);
        log_emit(rec);
      } else if (r.is_ok() && log_enabled(ZARENA_LOG_INFO)) {
        LogRecord rec(log_events::kReleased, d.source);
        rec.message(
            fmt::format("the device memory of the arena destroyed during a capture "
                        "went back ({} region, {} overflow blocks)",
                        human_bytes(d.region_bytes), d.blocks.size()));
        rec.add_uint("region_bytes", d.region_bytes);
        rec.add_uint("overflow_blocks", d.blocks.size());
        log_emit(rec);
      }
    } catch (...) {
    }
  }
  if (still.empty()) return;
  std::lock_guard<std::mutex> lock(w.mu);
  for (DeferredRelease& d : still) {
    try {
      w.list.push_back(std::move(d));
    } catch (...) {  // host memory: it stays with the process, as at exit
      (void)d.backend.release();
    }
  }
}

size_t deferred_releases() noexcept {
  Waiting& w = waiting();
  std::lock_guard<std::mutex> lock(w.mu);
  return w.list.size();
}

}  // namespace zarena_core
