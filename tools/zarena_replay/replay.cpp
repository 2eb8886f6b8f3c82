#include "replay.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <unordered_map>

#include "ops_ext.h"
#include "progress.h"

namespace zarena_replay {

using zarena_trace::Event;
using zarena_trace::Kind;
using zarena_trace::Trace;

namespace {

// A block as the trace names it, and what this replay made of it.
struct Block {
  void* ptr = nullptr;  // null: this replay could not allocate it
  uint64_t aligned = 0;
  uint64_t gen = 0;  // which allocation at this address (addresses are reused)
  uint32_t tag = 0;
  bool live = false;
  bool persistent = false;  // live at a step boundary: survives resets
};

uint64_t block_key(uint64_t addr, uint8_t flags) {
  return (addr << 1) | ((flags & zarena_trace::kAddrRaw) != 0 ? 1 : 0);
}

// A byte this replay never hands out: passed for frees the traced engine answered
// NOT_OWNED, so the replayed engine answers (and counts) the same.
char g_not_owned_byte;

class Replayer {
 public:
  Replayer(const Trace& t, const ReplayConfig& c, ReplayResult* out) : t_(t), c_(c), r_(*out) {}
  ~Replayer() { zarena_destroy(a_); }

  bool run(std::string* error) {
    zarena_config cfg;
    zarena_config_init(&cfg);
    cfg.backend = ZARENA_BACKEND_HOST;
    cfg.capacity_bytes = c_.capacity_bytes;
    cfg.alignment = c_.alignment;
    cfg.overflow_policy = c_.overflow_policy;
    cfg.overflow_limit_bytes = c_.overflow_limit_bytes;
    // Of the traced flags those that change what the engine does with the same calls (a
    // pool that never resets, step plans), and what the replay asks for (--plan).
    cfg.flags = traced_flags(t_.info) | c_.flags;
    if (c_.plans == 1) cfg.flags &= ~ZARENA_FLAG_NO_PLAN;
    if (c_.plans == 0) cfg.flags |= ZARENA_FLAG_NO_PLAN;
    cfg.name = c_.name.c_str();
    // Always: the engine's log records are the report's business, not stderr's.
    capture_.emplace();
    const zarena_status s = zarena_create(&cfg, &a_);
    if (s != ZARENA_OK) {
      *error = std::string("cannot create the replay arena: ") + zarena_last_error();
      return false;
    }
    if (c_.collect) {
      collector_.emplace(stats());
      prev_ = stats();
    }
    setup_tags();
    std::optional<Progress> progress;
    if (c_.progress_label != nullptr) progress.emplace(c_.progress_label, t_.events.size());

    size_t next_reset = 0, next_step = 0;
    for (uint64_t i = 0; i < t_.events.size() && !r_.stopped; ++i) {
      if (progress) progress->update(i);
      while (next_step < c_.step_begin_before.size() && c_.step_begin_before[next_step] <= i) {
        if (c_.step_begin_before[next_step++] == i && ext::available()) ext::step_begin(a_);
      }
      while (next_reset < c_.reset_before.size() && c_.reset_before[next_reset] <= i) {
        if (c_.reset_before[next_reset++] == i) do_reset(i, true);
      }
      if (i == c_.boundary_before) do_boundary(i);
      step(i, t_.events[i]);
      ++r_.events;
      sample_tags(i);
    }
    finish();
    return true;
  }

 private:
  zarena_stats stats() const {
    zarena_stats s;
    s.struct_size = sizeof s;
    zarena_get_stats(a_, &s);
    return s;
  }

  void position(uint64_t i) {
    if (capture_) capture_->set_position(i, epoch_);
  }

