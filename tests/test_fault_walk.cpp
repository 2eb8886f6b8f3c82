// Fault injection at every backend call site: a scripted workload (create, region
// allocations that commit an expandable region, set_stream, pins, poisoned frees,
// allocations into overflow, epoch-checked frees, resets that reclaim, poison and trim,
// a capture, a step boundary, batches, walks, destroy) runs once to count the backend
// calls of each kind; then, for every site and every N up to its count, it runs again with
// the N-th call of that site failing. Each run checks:
//   - the operation that met the fault returns the documented status (the call fails
//     with the site's status, or succeeds because the arena absorbs the failure), and
//     the failure is named: "injected fault: <site> call #N" in zarena_last_error() or
//     in a log record;
//   - every other operation returns what it returned without the fault (the arena keeps
//     working, to the end of the script and through a recovery sequence after it);
//   - the stats, the live-block walk and the region's invariants agree with a model of
//     what the script holds, and every live block's contents are intact;
//   - no leak: every overflow block the backend handed out was given back by the end of
//     zarena_destroy, or at the safe point after it when the destroy met a capture (a
//     failed capture query counts as one: the release waits, deferred_release.h), by the
//     wrapped backend's tally; host memory is checked by LSan in the ASan build
//     (scripts/test.sh).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../capi/handle.h"
#include "backend/backend_faults.h"
#include "backend/backend_faults_testing.h"
#include "engine/deferred_release.h"
#include "log/log.h"
#include "support.h"
#include "zarena/zarena.h"

using zarena_core::FaultPlan;
using zarena_core::FaultSite;
using zarena_core::FaultTally;
using zarena_core::kFaultSiteCount;
using zarena_test::kKiB;

namespace {

constexpr uint64_t kCapacity = 64 * kKiB;

zarena_config script_config() {
  zarena_config c;
  zarena_config_init(&c);
  c.backend = ZARENA_BACKEND_HOST;
  c.capacity_bytes = kCapacity;
  c.alignment = 256;
  c.overflow_policy = ZARENA_OVERFLOW_SYNC;
  c.overflow_limit_bytes = 4096 * kKiB;
  c.flags = ZARENA_FLAG_EXPANDABLE | ZARENA_FLAG_POISON;
  c.commit_chunk_bytes = 16 * kKiB;
  c.trim_keep_bytes = 16 * kKiB;
  c.name = "faults";
  return c;
}

struct Held {
  void* ptr;
  uint64_t size;
  uint64_t epoch;
  bool overflow;
  bool persistent;
  uint32_t pins;
  uint8_t fill;  // every byte of the block
};

struct OpRecord {
  std::string name;
  zarena_status status = ZARENA_OK;
  std::string error;  // zarena_last_error() when status != OK
  std::array<uint64_t, kFaultSiteCount> before{}, after{};
};

// The script, over a model of the blocks it holds. Every operation is recorded with the
// backend calls it made (from the tally), so a run can say which operation met the fault.
class Script {
 public:
  explicit Script(std::shared_ptr<FaultTally> tally) : tally_(std::move(tally)) {}

  std::vector<OpRecord> ops;
  std::vector<std::string> problems;  // model disagreements (contents, stats, walk)
  zarena* a = nullptr;

  void run() {
    const zarena_config cfg = script_config();
    op("create", [&] { return zarena_create(&cfg, &a); });
    if (a == nullptr) return;
    for (int i = 0; i < 6; ++i) alloc("alloc region", 8 * kKiB);  // commits chunk by chunk
    int token = 0;
    op("set_stream", [&] { return zarena_set_stream(a, &token); });
    Held* pinned = nth(0);
    if (pinned != nullptr) {
      if (op("pin", [&] { return zarena_pin(a, pinned->ptr); }) == ZARENA_OK) ++pinned->pins;
    }
    free_nth("free region (poisoned)", 1, false);
    for (int i = 0; i < 4; ++i) alloc("alloc overflow", 24 * kKiB);
    free_first_overflow("free overflow", false);
    free_first_overflow("free_at overflow", true);
    reset("reset (reclaims, poisons, trims)");
    for (Held& h : held_) {
      if (h.pins == 0) continue;
      void* p = h.ptr;
      if (op("unpin", [&] { return zarena_unpin(a, p); }) == ZARENA_OK) --h.pins;
    }
    free_nth("free survivor", 0, false);
    for (int i = 0; i < 3; ++i) alloc("alloc region again", 8 * kKiB);
    alloc_batch();
    op("mark_step_boundary", [&] { return zarena_mark_step_boundary(a); });
    for (Held& h : held_) h.persistent = true;
    alloc("alloc overflow after boundary", 40 * kKiB);
    alloc("alloc region above floor", 2 * kKiB);
    op("capture on", [&] { return zarena_set_capture_active(a, 1); });
    alloc("alloc overflow during capture", 40 * kKiB);  // SYNC is refused
    free_first_overflow("free overflow during capture", true);
    op("capture off", [&] { return zarena_set_capture_active(a, 0); });
    op("poison off", [&] { return zarena_set_poison(a, 0, 0); });
    free_last("free unpoisoned");
    op("poison on", [&] { return zarena_set_poison(a, 1, 0xDEADBEEF); });
    alloc("alloc overflow again", 48 * kKiB);
    reset("reset again");
    op("step_begin", [&] { return zarena_step_begin(a); });
    check_model("after the script");
    // Recovery: the arena still serves the region and overflow, frees and resets.
    alloc("recovery alloc region", 4 * kKiB);
    alloc("recovery alloc overflow", 80 * kKiB);
    free_last("recovery free");
    free_last("recovery free");
    reset("recovery reset");
    alloc("recovery alloc overflow (left to destroy)", 96 * kKiB);
    check_model("after recovery");
    zarena* gone = a;
    a = nullptr;
    op("destroy", [&] { return zarena_destroy(gone); });
  }

