// The host backend through the Backend interface, and the fault-injecting decorator
// around it: expandable regions (reserve, commit, decommit, recommit, the refusals),
// overflow alignment on both routes, sizes no allocator could serve, fill32, release, and
// every fault site failing exactly the armed call.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_faults.h"
#include "backend/backend_faults_testing.h"
#include "support.h"
#include "zarena/zarena.h"

namespace {

using zarena_core::Backend;
using zarena_core::BackendOptions;
using zarena_core::FaultInjectingBackend;
using zarena_core::FaultPlan;
using zarena_core::FaultSite;
using zarena_core::OverflowBlock;
using zarena_core::OverflowRoute;
using zarena_core::RegionInfo;
using zarena_core::RegionRequest;
using zarena_core::Result;
using zarena_core::Status;

using zarena_test::kMiB;
constexpr uint64_t kGiB = 1024 * kMiB;

std::unique_ptr<Backend> host() {
  std::unique_ptr<Backend> b;
  const Result r = zarena_core::make_host_backend(BackendOptions{}, &b);
  EXPECT_TRUE(r.is_ok()) << r.message;
  return b;
}

uint64_t page() { return static_cast<uint64_t>(sysconf(_SC_PAGESIZE)); }

RegionRequest request(uint64_t bytes, uint64_t alignment, bool expandable) {
  RegionRequest req;
  req.bytes = bytes;
  req.alignment = alignment;
  req.expandable = expandable;
  return req;
}

// Writes a pattern that depends on the address, so a chunk moved or zeroed is noticed.
void write_pattern(char* p, uint64_t bytes, uint8_t seed) {
  for (uint64_t i = 0; i < bytes; i += 512) p[i] = static_cast<char>(seed + i / 512);
}
bool pattern_intact(const char* p, uint64_t bytes, uint8_t seed) {
  for (uint64_t i = 0; i < bytes; i += 512) {
    if (p[i] != static_cast<char>(seed + i / 512)) return false;
  }
  return true;
}

// --- expandable regions -------------------------------------------------------------------

TEST(HostBackend, ExpandableGrowsWithEarlierDataIntactAndRecommitsZeroed) {
  auto b = host();
  RegionInfo info;
  ASSERT_TRUE(b->reserve_region(request(64 * kMiB, 4096, true), &info).is_ok());
  ASSERT_NE(info.base, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(info.base) % 4096, 0u);
  EXPECT_EQ(info.bytes, 64 * kMiB);
  EXPECT_EQ(info.commit_granularity, page());
  EXPECT_FALSE(info.managed);
  char* base = static_cast<char*>(info.base);
  // Grow one chunk at a time; everything written before each growth must survive it.
  constexpr uint64_t kChunk = 4 * kMiB;
  for (uint64_t i = 0; i < 16; ++i) {
    const Result r = b->commit(i * kChunk, kChunk);
    ASSERT_TRUE(r.is_ok()) << "chunk " << i << ": " << r.message;
    write_pattern(base + i * kChunk, kChunk, static_cast<uint8_t>(i));
    for (uint64_t j = 0; j <= i; ++j) {
      ASSERT_TRUE(pattern_intact(base + j * kChunk, kChunk, static_cast<uint8_t>(j)))
          << "chunk " << j << " changed after committing chunk " << i;
    }
  }
  // Give back the top two chunks in one decommit (a run of whole ranges), recommit one.
  ASSERT_TRUE(b->decommit(14 * kChunk, 2 * kChunk).is_ok());
  ASSERT_TRUE(b->commit(14 * kChunk, kChunk).is_ok());
  const char* again = base + 14 * kChunk;
  for (uint64_t i = 0; i < kChunk; i += 4096) ASSERT_EQ(again[i], 0) << "contents must be lost";
  for (uint64_t j = 0; j < 14; ++j) {
    EXPECT_TRUE(pattern_intact(base + j * kChunk, kChunk, static_cast<uint8_t>(j))) << j;
  }
  EXPECT_TRUE(b->release_region().is_ok());
}

TEST(HostBackendDeathTest, UncommittedAndDecommittedMemoryFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto b = host();
  RegionInfo info;
  ASSERT_TRUE(b->reserve_region(request(8 * kMiB, 256, true), &info).is_ok());
  volatile char* base = static_cast<char*>(info.base);
  ASSERT_TRUE(b->commit(0, kMiB).is_ok());
  base[kMiB - 1] = 1;  // committed: fine
  EXPECT_DEATH(base[kMiB] = 1, "") << "past the committed end must fault";
  ASSERT_TRUE(b->decommit(0, kMiB).is_ok());
  EXPECT_DEATH(base[0] = 1, "") << "a decommitted range must fault";
}

TEST(HostBackend, CommitAndDecommitRefusalsChangeNothing) {
  auto b = host();
  RegionInfo info;
  const uint64_t g = page();
  ASSERT_TRUE(b->reserve_region(request(16 * g + 100, 256, true), &info).is_ok());
  const uint64_t limit = 17 * g;  // 16 pages + 100 bytes, rounded up to the granularity
  char* base = static_cast<char*>(info.base);
  auto refused = [&](const Result& r, const char* what) {
    EXPECT_EQ(r.status, Status::kInvalidArgument) << what << ": " << r.message;
    EXPECT_FALSE(r.message.empty()) << what;
  };
  refused(b->commit(limit, g), "at the end");
  refused(b->commit(limit - g, 2 * g), "past the end");
  refused(b->commit(~0ull - g + 1, g), "offset near 2^64");
  refused(b->commit(0, ~0ull - g + 1), "size near 2^64");
  refused(b->commit(1, g), "offset not granular");
  refused(b->commit(0, g + 1), "size not granular");
  refused(b->commit(0, 0), "empty");
  ASSERT_TRUE(b->commit(limit - g, g).is_ok()) << "the last range ends past bytes";
  ASSERT_TRUE(b->commit(2 * g, 4 * g).is_ok());
  base[2 * g] = 7;
  refused(b->commit(g, 2 * g), "overlaps the start");
  refused(b->commit(5 * g, 2 * g), "overlaps the end");
  refused(b->commit(3 * g, g), "inside");
  refused(b->decommit(3 * g, g), "splits a range");
  refused(b->decommit(2 * g, 2 * g), "splits a range at its start");
  refused(b->decommit(2 * g, 5 * g), "reaches into uncommitted memory");
  refused(b->decommit(8 * g, g), "nothing committed there");
  refused(b->decommit(2 * g, 0), "empty");
  EXPECT_EQ(base[2 * g], 7) << "a refusal must not touch committed memory";
  base[6 * g - 1] = 8;  // still writable to the end of the range
  ASSERT_TRUE(b->decommit(2 * g, 4 * g).is_ok());
  ASSERT_TRUE(b->commit(2 * g, 4 * g).is_ok()) << "the addresses stay reserved";
}

TEST(HostBackend, NonExpandableRegionIsWholeAndRefusesCommit) {
  auto b = host();
  RegionInfo info;
  ASSERT_TRUE(b->reserve_region(request(4 * kMiB, 64 * kMiB, false), &info).is_ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(info.base) % (64 * kMiB), 0u);
  EXPECT_EQ(info.commit_granularity, 0u);
  char* base = static_cast<char*>(info.base);
  base[0] = 1;
  base[4 * kMiB - 1] = 2;
  EXPECT_EQ(b->commit(0, page()).status, Status::kUnsupported);
  EXPECT_EQ(b->decommit(0, page()).status, Status::kUnsupported);
}

TEST(HostBackend, ExpandableBaseHonoursLargeAlignment) {
  for (uint64_t align : {uint64_t{256}, 2 * kMiB, 64 * kMiB, kGiB}) {
    auto b = host();
    RegionInfo info;
    ASSERT_TRUE(b->reserve_region(request(align, align, true), &info).is_ok()) << align;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(info.base) % align, 0u) << align;
  }
}

