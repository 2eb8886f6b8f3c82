// FaultInjectingBackend: a Backend that wraps another and can make any one of its calls
// fail, so that every failure path of the engine (a region that cannot be reserved, a
// commit that runs out of memory, an overflow allocation or free that fails, a capture
// query that errors, ...) is testable on any machine, with no test hook on the production
// interface. The engine wraps host backends in it always
// (zarena_debug_inject_overflow_fault arms it); with nothing armed it only counts calls.
//
// For each call kind, arm(site, n) makes the n-th call from now fail (1 = the next;
// 0 = never): that call does not reach the wrapped backend and returns the status that
// site really returns on failure (or the one given), with the message
// "injected fault: <site> call #<n> (...)". Every other call passes through unchanged.
// With `repeat`, that many calls from the n-th on fail (kAlways: every one, as a device
// that stays out of memory does).
// It also simulates two device events a host backend cannot have (FaultPlan::capture,
// FaultPlan::device_reset), so the engine's bookkeeping around them is testable anywhere.
// All state is atomic: arming and calls may race from any thread (a call that races with
// arming is counted before or after it, never lost).
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backend/backend.h"

namespace zarena_core {

enum class FaultSite : int {
  kReserve = 0,
  kCommit,
  kDecommit,
  kOverflowAlloc,
  kOverflowFree,
  kFill32,
  kCaptureStatus,
  kSetStream,
};
constexpr int kFaultSiteCount = 8;

const char* fault_site_name(FaultSite site) noexcept;
// What a real failure at that site reports: kOutOfMemory for reserve and commit (no
// memory), kInvalidArgument for set_stream (a stream refused), kBackend elsewhere
// (overflow_alloc too: zarena_debug_inject_overflow_fault has always failed as
// ZARENA_E_BACKEND, and bindings test for it).
Status default_fault_status(FaultSite site) noexcept;

// Per-site counts that outlive the backend (FaultPlan::tally): a test reads them after
// zarena_destroy, to see that every overflow block the wrapped backend handed out was
// given back. calls: every call of that kind; ok: calls the wrapped backend completed.
struct FaultTally {
  std::array<std::atomic<uint64_t>, kFaultSiteCount> calls{};
  std::array<std::atomic<uint64_t>, kFaultSiteCount> ok{};
  // Calls that would have touched memory after the simulated device reset (refused).
  std::atomic<uint64_t> after_reset{0};
  uint64_t calls_at(FaultSite s) const { return calls[static_cast<int>(s)].load(); }
  uint64_t ok_at(FaultSite s) const { return ok[static_cast<int>(s)].load(); }
};

// A set of faults to arm at once (also the process-wide "next create" plan, see
// backend_faults_testing.h). Status kOk means "the site's default".
struct FaultPlan {
  struct Site {
    uint64_t fail_nth = 0;
    Status status = Status::kOk;
  };
  std::array<Site, kFaultSiteCount> sites{};
  uint64_t overflow_delay_nth = 0;  // see delay_overflow_alloc
  uint64_t overflow_delay_ns = 0;
  // Called by every fill32 and overflow_free that passes through (after the fault
  // decision, before the wrapped backend), with the pointer and the stream the wrapped
  // backend orders on at that moment: tests watch, or hold, those calls with it.
  void (*observe)(void* ctx, FaultSite site, const void* ptr, void* stream) = nullptr;
  void* observe_ctx = nullptr;
  // The backend that consumes this plan at its construction also counts into *tally.
  std::shared_ptr<FaultTally> tally;
  // Simulated device events; the test flips them, with no zarena call:
  //   capture: while true, capture_status reports a capture (one the backend sees, as a
  //     CUDA backend sees a capture of the arena's stream);
  //   device_reset: once true, the backend acts as a CUDA backend after cudaDeviceReset
  //     (Backend::context_lost): context_lost() is true, capture queries see no capture,
  //     every call that would touch memory (commit, decommit, overflow_alloc, overflow_free,
  //     fill32, set_stream, prepare_async) fails with kBackend without reaching the wrapped
  //     backend and counts in tally->after_reset, and release_region frees nothing. What
  //     the wrapped backend still holds (the region, overflow blocks) goes with the
  //     wrapper, as the reset would have taken it.
  std::shared_ptr<std::atomic<bool>> capture, device_reset;
};

class FaultInjectingBackend final : public Backend {
 public:
  // Wraps `inner` and applies the pending "next create" plan, if a test armed one.
  explicit FaultInjectingBackend(std::unique_ptr<Backend> inner);
  ~FaultInjectingBackend() override;

