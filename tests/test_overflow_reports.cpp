// How exhaustion is reported: the first-overflow record leaves the latency of a call that
// succeeds (the reporter thread builds and emits it) but is out before a failing call
// returns; nothing is lost at destroy or with zarena_log_flush; repeated overflow is
// summarised at a bounded rate with counts in stats; tags name who holds the memory; the
// per-step records and the capacity the workload needed.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "diagnosis/diagnostics.h"
#include "log/log.h"
#include "log/reporter.h"
#include "support.h"

using zarena_test::kKiB;
using zarena_test::kMiB;
using zarena_test::LogCapture;
using zarena_test::make_host_arena;
using zarena_test::Record;
using zarena_test::stats_of;

namespace {

// A raw callback (no flush on read): which thread delivered each first-overflow record.
// With `hold` set, it blocks until the test releases it (bounded): a call that built and
// emitted the record itself could then not return.
struct Delivery {
  std::mutex mu;
  std::vector<std::thread::id> threads;
  std::atomic<bool> hold{false};
  std::atomic<bool> released{false};
  std::atomic<int> count{0};
};

void delivery_cb(void* ud, const zarena_log_record* rec) {
  if (std::strcmp(rec->event, "arena.first_overflow") != 0) return;
  auto* d = static_cast<Delivery*>(ud);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (d->hold.load() && !d->released.load() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::lock_guard<std::mutex> lock(d->mu);
  d->threads.push_back(std::this_thread::get_id());
  d->count.fetch_add(1);
}

zarena* make_arena(uint64_t capacity, const char* name, int32_t policy, uint32_t flags = 0) {
  zarena_config cfg;
  zarena_config_init(&cfg);
  cfg.backend = ZARENA_BACKEND_HOST;
  cfg.capacity_bytes = capacity;
  cfg.overflow_policy = policy;
  cfg.overflow_limit_bytes = ZARENA_OVERFLOW_UNLIMITED;
  cfg.flags |= flags;
  cfg.name = name;
  zarena* a = nullptr;
  EXPECT_EQ(zarena_create(&cfg, &a), ZARENA_OK) << zarena_last_error();
  return a;
}

TEST(OffTheLatency, ASucceedingOverflowLeavesItsRecordToTheReporter) {
  Delivery d;
  d.hold = true;  // the record's delivery blocks until released
  ASSERT_EQ(zarena_set_log_callback(delivery_cb, &d, ZARENA_LOG_WARN), ZARENA_OK);
  zarena* a = make_arena(64 * kKiB, "async-record", ZARENA_OVERFLOW_SYNC);
  void* p = nullptr;
  ASSERT_EQ(zarena_alloc(a, 48 * kKiB, &p), ZARENA_OK);
  const uint64_t jobs_before = zarena_core::Reporter::jobs_run();
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(zarena_alloc(a, 32 * kKiB, &p), ZARENA_OK);  // overflows, and succeeds
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, std::chrono::seconds(5)) << "the call waited for its record";
  EXPECT_EQ(d.count.load(), 0) << "delivered before the test released the callback";
  d.released = true;
  zarena_log_flush();
  EXPECT_EQ(d.count.load(), 1);
  {
    std::lock_guard<std::mutex> lock(d.mu);
    ASSERT_EQ(d.threads.size(), 1u);
    EXPECT_NE(d.threads[0], std::this_thread::get_id());
  }
  EXPECT_EQ(zarena_core::Reporter::jobs_run(), jobs_before + 1);
  zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_INFO);
  zarena_destroy(a);
}

TEST(OffTheLatency, AFailingOverflowEmitsItsRecordBeforeReturning) {
  Delivery d;
  ASSERT_EQ(zarena_set_log_callback(delivery_cb, &d, ZARENA_LOG_WARN), ZARENA_OK);
  zarena* a = make_arena(64 * kKiB, "sync-record", ZARENA_OVERFLOW_REFUSE);
  void* p = nullptr;
  ASSERT_EQ(zarena_alloc(a, 48 * kKiB, &p), ZARENA_OK);
  EXPECT_EQ(zarena_alloc(a, 32 * kKiB, &p), ZARENA_E_OUT_OF_MEMORY);
  EXPECT_EQ(d.count.load(), 1) << "not delivered before the failing call returned";
  {
    std::lock_guard<std::mutex> lock(d.mu);
    ASSERT_EQ(d.threads.size(), 1u);
    EXPECT_EQ(d.threads[0], std::this_thread::get_id());
  }
  zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_INFO);
  zarena_destroy(a);
}