  uint64_t calls(FaultSite s) const { return tally_->calls_at(s); }
  uint64_t ok(FaultSite s) const { return tally_->ok_at(s); }
  uint64_t expected_overflow_failures = 0;

 private:
  zarena_status op(const std::string& name, const std::function<zarena_status()>& fn) {
    OpRecord r;
    r.name = name;
    for (int i = 0; i < kFaultSiteCount; ++i) r.before[i] = tally_->calls[i].load();
    r.status = fn();
    if (r.status != ZARENA_OK) r.error = zarena_last_error();
    for (int i = 0; i < kFaultSiteCount; ++i) r.after[i] = tally_->calls[i].load();
    ops.push_back(r);
    return r.status;
  }

  Held* nth(size_t i) { return i < held_.size() ? &held_[i] : nullptr; }

  void stamp(Held& h) {
    h.fill = static_cast<uint8_t>(++serial_ * 37 + 1);
    std::memset(h.ptr, h.fill, h.size);
  }
  bool intact(const Held& h) const {
    const auto* p = static_cast<const uint8_t*>(h.ptr);
    for (uint64_t i = 0; i < h.size; ++i) {
      if (p[i] != h.fill) return false;
    }
    return true;
  }

  void take(const zarena_block& b) {
    Held h{b.ptr, b.size, b.epoch, (b.flags & ZARENA_BLOCK_OVERFLOW) != 0, false, 0, 0};
    stamp(h);
    held_.push_back(h);
  }

  void alloc(const std::string& name, uint64_t size) {
    zarena_block b;
    const zarena_status s = op(name, [&] { return zarena_alloc_ex(a, size, 0, &b); });
    if (s == ZARENA_OK) {
      take(b);
    } else {
      ++expected_overflow_failures;  // every request here that fails is an overflow one
    }
  }

  void alloc_batch() {
    const uint64_t sizes[2] = {4 * kKiB, 40 * kKiB};  // the second overflows
    zarena_block out[2];
    zarena_status st[2];
    op("alloc_batch", [&] { return zarena_alloc_batch(a, sizes, 2, 0, out, st); });
    for (int i = 0; i < 2; ++i) {
      if (st[i] == ZARENA_OK) {
        take(out[i]);
      } else {
        ++expected_overflow_failures;
      }
    }
  }

  void release(size_t i, const std::string& name, bool epoch_checked) {
    Held h = held_[i];
    if (!intact(h)) problems.push_back(name + ": block contents changed while it was live");
    const zarena_status s = op(name, [&] {
      return epoch_checked ? zarena_free_at(a, h.ptr, h.epoch) : zarena_free(a, h.ptr);
    });
    if (s == ZARENA_OK) held_.erase(held_.begin() + static_cast<long>(i));
  }
  void free_nth(const std::string& name, size_t i, bool epoch_checked) {
    if (i < held_.size()) release(i, name, epoch_checked);
  }
  void free_last(const std::string& name) {
    if (!held_.empty()) release(held_.size() - 1, name, false);
  }
  void free_first_overflow(const std::string& name, bool epoch_checked) {
    for (size_t i = 0; i < held_.size(); ++i) {
      if (held_[i].overflow) {
        release(i, name, epoch_checked);
        return;
      }
    }
  }

  void reset(const std::string& name) {
    if (op(name, [&] { return zarena_reset(a); }) != ZARENA_OK) return;
    std::vector<Held> kept;
    for (const Held& h : held_) {
      if (h.pins > 0 || h.persistent) kept.push_back(h);
    }
    held_ = kept;
  }