  static constexpr uint64_t kAlways = ~0ull;
  void arm(FaultSite site, uint64_t nth, Status status = Status::kOk, uint64_t repeat = 1) noexcept;
  // The delay_nth-th overflow_alloc from now (1 = the next; 0 = every one) sleeps
  // delay_ns before it completes (0 = no delay); a call ends a sleep in progress. With
  // arm(kOverflowAlloc, ...) this is zarena_debug_inject_overflow_fault.
  void delay_overflow_alloc(uint64_t delay_nth, uint64_t delay_ns) noexcept;
  void apply(const FaultPlan& plan) noexcept;
  // A gate for tests of what may run while a commit or decommit is in progress: after
  // hold(site), calls of that kind (kCommit or kDecommit) wait inside the backend until
  // release(site). wait_held(site) returns once one is waiting.
  void hold(FaultSite site) noexcept;
  void wait_held(FaultSite site) noexcept;
  void release(FaultSite site) noexcept;
  // Calls of that kind since construction, failed ones included.
  uint64_t calls(FaultSite site) const noexcept;
  Backend& inner() noexcept { return *inner_; }

  int32_t kind() const noexcept override { return inner_->kind(); }
  std::string describe() const override { return inner_->describe(); }
  Result reserve_region(const RegionRequest& req, RegionInfo* out) noexcept override;
  Result commit(uint64_t offset, uint64_t bytes) noexcept override;
  Result decommit(uint64_t offset, uint64_t bytes) noexcept override;
  const CommitMap* commit_map() const noexcept override { return inner_->commit_map(); }
  Result release_region() noexcept override;
  Result overflow_alloc(uint64_t bytes, uint64_t alignment, OverflowRoute route,
                        OverflowBlock* out) noexcept override;
  Result overflow_free(const OverflowBlock& block) noexcept override;
  bool supports_async() const noexcept override { return inner_->supports_async(); }
  Result capture_status(bool* capturing) noexcept override;
  Result capture_id(uint64_t* id) noexcept override;
  bool on_legacy_stream() const noexcept override { return inner_->on_legacy_stream(); }
  Result prepare_async(bool create_allowed) noexcept override;
  Result set_stream(void* stream) noexcept override;
  void* stream() const noexcept override { return inner_->stream(); }
  Result wait_for(void* stream, bool* waited) noexcept override {
    return inner_->wait_for(stream, waited);
  }
  Result fill32(void* ptr, uint64_t bytes, uint32_t word) noexcept override;
  MemoryInfo memory_info() noexcept override { return inner_->memory_info(); }
  bool context_lost() noexcept override;

 private:
  struct Counter {
    std::atomic<uint64_t> calls{0};
    std::atomic<uint64_t> fail_at{0};     // absolute call number that fails; 0 = none
    std::atomic<uint64_t> fail_count{1};  // calls from fail_at on that fail
    std::atomic<uint64_t> fail_nth{0};    // as armed, for the message
    std::atomic<int32_t> status{0};
  };
  // Counts one call of that kind (its number into *call_number); true when it is the
  // armed one. Cheap: the message is built only for the call that fails.
  bool fires(FaultSite site, uint64_t* call_number = nullptr) noexcept;
  // Counts a call the wrapped backend completed (for the tally); returns r.
  Result passed(FaultSite site, Result r) noexcept;
  Result injected(FaultSite site, const std::string& detail) const;
  void pass_gate(FaultSite site) noexcept;  // waits while the site is held
  // True (and *out is the refusal) when the simulated device reset happened: `what` would
  // have touched memory.
  bool refused_after_reset(const std::string& what, Result* out) noexcept;
  // commit or decommit (site kCommit or kDecommit) of [offset, offset+bytes): the gate, an
  // armed fault, the simulated reset, else `call` of the wrapped backend.
  Result range_call(FaultSite site, uint64_t offset, uint64_t bytes,
                    Result (Backend::*call)(uint64_t, uint64_t) noexcept) noexcept;
  // An injected overflow delay: ns, or until delay_overflow_alloc runs again.
  void sleep_overflow_alloc(uint64_t ns) noexcept;

  std::unique_ptr<Backend> inner_;
  std::shared_ptr<FaultTally> tally_;  // set at construction only (no lock needed)
  std::array<Counter, kFaultSiteCount> counters_;
  // FaultPlan::observe (set at construction only).
  void (*observe_)(void*, FaultSite, const void*, void*) = nullptr;
  void* observe_ctx_ = nullptr;
  std::atomic<uint64_t> delay_at_{0};     // absolute overflow_alloc call that sleeps
  std::atomic<uint64_t> delay_every_{0};  // 1: every overflow_alloc sleeps
  std::atomic<uint64_t> delay_ns_{0};
  std::atomic<uint64_t> delay_plan_{
      0};  // counts delay_overflow_alloc calls: a new one ends a sleep
  // The gate (hold/release): tests only, so a mutex and a condition variable.
  struct Gate {
    bool armed = false;    // the next call waits
    bool waiting = false;  // a call is waiting
  };
  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  std::array<Gate, kFaultSiteCount> gates_{};
  // FaultPlan::capture and ::device_reset (set at construction only). With device_reset,
  // the wrapped backend's overflow blocks not given back yet, for the destructor.
  std::shared_ptr<std::atomic<bool>> sim_capture_, sim_reset_;
  std::mutex outstanding_mu_;
  std::unordered_map<void*, OverflowBlock> outstanding_;
};

}  // namespace zarena_core