TEST(OffTheLatency, AFailingCallAfterASucceedingOneKeepsTheOrder) {
  // SYNC with a cap: the first overflow succeeds (record queued), a later one fails at the
  // cap in the next epoch; the failing call waits for the queued record, then emits its own.
  LogCapture cap;
  zarena_config cfg;
  zarena_config_init(&cfg);
  cfg.backend = ZARENA_BACKEND_HOST;
  cfg.capacity_bytes = 64 * kKiB;
  cfg.overflow_policy = ZARENA_OVERFLOW_SYNC;
  cfg.overflow_limit_bytes = 64 * kKiB;
  cfg.name = "order";
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&cfg, &a), ZARENA_OK);
  void* p = nullptr;
  ASSERT_EQ(zarena_alloc(a, 48 * kKiB, &p), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(a, 32 * kKiB, &p), ZARENA_OK);  // spills (epoch 0)
  ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(a, 48 * kKiB, &p), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(a, 32 * kKiB, &p), ZARENA_OK);               // spills (epoch 1)
  EXPECT_EQ(zarena_alloc(a, 48 * kKiB, &p), ZARENA_E_OUT_OF_MEMORY);  // the cap
  const auto recs = cap.of("arena.first_overflow");
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].u("epoch"), 0u);
  EXPECT_EQ(recs[1].u("epoch"), 1u);
  zarena_destroy(a);
}

TEST(OffTheLatency, DestroyDeliversTheArenasRecords) {
  Delivery d;
  ASSERT_EQ(zarena_set_log_callback(delivery_cb, &d, ZARENA_LOG_WARN), ZARENA_OK);
  for (int i = 0; i < 20; ++i) {
    zarena* a = make_arena(64 * kKiB, "destroy-flush", ZARENA_OVERFLOW_SYNC);
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(a, 48 * kKiB, &p), ZARENA_OK);
    ASSERT_EQ(zarena_alloc(a, 32 * kKiB, &p), ZARENA_OK);
    ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
    EXPECT_EQ(d.count.load(), i + 1) << "a record outlived its arena";
  }
  zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_INFO);
}

// --- repeated overflow ------------------------------------------------------------------

std::atomic<uint64_t> g_now{1'000'000'000};
uint64_t fake_now() { return g_now.load(); }

class Summary : public ::testing::Test {
 protected:
  void SetUp() override { zarena_core::diag_set_clock_for_testing(fake_now); }
  void TearDown() override { zarena_core::diag_set_clock_for_testing(nullptr); }
};

// Fills the arena and overflows once per epoch, `epochs` times (REFUSE: every overflow fails).
void overflow_every_epoch(zarena* a, int epochs, int advance_at = -1) {
  void* p = nullptr;
  for (int e = 0; e < epochs; ++e) {
    if (e == advance_at) g_now.fetch_add(61'000'000'000ull);
    while (zarena_alloc(a, 4 * kKiB, &p) == ZARENA_OK) {
    }
    ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  }
}

TEST_F(Summary, TheFirstFewEpochsOneByOneThenASummary) {
  LogCapture cap;
  zarena* a = make_host_arena(64 * kKiB, "repeat");
  overflow_every_epoch(a, 200);
  EXPECT_EQ(cap.of("arena.first_overflow").size(), static_cast<size_t>(ZARENA_OVERFLOW_RECORDS));
  EXPECT_TRUE(cap.of("arena.overflow_summary").empty()) << "at most one a minute";
  zarena_stats s = stats_of(a);
  EXPECT_EQ(s.overflow_epochs, 200u);
  EXPECT_EQ(s.overflow_records, static_cast<uint64_t>(ZARENA_OVERFLOW_RECORDS));
  EXPECT_EQ(s.overflow_summaries, 0u);
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
  const auto sum = cap.of("arena.overflow_summary");
  ASSERT_EQ(sum.size(), 1u) << "the epochs not reported are summarised at destroy";
  EXPECT_EQ(sum[0].u("overflow_epochs"), 200u);
  EXPECT_EQ(sum[0].u("unreported_epochs"), 200u - ZARENA_OVERFLOW_RECORDS);
  EXPECT_EQ(sum[0].str("verdict"), "working_set_full");
  EXPECT_NE(sum[0].message.find("overflowed in 200 of 200 epochs"), std::string::npos)
      << sum[0].message;
  const auto destroy = cap.of("arena.destroy");
  ASSERT_EQ(destroy.size(), 1u);
  EXPECT_EQ(destroy[0].u("overflow_epochs"), 200u);
}

// A SYNC overflow that succeeds captures the facts only of the epochs it reports one by
// one: the summary at destroy still counts every epoch ("8 of 3 epochs" was printed).
TEST_F(Summary, SucceedingOverflowsCountEveryEpoch) {
  LogCapture cap;
  zarena_config c;
  zarena_config_init(&c);
  c.backend = ZARENA_BACKEND_HOST;
  c.capacity_bytes = 64 * kKiB;
  c.overflow_policy = ZARENA_OVERFLOW_SYNC;
  c.overflow_limit_bytes = ZARENA_OVERFLOW_UNLIMITED;
  c.name = "repeat-sync";
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  for (int e = 0; e < 8; ++e) {
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(a, 128 * kKiB, &p), ZARENA_OK) << zarena_last_error();
    ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  }
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
  const auto sum = cap.of("arena.overflow_summary");
  ASSERT_EQ(sum.size(), 1u);
  EXPECT_EQ(sum[0].u("overflow_epochs"), 8u);
  EXPECT_EQ(sum[0].u("epochs"), 8u);
  EXPECT_NE(sum[0].message.find("overflowed in 8 of 8 epochs"), std::string::npos)
      << sum[0].message;
}

TEST_F(Summary, AtABoundedRate) {
  LogCapture cap;
  zarena* a = make_host_arena(64 * kKiB, "repeat-rate");
  overflow_every_epoch(a, 100, 50);  // a minute passes before epoch 50
  const auto sum = cap.of("arena.overflow_summary");
  ASSERT_EQ(sum.size(), 1u);
  EXPECT_EQ(sum[0].u("overflow_epochs"), 51u);
  EXPECT_EQ(sum[0].u("unreported_epochs"), 51u - ZARENA_OVERFLOW_RECORDS);
  EXPECT_EQ(sum[0].u("epoch"), 50u);
  EXPECT_EQ(stats_of(a).overflow_summaries, 1u);
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
  const auto all = cap.of("arena.overflow_summary");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].u("unreported_epochs"), 49u);
  EXPECT_EQ(all[1].u("overflow_epochs"), 100u);
}

