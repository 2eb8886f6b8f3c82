#include "backend/backend_faults.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "backend/backend_faults_testing.h"

namespace zarena_core {

namespace {

// The "next create" plan: rare (tests only), so a mutex is fine; it is taken once per
// wrapped backend, at create.
std::mutex g_next_mu;
std::optional<FaultPlan> g_next_plan;

std::optional<FaultPlan> take_next_create_plan() noexcept {
  std::lock_guard<std::mutex> lock(g_next_mu);
  std::optional<FaultPlan> p = std::move(g_next_plan);
  g_next_plan.reset();
  return p;
}

const char* route_name(OverflowRoute r) {
  return r == OverflowRoute::kAsync ? "async" : r == OverflowRoute::kCustom ? "custom" : "sync";
}

}  // namespace

void arm_faults_for_next_create(const FaultPlan& plan) noexcept {
  std::lock_guard<std::mutex> lock(g_next_mu);
  g_next_plan = plan;
}

void disarm_faults_for_next_create() noexcept {
  std::lock_guard<std::mutex> lock(g_next_mu);
  g_next_plan.reset();
}

// By FaultSite, in the enum's order.
constexpr const char* kFaultSiteNames[] = {
    "reserve",       "commit", "decommit",       "overflow_alloc",
    "overflow_free", "fill32", "capture_status", "set_stream",
};
static_assert(std::size(kFaultSiteNames) == kFaultSiteCount, "a name for every FaultSite");

const char* fault_site_name(FaultSite site) noexcept {
  const int i = static_cast<int>(site);
  return i >= 0 && i < kFaultSiteCount ? kFaultSiteNames[i] : "unknown";
}

Status default_fault_status(FaultSite site) noexcept {
  switch (site) {
    case FaultSite::kReserve:
    case FaultSite::kCommit:
      return Status::kOutOfMemory;
    case FaultSite::kSetStream:
      return Status::kInvalidArgument;
    default:
      return Status::kBackend;
  }
}

FaultInjectingBackend::FaultInjectingBackend(std::unique_ptr<Backend> inner)
    : inner_(std::move(inner)) {
  if (std::optional<FaultPlan> plan = take_next_create_plan()) {
    tally_ = plan->tally;
    observe_ = plan->observe;
    observe_ctx_ = plan->observe_ctx;
    sim_capture_ = plan->capture;
    sim_reset_ = plan->device_reset;
    apply(*plan);
  }
}

FaultInjectingBackend::~FaultInjectingBackend() {
  // The simulated reset "took" what the engine no longer gives back: the wrapped backend
  // really holds it.
  for (auto& [p, b] : outstanding_) (void)inner_->overflow_free(b);
}

bool FaultInjectingBackend::context_lost() noexcept {
  return (sim_reset_ && sim_reset_->load()) || inner_->context_lost();
}

bool FaultInjectingBackend::refused_after_reset(const std::string& what, Result* out) noexcept {
  if (!sim_reset_ || !sim_reset_->load()) return false;
  if (tally_) tally_->after_reset.fetch_add(1);
  *out = Result::fail(Status::kBackend, fmt::format("{} refused: simulated device reset", what));
  return true;
}

Result FaultInjectingBackend::release_region() noexcept {
  if (sim_reset_ && sim_reset_->load()) return Result::ok();  // frees nothing, as CUDA
  return inner_->release_region();
}

Result FaultInjectingBackend::prepare_async(bool create_allowed) noexcept {
  Result r;
  if (refused_after_reset("prepare_async", &r)) return r;
  return inner_->prepare_async(create_allowed);
}

Result FaultInjectingBackend::capture_id(uint64_t* id) noexcept {
  if (sim_reset_ && sim_reset_->load()) {
    *id = 0;
    return Result::ok();
  }
  return inner_->capture_id(id);
}

void FaultInjectingBackend::arm(FaultSite site, uint64_t nth, Status status,
                                uint64_t repeat) noexcept {
  Counter& c = counters_[static_cast<int>(site)];
  if (status == Status::kOk) status = default_fault_status(site);
  c.status.store(static_cast<int32_t>(status));
  c.fail_nth.store(nth);
  c.fail_count.store(repeat == 0 ? 1 : repeat);
  // Counting restarts here, so 1 means the next call.
  c.fail_at.store(nth == 0 ? 0 : c.calls.load() + nth);
}

void FaultInjectingBackend::delay_overflow_alloc(uint64_t delay_nth, uint64_t delay_ns) noexcept {
  const uint64_t base = counters_[static_cast<int>(FaultSite::kOverflowAlloc)].calls.load();
  delay_ns_.store(0);        // no call sleeps on a half-written plan
  delay_plan_.fetch_add(1);  // a sleep in progress ends (sleep_overflow_alloc)
  delay_every_.store(delay_nth == 0 ? 1 : 0);
  delay_at_.store(delay_nth == 0 ? 0 : base + delay_nth);
  delay_ns_.store(delay_ns);
}

void FaultInjectingBackend::apply(const FaultPlan& plan) noexcept {
  for (int i = 0; i < kFaultSiteCount; ++i) {
    arm(static_cast<FaultSite>(i), plan.sites[i].fail_nth, plan.sites[i].status);
  }
  delay_overflow_alloc(plan.overflow_delay_nth, plan.overflow_delay_ns);
}

uint64_t FaultInjectingBackend::calls(FaultSite site) const noexcept {
  return counters_[static_cast<int>(site)].calls.load();
}

bool FaultInjectingBackend::fires(FaultSite site, uint64_t* call_number) noexcept {
  Counter& c = counters_[static_cast<int>(site)];
  const uint64_t n = ++c.calls;
  if (call_number != nullptr) *call_number = n;
  if (tally_) tally_->calls[static_cast<int>(site)].fetch_add(1);
  const uint64_t at = c.fail_at.load();
  return at != 0 && n >= at && n - at < c.fail_count.load();
}

Result FaultInjectingBackend::passed(FaultSite site, Result r) noexcept {
  if (tally_ && r.is_ok()) tally_->ok[static_cast<int>(site)].fetch_add(1);
  return r;
}

Result FaultInjectingBackend::injected(FaultSite site, const std::string& detail) const {
  const Counter& c = counters_[static_cast<int>(site)];
  return Result::fail(static_cast<Status>(c.status.load()),
                      fmt::format("injected fault: {} call #{}{}", fault_site_name(site),
                                  c.fail_nth.load(), detail));
}

Result FaultInjectingBackend::reserve_region(const RegionRequest& req, RegionInfo* out) noexcept {
  if (fires(FaultSite::kReserve))
    return injected(FaultSite::kReserve,
                    fmt::format(" ({} bytes{})", req.bytes, req.expandable ? ", expandable" : ""));
  return passed(FaultSite::kReserve, inner_->reserve_region(req, out));
}

void FaultInjectingBackend::hold(FaultSite site) noexcept {
  std::lock_guard<std::mutex> lock(gate_mu_);
  gates_[static_cast<int>(site)].armed = true;
}

void FaultInjectingBackend::wait_held(FaultSite site) noexcept {
  std::unique_lock<std::mutex> lock(gate_mu_);
  gate_cv_.wait(lock, [&] { return gates_[static_cast<int>(site)].waiting; });
}

void FaultInjectingBackend::release(FaultSite site) noexcept {
  std::lock_guard<std::mutex> lock(gate_mu_);
  gates_[static_cast<int>(site)].armed = false;
  gate_cv_.notify_all();
}

void FaultInjectingBackend::pass_gate(FaultSite site) noexcept {
  std::unique_lock<std::mutex> lock(gate_mu_);
  Gate& g = gates_[static_cast<int>(site)];
  if (!g.armed) return;
  g.waiting = true;
  gate_cv_.notify_all();
  gate_cv_.wait(lock, [&] { return !g.armed; });
  g.waiting = false;
}

Result FaultInjectingBackend::range_call(FaultSite site, uint64_t offset, uint64_t bytes,
                                         Result (Backend::*call)(uint64_t,
                                                                 uint64_t) noexcept) noexcept {
  pass_gate(site);
  if (fires(site)) return injected(site, fmt::format(" ([{}, +{}))", offset, bytes));
  Result refused;
  if (refused_after_reset(fault_site_name(site), &refused)) return refused;
  return passed(site, ((*inner_).*call)(offset, bytes));
}

Result FaultInjectingBackend::commit(uint64_t offset, uint64_t bytes) noexcept {
  return range_call(FaultSite::kCommit, offset, bytes, &Backend::commit);
}

Result FaultInjectingBackend::decommit(uint64_t offset, uint64_t bytes) noexcept {
  return range_call(FaultSite::kDecommit, offset, bytes, &Backend::decommit);
}

// Sleeps ns, in slices of at most a millisecond, or until the delay is set again (a test
// ends a long delay once what it waited for has happened: no test depends on how long).
void FaultInjectingBackend::sleep_overflow_alloc(uint64_t ns) noexcept {
  const uint64_t plan = delay_plan_.load();
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  for (auto now = std::chrono::steady_clock::now(); now < until && delay_plan_.load() == plan;
       now = std::chrono::steady_clock::now()) {
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(until - now, std::chrono::milliseconds(1)));
  }
}