TEST(HostBackend, ReserveRefusals) {
  auto b = host();
  RegionInfo info;
  info.base = &info;  // outputs are written only on success
  EXPECT_EQ(b->reserve_region(request(0, 256, false), &info).status, Status::kInvalidArgument);
  EXPECT_EQ(b->reserve_region(request(kMiB, 3, false), &info).status, Status::kInvalidArgument);
  EXPECT_EQ(b->reserve_region(request(~0ull, 256, false), &info).status, Status::kOutOfMemory);
  EXPECT_EQ(b->reserve_region(request(kMiB, 1ull << 63, true), &info).status, Status::kOutOfMemory);
  EXPECT_EQ(info.base, &info);
  ASSERT_TRUE(b->reserve_region(request(kMiB, 256, false), &info).is_ok());
  EXPECT_EQ(b->reserve_region(request(kMiB, 256, false), &info).status, Status::kInternal);
}

TEST(HostBackend, ReleaseIsIdempotentAndAllowsAFreshReserve) {
  auto b = host();
  EXPECT_TRUE(b->release_region().is_ok()) << "nothing reserved yet";
  RegionInfo info;
  ASSERT_TRUE(b->reserve_region(request(8 * kMiB, 256, true), &info).is_ok());
  ASSERT_TRUE(b->commit(0, 2 * kMiB).is_ok());
  EXPECT_TRUE(b->release_region().is_ok());
  EXPECT_TRUE(b->release_region().is_ok());
  EXPECT_EQ(b->commit(0, page()).status, Status::kUnsupported) << "nothing to commit into";
  ASSERT_TRUE(b->reserve_region(request(8 * kMiB, 256, true), &info).is_ok());
  ASSERT_TRUE(b->commit(0, 2 * kMiB).is_ok()) << "the old commit map is gone";
}

