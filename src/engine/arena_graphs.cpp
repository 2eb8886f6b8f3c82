// The arena's side of graph-stable steps (zarena/zarena_graph.h; docs/PLANS.md
// "Graph-stable steps"): a step captured into a CUDA graph once and replayed in the step
// plan's own zone. The bookkeeping is plan/graph_steps.h; here are what it needs of the
// rest of the arena: the plans' zone held still (StepPlans::set_zone_frozen) while a
// graph may replay, floors kept off it, the refusal of any allocation the plan does not
// serve during a capture, the end of the captured step, and the cross-stream free.
#include <fmt/format.h>

#include <mutex>
#include <shared_mutex>

#include "base/last_error.h"
#include "diagnosis/diagnostics.h"
#include "engine/arena.h"

namespace zarena_core {

namespace {

const char* miss_reason_text(uint64_t reason) {
  switch (reason) {
    case ZARENA_PLAN_MISS_SIZE:
      return "another size than the plan's";
    case ZARENA_PLAN_MISS_TAG:
      return "another tag than the plan's";
    case ZARENA_PLAN_MISS_EXTRA:
      return "more allocations than the learned step";
    case ZARENA_PLAN_MISS_LATE:
      return "a block the plan reuses there was still live";
    case ZARENA_PLAN_MISS_SHORT:
      return "a step ended early";
    case ZARENA_PLAN_MISS_FLOOR:
      return "the floor moved over the zone";
    default:
      return "no deviation recorded";
  }
}

// What the plan says of a request it did not serve during a capture (the plan's state as
// the refused call left it).
std::string refusal_why(const zarena_plan_view* v, uint64_t aligned, uint32_t tag) {
  if (v == nullptr) return "the arena has no step plan";
  const uint64_t st = __atomic_load_n(v->state, __ATOMIC_ACQUIRE);
  if ((st & ZARENA_PLAN_ENGAGED) == 0) {
    const uint64_t reason = __atomic_load_n(v->miss_reason, __ATOMIC_RELAXED);
    const uint64_t i = __atomic_load_n(v->miss_index, __ATOMIC_RELAXED);
    std::string s =
        fmt::format("the step left its plan at allocation {} ({})", i, miss_reason_text(reason));
    if (i < v->n && (reason == ZARENA_PLAN_MISS_SIZE || reason == ZARENA_PLAN_MISS_TAG ||
                     reason == ZARENA_PLAN_MISS_LATE)) {
      s += fmt::format(
          ": the plan expects {} bytes, tag {}, there; this request is {} bytes, "
          "tag {}",
          v->item_size[i], v->item_tag[i], aligned, tag);
    } else if (reason == ZARENA_PLAN_MISS_EXTRA) {
      s += fmt::format(": the plan's step has {} allocations; this request is {} bytes, tag {}",
                       v->n, aligned, tag);
    }
    return s;
  }
  const uint32_t c = __atomic_load_n(v->cursor, __ATOMIC_RELAXED);
  if (c > 0 && c <= v->n && v->item_planned[c - 1] == 0 && v->item_size[c - 1] == aligned &&
      v->item_tag[c - 1] == tag) {
    return fmt::format(
        "allocation {} of the step ({} bytes, tag {}) outlives its step, so the "
        "plan leaves it to the dynamic engine",
        c - 1, aligned, tag);
  }
  return fmt::format(
      "the request ({} bytes, tag {}) comes from a thread the plan does not "
      "follow (a plan follows the threads that made the learned steps' "
      "allocations)",
      aligned, tag);
}

}  // namespace

Status Arena::graph_refuse(uint64_t size, uint32_t tag) noexcept {
  try {
    const uint64_t aligned = (size + granule_ - 1) & ~(granule_ - 1);
    const std::string why = refusal_why(plans_.view(), aligned, tag);
    const Verdict v = graph_capture_verdict(why);
    std::string message = fmt::format(
        "allocation of {} bytes during a graph-captured step refused (arena '{}'): {}; nothing "
        "was allocated and the capture will not be kept. {}",
        size, source_.name, why, verdict_suffix(v));
    graphs_.note_refusal(message);
    return fail_with(Status::kCaptureUnsafe, std::move(message));
  } catch (...) {
    graphs_.note_refusal("an allocation was refused (no host memory for its message)");
    return fail_with(Status::kCaptureUnsafe,
                     "allocation during a graph-captured step refused (the plan did not serve "
                     "it). verdict=graph_capture; fix: capture a step the same as the planned "
                     "ones");
  }
}

Result Arena::graph_floor_check_w(uint64_t new_floor) {
  const Zone& z = plans_.zone_w();  // zone changes take the writer lock too
  if (!graphs_.holds_zone() || z.pieces.empty()) return Result::ok();
  const uint64_t zone =
      static_cast<uint64_t>(reinterpret_cast<const char*>(z.base + z.pieces[0].offset) - base_);
  if (new_floor <= zone) return Result::ok();
  return Result::fail(
      Status::kCaptureUnsafe,
      fmt::format("the floor would move to offset {}, over the step plan's zone (from offset "
                  "{}), which a captured graph replays in; nothing changed. Release the "
                  "graphs first (zarena_graph_release), or keep the floor below the zone",
                  new_floor, zone));
}

Result Arena::graph_capture_begin() {
  if (!plans_.enabled()) {
    return Result::fail(Status::kUnsupported,
                        fmt::format("zarena_graph_capture_begin (arena '{}'): step plans are off "
                                    "(ZARENA_FLAG_PLAN or ZARENA_PLAN=1; a trace file turns them "
                                    "off): a graph-stable step is a planned step",
                                    source_.name));
  }
  std::lock_guard<std::mutex> g(graph_mu_);
  plans_.set_zone_frozen(true);
  Result r;
  {
    // Floors move under the writer lock: they see the zone held with the capture.
    Region::WriterLock w(region_);
    r = graphs_.begin_capture(plans_.view());
  }
  if (!graphs_.holds_zone()) plans_.set_zone_frozen(false);
  if (!r.is_ok()) {
    r.message = fmt::format("zarena_graph_capture_begin (arena '{}'): {}", source_.name, r.message);
    return r;
  }
  // Every request now asks the plan, also once a reset inside the capture left it.
  fast_path_flags_.fetch_or(kGraphCapture, std::memory_order_relaxed);
  return r;
}

Result Arena::graph_capture_end(bool keep, uint32_t* id) {
  *id = 0;
  std::lock_guard<std::mutex> g(graph_mu_);
  if (!graphs_.capturing()) {
    return Result::fail(Status::kInvalidArgument,
                        fmt::format("zarena_graph_capture_end (arena '{}'): no capture is in "
                                    "progress",
                                    source_.name));
  }
  plan_boundary();  // the captured step ends here
  Result r = graphs_.end_capture(plans_.view(), keep, id);
  fast_path_flags_.fetch_and(~kGraphCapture, std::memory_order_relaxed);
  if (!graphs_.holds_zone()) plans_.set_zone_frozen(false);
  // As at zarena_set_capture_active(a, 0): what the capture deferred goes back now.
  if (!capture_declared()) {
    poison_.rearm_skip_warning();
    std::vector<OverflowBlock> none;
    give_back(none);
  }
  emit_queued_warnings();
  if (!r.is_ok()) {
    r.message = fmt::format("zarena_graph_capture_end (arena '{}'): {}", source_.name, r.message);
  }
  return r;
}

Result Arena::graph_replay(uint32_t id) {
  Result r = graphs_.replay(plans_.view(), id);
  if (!r.is_ok()) {
    r.message = fmt::format("zarena_graph_replay (arena '{}'): {}", source_.name, r.message);
  }
  return r;
}

Result Arena::graph_release(uint32_t id) {
  std::lock_guard<std::mutex> g(graph_mu_);
  Result r = graphs_.release(id);
  if (!graphs_.holds_zone()) plans_.set_zone_frozen(false);
  if (!r.is_ok()) {
    r.message = fmt::format("zarena_graph_release (arena '{}'): {}", source_.name, r.message);
  }
  return r;
}

Status Arena::graph_free_after(void* ptr, void* stream) noexcept {
  if (ptr == nullptr) return Status::kOk;
  bool waited = false;
  Result r;
  {
    std::shared_lock<std::shared_mutex> g(stream_mu_);  // no stream change meanwhile
    r = backend_->wait_for(stream, &waited);
  }
  if (!r.is_ok()) {
    try {
      return fail_with(r.status,
                       fmt::format("zarena_graph_free_after({}) (arena '{}'): {}; the block was "
                                   "not freed",
                                   ptr, source_.name, r.message));
    } catch (...) {
      return r.status;
    }
  }
  if (waited) graphs_.count_join();
  return free(ptr, kAnyEpoch);
}

void Arena::graph_info(GraphInfo* out) {
  out->counts = graphs_.counts();
  {
    Region::WriterLock w(region_);
    out->zone_bytes = plans_.zone_w().bytes();
  }
  out->period = out->phase = 0;
  out->ready = false;
  const zarena_plan_view* v = plans_.view();
  if (v == nullptr) return;
  out->period = v->period;
  const uint64_t st = __atomic_load_n(v->state, __ATOMIC_ACQUIRE);
  out->phase = static_cast<uint32_t>((st >> 1) & 1);
  out->ready = graphs_.may_begin(v);
}

}  // namespace zarena_core