Result FaultInjectingBackend::overflow_alloc(uint64_t bytes, uint64_t alignment,
                                             OverflowRoute route, OverflowBlock* out) noexcept {
  uint64_t n = 0;
  const bool fire = fires(FaultSite::kOverflowAlloc, &n);
  const uint64_t ns = delay_ns_.load();
  if (ns != 0 && (delay_every_.load() != 0 || n == delay_at_.load())) sleep_overflow_alloc(ns);
  if (fire) {
    return injected(FaultSite::kOverflowAlloc, fmt::format(" ({} bytes aligned to {}, {} route)",
                                                           bytes, alignment, route_name(route)));
  }
  Result refused;
  if (refused_after_reset("overflow_alloc", &refused)) return refused;
  Result r = inner_->overflow_alloc(bytes, alignment, route, out);
  if (r.is_ok() && sim_reset_) {
    std::lock_guard<std::mutex> lock(outstanding_mu_);
    try {
      outstanding_.emplace(out->base, *out);
    } catch (...) {
      (void)inner_->overflow_free(*out);
      return Result::fail(Status::kOutOfMemory, "fault injection: out of host memory");
    }
  }
  return passed(FaultSite::kOverflowAlloc, r);
}

Result FaultInjectingBackend::overflow_free(const OverflowBlock& block) noexcept {
  if (fires(FaultSite::kOverflowFree))
    return injected(FaultSite::kOverflowFree, fmt::format(" ({}, {} bytes, {} route)", block.ptr,
                                                          block.bytes, route_name(block.route)));
  Result refused;
  if (refused_after_reset("overflow_free", &refused)) return refused;
  if (observe_ != nullptr) observe_(observe_ctx_, FaultSite::kOverflowFree, block.ptr, stream());
  const Result r = inner_->overflow_free(block);
  if (r.is_ok() && sim_reset_) {
    std::lock_guard<std::mutex> lock(outstanding_mu_);
    outstanding_.erase(block.base);
  }
  return passed(FaultSite::kOverflowFree, r);
}