// --- overflow blocks ------------------------------------------------------------------------

TEST(HostBackend, OverflowBlocksHonourEveryAlignmentOnBothRoutes) {
  auto b = host();
  for (OverflowRoute route : {OverflowRoute::kSync, OverflowRoute::kAsync}) {
    for (uint64_t align = 8; align <= kGiB; align <<= 1) {
      // A few sizes, including ones that are not a multiple of the alignment, several
      // blocks held at once so that the allocator cannot hand the same lucky address back.
      std::vector<OverflowBlock> held;
      for (uint64_t size : {uint64_t{1}, uint64_t{4097}, kMiB + 3}) {
        for (int i = 0; i < (align >= 64 * kMiB ? 1 : 5); ++i) {
          OverflowBlock blk;
          const Result r = b->overflow_alloc(size, align, route, &blk);
          ASSERT_TRUE(r.is_ok()) << size << " aligned to " << align << ": " << r.message;
          EXPECT_EQ(reinterpret_cast<uintptr_t>(blk.ptr) % align, 0u)
              << size << " aligned to " << align;
          EXPECT_EQ(blk.bytes, size);
          EXPECT_GE(blk.reserved_bytes, size);
          EXPECT_EQ(blk.route, route);
          ASSERT_NE(blk.base, nullptr);
          static_cast<char*>(blk.ptr)[0] = 1;
          static_cast<char*>(blk.ptr)[size - 1] = 2;
          held.push_back(blk);
        }
      }
      for (const auto& blk : held) EXPECT_TRUE(b->overflow_free(blk).is_ok());
    }
  }
}

TEST(HostBackend, OverflowSizesNoAllocatorCouldServeFailCleanly) {
  auto b = host();
  for (uint64_t size : {~0ull, ~0ull - 255, ~0ull - kGiB, 1ull << 63, (1ull << 56) + 1}) {
    for (OverflowRoute route : {OverflowRoute::kSync, OverflowRoute::kAsync}) {
      OverflowBlock blk;
      blk.ptr = &blk;  // outputs are written only on success
      const Result r = b->overflow_alloc(size, 256, route, &blk);
      EXPECT_EQ(r.status, Status::kOutOfMemory) << size << ": " << r.message;
      EXPECT_NE(r.message.find(std::to_string(size)), std::string::npos) << r.message;
      EXPECT_EQ(blk.ptr, &blk);
    }
  }
  OverflowBlock blk;
  EXPECT_EQ(b->overflow_alloc(kMiB, 1ull << 63, OverflowRoute::kSync, &blk).status,
            Status::kOutOfMemory);
  EXPECT_EQ(b->overflow_alloc(0, 256, OverflowRoute::kSync, &blk).status, Status::kInvalidArgument);
  EXPECT_EQ(b->overflow_alloc(kMiB, 384, OverflowRoute::kSync, &blk).status,
            Status::kInvalidArgument);
}

// --- fill, streams, capture -----------------------------------------------------------------