  void step(uint64_t i, const Event& e) {
    switch (e.kind) {
      case Kind::kAlloc:
        return do_alloc(i, e);
      case Kind::kFree:
        return do_free(i, e);
      case Kind::kReset:
        return do_reset(i, false);
      case Kind::kBoundary:
        if (c_.drop_boundaries_after_first && r_.boundaries > 0) return;
        return do_boundary(i);
      case Kind::kSetFloor:
        if (!ext::available()) return skip("set_floor");
        position(i);
        ext::set_floor(a_, e.value);
        return after_other(i, 0, 0);
      case Kind::kPin:
      case Kind::kUnpin:
        return do_pin(i, e);
      case Kind::kStepBegin:
        if (!ext::available()) return skip("step_begin");
        position(i);
        ext::step_begin(a_);
        return after_other(i, 0, 0);
      case Kind::kTag:
        return;  // registered up front (setup_tags)
      case Kind::kCapture:
        // zarena_set_capture_active has no agreed signature yet; host replay has no
        // graph capture to refuse anyway.
        return skip("capture");
      case Kind::kEnd:
      case Kind::kLaneAlloc:  // the reader gives these as kAlloc / kFree; times are no events
      case Kind::kLaneFree:
      case Kind::kLaneTime:
      case Kind::kLaneOrder:
        return;
    }
  }

  void skip(const char* what) { ++r_.not_replayed[what]; }

  void do_alloc(uint64_t i, const Event& e) {
    position(i);
    void* p = nullptr;
    const uint32_t tag = e.tag;
    const auto mapped = tag_map_.find(tag);
    const zarena_status st = mapped != tag_map_.end()
                                 ? ext::alloc_tagged(a_, e.size, mapped->second, &p)
                                 : zarena_alloc(a_, e.size, &p);
    // An overflow that succeeded has its record delivered by zarena's reporter thread:
    // wait for it, so the live verdict is placed at this event.
    if (capture_) zarena_log_flush();
    if (e.size == 0) return after_other(i, 0, 0);
    ++r_.allocs;
    if (e.outcome == zarena_trace::AllocOutcome::kPlanned) ++r_.traced_planned;
    const uint64_t aligned = align_up(e.size, c_.alignment);
    Block& b = blocks_[block_key(e.addr, e.flags)];
    b.ptr = st == ZARENA_OK ? p : nullptr;
    b.aligned = aligned;
    b.gen = ++gen_;
    b.tag = tag;
    b.live = st == ZARENA_OK;
    b.persistent = false;
    if (b.live) {
      epoch_blocks_.push_back({block_key(e.addr, e.flags), b.gen});
      tag_add(tag, aligned);
    }
    if (!c_.collect) {
      // Sizing runs use the REFUSE policy, so a failed request is a region miss.
      if (st != ZARENA_OK) miss(i);
      return;
    }
    const zarena_stats s = stats();
    const Outcome o = collector_->after_alloc(s, st, aligned);
    if (s.misses > prev_.misses) miss(i);
    uint8_t marks = kMarkAlloc;
    if (o == Outcome::kOverflow) {
      marks |= kMarkOverflow;
      ++r_.overflow_allocs;
      r_.overflow_bytes += aligned;
    } else if (o == Outcome::kRefused) {
      marks |= kMarkRefused;
      ++r_.refused;
    }
    observe(s, tag, marks);
  }

  void miss(uint64_t i) {
    if (r_.misses++ == 0) r_.first_miss_event = i;
    if (c_.stop_at_first_miss) r_.stopped = true;
  }

  void do_free(uint64_t i, const Event& e) {
    ++r_.frees;
    const bool epoch_checked = (e.flags & zarena_trace::kFreeEpochChecked) != 0;
    auto it = blocks_.find(block_key(e.addr, e.flags));
    void* ptr = nullptr;
    Block* b = nullptr;
    if (e.addr == 0 && (e.flags & zarena_trace::kAddrRaw) != 0) {
      // zarena_free(NULL): a no-op the program did call (a refused allocation's NULL is
      // not that allocation's block).
      ptr = nullptr;
    } else if (it == blocks_.end()) {
      if (e.status == ZARENA_OK) {
        ++r_.unmatched_frees;  // allocated before the trace began (an RMM log)
        return;
      }
      if (!c_.exact) {
        ++r_.skipped_failed_frees;
        return;
      }
      ptr = &g_not_owned_byte;
    } else {
      b = &it->second;
      if (b->ptr == nullptr) {
        ++r_.frees_of_refused;
        return;
      }
      if (!c_.exact && e.status != ZARENA_OK) {
        ++r_.skipped_failed_frees;
        return;
      }
      if (!c_.exact && !b->live) {
        ++r_.frees_after_reclaim;
        return;
      }
      ptr = b->ptr;
    }
    position(i);
    zarena_status st;
    if (epoch_checked && ext::available()) {
      st = ext::free_at(a_, ptr, e.epoch);
    } else if (epoch_checked && e.status != ZARENA_OK) {
      // Whether the epoch check refused it cannot be told without the 1.1 call.
      return skip("free_at");
    } else {
      if (epoch_checked) ++r_.free_at_as_free;
      st = zarena_free(a_, ptr);
    }
    if (c_.exact && st != e.status) ++r_.status_mismatches;
    uint32_t tag = 0;
    if (st == ZARENA_OK && b != nullptr && b->live) {
      b->live = false;
      tag = b->tag;
      tag_add(tag, -static_cast<int64_t>(b->aligned));
    }
    after_other(i, tag, kMarkFree);
  }