// --- tags -------------------------------------------------------------------------------

TEST(TopTags, TheOverflowLineNamesWhoHoldsTheMemory) {
  LogCapture cap;
  uint32_t grad = 0, kv = 0, old = 0;
  ASSERT_EQ(zarena_tag_register("matmul.grad", &grad), ZARENA_OK);
  ASSERT_EQ(zarena_tag_register("attn.kv", &kv), ZARENA_OK);
  ASSERT_EQ(zarena_tag_register("last.epoch", &old), ZARENA_OK);
  zarena* a = make_host_arena(1 * kMiB, "tagged");
  zarena_block b;
  ASSERT_EQ(zarena_alloc_ex(a, 128 * kKiB, old, &b), ZARENA_OK);
  ASSERT_EQ(zarena_reset(a), ZARENA_OK);  // not this epoch's: not counted
  for (int i = 0; i < 3; ++i) ASSERT_EQ(zarena_alloc_ex(a, 192 * kKiB, grad, &b), ZARENA_OK);
  ASSERT_EQ(zarena_alloc_ex(a, 64 * kKiB, kv, &b), ZARENA_OK);
  ASSERT_EQ(zarena_alloc_ex(a, 32 * kKiB, 0, &b), ZARENA_OK);  // untagged: not named
  EXPECT_EQ(zarena_alloc_ex(a, 512 * kKiB, kv, &b), ZARENA_E_OUT_OF_MEMORY);
  const auto over = cap.of("arena.first_overflow");
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].str("top_tags"), "matmul.grad 576.0 KiB, attn.kv 64.0 KiB");
  EXPECT_NE(over[0].message.find("top tags: matmul.grad 576.0 KiB"), std::string::npos);
  zarena_destroy(a);
  // On the human line.
  zarena_core::ExhaustionFacts f;
  f.path = "refused";
  f.capacity_bytes = 1 * kMiB;
  f.requested_bytes = f.aligned_bytes = 512 * kKiB;
  const std::string line = zarena_core::log_format_line(
      zarena_core::first_overflow_record(f, "tagged", "matmul.grad 38.0 GiB"));
  EXPECT_NE(line.find("top_tags=\"matmul.grad 38.0 GiB\""), std::string::npos) << line;
}