TEST(HostBackend, Fill32WritesTheWordAndRefusesMisalignedRanges) {
  auto b = host();
  std::vector<uint32_t> buf(1024, 0);
  ASSERT_TRUE(b->fill32(buf.data() + 1, 1000 * 4, 0xA5A5A5A5u).is_ok());
  EXPECT_EQ(buf[0], 0u);
  for (int i = 1; i <= 1000; ++i) ASSERT_EQ(buf[i], 0xA5A5A5A5u) << i;
  EXPECT_EQ(buf[1001], 0u);
  ASSERT_TRUE(b->fill32(buf.data(), 8, 0xDEADBEEFu).is_ok());
  EXPECT_EQ(buf[0], 0xDEADBEEFu);
  EXPECT_EQ(buf[1], 0xDEADBEEFu);
  char* bytes = reinterpret_cast<char*>(buf.data());
  EXPECT_EQ(b->fill32(bytes + 2, 8, 0).status, Status::kInvalidArgument);
  EXPECT_EQ(b->fill32(buf.data(), 6, 0).status, Status::kInvalidArgument);
  EXPECT_EQ(buf[0], 0xDEADBEEFu) << "a refused fill writes nothing";
}

TEST(HostBackend, NeverCapturingAndKeepsTheStreamItIsGiven) {
  auto b = host();
  bool capturing = true;
  ASSERT_TRUE(b->capture_status(&capturing).is_ok());
  EXPECT_FALSE(capturing);
  EXPECT_EQ(b->stream(), nullptr);
  int token = 0;
  ASSERT_TRUE(b->set_stream(&token).is_ok());
  EXPECT_EQ(b->stream(), &token);
  EXPECT_EQ(b->kind(), ZARENA_BACKEND_HOST);
  EXPECT_TRUE(b->supports_async());
  EXPECT_GT(b->memory_info().total_bytes, 0u);
}

// --- the fault-injecting decorator ----------------------------------------------------------

// One call of each kind that succeeds on the host backend and can be repeated: the
// inverse operation goes to the inner backend, so only the site under test is counted.
struct SiteCall {
  FaultSite site;
  Status expected;
  std::function<Result(FaultInjectingBackend&)> call;
};

std::vector<SiteCall> site_calls() {
  const uint64_t g = page();
  return {
      {FaultSite::kReserve, Status::kOutOfMemory,
       [](FaultInjectingBackend& f) {
         RegionInfo info;
         Result r = f.reserve_region(request(kMiB, 256, true), &info);
         if (r.is_ok()) (void)f.release_region();
         return r;
       }},
      {FaultSite::kCommit, Status::kOutOfMemory,
       [g](FaultInjectingBackend& f) {
         Result r = f.commit(0, g);
         if (r.is_ok()) (void)f.inner().decommit(0, g);
         return r;
       }},
      {FaultSite::kDecommit, Status::kBackend,
       [g](FaultInjectingBackend& f) {
         if (!f.inner().commit(0, g).is_ok()) return Result::fail(Status::kInternal, "setup");
         Result r = f.decommit(0, g);
         if (!r.is_ok()) (void)f.inner().decommit(0, g);
         return r;
       }},
      {FaultSite::kOverflowAlloc, Status::kBackend,
       [](FaultInjectingBackend& f) {
         OverflowBlock blk;
         Result r = f.overflow_alloc(4096, 4096, OverflowRoute::kSync, &blk);
         if (r.is_ok()) (void)f.inner().overflow_free(blk);
         return r;
       }},
      {FaultSite::kOverflowFree, Status::kBackend,
       [](FaultInjectingBackend& f) {
         OverflowBlock blk;
         if (!f.inner().overflow_alloc(4096, 256, OverflowRoute::kAsync, &blk).is_ok()) {
           return Result::fail(Status::kInternal, "setup");
         }
         Result r = f.overflow_free(blk);
         if (!r.is_ok()) (void)f.inner().overflow_free(blk);  // the injected one freed nothing
         return r;
       }},
      {FaultSite::kFill32, Status::kBackend,
       [](FaultInjectingBackend& f) {
         uint32_t words[4] = {};
         return f.fill32(words, sizeof words, 1);
       }},
      {FaultSite::kCaptureStatus, Status::kBackend,
       [](FaultInjectingBackend& f) {
         bool capturing = false;
         return f.capture_status(&capturing);
       }},
      {FaultSite::kSetStream, Status::kInvalidArgument,
       [](FaultInjectingBackend& f) { return f.set_stream(nullptr); }},
  };
}