  void check_model(const std::string& when) {
    const zarena_stats s = zarena_test::stats_of(a);
    uint64_t region_bytes = 0, overflow_bytes = 0, pinned = 0;
    for (const Held& h : held_) {
      (h.overflow ? overflow_bytes : region_bytes) += h.size;
      if (h.pins > 0) ++pinned;
      if (!intact(h)) problems.push_back(when + ": a live block's contents changed");
    }
    auto expect = [&](const char* what, uint64_t got, uint64_t want) {
      if (got != want) {
        problems.push_back(when + ": stats " + what + " = " + std::to_string(got) + ", model " +
                           std::to_string(want));
      }
    };
    expect("live_allocs", s.live_allocs, held_.size());
    expect("used_bytes", s.used_bytes, region_bytes);
    expect("overflow_live_bytes", s.overflow_live_bytes, overflow_bytes);
    expect("pinned_blocks", s.pinned_blocks, pinned);
    expect("overflow_failures", s.overflow_failures, expected_overflow_failures);
    if (s.top_bytes > s.committed_bytes || s.committed_bytes > kCapacity + 16 * kKiB) {
      problems.push_back(when + ": committed_bytes " + std::to_string(s.committed_bytes) +
                         " does not cover the top " + std::to_string(s.top_bytes));
    }
    // The walk lists exactly the blocks the model holds.
    std::vector<zarena_live_block> walked;
    const zarena_status ws = zarena_for_each_live_block(
        a,
        [](void* u, const zarena_live_block* b) {
          static_cast<std::vector<zarena_live_block>*>(u)->push_back(*b);
          return 0;
        },
        &walked);
    if (ws != ZARENA_OK) problems.push_back(when + ": walk failed: " + zarena_last_error());
    size_t matched = 0;
    for (const zarena_live_block& b : walked) {
      for (const Held& h : held_) {
        if (h.ptr == b.ptr && h.size == b.size && h.epoch == b.epoch &&
            h.overflow == ((b.flags & ZARENA_LIVE_OVERFLOW) != 0)) {
          ++matched;
          break;
        }
      }
    }
    if (walked.size() != held_.size() || matched != held_.size()) {
      problems.push_back(when + ": the walk lists " + std::to_string(walked.size()) + " blocks, " +
                         std::to_string(matched) + " of the model's " +
                         std::to_string(held_.size()));
    }
    const std::string inv = a->arena->check_invariants();
    if (!inv.empty()) problems.push_back(when + ": region invariants: " + inv);
  }