// A failed allocation's error text, its record and its verdict are built from one
// snapshot: while other threads allocate and free (moving the top), the top the message
// names is the top the record names.
TEST(OneSnapshot, TheErrorTextAndTheRecordShowTheSameInstant) {
  LogCapture cap(ZARENA_LOG_WARN);
  for (int round = 0; round < 20; ++round) {
    zarena* a = make_host_arena(8 * kMiB, "one_instant");
    std::atomic<bool> stop{false};
    std::vector<std::thread> churn;
    for (int t = 0; t < 3; ++t) {
      churn.emplace_back([&, t] {
        void* held[4] = {};
        for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
          void*& p = held[i % 4];
          if (p != nullptr) {
            EXPECT_EQ(zarena_free(a, p), ZARENA_OK);
          }
          p = nullptr;
          EXPECT_EQ(zarena_alloc(a, (1 + (i + t) % 8) * 16 * kKiB, &p), ZARENA_OK);
        }
        for (void* p : held) {
          if (p != nullptr) {
            EXPECT_EQ(zarena_free(a, p), ZARENA_OK);
          }
        }
      });
    }
    cap.clear();
    void* p = nullptr;
    ASSERT_EQ(zarena_alloc(a, 16 * kMiB, &p), ZARENA_E_OUT_OF_MEMORY);
    const std::string text = zarena_last_error();
    stop.store(true);
    for (auto& t : churn) t.join();
    const auto over = cap.of("arena.first_overflow");
    ASSERT_EQ(over.size(), 1u);
    const size_t at = text.find("(top ");
    ASSERT_NE(at, std::string::npos) << text;
    EXPECT_EQ(std::stoull(text.substr(at + 5)), over[0].u("offset_bytes")) << text;
    EXPECT_NE(text.find("verdict=" + over[0].str("verdict") + ";"), std::string::npos) << text;
    zarena_destroy(a);
  }
}

// --- per-step view ----------------------------------------------------------------------

TEST(StepRecords, OneAtEveryResetAndTheNeededCapacityAtDestroy) {
  LogCapture cap;
  zarena* a = make_arena(256 * kKiB, "steps", ZARENA_OVERFLOW_SYNC, ZARENA_FLAG_STEP_RECORDS);
  void* p = nullptr;
  void* h = nullptr;
  void* k = nullptr;
  for (int e = 0; e < 3; ++e) {
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    ASSERT_EQ(zarena_alloc(a, 16 * kKiB, &h), ZARENA_OK);
    ASSERT_EQ(zarena_alloc(a, 16 * kKiB, &k), ZARENA_OK);
    ASSERT_EQ(zarena_free(a, h), ZARENA_OK);  // a hole under k
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(zarena_alloc(a, 16 * kKiB, &p), ZARENA_OK);  // reuses the hole
      ASSERT_EQ(zarena_free(a, p), ZARENA_OK);
    }
    ASSERT_EQ(zarena_alloc(a, 32 * kKiB, &p), ZARENA_OK);  // top 64 KiB
    if (e == 1) {
      ASSERT_EQ(zarena_alloc(a, 200 * kKiB, &p), ZARENA_OK);  // does not fit: spills
      ASSERT_EQ(zarena_alloc(a, 100 * kKiB, &p), ZARENA_OK);  // fits: top 164 KiB
    }
    ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  }
  const auto steps = cap.of("arena.step");
  ASSERT_EQ(steps.size(), 3u);
  for (uint64_t e = 0; e < 3; ++e) {
    const Record& r = steps[e];
    EXPECT_EQ(r.level, ZARENA_LOG_INFO);
    EXPECT_EQ(r.u("epoch"), e);
    EXPECT_EQ(r.u("steps"), 1u);
    EXPECT_EQ(r.u("allocs"), e == 1 ? 8u : 6u);
    EXPECT_EQ(r.u("reuses"), 3u);
    EXPECT_EQ(r.u("overflow_allocs"), e == 1 ? 1u : 0u) << e;
  }
  EXPECT_EQ(steps[0].u("peak_bytes"), 64 * kKiB);
  EXPECT_EQ(steps[1].u("peak_bytes"), 164 * kKiB);
  EXPECT_EQ(steps[1].u("overflow_peak_bytes"), 200 * kKiB);
  EXPECT_EQ(steps[1].u("needed_bytes"), 364 * kKiB);
  EXPECT_EQ(steps[2].u("overflow_peak_bytes"), 0u);
  EXPECT_EQ(stats_of(a).needed_bytes, 364 * kKiB);
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
  const auto destroy = cap.of("arena.destroy");
  ASSERT_EQ(destroy.size(), 1u);
  EXPECT_EQ(destroy[0].u("needed_bytes"), 364 * kKiB);
  EXPECT_NE(destroy[0].message.find("the workload needed 364.0 KiB"), std::string::npos)
      << destroy[0].message;
}

TEST(StepRecords, OffByDefault) {
  LogCapture cap;
  zarena* a = make_host_arena(64 * kKiB, "no-steps");
  for (int e = 0; e < 3; ++e) ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  EXPECT_TRUE(cap.of("arena.step").empty());
  zarena_destroy(a);
}

}  // namespace
