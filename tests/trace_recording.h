// An arena whose calls are traced as the engine will trace them once it calls the
// Tracer itself: each public C call is made directly, and its event is written with
// what the call returned and how the stats moved (bump, reuse, overflow, refused; the
// freed size). The same run also feeds an EpochCollector, so a test can compare a
// direct run with the replay of its trace, number for number.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "epoch_stats.h"
#include "trace/trace.h"
#include "zarena/zarena.h"

namespace zarena_test {

class RecordedArena {
 public:
  RecordedArena(const std::string& trace_path, uint64_t capacity, int32_t policy,
                const std::string& name, uint64_t alignment = 256)
      : capacity_(capacity), alignment_(alignment) {
    zarena_config cfg;
    zarena_config_init(&cfg);
    cfg.backend = ZARENA_BACKEND_HOST;
    cfg.capacity_bytes = capacity;
    cfg.alignment = alignment;
    cfg.overflow_policy = policy;
    cfg.overflow_limit_bytes = ZARENA_OVERFLOW_UNLIMITED;
    cfg.name = name.c_str();
    EXPECT_EQ(zarena_create(&cfg, &a_), ZARENA_OK) << zarena_last_error();
    zarena_trace::TraceHeader h;
    h.arena_name = name;
    h.capacity_bytes = capacity;
    h.alignment = alignment;
    h.overflow_policy = policy;
    h.overflow_limit_bytes = ZARENA_OVERFLOW_UNLIMITED;
    h.backend = ZARENA_BACKEND_HOST;
    zarena_core::Result err;
    tracer_ = zarena_trace::Tracer::open(trace_path, h, &err);
    EXPECT_TRUE(tracer_ != nullptr) << err.message;
    collector_.emplace(stats());
  }
  ~RecordedArena() { close(); }

  // Destroys the arena and closes the trace (the engine does both at destroy).
  void close() {
    if (a_ == nullptr) return;
    final_stats_ = stats();
    zarena_destroy(a_);
    a_ = nullptr;
    EXPECT_TRUE(tracer_->close().is_ok());
  }

  void* alloc(uint64_t size, uint32_t tag = 0) {
    void* p = nullptr;
    const zarena_status st = zarena_alloc(a_, size, &p);
    const zarena_stats s = stats();
    const uint64_t aligned = (size + alignment_ - 1) & ~(alignment_ - 1);
    using zarena_trace::AllocOutcome;
    AllocOutcome o = AllocOutcome::kRefused;
    if (size == 0) {
      collector_->after_other(s);
      o = AllocOutcome::kRegionBump;
    } else {
      switch (collector_->after_alloc(s, st, aligned)) {
        case zarena_replay::Outcome::kBump:
          o = AllocOutcome::kRegionBump;
          break;
        case zarena_replay::Outcome::kReuse:
          o = AllocOutcome::kRegionReuse;
          break;
        case zarena_replay::Outcome::kOverflow:
          o = AllocOutcome::kOverflow;
          break;
        case zarena_replay::Outcome::kRefused:
          break;
      }
    }
    // A fresh arena's first region block is carved at offset 0: that is the base.
    if (base_ == nullptr && (o == AllocOutcome::kRegionBump) && p != nullptr) base_ = p;
    tracer_->on_alloc(size, aligned, addr(p), o, st, zarena_epoch(a_), tag);
    return st == ZARENA_OK ? p : nullptr;
  }

  zarena_status free(void* p) {
    const zarena_stats before = stats();
    const zarena_status st = zarena_free(a_, p);
    const zarena_stats s = stats();
    collector_->after_other(s);
    const uint64_t freed =
        (before.used_bytes - s.used_bytes) + (before.overflow_live_bytes - s.overflow_live_bytes);
    tracer_->on_free(addr(p), st, freed, false, 0);
    return st;
  }

  void reset() {
    zarena_reset(a_);
    collector_->after_reset(stats());
    tracer_->on_reset(zarena_epoch(a_));
  }

  void boundary() {
    zarena_mark_step_boundary(a_);
    const zarena_stats s = stats();
    collector_->after_other(s);
    tracer_->on_boundary(zarena_replay::EpochCollector::top_of(s));
  }

  // Events without a 1.0 call: only traced.
  void step_begin() { tracer_->on_step_begin(); }
  void tag(uint32_t id, const std::string& name) { tracer_->on_tag(id, name); }

  zarena* arena() { return a_; }
  zarena_stats stats() const {
    zarena_stats s;
    s.struct_size = sizeof s;
    zarena_get_stats(a_, &s);
    return s;
  }
  const zarena_stats& final_stats() const { return final_stats_; }
  const zarena_replay::EpochCollector& collector() const { return *collector_; }

 private:
  zarena_trace::TraceAddr addr(void* p) const {
    const char* c = static_cast<const char*>(p);
    const char* b = static_cast<const char*>(base_);
    if (p != nullptr && b != nullptr && c >= b && c < b + capacity_) {
      return zarena_trace::TraceAddr::region(static_cast<uint64_t>(c - b));
    }
    return zarena_trace::TraceAddr::pointer(p);
  }

  uint64_t capacity_, alignment_;
  zarena* a_ = nullptr;
  void* base_ = nullptr;
  std::unique_ptr<zarena_trace::Tracer> tracer_;
  std::optional<zarena_replay::EpochCollector> collector_;
  zarena_stats final_stats_{};
};

}  // namespace zarena_test
