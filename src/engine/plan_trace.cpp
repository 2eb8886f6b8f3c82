// The trace of what step plans serve (docs/TRACE.md, format 2.2): a planned allocation is
// an alloc record of outcome kPlanned at the block's region offset, and the frees, pins
// and unpins of planned blocks carry kAddrPlanned. Planned blocks are named by their
// region offset, as the region's blocks are: a plan's zone is region memory. Each record
// takes a key of its own (the planned paths hold no slot lock): an allocation's after it,
// a free's or an unpin's before it (trace_key), since the plan may hand the space to its
// next instance at once. Called only while tracing (kTracing).
#include "engine/arena.h"

namespace zarena_core {

void Arena::trace_planned_alloc(uint64_t size, uint64_t aligned, uint32_t tag,
                                const zarena_block& b) noexcept {
  const uint64_t offset = static_cast<uint64_t>(static_cast<const char*>(b.ptr) - base_);
  trace_->on_alloc(size, aligned, zarena_trace::TraceAddr::planned_block(offset),
                   zarena_trace::AllocOutcome::kPlanned, ZARENA_OK, b.epoch, tag);
}

void Arena::trace_planned_free(uint64_t key, void* ptr, Status st, uint64_t freed,
                               uint64_t want_epoch) noexcept {
  const uint64_t offset = static_cast<uint64_t>(static_cast<const char*>(ptr) - base_);
  trace_->on_free(zarena_trace::TraceAddr::planned_block(offset), static_cast<int32_t>(st), freed,
                  want_epoch != kAnyEpoch, want_epoch == kAnyEpoch ? 0 : want_epoch, key);
}

void Arena::trace_planned_pin(bool pin, uint64_t key, void* ptr, const Result& r) noexcept {
  const uint64_t offset = static_cast<uint64_t>(static_cast<const char*>(ptr) - base_);
  const auto addr = zarena_trace::TraceAddr::planned_block(offset);
  if (pin) {
    trace_->on_pin(addr, static_cast<int32_t>(r.status), key);
  } else {
    trace_->on_unpin(addr, static_cast<int32_t>(r.status), key);
  }
}

}  // namespace zarena_core