Result FaultInjectingBackend::capture_status(bool* capturing) noexcept {
  if (fires(FaultSite::kCaptureStatus)) return injected(FaultSite::kCaptureStatus, std::string());
  if (sim_reset_ && sim_reset_->load()) {
    *capturing = false;
    return passed(FaultSite::kCaptureStatus, Result::ok());
  }
  if (sim_capture_ && sim_capture_->load()) {
    *capturing = true;
    return passed(FaultSite::kCaptureStatus, Result::ok());
  }
  return passed(FaultSite::kCaptureStatus, inner_->capture_status(capturing));
}

Result FaultInjectingBackend::set_stream(void* stream) noexcept {
  if (fires(FaultSite::kSetStream))
    return injected(FaultSite::kSetStream, fmt::format(" ({})", stream));
  Result refused;
  if (refused_after_reset("set_stream", &refused)) return refused;
  return passed(FaultSite::kSetStream, inner_->set_stream(stream));
}

Result FaultInjectingBackend::fill32(void* ptr, uint64_t bytes, uint32_t word) noexcept {
  if (fires(FaultSite::kFill32))
    return injected(FaultSite::kFill32, fmt::format(" ({}, {} bytes)", ptr, bytes));
  Result refused;
  if (refused_after_reset("fill32", &refused)) return refused;
  if (observe_ != nullptr) observe_(observe_ctx_, FaultSite::kFill32, ptr, stream());
  return passed(FaultSite::kFill32, inner_->fill32(ptr, bytes, word));
}

}  // namespace zarena_core