  void do_reset(uint64_t i, bool inserted) {
    position(i);
    zarena_reset(a_);
    ++epoch_;
    if (inserted) {
      ++r_.inserted_resets;
    } else {
      ++r_.resets;
    }
    // What the trace still uses but the reset reclaims: allocated since the last boundary.
    uint64_t lost = 0;
    for (const auto& [key, gen] : epoch_blocks_) {
      Block& b = blocks_[key];
      if (b.gen != gen || !b.live || b.persistent) continue;
      b.live = false;
      tag_add(b.tag, -static_cast<int64_t>(b.aligned));
      if (inserted) {
        ++r_.reclaimed_live_blocks;
        lost += b.aligned;
      }
    }
    epoch_blocks_.clear();
    r_.reclaimed_live_bytes += lost;
    r_.max_reclaimed_live_bytes = std::max(r_.max_reclaimed_live_bytes, lost);
    if (!c_.collect) return;
    const zarena_stats s = stats();
    collector_->after_reset(s);
    observe(s, 0, kMarkReset);
  }

  void do_boundary(uint64_t i) {
    position(i);
    zarena_mark_step_boundary(a_);
    ++r_.boundaries;
    for (const auto& [key, gen] : epoch_blocks_) {
      Block& b = blocks_[key];
      if (b.gen == gen && b.live) b.persistent = true;
    }
    epoch_blocks_.clear();
    after_other(i, 0, kMarkBoundary);
  }

  void do_pin(uint64_t i, const Event& e) {
    const bool pin = e.kind == Kind::kPin;
    if (!ext::available()) return skip(pin ? "pin" : "unpin");
    auto it = blocks_.find(block_key(e.addr, e.flags));
    if (it == blocks_.end() || it->second.ptr == nullptr) return skip(pin ? "pin" : "unpin");
    position(i);
    const zarena_status st = pin ? ext::pin(a_, it->second.ptr) : ext::unpin(a_, it->second.ptr);
    if (c_.exact && st != e.status) ++r_.status_mismatches;
    after_other(i, 0, pin ? kMarkPin : 0);
  }

  void after_other(uint64_t i, uint32_t tag, uint8_t marks) {
    (void)i;
    if (!c_.collect) return;
    const zarena_stats s = stats();
    collector_->after_other(s);
    observe(s, tag, marks);
  }

  void observe(const zarena_stats& s, uint32_t tag, uint8_t marks) {
    prev_ = s;
    const uint64_t top = EpochCollector::top_of(s);
    const uint64_t live = EpochCollector::live_of(s);
    r_.peak_top = std::max(r_.peak_top, top);
    r_.peak_live = std::max(r_.peak_live, live);
    if (!c_.timeline) return;
    // One sample per trace event: a what-if reset or boundary placed before event i
    // shares its sample; events that made no call repeat the previous one.
    const uint64_t i = r_.events;
    auto& tl = r_.timeline;
    if (tl.size() == i + 1) {
      tl[i].top = top;
      tl[i].live = live;
      tl[i].planned = s.plan_live_bytes;
      if (tag != 0) tl[i].tag = tag;
      tl[i].marks |= marks;
      return;
    }
    tl.resize(
        i, tl.empty() ? Sample{} : Sample{tl.back().top, tl.back().live, 0, 0, tl.back().planned});
    tl.push_back(Sample{top, live, tag, marks, s.plan_live_bytes});
  }