  std::shared_ptr<FaultTally> tally_;
  std::vector<Held> held_;
  uint64_t serial_ = 0;
};

struct RunResult {
  std::vector<OpRecord> ops;
  std::vector<std::string> problems;
  std::vector<zarena_test::Record> records;
  std::shared_ptr<FaultTally> tally;
};

RunResult run_script(int site, uint64_t nth) {
  zarena_core::log_set_clock_for_testing(nullptr);  // a fresh rate limiter for every run
  RunResult out;
  out.tally = std::make_shared<FaultTally>();
  FaultPlan plan;
  if (site >= 0) plan.sites[site].fail_nth = nth;
  plan.tally = out.tally;
  zarena_test::LogCapture log(ZARENA_LOG_DEBUG);
  zarena_core::arm_faults_for_next_create(plan);
  Script s(out.tally);
  s.run();
  zarena_core::release_deferred();  // the safe point a program's next create would be
  zarena_core::disarm_faults_for_next_create();
  if (s.a != nullptr) {
    out.problems.push_back("the script stopped with the arena alive");
    zarena_destroy(s.a);
  }
  out.ops = s.ops;
  out.problems.insert(out.problems.end(), s.problems.begin(), s.problems.end());
  out.records = log.all();
  return out;
}

// The status a failing call reports for a fault at that site (when the call fails rather
// than absorbing it).
zarena_status failing_status(FaultSite site) {
  switch (site) {
    case FaultSite::kReserve:
      return ZARENA_E_OUT_OF_MEMORY;
    case FaultSite::kOverflowAlloc:
      return ZARENA_E_BACKEND;
    case FaultSite::kCaptureStatus:
      return ZARENA_E_CAPTURE_UNSAFE;  // a SYNC overflow that cannot check for a capture
    case FaultSite::kSetStream:
      return ZARENA_E_INVALID_ARGUMENT;
    default:
      return -1;  // commit, decommit, overflow_free, fill32: the call succeeds regardless
  }
}

TEST(FaultWalk, EveryNthCallOfEverySiteFailsCleanly) {
  const RunResult base = run_script(-1, 0);
  for (const std::string& p : base.problems) ADD_FAILURE() << "without faults: " << p;
  ASSERT_FALSE(base.ops.empty());
  ASSERT_EQ(base.ops.front().status, ZARENA_OK) << base.ops.front().error;
  EXPECT_EQ(base.ops.back().status, ZARENA_OK) << "destroy: " << base.ops.back().error;
  std::array<uint64_t, kFaultSiteCount> counts{};
  for (int i = 0; i < kFaultSiteCount; ++i) {
    counts[i] = base.tally->calls[i].load();
    // The script reaches every site.
    EXPECT_GT(counts[i], 0u) << zarena_core::fault_site_name(static_cast<FaultSite>(i));
  }
  EXPECT_EQ(base.tally->ok_at(FaultSite::kOverflowAlloc),
            base.tally->ok_at(FaultSite::kOverflowFree));

  uint64_t runs = 0, fired = 0;
  std::string per_site;
  for (int site = 0; site < kFaultSiteCount; ++site) {
    const auto fs = static_cast<FaultSite>(site);
    const std::string name = zarena_core::fault_site_name(fs);
    for (uint64_t n = 1; n <= counts[site]; ++n) {
      ++runs;
      const std::string label = name + " call #" + std::to_string(n);
      SCOPED_TRACE(label);
      const RunResult r = run_script(site, n);
      for (const std::string& p : r.problems) ADD_FAILURE() << p;
      const std::string needle = "injected fault: " + label;
      // Which operation met the fault (if the faulted run still reached that call).
      size_t at = r.ops.size();
      for (size_t i = 0; i < r.ops.size(); ++i) {
        if (r.ops[i].before[site] < n && n <= r.ops[i].after[site]) at = i;
      }
      if (at == r.ops.size()) {
        ADD_FAILURE() << "the faulted run made only " << r.tally->calls[site].load()
                      << " calls of that site";
        continue;
      }
      ++fired;
      const OpRecord& hit = r.ops[at];
      if (hit.status != ZARENA_OK) {
        EXPECT_EQ(hit.status, failing_status(fs)) << hit.name << ": " << hit.error;
        EXPECT_NE(hit.error.find(needle), std::string::npos) << hit.name << ": " << hit.error;
      } else {
        bool named = false;
        for (const auto& rec : r.records) {
          if (rec.message.find(needle) != std::string::npos) named = true;
        }
        // A commit may be absorbed by a smaller commit of exactly what was needed.
        const bool retried = fs == FaultSite::kCommit && hit.after[site] - hit.before[site] >= 2;
        EXPECT_TRUE(named || retried) << hit.name << " succeeded and no log record names the fault";
      }
      // Every other operation did what it did without the fault (ops line up one to one:
      // a fault changes which blocks exist, never the script's shape).
      if (fs == FaultSite::kReserve) {
        EXPECT_EQ(r.ops.size(), 1u);
        continue;
      }
      ASSERT_EQ(r.ops.size(), base.ops.size());
      for (size_t i = 0; i < r.ops.size(); ++i) {
        if (i == at) continue;
        EXPECT_EQ(r.ops[i].status, base.ops[i].status)
            << r.ops[i].name << " (op " << i << ", fault in op " << at << " " << hit.name
            << "): " << r.ops[i].error;
      }
      // No leak: every overflow block the host handed out went back by destroy's end.
      EXPECT_EQ(r.tally->ok_at(FaultSite::kOverflowAlloc), r.tally->ok_at(FaultSite::kOverflowFree))
          << "overflow blocks handed out vs given back";
    }
    per_site += " " + name + " " + std::to_string(counts[site]);
  }
  std::printf("[ info ] fault walk: %llu (site, N) runs, %llu met their fault; calls per site:%s\n",
              static_cast<unsigned long long>(runs), static_cast<unsigned long long>(fired),
              per_site.c_str());
  EXPECT_EQ(fired, runs);
}

// A fault at create leaves nothing behind and the next create works: the walk above covers
// reserve; this one pins the message a user sees.
TEST(FaultWalk, ReserveFailureNamesTheCallAndTheSize) {
  zarena_test::LogCapture quiet(ZARENA_LOG_OFF);
  FaultPlan plan;
  plan.sites[static_cast<int>(FaultSite::kReserve)].fail_nth = 1;
  zarena_core::arm_faults_for_next_create(plan);
  const zarena_config c = script_config();
  zarena* a = nullptr;
  EXPECT_EQ(zarena_create(&c, &a), ZARENA_E_OUT_OF_MEMORY);
  EXPECT_EQ(a, nullptr);
  const std::string e = zarena_last_error();
  EXPECT_NE(e.find("zarena_create: injected fault: reserve call #1 (65536 bytes, expandable)"),
            std::string::npos)
      << e;
}

}  // namespace