TEST(FaultInjectingBackend, FailsExactlyTheNthCallOfEveryKind) {
  for (const SiteCall& sc : site_calls()) {
    const std::string name = zarena_core::fault_site_name(sc.site);
    FaultInjectingBackend f(host());
    RegionInfo info;
    if (sc.site != FaultSite::kReserve) {
      ASSERT_TRUE(f.inner().reserve_region(request(8 * kMiB, 256, true), &info).is_ok());
    }
    EXPECT_EQ(zarena_core::default_fault_status(sc.site), sc.expected) << name;
    ASSERT_TRUE(sc.call(f).is_ok()) << name << ": one call before arming";
    f.arm(sc.site, 3);
    for (int i = 1; i <= 5; ++i) {
      const Result r = sc.call(f);
      if (i == 3) {
        EXPECT_EQ(r.status, sc.expected) << name;
        EXPECT_EQ(r.message.rfind("injected fault: " + name + " call #3", 0), 0u) << r.message;
      } else {
        EXPECT_TRUE(r.is_ok()) << name << " call " << i << ": " << r.message;
      }
    }
    EXPECT_EQ(f.calls(sc.site), 6u) << name;
    for (const SiteCall& other : site_calls()) {
      if (other.site != sc.site) {
        EXPECT_EQ(f.calls(other.site), 0u) << name;
      }
    }
  }
}

TEST(FaultInjectingBackend, ReArmingRestartsTheCountAndZeroDisarms) {
  FaultInjectingBackend f(host());
  const SiteCall sc = site_calls()[3];  // overflow_alloc
  f.arm(sc.site, 2);
  ASSERT_TRUE(sc.call(f).is_ok());
  f.arm(sc.site, 0);  // disarmed before the armed call came
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(sc.call(f).is_ok()) << i;
  f.arm(sc.site, 1, Status::kOutOfMemory);
  const Result r = sc.call(f);
  EXPECT_EQ(r.status, Status::kOutOfMemory) << "an explicit status replaces the default";
  EXPECT_EQ(r.message.rfind("injected fault: overflow_alloc call #1", 0), 0u) << r.message;
  EXPECT_TRUE(sc.call(f).is_ok()) << "one-shot";
}

TEST(FaultInjectingBackend, ArmedCallFailsOnceAcrossThreads) {
  FaultInjectingBackend f(host());
  constexpr int kThreads = 8, kCalls = 500;
  f.arm(FaultSite::kOverflowAlloc, 1234);
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        OverflowBlock blk;
        if (f.overflow_alloc(256, 256, OverflowRoute::kAsync, &blk).is_ok()) {
          (void)f.overflow_free(blk);
        } else {
          ++failures;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 1);
  EXPECT_EQ(f.calls(FaultSite::kOverflowAlloc), uint64_t{kThreads * kCalls});
  EXPECT_EQ(f.calls(FaultSite::kOverflowFree), uint64_t{kThreads * kCalls - 1});
}

TEST(FaultInjectingBackend, DelaysTheChosenOverflowAllocation) {
  FaultInjectingBackend f(host());
  constexpr auto kDelay = std::chrono::milliseconds(60);
  f.delay_overflow_alloc(2, std::chrono::nanoseconds(kDelay).count());
  std::vector<std::chrono::nanoseconds> took;
  for (int i = 0; i < 3; ++i) {
    OverflowBlock blk;
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(f.overflow_alloc(4096, 256, OverflowRoute::kSync, &blk).is_ok());
    took.push_back(std::chrono::steady_clock::now() - t0);
    (void)f.overflow_free(blk);
  }
  EXPECT_LT(took[0], kDelay);
  EXPECT_GE(took[1], kDelay);
  EXPECT_LT(took[2], kDelay);
  f.delay_overflow_alloc(0, std::chrono::nanoseconds(kDelay).count());  // 0 = every one
  for (int i = 0; i < 2; ++i) {
    OverflowBlock blk;
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(f.overflow_alloc(4096, 256, OverflowRoute::kSync, &blk).is_ok());
    EXPECT_GE(std::chrono::steady_clock::now() - t0, kDelay) << i;
    (void)f.overflow_free(blk);
  }
}

