#include "plan/graph_steps.h"

#include <algorithm>
#include <string>

#include "base/spin_lock.h"

namespace zarena_core {

namespace {

uint64_t load64(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

// The plan's lock (zarena_plan.h: 0 -> 1 by compare-and-swap, spin while 1), held while
// the state word, the cursor and the instances' words are read as one.
class PlanLock {
 public:
  explicit PlanLock(const zarena_plan_view* v) : lock_(v->lock) {
    for (uint32_t round = 0;; ++round) {
      uint32_t expected = 0;
      if (__atomic_load_n(lock_, __ATOMIC_RELAXED) == 0 &&
          __atomic_compare_exchange_n(lock_, &expected, 1u, false, __ATOMIC_ACQUIRE,
                                      __ATOMIC_RELAXED)) {
        return;
      }
      spin_wait(round);
    }
  }
  ~PlanLock() { __atomic_store_n(lock_, 0u, __ATOMIC_RELEASE); }
  PlanLock(const PlanLock&) = delete;
  PlanLock& operator=(const PlanLock&) = delete;

 private:
  uint32_t* lock_;
};

// zarena_plan.h's liveness rule.
bool live(uint64_t w, uint64_t epoch) {
  const uint64_t state = w & ZARENA_PLAN_W_STATE;
  if (state != ZARENA_PLAN_W_LIVE && state != ZARENA_PLAN_W_DEFERRED) return false;
  return (w & (ZARENA_PLAN_W_PERSISTENT | ZARENA_PLAN_W_PIN_MASK)) != 0 ||
         (w >> ZARENA_PLAN_W_EPOCH_SHIFT) == (epoch & ZARENA_PLAN_EPOCH_MASK);
}

uint64_t instances(const zarena_plan_view* v) { return uint64_t{v->period} * v->n; }

const char* miss_text(uint64_t reason) {
  switch (reason) {
    case ZARENA_PLAN_MISS_SIZE:
      return "a request of another size than the plan's";
    case ZARENA_PLAN_MISS_TAG:
      return "a request with another tag than the plan's";
    case ZARENA_PLAN_MISS_EXTRA:
      return "more allocations than the learned step";
    case ZARENA_PLAN_MISS_SHORT:
      return "the step ended before its last planned allocation";
    case ZARENA_PLAN_MISS_LATE:
      return "a block the plan reuses was still live";
    case ZARENA_PLAN_MISS_FLOOR:
      return "the floor moved over the plan's zone";
    default:
      return "no deviation recorded";
  }
}

std::string not_engaged_text(const zarena_plan_view* v) {
  const uint64_t reason = load64(v->miss_reason), index = load64(v->miss_index);
  if (reason == ZARENA_PLAN_MISS_NONE) {
    return "the step plan is not engaged (it is taken up at a step boundary once no planned "
           "block is live)";
  }
  return "the step plan is not engaged: a step left it at allocation " + std::to_string(index) +
         " (" + miss_text(reason) +
         "); eager steps take it up again once the step repeats (zarena_graph_get_info: ready)";
}

// "allocation 12 of phase 1 (offset 4096, 1024 bytes)"
std::string instance_text(const zarena_plan_view* v, uint64_t id) {
  const uint64_t i = id % v->n;
  std::string s = "allocation " + std::to_string(i);
  if (v->period == 2) s += " of phase " + std::to_string(id / v->n);
  return s + " (zone offset " + std::to_string(v->offset[id]) + ", " +
         std::to_string(v->item_size[i]) + " bytes)";
}

}  // namespace

void GraphSteps::after_boundary(const zarena_plan_view* v) noexcept {
  std::lock_guard<std::mutex> g(mu_);
  if (v == nullptr) {
    last_view_ = nullptr;
    whole_steps_ = 0;
    return;
  }
  const uint64_t st = load64(v->state);
  const uint64_t steps = st >> 2;
  if (v != last_view_ || (st & ZARENA_PLAN_ENGAGED) == 0) {
    whole_steps_ = 0;
  } else if (steps == last_steps_ + 1) {
    ++whole_steps_;
  } else if (steps != last_steps_) {
    whole_steps_ = 0;
  }  // the same count: a boundary with no allocation since the last one (not a step)
  if (v != last_view_ || steps != last_steps_ || (st & ZARENA_PLAN_ENGAGED) == 0) {
    last_graph_ = first_launch_ = 0;  // a step of its own ran (or was left)
  }
  last_view_ = v;
  last_steps_ = steps;
}

Result GraphSteps::begin_capture(const zarena_plan_view* v) {
  std::lock_guard<std::mutex> g(mu_);
  if (v == nullptr) {
    return Result::fail(Status::kCaptureUnsafe,
                        "the arena has no step plan yet: it learns one from two equal steps "
                        "in a row and serves the steps after them; capture a step once "
                        "zarena_graph_get_info says ready");
  }
  Capture c;
  {
    PlanLock lock(v);
    std::string why = why_not_locked(v);
    if (!why.empty()) return Result::fail(Status::kCaptureUnsafe, std::move(why));
    const uint64_t st = load64(v->state);
    const uint64_t e = load64(v->epoch);
    c.live.assign(instances(v), 0);
    for (uint64_t id = 0; id < c.live.size(); ++id) {
      c.live[id] = live(load64(&v->words[id]), e) ? 1 : 0;
    }
    c.view = v;
    c.phase = static_cast<uint32_t>((st >> 1) & 1);
    c.start_steps = st >> 2;
  }
  capture_ = std::move(c);
  first_launch_ = 0;
  capturing_.store(true, std::memory_order_relaxed);
  holds_zone_.store(true, std::memory_order_relaxed);
  return Result::ok();
}

void GraphSteps::note_refusal(const std::string& message) {
  std::lock_guard<std::mutex> g(mu_);
  ++counts_.refused_allocs;
  if (!capturing_.load(std::memory_order_relaxed)) return;
  if (capture_.refusals++ == 0) capture_.first_refusal = message;
}

Result GraphSteps::end_capture(const zarena_plan_view* v, bool keep, uint32_t* id) {
  std::lock_guard<std::mutex> g(mu_);
  *id = 0;
  if (!capturing_.load(std::memory_order_relaxed)) {
    return Result::fail(Status::kInvalidArgument, "no capture is in progress");
  }
  Capture c = std::move(capture_);
  capture_ = Capture{};
  capturing_.store(false, std::memory_order_relaxed);
  Result r;
  if (!keep) {
    r = Result::ok();  // the caller's capture failed: nothing to keep
  } else if (c.refusals != 0) {
    r = Result::fail(Status::kCaptureUnsafe,
                     std::to_string(c.refusals) +
                         " allocation(s) of the captured step were refused, so the graph was "
                         "not kept; the first: " +
                         c.first_refusal);
  } else if (v != c.view) {
    r = Result::fail(Status::kCaptureUnsafe,
                     "the step plan changed during the capture; the graph was not kept");
  } else {
    PlanLock lock(v);
    const uint64_t st = load64(v->state);
    const uint64_t steps = st >> 2;
    if ((st & ZARENA_PLAN_ENGAGED) == 0) {
      r = Result::fail(Status::kCaptureUnsafe,
                       "the captured step was not served whole by its plan (" +
                           std::string(miss_text(load64(v->miss_reason))) + ", at allocation " +
                           std::to_string(load64(v->miss_index)) + "); the graph was not kept");
    } else if (steps != c.start_steps + 1) {
      r = Result::fail(Status::kCaptureUnsafe,
                       steps == c.start_steps
                           ? std::string("the capture made no allocation: it holds no step of "
                                         "the plan; the graph was not kept")
                           : "the capture spanned " + std::to_string(steps - c.start_steps) +
                                 " steps (a boundary came inside it); a graph holds one step; "
                                 "the graph was not kept");
    }
  }
  if (r.is_ok() && keep) {
    Graph gr;
    gr.id = next_id_++;
    gr.phase = c.phase;
    gr.view = c.view;
    gr.before = std::move(c.live);
    {
      PlanLock lock(v);
      const uint64_t e = load64(v->epoch);
      gr.outputs.assign(instances(v), 0);
      for (uint64_t k = 0; k < gr.outputs.size(); ++k) {
        gr.outputs[k] = live(load64(&v->words[k]), e) ? 1 : 0;
      }
    }
    graphs_.push_back(std::move(gr));
    *id = graphs_.back().id;
    last_graph_ = first_launch_ = *id;
    ++counts_.captures;
  } else {
    ++counts_.failed_captures;
  }
  update_holds_locked();
  return r;
}

std::string GraphSteps::why_not_locked(const zarena_plan_view* v) const {
  if (capturing_.load(std::memory_order_relaxed)) {
    return "a capture is in progress already (end it with zarena_graph_capture_end first)";
  }
  if ((load64(v->state) & ZARENA_PLAN_ENGAGED) == 0) return not_engaged_text(v);
  const uint32_t cursor = __atomic_load_n(v->cursor, __ATOMIC_RELAXED);
  if (cursor != 0) {
    return std::to_string(cursor) +
           " allocations were made since the last step boundary: a capture begins a step "
           "(call zarena_step_begin, or zarena_reset, first)";
  }
  if (last_view_ != v || whole_steps_ == 0) {
    return "the step before was not served whole by the step plan (it was learned, or the "
           "plan was taken up at this boundary): what the captured step frees of it would not "
           "be planned blocks. Run one more eager step first";
  }
  return "";
}

bool GraphSteps::may_begin(const zarena_plan_view* v) const {
  if (v == nullptr) return false;
  std::lock_guard<std::mutex> g(mu_);
  PlanLock lock(v);
  return why_not_locked(v).empty();
}

GraphSteps::Graph* GraphSteps::find_locked(uint32_t id) {
  for (Graph& gr : graphs_) {
    if (gr.id == id) return &gr;
  }
  return nullptr;
}

void GraphSteps::update_holds_locked() noexcept {
  holds_zone_.store(capturing_.load(std::memory_order_relaxed) || !graphs_.empty(),
                    std::memory_order_relaxed);
}

Result GraphSteps::replay(const zarena_plan_view* v, uint32_t id) {
  std::lock_guard<std::mutex> g(mu_);
  Graph* gr = find_locked(id);
  if (gr == nullptr) {
    return Result::fail(
        Status::kInvalidArgument,
        "graph " + std::to_string(id) + " is unknown (never captured here, or released)");
  }
  auto refuse = [&](std::string why) {
    ++counts_.refused_replays;
    return Result::fail(Status::kCaptureUnsafe,
                        "graph " + std::to_string(id) + " may not be replayed now: " + why);
  };
  if (capturing_.load(std::memory_order_relaxed)) {
    return refuse("a capture is in progress (a replay is a step of its own)");
  }
  if (v != gr->view) return refuse("the arena's step plan is not the one it was captured under");
  uint64_t steps = 0;
  {
    PlanLock lock(v);
    const uint64_t st = load64(v->state);
    if ((st & ZARENA_PLAN_ENGAGED) == 0) return refuse(not_engaged_text(v));
    const uint32_t cursor = __atomic_load_n(v->cursor, __ATOMIC_RELAXED);
    if (cursor != 0) {
      return refuse(std::to_string(cursor) +
                    " allocations were made since the last step boundary (a replay is a step: "
                    "end the step before it with zarena_step_begin or zarena_reset)");
    }
    if (first_launch_ == id) {  // the captured step itself runs now
      first_launch_ = 0;
      return Result::ok();
    }
    if (last_view_ != v || whole_steps_ == 0) {
      return refuse(
          "the step before was not served whole by the step plan: what it left live is not "
          "all planned blocks, and a replay frees only planned ones (the graph frees nothing "
          "itself). Run one eager step that the plan serves whole first");
    }
    const uint32_t phase = static_cast<uint32_t>((st >> 1) & 1);
    if (phase != gr->phase) {
      return refuse("it was captured in phase " + std::to_string(gr->phase) +
                    " of the plan's period of 2, and the step starting now is of phase " +
                    std::to_string(phase) +
                    ": replay the graph captured in that phase (or run this step eagerly)");
    }
    // What the replay writes over must be free, or the graph's own: the step before's
    // blocks (which its step frees or writes again), or its outputs when the step before
    // was this graph's. None of them pinned (the replay would overwrite what a pin keeps).
    const uint64_t e = load64(v->epoch);
    const bool own_outputs = last_graph_ == id;
    const uint64_t count = gr->before.size();
    for (uint64_t k = 0; k < count; ++k) {
      const uint64_t w = load64(&v->words[k]);
      if (!live(w, e)) continue;
      if (gr->before[k] == 0 && !(own_outputs && gr->outputs[k] != 0)) {
        return refuse("the planned block of " + instance_text(v, k) +
                      " is live, and the graph writes over its bytes (it was not live when "
                      "the graph was captured); free it first");
      }
      if ((w & ZARENA_PLAN_W_PIN_MASK) != 0) {
        return refuse("the planned block of " + instance_text(v, k) +
                      " is pinned, and the graph writes over its bytes; unpin it first");
      }
    }
    // The words become what the captured step left: its outputs live in this epoch (and
    // the blocks their offsets' frees find), what it freed of the step before freed.
    for (uint64_t k = 0; k < count; ++k) {
      uint64_t w = load64(&v->words[k]);
      if (gr->outputs[k] != 0) {
        __atomic_store_n(&v->born[k], e, __ATOMIC_RELAXED);
        const uint64_t want =
            ZARENA_PLAN_W_LIVE | ((e & ZARENA_PLAN_EPOCH_MASK) << ZARENA_PLAN_W_EPOCH_SHIFT);
        while (!__atomic_compare_exchange_n(&v->words[k], &w, want, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
        }
        __atomic_store_n(&v->dlast[v->dindex[k]], static_cast<uint32_t>(k), __ATOMIC_RELEASE);
      } else if (gr->before[k] != 0) {
        while (live(w, e) && !__atomic_compare_exchange_n(
                                 &v->words[k], &w, (w & ~ZARENA_PLAN_W_STATE) | ZARENA_PLAN_W_FREED,
                                 false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        }
      }
    }
    // The step counts as served whole: its count, and a period of 2's phase, move on.
    steps = (st >> 2) + 1;
    const uint64_t parity = v->period == 2 ? phase ^ 1u : 0;
    __atomic_store_n(v->state, (steps << 2) | (parity << 1) | ZARENA_PLAN_ENGAGED,
                     __ATOMIC_RELEASE);
  }
  first_launch_ = 0;
  ++gr->replays;
  ++counts_.replays;
  if (last_view_ == v && steps == last_steps_ + 1) ++whole_steps_;
  last_view_ = v;
  last_steps_ = steps;
  last_graph_ = id;
  return Result::ok();
}

Result GraphSteps::release(uint32_t id) {
  std::lock_guard<std::mutex> g(mu_);
  const auto it =
      std::find_if(graphs_.begin(), graphs_.end(), [id](const Graph& gr) { return gr.id == id; });
  if (it == graphs_.end()) {
    return Result::fail(
        Status::kInvalidArgument,
        "graph " + std::to_string(id) + " is unknown (never captured here, or released already)");
  }
  graphs_.erase(it);
  update_holds_locked();
  return Result::ok();
}

GraphCounts GraphSteps::counts() const {
  std::lock_guard<std::mutex> g(mu_);
  GraphCounts c = counts_;
  c.graphs = static_cast<uint32_t>(graphs_.size());
  c.capturing = capturing_.load(std::memory_order_relaxed);
  c.stream_joins = joins_.load(std::memory_order_relaxed);
  return c;
}

uint64_t GraphSteps::whole_steps() const {
  std::lock_guard<std::mutex> g(mu_);
  return whole_steps_;
}

}  // namespace zarena_core
