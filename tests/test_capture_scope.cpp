// Capture scopes (zarena.h, zarena_capture_begin): a capture declared once, process-wide
// or per stream, acts on every arena it covers exactly as zarena_set_capture_active(a, 1)
// does -- SYNC overflow refused before any backend call, poison skipped, overflow gives
// deferred, destroys deferred -- with nesting counts, arenas created during the capture
// covered, and the scope's end as a safe point. The host backend counts every backend call
// (FaultSite), which is how these tests see what a capture must prevent.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../capi/handle.h"
#include "backend/backend_faults.h"
#include "engine/deferred_release.h"
#include "support.h"
#include "zarena/zarena.h"

namespace {

using zarena_core::FaultSite;
using zarena_test::kKiB;
using zarena_test::LogCapture;
using zarena_test::stats_of;

void* const kStreamA = reinterpret_cast<void*>(0x1000);
void* const kStreamB = reinterpret_cast<void*>(0x2000);
void* const kLegacy = reinterpret_cast<void*>(0x1);     // cudaStreamLegacy
void* const kPerThread = reinterpret_cast<void*>(0x2);  // cudaStreamPerThread

zarena_config host_config(int32_t policy, void* stream = nullptr, uint32_t flags = 0) {
  zarena_config c = zarena_test::host_overflow_config(4 * kKiB, "scope", policy, flags);
  c.stream = stream;
  return c;
}

struct Arena : zarena_test::ArenaHolder {
  using ArenaHolder::ArenaHolder;
  uint64_t calls(FaultSite s) const { return a->arena->fault_injector()->calls(s); }
};

zarena_block alloc_ex(zarena* a, uint64_t size) {
  zarena_block b;
  std::memset(&b, 0, sizeof b);
  EXPECT_EQ(zarena_alloc_ex(a, size, 0, &b), ZARENA_OK) << zarena_last_error();
  return b;
}

// True when the arena acts as captured: a SYNC overflow is refused before any backend call.
bool refuses_sync_overflow(Arena& g) {
  const uint64_t allocs = g.calls(FaultSite::kOverflowAlloc);
  void* p = nullptr;
  const zarena_status s = zarena_alloc(g, 8 * kKiB, &p);
  if (s == ZARENA_OK) {
    EXPECT_EQ(zarena_free(g, p), ZARENA_OK);
    return false;
  }
  EXPECT_EQ(s, ZARENA_E_CAPTURE_UNSAFE) << zarena_last_error();
  EXPECT_EQ(g.calls(FaultSite::kOverflowAlloc), allocs) << "refused before the backend";
  return true;
}

class CaptureScope : public ::testing::Test {
 protected:
  void TearDown() override {
    // A failed test must not leave a scope open for the next one.
    while (zarena_capture_end(ZARENA_CAPTURE_PROCESS, nullptr) == ZARENA_OK) {
    }
    for (void* s : {kStreamA, kStreamB, static_cast<void*>(nullptr)})
      while (zarena_capture_end(ZARENA_CAPTURE_STREAM, s) == ZARENA_OK) {
      }
  }
  LogCapture log_;
};

TEST_F(CaptureScope, ProcessScopeDefersOverflowGivesLikeTheArenaFlag) {
  Arena g(host_config(ZARENA_OVERFLOW_SYNC));
  const zarena_block a = alloc_ex(g, 8 * kKiB);
  const zarena_block b = alloc_ex(g, 8 * kKiB);
  ASSERT_TRUE(a.flags & b.flags & ZARENA_BLOCK_OVERFLOW);
  const uint64_t frees0 = g.calls(FaultSite::kOverflowFree);
  ASSERT_EQ(zarena_capture_begin(ZARENA_CAPTURE_PROCESS, nullptr), ZARENA_OK);
  EXPECT_TRUE(refuses_sync_overflow(g));
  ASSERT_EQ(zarena_free(g, a.ptr), ZARENA_OK);
  ASSERT_EQ(zarena_reset(g), ZARENA_OK);  // reclaims b
  EXPECT_EQ(g.calls(FaultSite::kOverflowFree), frees0) << "nothing goes back during it";
  EXPECT_EQ(stats_of(g).overflow_deferred_gives, 2u);
  ASSERT_EQ(zarena_capture_end(ZARENA_CAPTURE_PROCESS, nullptr), ZARENA_OK);
  EXPECT_FALSE(refuses_sync_overflow(g)) << "its overflow allocation is a give-back point";
  EXPECT_EQ(stats_of(g).overflow_deferred_gives, 0u);
  EXPECT_EQ(g.calls(FaultSite::kOverflowFree), frees0 + 3) << "a, b, and the probe's block";
}

TEST_F(CaptureScope, ProcessScopeSkipsPoisonOnceWarnedPerScope) {
  Arena g(host_config(ZARENA_OVERFLOW_REFUSE, nullptr, ZARENA_FLAG_POISON));
  const uint64_t fills0 = g.calls(FaultSite::kFill32);
  ASSERT_EQ(zarena_capture_begin(ZARENA_CAPTURE_PROCESS, nullptr), ZARENA_OK);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(zarena_free(g, alloc_ex(g, 256).ptr), ZARENA_OK);
  EXPECT_EQ(g.calls(FaultSite::kFill32), fills0) << "no fill during the capture";
  EXPECT_EQ(stats_of(g).poison_skipped, 3u);
  EXPECT_EQ(log_.count("poison.skipped"), 1u);
  ASSERT_EQ(zarena_capture_end(ZARENA_CAPTURE_PROCESS, nullptr), ZARENA_OK);
  ASSERT_EQ(zarena_free(g, alloc_ex(g, 256).ptr), ZARENA_OK);
  EXPECT_EQ(g.calls(FaultSite::kFill32), fills0 + 1) << "fills resume after it";
  // Another capture warns again, once.
  ASSERT_EQ(zarena_capture_begin(ZARENA_CAPTURE_PROCESS, nullptr), ZARENA_OK);
  ASSERT_EQ(zarena_free(g, alloc_ex(g, 256).ptr), ZARENA_OK);
  ASSERT_EQ(zarena_free(g, alloc_ex(g, 256).ptr), ZARENA_OK);
  ASSERT_EQ(zarena_capture_end(ZARENA_CAPTURE_PROCESS, nullptr), ZARENA_OK);
  EXPECT_EQ(log_.count("poison.skipped"), 2u);
  EXPECT_EQ(stats_of(g).poison_skipped, 5u);
}

TEST_F(CaptureScope, ScopesNestAndAnEndWithoutItsBeginIsRefused) {
  Arena g(host_config(ZARENA_OVERFLOW_SYNC));
  EXPECT_EQ(zarena_capture_end(ZARENA_CAPTURE_PROCESS, nullptr), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(zarena_last_error()).find("more ends than begins"), std::string::npos)
      << zarena_last_error();
  ASSERT_EQ(zarena_capture_begin(ZARENA_CAPTURE_PROCESS, nullptr), ZARENA_OK);
  ASSERT_EQ(zarena_capture_begin(ZARENA_CAPTURE_PROCESS, nullptr), ZARENA_OK);
  ASSERT_EQ(zarena_capture_end(ZARENA_CAPTURE_PROCESS, nullptr), ZARENA_OK);
  EXPECT_TRUE(refuses_sync_overflow(g)) << "one begin is still open";
  ASSERT_EQ(zarena_capture_end(ZARENA_CAPTURE_PROCESS, nullptr), ZARENA_OK);
  EXPECT_FALSE(refuses_sync_overflow(g));
  EXPECT_EQ(zarena_capture_end(ZARENA_CAPTURE_PROCESS, nullptr), ZARENA_E_INVALID_ARGUMENT);
  // Bad scopes and the per-thread stream change nothing.
  EXPECT_EQ(zarena_capture_begin(7, nullptr), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(zarena_capture_begin(ZARENA_CAPTURE_STREAM, kPerThread), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(zarena_last_error()).find("cudaStreamPerThread"), std::string::npos);
  EXPECT_FALSE(refuses_sync_overflow(g));
  // A scope leaves the arena's own flag alone, and the flag's end leaves the scope.
  ASSERT_EQ(zarena_set_capture_active(g, 1), ZARENA_OK);
  ASSERT_EQ(zarena_capture_begin(ZARENA_CAPTURE_PROCESS, nullptr), ZARENA_OK);
  ASSERT_EQ(zarena_set_capture_active(g, 0), ZARENA_OK);
  EXPECT_TRUE(refuses_sync_overflow(g)) << "the scope is still open";
  ASSERT_EQ(zarena_set_capture_active(g, 1), ZARENA_OK);
  ASSERT_EQ(zarena_capture_end(ZARENA_CAPTURE_PROCESS, nullptr), ZARENA_OK);
  EXPECT_TRUE(refuses_sync_overflow(g)) << "the arena's flag is still set";
  ASSERT_EQ(zarena_set_capture_active(g, 0), ZARENA_OK);
  EXPECT_FALSE(refuses_sync_overflow(g));
}

TEST_F(CaptureScope, ArenasCreatedDuringTheCaptureAreCovered) {
  ASSERT_EQ(zarena_capture_begin(ZARENA_CAPTURE_PROCESS, nullptr), ZARENA_OK);
  Arena late(host_config(ZARENA_OVERFLOW_SYNC, kStreamB));
  EXPECT_TRUE(refuses_sync_overflow(late));
  ASSERT_EQ(zarena_capture_end(ZARENA_CAPTURE_PROCESS, nullptr), ZARENA_OK);
  ASSERT_EQ(zarena_capture_begin(ZARENA_CAPTURE_STREAM, kStreamA), ZARENA_OK);
  Arena on_a(host_config(ZARENA_OVERFLOW_SYNC, kStreamA));
  EXPECT_TRUE(refuses_sync_overflow(on_a));
  EXPECT_FALSE(refuses_sync_overflow(late));
  ASSERT_EQ(zarena_capture_end(ZARENA_CAPTURE_STREAM, kStreamA), ZARENA_OK);
  EXPECT_FALSE(refuses_sync_overflow(on_a));
}

TEST_F(CaptureScope, StreamScopeCoversOnlyTheArenasOnThatStream) {
  Arena on_a(host_config(ZARENA_OVERFLOW_SYNC, kStreamA));
  Arena on_b(host_config(ZARENA_OVERFLOW_SYNC, kStreamB));
  Arena on_null(host_config(ZARENA_OVERFLOW_SYNC, nullptr));
  ASSERT_EQ(zarena_capture_begin(ZARENA_CAPTURE_STREAM, kStreamA), ZARENA_OK);
  EXPECT_TRUE(refuses_sync_overflow(on_a));
  EXPECT_FALSE(refuses_sync_overflow(on_b));
  EXPECT_FALSE(refuses_sync_overflow(on_null));
  // Coverage follows zarena_set_stream, both ways.
  ASSERT_EQ(zarena_set_stream(on_b, kStreamA), ZARENA_OK);
  EXPECT_TRUE(refuses_sync_overflow(on_b));
  ASSERT_EQ(zarena_set_stream(on_a, kStreamB), ZARENA_OK);
  EXPECT_FALSE(refuses_sync_overflow(on_a));
  ASSERT_EQ(zarena_capture_end(ZARENA_CAPTURE_STREAM, kStreamA), ZARENA_OK);
  EXPECT_FALSE(refuses_sync_overflow(on_b));
  EXPECT_EQ(zarena_capture_end(ZARENA_CAPTURE_STREAM, kStreamA), ZARENA_E_INVALID_ARGUMENT);
  // NULL and cudaStreamLegacy are one stream.
  ASSERT_EQ(zarena_capture_begin(ZARENA_CAPTURE_STREAM, kLegacy), ZARENA_OK);
  EXPECT_TRUE(refuses_sync_overflow(on_null));
  ASSERT_EQ(zarena_capture_end(ZARENA_CAPTURE_STREAM, nullptr), ZARENA_OK);
  EXPECT_FALSE(refuses_sync_overflow(on_null));
}

// Destroyed during the scope: the arena's memory waits (deferred_release.h) and the end
// that closes the scope is the safe point that gives it back.
TEST_F(CaptureScope, DestroyDuringTheScopeIsReleasedAtItsEnd) {
  const size_t waiting0 = zarena_core::deferred_releases();
  ASSERT_EQ(zarena_capture_begin(ZARENA_CAPTURE_STREAM, kStreamA), ZARENA_OK);
  ASSERT_EQ(zarena_capture_begin(ZARENA_CAPTURE_STREAM, kStreamA), ZARENA_OK);
  {
    Arena g(host_config(ZARENA_OVERFLOW_SYNC, kStreamA));
    (void)alloc_ex(g, 1 * kKiB);
  }  // destroyed here
  EXPECT_EQ(zarena_core::deferred_releases(), waiting0 + 1);
  EXPECT_EQ(log_.count("arena.destroy_deferred"), 1u);
  ASSERT_EQ(zarena_capture_end(ZARENA_CAPTURE_STREAM, kStreamA), ZARENA_OK);
  EXPECT_EQ(zarena_core::deferred_releases(), waiting0 + 1) << "one begin is still open";
  ASSERT_EQ(zarena_capture_end(ZARENA_CAPTURE_STREAM, kStreamA), ZARENA_OK);
  EXPECT_EQ(zarena_core::deferred_releases(), waiting0);
  EXPECT_EQ(log_.count("arena.released"), 1u);
}

// Begins and ends from many threads on scopes of their own, while arenas of another
// stream allocate and free overflow blocks: the counts stay exact (TSan sees the rest).
TEST_F(CaptureScope, ThreadsBeginAndEndConcurrently) {
  Arena g(host_config(ZARENA_OVERFLOW_SYNC, kStreamB));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &g] {
      void* mine = reinterpret_cast<void*>(static_cast<uintptr_t>(0x10000 + 0x100 * t));
      for (int i = 0; i < 200; ++i) {
        EXPECT_EQ(zarena_capture_begin(ZARENA_CAPTURE_STREAM, mine), ZARENA_OK);
        EXPECT_EQ(zarena_capture_begin(ZARENA_CAPTURE_STREAM, mine), ZARENA_OK);
        EXPECT_EQ(zarena_capture_end(ZARENA_CAPTURE_STREAM, mine), ZARENA_OK);
        EXPECT_EQ(zarena_capture_end(ZARENA_CAPTURE_STREAM, mine), ZARENA_OK);
        if (t == 0) {
          void* p = nullptr;
          EXPECT_EQ(zarena_alloc(g, 8 * kKiB, &p), ZARENA_OK) << zarena_last_error();
          EXPECT_EQ(zarena_free(g, p), ZARENA_OK);
        }
      }
      EXPECT_EQ(zarena_capture_end(ZARENA_CAPTURE_STREAM, mine), ZARENA_E_INVALID_ARGUMENT);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(stats_of(g).overflow_deferred_gives, 0u) << "no scope ever covered stream B";
}

}  // namespace