TEST(FaultInjectingBackend, PassesResultsAndFactsThrough) {
  auto f = std::make_unique<FaultInjectingBackend>(host());
  EXPECT_EQ(f->kind(), ZARENA_BACKEND_HOST);
  EXPECT_EQ(f->describe(), f->inner().describe());
  EXPECT_TRUE(f->supports_async());
  RegionInfo info;
  ASSERT_TRUE(f->reserve_region(request(kMiB, 256, true), &info).is_ok());
  // The inner backend's own refusals come back unchanged.
  const Result r = f->commit(0, 3);
  EXPECT_EQ(r.status, Status::kInvalidArgument);
  EXPECT_EQ(r.message.find("injected"), std::string::npos) << r.message;
  int token = 0;
  ASSERT_TRUE(f->set_stream(&token).is_ok());
  EXPECT_EQ(f->stream(), &token);
  EXPECT_TRUE(f->release_region().is_ok());
  EXPECT_TRUE(f->release_region().is_ok());
}

// The process-wide plan reaches the next arena's backend, so a failing reserve is
// testable through zarena_create, and it is used once.
TEST(FaultInjectingBackend, NextCreatePlanFailsThatCreateOnly) {
  zarena_test::LogCapture quiet;
  zarena_config c;
  zarena_config_init(&c);
  c.backend = ZARENA_BACKEND_HOST;
  c.capacity_bytes = kMiB;
  c.overflow_policy = ZARENA_OVERFLOW_SYNC;
  c.overflow_limit_bytes = ZARENA_OVERFLOW_UNLIMITED;
  c.name = "faults";
  FaultPlan plan;
  plan.sites[static_cast<int>(FaultSite::kReserve)].fail_nth = 1;
  zarena_core::arm_faults_for_next_create(plan);
  zarena* a = nullptr;
  EXPECT_EQ(zarena_create(&c, &a), ZARENA_E_OUT_OF_MEMORY);
  EXPECT_EQ(a, nullptr);
  EXPECT_NE(std::string(zarena_last_error()).find("injected fault: reserve call #1"),
            std::string::npos)
      << zarena_last_error();
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);

  // A plan for a later site applies to the arena that was created with it.
  FaultPlan overflow;
  overflow.sites[static_cast<int>(FaultSite::kOverflowAlloc)].fail_nth = 2;
  zarena_core::arm_faults_for_next_create(overflow);
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  void *p1 = nullptr, *p2 = nullptr, *p3 = nullptr;
  ASSERT_EQ(zarena_alloc(a, 2 * kMiB, &p1), ZARENA_OK);  // larger than the arena: overflow
  EXPECT_EQ(zarena_alloc(a, 2 * kMiB, &p2), ZARENA_E_BACKEND);
  EXPECT_NE(std::string(zarena_last_error()).find("injected fault: overflow_alloc call #2"),
            std::string::npos)
      << zarena_last_error();
  ASSERT_EQ(zarena_alloc(a, 2 * kMiB, &p3), ZARENA_OK);
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);

  zarena_core::arm_faults_for_next_create(plan);
  zarena_core::disarm_faults_for_next_create();
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << "a disarmed plan is gone";
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
}

}  // namespace

namespace {

// The engine passes the arena's alignment down: overflow blocks of a host arena honour
// it on both routes (issue 17: they came from a 256-byte aligned operator new).
TEST(HostBackend, ArenaOverflowBlocksHaveTheArenasAlignment) {
  zarena_test::LogCapture quiet;
  for (int32_t policy : {ZARENA_OVERFLOW_SYNC, ZARENA_OVERFLOW_ASYNC}) {
    for (uint64_t align : {uint64_t{4096}, 64 * zarena_test::kKiB, 64 * kMiB}) {
      zarena_config c;
      zarena_config_init(&c);
      c.backend = ZARENA_BACKEND_HOST;
      c.capacity_bytes = align;
      c.alignment = align;
      c.overflow_policy = policy;
      c.overflow_limit_bytes = ZARENA_OVERFLOW_UNLIMITED;
      c.name = "aligned-overflow";
      zarena* a = nullptr;
      ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
      std::vector<void*> blocks;
      for (int i = 0; i < 16; ++i) {
        void* p = nullptr;
        ASSERT_EQ(zarena_alloc(a, align + 512 * i + 1, &p), ZARENA_OK) << zarena_last_error();
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << "alignment " << align;
        blocks.push_back(p);
      }
      EXPECT_EQ(zarena_test::stats_of(a).overflow_allocs, 16u);
      for (void* p : blocks) EXPECT_EQ(zarena_free(a, p), ZARENA_OK);
      ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
    }
  }
}

}  // namespace