  void setup_tags() {
    if (t_.tags.empty()) return;
    for (const auto& [id, name] : t_.tags) {
      tag_column_[id] = r_.tags.ids.size();
      r_.tags.ids.push_back(id);
      uint32_t replay_id = 0;
      if (ext::tag_register(name.c_str(), &replay_id) == ZARENA_OK) tag_map_[id] = replay_id;
    }
    tag_live_.assign(r_.tags.ids.size(), 0);
    // About a thousand columns: as many as a picture can show.
    r_.tags.every = std::max<uint64_t>(1, t_.events.size() / 1000);
  }

  void tag_add(uint32_t tag, int64_t delta) {
    auto it = tag_column_.find(tag);
    if (it == tag_column_.end()) return;
    tag_live_[it->second] += static_cast<uint64_t>(delta);
  }

  // One sample per bucket of `every` events: the tag bytes when the tagged total was
  // highest in it. A fixed-phase sample would alias with the steps (always catching the
  // same moment of a step) and miss short-lived peaks.
  void sample_tags(uint64_t i) {
    if (!c_.timeline || r_.tags.ids.empty()) return;
    uint64_t total = 0;
    for (uint64_t b : tag_live_) total += b;
    const bool bucket_start = i % r_.tags.every == 0;
    if (bucket_start || total > bucket_best_total_) {
      bucket_best_total_ = total;
      bucket_best_event_ = i;
      bucket_best_ = tag_live_;
    }
    if ((i + 1) % r_.tags.every == 0 || i + 1 == t_.events.size()) {
      r_.tags.events.push_back(bucket_best_event_);
      r_.tags.bytes.push_back(bucket_best_);
    }
  }

  void finish() {
    if (c_.timeline) {
      auto& tl = r_.timeline;
      tl.resize(r_.events, tl.empty()
                               ? Sample{}
                               : Sample{tl.back().top, tl.back().live, 0, 0, tl.back().planned});
    }
    r_.final_stats = stats();
    if (collector_) r_.epochs = collector_->epochs();
    if (capture_) {
      r_.first_overflows = capture_->first_overflows();
      r_.cadence_warned = capture_->cadence_warned();
      r_.cadence_event = capture_->cadence_event();
      r_.cadence_message = capture_->cadence_message();
    }
    zarena_destroy(a_);
    a_ = nullptr;
  }

  const Trace& t_;
  const ReplayConfig& c_;
  ReplayResult& r_;
  zarena* a_ = nullptr;
  std::optional<VerdictCapture> capture_;
  std::optional<EpochCollector> collector_;
  zarena_stats prev_{};
  uint64_t epoch_ = 0;
  uint64_t gen_ = 0;
  std::unordered_map<uint64_t, Block> blocks_;
  std::vector<std::pair<uint64_t, uint64_t>> epoch_blocks_;  // (key, gen) since boundary/reset
  std::unordered_map<uint32_t, uint32_t> tag_map_;           // trace id -> replay id (1.1)
  std::unordered_map<uint32_t, size_t> tag_column_;
  std::vector<uint64_t> tag_live_;
  std::vector<uint64_t> bucket_best_;
  uint64_t bucket_best_total_ = 0, bucket_best_event_ = 0;
};

}  // namespace

bool traced_run_planned(const zarena_trace::TraceInfo& info) {
  return info.plans_traced() && (info.config_flags & ZARENA_FLAG_NO_PLAN) == 0;
}

uint32_t traced_flags(const zarena_trace::TraceInfo& info) {
  return (info.config_flags & ZARENA_FLAG_NO_RESETS) |
         (traced_run_planned(info) ? 0u : uint32_t{ZARENA_FLAG_NO_PLAN});
}

bool replay(const Trace& t, const ReplayConfig& c, ReplayResult* out, std::string* error) {
  *out = ReplayResult{};
  Replayer r(t, c, out);
  return r.run(error);
}

}  // namespace zarena_replay
