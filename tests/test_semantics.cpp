// Issue 9's engine semantics through the C API on the host backend, as an engine uses them:
// pins (region and overflow blocks, counted, deferred frees, the stats that price them),
// epoch-checked frees from a "finalizer" thread after resets, floors raised and lowered
// with region_info and contains, poison switched at run time and skipped while the engine
// marks a capture, the capture flag refusing SYNC overflow before any backend call (the
// fault injector counts the calls), set_stream and the managed flags on the host, and the
// forward -> reset -> backward hazard. Issue 17's backend-independent parts run here too:
// overflow frees and reclaims during a capture are deferred (and never leaked), and
// overflow blocks are poisoned before they go back.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../capi/handle.h"
#include "backend/backend_faults.h"
#include "backend/backend_faults_testing.h"
#include "engine/deferred_release.h"
#include "support.h"
#include "zarena/zarena.h"

namespace {

using zarena_core::FaultInjectingBackend;
using zarena_core::FaultSite;
using zarena_test::kKiB;
using zarena_test::kMiB;
using zarena_test::LogCapture;
using zarena_test::stats_of;

zarena_config host_config(uint64_t capacity, int32_t policy = ZARENA_OVERFLOW_REFUSE) {
  return zarena_test::host_overflow_config(capacity, "semantics", policy);
}

// An arena of the host backend, whose fault injector the tests drive.
struct Arena : zarena_test::ArenaHolder {
  using ArenaHolder::ArenaHolder;
  FaultInjectingBackend& faults() const { return *a->arena->fault_injector(); }
  uint64_t calls(FaultSite s) const { return faults().calls(s); }
};

zarena_block alloc_ex(zarena* a, uint64_t size) {
  zarena_block b;
  std::memset(&b, 0, sizeof b);
  EXPECT_EQ(zarena_alloc_ex(a, size, 0, &b), ZARENA_OK) << zarena_last_error();
  return b;
}

using zarena_test::region_of;

uint64_t offset_of(zarena* a, const void* p) {
  return static_cast<uint64_t>(static_cast<const char*>(p) -
                               static_cast<const char*>(region_of(a).base));
}

void fill_bytes(void* p, uint64_t n, unsigned char v) { std::memset(p, v, n); }

// True when every byte of [p, p+n) is v.
::testing::AssertionResult holds(const void* p, uint64_t n, unsigned char v) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (uint64_t i = 0; i < n; ++i) {
    if (b[i] != v) {
      return ::testing::AssertionFailure() << "byte " << i << " of " << p << " is 0x" << std::hex
                                           << int(b[i]) << ", not 0x" << int(v);
    }
  }
  return ::testing::AssertionSuccess();
}

uint32_t word_at(const void* p) {
  uint32_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}

bool overlaps(const void* a, uint64_t an, const void* b, uint64_t bn) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bn && y < x + an;
}

class Semantics : public ::testing::Test {
 protected:
  // Records reach the capture, not stderr; tests that check records read them here.
  LogCapture log_{ZARENA_LOG_DEBUG};
};

// --- 1. pins ---------------------------------------------------------------------------------

TEST_F(Semantics, PinnedRegionBlockSurvivesResetsIntactAndIsNeverHandedOut) {
  // The region's own layout to the end (the top back at 0): plans off, since a plan's zone
  // holds the top up for the steps it serves.
  zarena_config cfg = host_config(256 * kKiB);
  cfg.flags |= ZARENA_FLAG_NO_PLAN;
  Arena g(cfg);
  const zarena_block a = alloc_ex(g, 4 * kKiB);
  const zarena_block p = alloc_ex(g, 4 * kKiB);
  const zarena_block c = alloc_ex(g, 4 * kKiB);
  (void)a;
  (void)c;
  fill_bytes(p.ptr, p.size, 0x3C);
  ASSERT_EQ(zarena_pin(g, p.ptr), ZARENA_OK);
  zarena_stats s = stats_of(g);
  EXPECT_EQ(s.pinned_bytes, 4 * kKiB);
  EXPECT_EQ(s.pinned_blocks, 1u);

  ASSERT_EQ(zarena_reset(g), ZARENA_OK);
  s = stats_of(g);
  EXPECT_EQ(s.pinned_bytes, 4 * kKiB) << "a pin outlives the reset";
  EXPECT_EQ(s.live_allocs, 1u) << "only the pinned block survives";
  EXPECT_EQ(s.top_bytes, offset_of(g, p.ptr) + p.size)
      << "the top rewinds to just above the highest pinned block";
  EXPECT_EQ(s.pin_retained_bytes, offset_of(g, p.ptr))
      << "the unpinned space under the pin is what the pin costs";
  EXPECT_TRUE(holds(p.ptr, p.size, 0x3C));

  // Fill the whole arena: nothing handed out may overlap the pinned block.
  for (int round = 0; round < 3; ++round) {
    std::vector<void*> got;
    for (;;) {
      void* q = nullptr;
      if (zarena_alloc(g, 1 * kKiB, &q) != ZARENA_OK) break;
      ASSERT_FALSE(overlaps(q, kKiB, p.ptr, p.size)) << "handed out over a pinned block";
      fill_bytes(q, kKiB, 0xEE);
      got.push_back(q);
    }
    EXPECT_GE(got.size(), (256 - 4) - 8u) << "the holes under the pin are reused";
    EXPECT_TRUE(holds(p.ptr, p.size, 0x3C)) << "round " << round;
    ASSERT_EQ(zarena_reset(g), ZARENA_OK);
    EXPECT_TRUE(holds(p.ptr, p.size, 0x3C)) << "after reset " << round;
  }
  ASSERT_EQ(zarena_unpin(g, p.ptr), ZARENA_OK);
  s = stats_of(g);
  EXPECT_EQ(s.pinned_bytes, 0u);
  EXPECT_EQ(s.pinned_blocks, 0u);
  EXPECT_EQ(s.live_allocs, 1u) << "unpinned, not freed: live until the next reset";
  ASSERT_EQ(zarena_reset(g), ZARENA_OK);
  EXPECT_EQ(stats_of(g).live_allocs, 0u) << "once unpinned, the next reset reclaims it";
  EXPECT_EQ(zarena_free(g, p.ptr), ZARENA_E_STALE);
  EXPECT_EQ(stats_of(g).top_bytes, 0u);
}

TEST_F(Semantics, FreeOfAPinnedBlockWaitsForTheLastUnpinAndPinsAreCounted) {
  Arena g(host_config(64 * kKiB));
  const zarena_block p = alloc_ex(g, 2 * kKiB);
  ASSERT_EQ(zarena_pin(g, p.ptr), ZARENA_OK);
  ASSERT_EQ(zarena_pin(g, p.ptr), ZARENA_OK);
  EXPECT_EQ(stats_of(g).pinned_blocks, 1u) << "two pins, one block";
  ASSERT_EQ(zarena_free_at(g, p.ptr, p.epoch), ZARENA_OK) << "answers at once";
  zarena_stats s = stats_of(g);
  EXPECT_EQ(s.deferred_frees, 1u);
  EXPECT_EQ(s.live_allocs, 1u) << "still there while pinned";
  EXPECT_EQ(zarena_free(g, p.ptr), ZARENA_E_DOUBLE_FREE) << "the free is already recorded";
  EXPECT_EQ(zarena_pin(g, p.ptr), ZARENA_E_DOUBLE_FREE) << "a freed block takes no new pin";

  ASSERT_EQ(zarena_reset(g), ZARENA_OK);  // still pinned: survives, its free still pending
  s = stats_of(g);
  EXPECT_EQ(s.deferred_frees, 1u);
  EXPECT_EQ(s.live_allocs, 1u);
  ASSERT_EQ(zarena_unpin(g, p.ptr), ZARENA_OK);
  EXPECT_EQ(stats_of(g).deferred_frees, 1u) << "one pin left";
  ASSERT_EQ(zarena_unpin(g, p.ptr), ZARENA_OK);
  s = stats_of(g);
  EXPECT_EQ(s.deferred_frees, 0u) << "the last unpin completes the free";
  EXPECT_EQ(s.live_allocs, 0u);
  EXPECT_EQ(s.pinned_blocks, 0u);
  EXPECT_EQ(s.used_bytes, 0u);
  EXPECT_EQ(zarena_unpin(g, p.ptr), ZARENA_E_DOUBLE_FREE);
  // The space is free again and handed out.
  void* q = nullptr;
  ASSERT_EQ(zarena_alloc(g, 64 * kKiB, &q), ZARENA_OK) << "the whole region is free";
}

TEST_F(Semantics, PinErrorsChangeNothing) {
  Arena g(host_config(64 * kKiB));
  const zarena_block b = alloc_ex(g, 1 * kKiB);
  EXPECT_EQ(zarena_pin(g, nullptr), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(zarena_pin(g, static_cast<char*>(b.ptr) + 1 * kKiB + 256), ZARENA_E_NOT_OWNED)
      << "past the block's end: the unused part of the span";
  int local = 0;
  EXPECT_EQ(zarena_pin(g, &local), ZARENA_E_NOT_OWNED);
  EXPECT_EQ(zarena_unpin(g, b.ptr), ZARENA_E_NOT_PINNED);
  const zarena_block f = alloc_ex(g, 1 * kKiB);
  ASSERT_EQ(zarena_free(g, f.ptr), ZARENA_OK);
  EXPECT_EQ(zarena_pin(g, f.ptr), ZARENA_E_DOUBLE_FREE);
  ASSERT_EQ(zarena_reset(g), ZARENA_OK);
  EXPECT_EQ(zarena_pin(g, b.ptr), ZARENA_E_STALE) << "reclaimed by the reset";
  const zarena_stats s = stats_of(g);
  EXPECT_EQ(s.pinned_blocks, 0u);
  EXPECT_EQ(s.live_allocs, 0u);
}

TEST_F(Semantics, PinnedOverflowBlocksSurviveResetsAndGoBackAtTheLastUnpin) {
  Arena g(host_config(64 * kKiB, ZARENA_OVERFLOW_SYNC));
  void* fill = nullptr;
  ASSERT_EQ(zarena_alloc(g, 64 * kKiB, &fill), ZARENA_OK);
  const zarena_block o = alloc_ex(g, 8 * kKiB);
  ASSERT_TRUE(o.flags & ZARENA_BLOCK_OVERFLOW);
  EXPECT_EQ(zarena_contains(g, o.ptr), 0);
  fill_bytes(o.ptr, o.size, 0x5A);
  ASSERT_EQ(zarena_pin(g, o.ptr), ZARENA_OK);
  zarena_stats s = stats_of(g);
  EXPECT_EQ(s.pinned_bytes, 8 * kKiB);
  EXPECT_EQ(s.pinned_blocks, 1u);
  const uint64_t frees0 = g.calls(FaultSite::kOverflowFree);

  ASSERT_EQ(zarena_reset(g), ZARENA_OK);
  ASSERT_EQ(zarena_reset(g), ZARENA_OK);
  s = stats_of(g);
  EXPECT_EQ(s.overflow_live_bytes, 8 * kKiB) << "pinned overflow blocks survive resets";
  EXPECT_EQ(s.pinned_bytes, 8 * kKiB);
  EXPECT_EQ(s.overflow_reclaimed, 0u);
  EXPECT_EQ(g.calls(FaultSite::kOverflowFree), frees0) << "nothing went back to the backend";
  EXPECT_TRUE(holds(o.ptr, o.size, 0x5A));

  ASSERT_EQ(zarena_free_at(g, o.ptr, o.epoch), ZARENA_OK)
      << "a pinned block stays valid under its own epoch: " << zarena_last_error();
  s = stats_of(g);
  EXPECT_EQ(s.deferred_frees, 1u);
  EXPECT_EQ(g.calls(FaultSite::kOverflowFree), frees0) << "deferred to the last unpin";
  ASSERT_EQ(zarena_unpin(g, o.ptr), ZARENA_OK);
  s = stats_of(g);
  EXPECT_EQ(s.deferred_frees, 0u);
  EXPECT_EQ(s.pinned_bytes, 0u);
  EXPECT_EQ(s.overflow_live_bytes, 0u);
  EXPECT_EQ(g.calls(FaultSite::kOverflowFree), frees0 + 1) << "given back at the last unpin";

  // Pinned, unpinned, never freed: the next reset reclaims it.
  const zarena_block o2 = alloc_ex(g, 64 * kKiB + 256);  // larger than the region: overflow
  ASSERT_TRUE(o2.flags & ZARENA_BLOCK_OVERFLOW);
  ASSERT_EQ(zarena_pin(g, o2.ptr), ZARENA_OK);
  ASSERT_EQ(zarena_reset(g), ZARENA_OK);
  ASSERT_EQ(zarena_unpin(g, o2.ptr), ZARENA_OK);
  EXPECT_EQ(stats_of(g).overflow_live_bytes, o2.size);
  ASSERT_EQ(zarena_reset(g), ZARENA_OK);
  s = stats_of(g);
  EXPECT_EQ(s.overflow_live_bytes, 0u);
  EXPECT_EQ(s.overflow_reclaimed, 1u);
  EXPECT_EQ(g.calls(FaultSite::kOverflowFree), frees0 + 2);
}

// zarena.h: "freeing the topmost block lowers the top", also after a reset that kept pinned
// blocks (the top is then the end of the highest one, in no thread's span). One thread, a
// random run against a model of the live region blocks: weights under a floor; steps that
// allocate, pin, free (pinned blocks: deferred to the last unpin) and end with a reset;
// between a reset and the next allocation, pins, unpins and frees of what the reset kept.
// There the top is always the end of the highest live block (or the floor); everywhere it
// is never below a live block, and the layout is sound.
TEST_F(Semantics, FreeingTheTopmostBlockLowersTheTopAfterResetsThatKeptPins) {
  struct Blk {
    void* p;
    uint64_t end;
    uint32_t pins;
    bool freed;  // freed while pinned
  };
  uint64_t lowered = 0;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    Arena g(host_config(2 * kMiB));
    std::mt19937_64 rng(seed);
    const uint64_t base = reinterpret_cast<uint64_t>(region_of(g).base);
    for (uint64_t w = rng() % 3; w > 0; --w) (void)alloc_ex(g, 1 + rng() % (8 * kKiB));
    ASSERT_EQ(zarena_mark_step_boundary(g), ZARENA_OK);
    const uint64_t floor_bytes = stats_of(g).floor_bytes;
    std::vector<Blk> live;
    std::deque<std::string> recent;  // the last operations, for a failure's message
    auto note = [&](const std::string& what, const void* p) {
      recent.push_back(what + " @" + std::to_string(reinterpret_cast<uint64_t>(p) - base) +
                       " -> top " + std::to_string(stats_of(g).top_bytes));
      if (recent.size() > 12) recent.pop_front();
    };
    auto drop = [&](size_t k) {
      live[k] = live.back();
      live.pop_back();
    };
    // One random pin, unpin or free of a live block.
    auto pin_or_free = [&]() -> bool {
      const size_t k = rng() % live.size();
      Blk& b = live[k];
      const int what = static_cast<int>(rng() % 3);
      if (what == 0 && !b.freed) {
        if (zarena_pin(g, b.p) != ZARENA_OK) return false;
        ++b.pins;
        note("pin", b.p);
      } else if (what == 1 && b.pins > 0) {
        if (zarena_unpin(g, b.p) != ZARENA_OK) return false;
        note("unpin", b.p);
        if (--b.pins == 0 && b.freed) drop(k);
      } else if (what == 2 && !b.freed) {
        if (zarena_free(g, b.p) != ZARENA_OK) return false;
        note("free", b.p);
        if (b.pins > 0) {
          b.freed = true;
        } else {
          drop(k);
        }
      }
      return true;
    };
    auto highest = [&] {
      uint64_t h = floor_bytes;
      for (const Blk& b : live) h = std::max(h, b.end);
      return h;
    };
    auto trail = [&] {
      std::string ops = "seed " + std::to_string(seed);
      for (const std::string& r : recent) ops += "\n  " + r;
      return ops;
    };
    for (int step = 0; step < 12; ++step) {
      for (int op = 0; op < 40; ++op) {  // the step
        if (live.empty() || rng() % 2 == 0) {
          zarena_block b;
          ASSERT_EQ(zarena_alloc_ex(g, 1 + rng() % (16 * kKiB), 0, &b), ZARENA_OK);
          live.push_back({b.ptr, reinterpret_cast<uint64_t>(b.ptr) - base + b.size, 0, false});
          note("alloc " + std::to_string(b.size), b.ptr);
        } else {
          ASSERT_TRUE(pin_or_free()) << zarena_last_error() << "\n" << trail();
        }
        ASSERT_GE(stats_of(g).top_bytes, highest()) << trail();
        ASSERT_EQ(g.a->arena->check_invariants(), "") << trail();
      }
      ASSERT_EQ(zarena_reset(g), ZARENA_OK);
      note("reset", reinterpret_cast<void*>(base));
      for (size_t k = live.size(); k-- > 0;) {
        if (live[k].pins == 0) drop(k);
      }
      ASSERT_EQ(stats_of(g).top_bytes, highest()) << trail();
      // What the reset kept, unpinned and freed in a random order.
      for (int op = 0; op < 60 && !live.empty(); ++op) {
        const uint64_t top = stats_of(g).top_bytes;
        ASSERT_TRUE(pin_or_free()) << zarena_last_error() << "\n" << trail();
        ASSERT_EQ(stats_of(g).top_bytes, highest()) << trail();
        ASSERT_EQ(g.a->arena->check_invariants(), "") << trail();
        if (stats_of(g).top_bytes < top) ++lowered;
      }
    }
  }
  EXPECT_GT(lowered, 100u) << "the runs did free kept blocks at the top";
}

// Engines pin views: zarena_pin and zarena_unpin of an address inside a live block act on
// that block. A random run against a model (region and overflow blocks, allocations,
// frees, pins and unpins through random addresses inside the blocks, resets): every
// block's pin count (read back from the live-block walk), pinned_bytes and pinned_blocks
// match the model; an address in no live block (past a block's end, the bump space, a
// freed block) is refused and changes nothing.
TEST_F(Semantics, PinsOfAddressesInsideABlockPinThatBlock) {
  Arena g(host_config(1 * kMiB, ZARENA_OVERFLOW_SYNC));
  std::mt19937_64 rng(11);
  struct Blk {
    char* p;
    uint64_t size;
    uint32_t pins;
    bool freed;
  };
  std::map<char*, Blk> live;
  auto any = [&]() -> Blk& {
    auto it = live.begin();
    std::advance(it, static_cast<long>(rng() % live.size()));
    return it->second;
  };
  auto inside = [&](const Blk& b) { return b.p + rng() % b.size; };
  uint64_t interior = 0, overflow_pins = 0, refused = 0;
  for (int op = 0; op < 3000; ++op) {
    const int what = static_cast<int>(rng() % 100);
    if (what < 25 || live.empty()) {
      const uint64_t n = rng() % 8 == 0 ? 600 * kKiB : 1 + rng() % (24 * kKiB);
      zarena_block b;
      ASSERT_EQ(zarena_alloc_ex(g, n, 0, &b), ZARENA_OK) << zarena_last_error();
      live[static_cast<char*>(b.ptr)] = {static_cast<char*>(b.ptr), b.size, 0, false};
    } else if (what < 50) {
      Blk& b = any();
      char* at = inside(b);
      const zarena_status st = zarena_pin(g, at);
      if (b.freed) {  // freed while pinned: no new pin, through any of its addresses
        ASSERT_EQ(st, ZARENA_E_DOUBLE_FREE) << op;
        continue;
      }
      ASSERT_EQ(st, ZARENA_OK) << "op " << op << ": " << zarena_last_error();
      ++b.pins;
      interior += at != b.p;
      overflow_pins += zarena_contains(g, at) == 0;
    } else if (what < 72) {
      Blk& b = any();
      if (b.pins == 0) {
        if (!b.freed) {
          ASSERT_EQ(zarena_unpin(g, inside(b)), ZARENA_E_NOT_PINNED) << op;
        }
        continue;
      }
      ASSERT_EQ(zarena_unpin(g, inside(b)), ZARENA_OK)
          << "op " << op << ": " << zarena_last_error();
      if (--b.pins == 0 && b.freed) live.erase(b.p);
    } else if (what < 92) {
      Blk& b = any();
      if (b.freed) continue;
      ASSERT_EQ(zarena_free(g, b.p), ZARENA_OK) << zarena_last_error();
      if (b.pins > 0) {
        b.freed = true;
      } else {
        live.erase(b.p);
      }
    } else if (what < 96) {
      // An address no live block holds: just past a block whose end is unused, the
      // bump space, a stack variable. Refused, nothing changes.
      const zarena_stats before = stats_of(g);
      const zarena_region r = region_of(g);
      char* past_top = static_cast<char*>(r.base) + r.top_bytes + rng() % 4096;
      if (r.top_bytes < r.capacity_bytes) {
        ASSERT_EQ(zarena_pin(g, past_top), ZARENA_E_NOT_OWNED);
        ASSERT_EQ(zarena_unpin(g, past_top), ZARENA_E_NOT_OWNED);
      }
      int local = 0;
      ASSERT_EQ(zarena_pin(g, &local), ZARENA_E_NOT_OWNED);
      const zarena_stats after = stats_of(g);
      ASSERT_EQ(before.pinned_bytes, after.pinned_bytes);
      ASSERT_EQ(before.pinned_blocks, after.pinned_blocks);
      ++refused;
    } else {
      ASSERT_EQ(zarena_reset(g), ZARENA_OK);
      for (auto it = live.begin(); it != live.end();) {
        it = it->second.pins == 0 ? live.erase(it) : std::next(it);
      }
    }
    // The model against the arena.
    uint64_t bytes = 0, blocks = 0;
    for (const auto& [p, b] : live) {
      if (b.pins > 0) bytes += b.size, ++blocks;
    }
    const zarena_stats s = stats_of(g);
    ASSERT_EQ(s.pinned_bytes, bytes) << "op " << op;
    ASSERT_EQ(s.pinned_blocks, blocks) << "op " << op;
    ASSERT_EQ(s.live_allocs, live.size()) << "op " << op;
    if (op % 50 == 0) {
      std::map<void*, uint32_t> pins;
      zarena_for_each_live_block(
          g,
          [](void* u, const zarena_live_block* lb) {
            (*static_cast<std::map<void*, uint32_t>*>(u))[lb->ptr] = lb->pins;
            return 0;
          },
          &pins);
      for (const auto& [p, b] : live) ASSERT_EQ(pins[p], b.pins) << "op " << op;
    }
    ASSERT_EQ(g.a->arena->check_invariants(), "") << "op " << op;
  }
  EXPECT_GT(interior, 300u);
  EXPECT_GT(overflow_pins, 20u) << "overflow blocks were pinned through inner addresses too";
  EXPECT_GT(refused, 50u);
}

// Threads pin and unpin their own blocks through inner addresses while others allocate
// and free around them: no pin ever lands on another block (every thread's blocks end
// with the pins it made, then none), and the layout stays sound.
TEST_F(Semantics, InnerPinsRaceAllocationsAndFrees) {
  Arena g(host_config(16 * kMiB));
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      for (int round = 0; round < 200; ++round) {
        std::vector<zarena_block> mine;
        for (int i = 0; i < 8; ++i) {
          zarena_block b;
          ASSERT_EQ(zarena_alloc_ex(g, 256 + rng() % (32 * kKiB), 0, &b), ZARENA_OK);
          mine.push_back(b);
        }
        std::vector<uint32_t> pins(mine.size(), 0);
        for (int i = 0; i < 32; ++i) {
          const size_t k = rng() % mine.size();
          char* at = static_cast<char*>(mine[k].ptr) + rng() % mine[k].size;
          if (pins[k] == 0 || rng() % 2 == 0) {
            ASSERT_EQ(zarena_pin(g, at), ZARENA_OK) << zarena_last_error();
            ++pins[k];
          } else {
            ASSERT_EQ(zarena_unpin(g, at), ZARENA_OK) << zarena_last_error();
            --pins[k];
          }
        }
        for (size_t k = 0; k < mine.size(); ++k) {
          for (; pins[k] > 0; --pins[k]) {
            ASSERT_EQ(zarena_unpin(g, static_cast<char*>(mine[k].ptr) + mine[k].size - 1),
                      ZARENA_OK);
          }
          ASSERT_EQ(zarena_unpin(g, mine[k].ptr), ZARENA_E_NOT_PINNED);
          ASSERT_EQ(zarena_free(g, mine[k].ptr), ZARENA_OK);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  const zarena_stats s = stats_of(g);
  EXPECT_EQ(s.pinned_blocks, 0u);
  EXPECT_EQ(s.live_allocs, 0u);
  EXPECT_EQ(g.a->arena->check_invariants(), "");
}

// The stats an engine's pool adapter reads instead of walking the live blocks: the largest
// request of the epoch as the block it took (rounded up to the alignment) and the count of
// live overflow blocks. A random run (region and overflow blocks, frees, pins, resets)
// against a model.
TEST_F(Semantics, AlignedEpochMaxAndLiveOverflowBlocksAgainstAModel) {
  zarena_config c = host_config(1 * kMiB, ZARENA_OVERFLOW_SYNC);
  c.alignment = 512;
  Arena g(c);
  std::mt19937_64 rng(5);
  struct Blk {
    void* p;
    bool overflow;
    bool pinned;
  };
  std::vector<Blk> live;
  uint64_t max_request = 0, overflowed = 0;
  for (int op = 0; op < 2000; ++op) {
    const int what = static_cast<int>(rng() % 100);
    if (what < 45 || live.empty()) {
      const uint64_t n = rng() % 6 == 0 ? 700 * kKiB + rng() % 1000 : 1 + rng() % (20 * kKiB);
      zarena_block b;
      ASSERT_EQ(zarena_alloc_ex(g, n, 0, &b), ZARENA_OK) << zarena_last_error();
      const bool over = (b.flags & ZARENA_BLOCK_OVERFLOW) != 0;
      overflowed += over;
      live.push_back({b.ptr, over, false});
      max_request = std::max(max_request, n);
    } else if (what < 85) {
      const size_t k = rng() % live.size();
      if (live[k].pinned) continue;
      ASSERT_EQ(zarena_free(g, live[k].p), ZARENA_OK);
      live[k] = live.back();
      live.pop_back();
    } else if (what < 95) {
      Blk& b = live[rng() % live.size()];
      if (b.pinned) {
        ASSERT_EQ(zarena_unpin(g, b.p), ZARENA_OK);
      } else {
        ASSERT_EQ(zarena_pin(g, b.p), ZARENA_OK);
      }
      b.pinned = !b.pinned;
    } else {
      ASSERT_EQ(zarena_reset(g), ZARENA_OK);
      std::vector<Blk> kept;
      for (const Blk& b : live) {
        if (b.pinned) kept.push_back(b);
      }
      live.swap(kept);
      max_request = 0;
    }
    uint64_t over = 0;
    for (const Blk& b : live) over += b.overflow;
    const zarena_stats s = stats_of(g);
    ASSERT_EQ(s.epoch_max_alloc_bytes, max_request) << "op " << op;
    ASSERT_EQ(s.epoch_max_alloc_aligned_bytes, (max_request + 511) / 512 * 512) << "op " << op;
    ASSERT_EQ(s.overflow_live_blocks, over) << "op " << op;
  }
  EXPECT_GT(overflowed, 50u);
}

// --- 2. epoch-checked frees --------------------------------------------------------------------

TEST_F(Semantics, StaleFreeFromAFinalizerThreadNeverFreesTheLiveBlockAtThatAddress) {
  Arena g(host_config(64 * kKiB));
  const zarena_block old = alloc_ex(g, 4 * kKiB);
  EXPECT_EQ(old.epoch, 0u);
  EXPECT_EQ(old.size, 4 * kKiB);
  ASSERT_EQ(zarena_reset(g), ZARENA_OK);
  ASSERT_EQ(zarena_reset(g), ZARENA_OK);
  const zarena_block live = alloc_ex(g, 4 * kKiB);
  ASSERT_EQ(live.ptr, old.ptr) << "the test needs the address handed out again";
  EXPECT_EQ(live.epoch, 2u);
  fill_bytes(live.ptr, live.size, 0x77);
  const zarena_stats before = stats_of(g);

  zarena_status from_finalizer = ZARENA_OK;
  std::thread finalizer([&] { from_finalizer = zarena_free_at(g, old.ptr, old.epoch); });
  finalizer.join();
  EXPECT_EQ(from_finalizer, ZARENA_E_STALE);
  const zarena_stats after = stats_of(g);
  EXPECT_EQ(after.stale_frees, before.stale_frees + 1);
  EXPECT_EQ(after.live_allocs, before.live_allocs) << "the live block was not freed";
  EXPECT_EQ(after.used_bytes, before.used_bytes);
  EXPECT_TRUE(holds(live.ptr, live.size, 0x77));
  // A block of the same epoch placed over part of the address range: still stale.
  EXPECT_EQ(zarena_free_at(g, static_cast<char*>(old.ptr) + 1 * kKiB, old.epoch), ZARENA_E_STALE);
  EXPECT_EQ(zarena_free_at(g, live.ptr, live.epoch + 1), ZARENA_E_STALE) << "a future epoch";
  EXPECT_EQ(zarena_free_at(g, live.ptr, live.epoch), ZARENA_OK);
  EXPECT_EQ(zarena_free_at(g, live.ptr, live.epoch), ZARENA_E_DOUBLE_FREE);
  EXPECT_EQ(zarena_free_at(g, live.ptr, ZARENA_ANY_EPOCH), ZARENA_E_DOUBLE_FREE);
}

// A batch of frees goes through every item, in order, each exactly as zarena_free_at: the
// failures change nothing and are reported in statuses, the batch returns the first one with
// its message, and the items after a failure are still freed.
TEST_F(Semantics, BatchFreesEveryItemAndReportsTheFirstFailure) {
  Arena g(host_config(64 * kKiB));
  const zarena_block x = alloc_ex(g, kKiB), y = alloc_ex(g, kKiB), z = alloc_ex(g, kKiB);
  int foreign = 0;  // not the arena's
  const zarena_free_item items[] = {{x.ptr, x.epoch},
                                    {&foreign, ZARENA_ANY_EPOCH},
                                    {y.ptr, y.epoch + 1},
                                    {z.ptr, ZARENA_ANY_EPOCH},
                                    {x.ptr, ZARENA_ANY_EPOCH}};
  zarena_status st[5];
  EXPECT_EQ(zarena_free_batch(g, items, 5, st), ZARENA_E_NOT_OWNED);
  EXPECT_NE(std::string(zarena_last_error()).find("item 1: "), std::string::npos)
      << zarena_last_error();
  const zarena_status want[] = {ZARENA_OK, ZARENA_E_NOT_OWNED, ZARENA_E_STALE, ZARENA_OK,
                                ZARENA_E_DOUBLE_FREE};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(st[i], want[i]) << "item " << i;
  const zarena_stats s = stats_of(g);
  EXPECT_EQ(s.live_allocs, 1u) << "y alone is live";
  EXPECT_EQ(s.invalid_frees, 2u);
  EXPECT_EQ(s.stale_frees, 1u);
  EXPECT_EQ(zarena_free_batch(g, items, 1, nullptr), ZARENA_E_DOUBLE_FREE) << "no statuses";
  const zarena_free_item last = {y.ptr, y.epoch};
  EXPECT_EQ(zarena_free_batch(g, &last, 1, st), ZARENA_OK);
  EXPECT_EQ(st[0], ZARENA_OK);
  EXPECT_EQ(stats_of(g).live_allocs, 0u);
}

// Steps allocate tensors; half of them are "dropped" and freed later by a finalizer thread
// with the epoch they came with, across resets; the other half the step frees itself. No
// finalizer free may ever hit the step's own blocks (they keep their bytes and free with OK,
// exactly once), and every finalizer free is OK (same epoch) or STALE.
// The race is made by events, not by timing: the resets are made by another thread
// (ResetThread), and a step's "racing" drops reach the finalizer only once the reset that
// ends their epoch has begun, its window after the epoch moved held open until the
// finalizer answered a free (YieldAt): they race that reset and the next step, OK or STALE
// as it falls. The "late" drops of an epoch reach the finalizer only after the test saw the
// reset that ended it return, while the next step's own blocks are live at the addresses
// they had (the step's shape repeats, its halves swapped): every one must be STALE, which
// fails at once if the free's epoch check were skipped (a late free would free a live block
// of the newer epoch, or answer something else than STALE).
TEST_F(Semantics, FinalizerFreesRacingResetsNeverHitLiveBlocks) {
  Arena g(host_config(1 * kMiB));
  struct Dropped {
    void* ptr;
    uint64_t epoch;
    bool late;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Dropped> queue;
  bool done = false;
  std::atomic<uint64_t> answered{0}, ok{0}, stale{0}, other{0}, late_stale{0}, late_not_stale{0};
  std::thread finalizer([&] {
    for (;;) {
      Dropped d{nullptr, 0, false};
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return !queue.empty() || done; });
        if (queue.empty()) return;
        d = queue.front();
        queue.pop_front();
      }
      const zarena_status st = zarena_free_at(g, d.ptr, d.epoch);
      (st == ZARENA_OK ? ok : st == ZARENA_E_STALE ? stale : other).fetch_add(1);
      if (d.late) (st == ZARENA_E_STALE ? late_stale : late_not_stale).fetch_add(1);
      {
        std::lock_guard<std::mutex> lock(mu);
        answered.fetch_add(1);
      }
      cv.notify_all();
    }
  });
  uint64_t handed = 0;  // to the finalizer
  const auto hand = [&](const std::vector<Dropped>& ds) {
    {
      std::lock_guard<std::mutex> lock(mu);
      for (const Dropped& d : ds) queue.push_back(d);
    }
    handed += ds.size();
    cv.notify_all();
  };
  const auto wait_answered = [&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return answered.load() == handed; });
  };
  struct Stop {  // the finalizer ends however the test does
    std::function<void()> f;
    ~Stop() { f(); }
  } stop{[&] {
    {
      std::lock_guard<std::mutex> lock(mu);
      done = true;
    }
    cv.notify_all();
    finalizer.join();
  }};
  // The reset's window after its epoch moved: open until the finalizer answers a free
  // (or 200 yields, where the free waits for the reset's locks).
  uint64_t answered_at_open = 0;  // the resetting thread's alone
  zarena_test::YieldAt window({zarena_core::test_points::Point::kResetEpochMoved}, 200, [&](int i) {
    if (i == 0) answered_at_open = answered.load();
    return answered.load() > answered_at_open;
  });
  window.allow(0);
  uint64_t late_on_live = 0;  // late frees that named a live block's address
  std::vector<Dropped> late;  // the previous step's, of an epoch that ended
  {
    zarena_test::ResetThread resets(g);
    const int steps = 400 / zarena_test::kSanitizerSlowdown;
    for (int step = 0; step < steps; ++step) {
      std::vector<zarena_block> mine;
      std::vector<Dropped> racing, next_late;
      for (int i = 0; i < 24; ++i) {
        zarena_block b;
        ASSERT_EQ(zarena_alloc_ex(g, 256 * (1 + (i * 7) % 9), 0, &b), ZARENA_OK);
        if ((i + step) % 2 == 0) {
          fill_bytes(b.ptr, b.size, static_cast<unsigned char>(step));
          mine.push_back(b);
        } else {
          (i / 2 % 2 == 0 ? racing : next_late).push_back({b.ptr, b.epoch, i / 2 % 2 != 0});
        }
      }
      // The late frees of the ended epoch, answered while this step's blocks are live.
      for (const Dropped& d : late) {
        for (const zarena_block& b : mine) late_on_live += b.ptr == d.ptr;
      }
      hand(late);
      wait_answered();
      for (const zarena_block& b : mine) {
        ASSERT_TRUE(holds(b.ptr, b.size, static_cast<unsigned char>(step))) << "step " << step;
        ASSERT_EQ(zarena_free_at(g, b.ptr, b.epoch), ZARENA_OK)
            << "step " << step << ": a finalizer freed a live block";
      }
      // The racing frees, handed once the reset that ends their epoch has begun.
      window.allow(1);
      resets.ask();
      hand(racing);
      resets.wait_ended();
      late = std::move(next_late);
    }
    hand(late);
  }
  stop.f();
  stop.f = [] {};
  EXPECT_EQ(other.load(), 0u) << "finalizer frees are OK or STALE, nothing else";
  EXPECT_EQ(ok.load() + stale.load(), handed);
  EXPECT_EQ(late_not_stale.load(), 0u) << "a free after its epoch ended must be STALE";
  EXPECT_EQ(late_stale.load(), handed / 2) << "half the drops were late";
  EXPECT_GT(stale.load(), 0u);
  EXPECT_GT(late_on_live, 0u)
      << "no late free named a live block's address: the test proves little";
  EXPECT_EQ(stats_of(g).stale_frees, stale.load());
  std::printf(
      "[ info ] finalizer frees: %llu same-epoch, %llu stale (%llu late, %llu of them at a live "
      "block's address); %llu reset windows ended by a free\n",
      static_cast<unsigned long long>(ok.load()), static_cast<unsigned long long>(stale.load()),
      static_cast<unsigned long long>(late_stale.load()),
      static_cast<unsigned long long>(late_on_live),
      static_cast<unsigned long long>(window.ended_by_event()));
}

// --- 3. floors and queries ---------------------------------------------------------------------

// A pointer a reset reclaimed reads STALE through the next epoch (docs/RELIABILITY.md,
// "History is finite"), also after the free space that took over its start went back to
// the bump space and the bump space was bumped into below it: nothing was handed out over
// it. Before, any bump since made the region answer NOT_OWNED (fuzz_arena_replay).
TEST_F(Semantics, AReclaimedStartStaysStaleAfterABumpBelowIt) {
  zarena_config c = host_config(64 * kKiB);
  c.alignment = 4 * kKiB;
  c.flags |= ZARENA_FLAG_NO_PLAN;  // the region's own history, with no plan's zone in the way
  Arena g(c);
  const zarena_block a0 = alloc_ex(g, 4 * kKiB), b0 = alloc_ex(g, 4 * kKiB);
  const zarena_block t = alloc_ex(g, 4 * kKiB), d = alloc_ex(g, 4 * kKiB);
  ASSERT_EQ(offset_of(g, t.ptr), 8 * kKiB);
  ASSERT_EQ(offset_of(g, d.ptr), 12 * kKiB);
  (void)a0;
  (void)b0;
  ASSERT_EQ(zarena_pin(g, d.ptr), ZARENA_OK);
  ASSERT_EQ(zarena_reset(g), ZARENA_OK);  // reclaims a0, b0 and t; d stays (pinned)
  ASSERT_EQ(region_of(g).top_bytes, 16 * kKiB);
  // Two blocks from the reset's hole: the rest of the hole now starts at t's address.
  const zarena_block x = alloc_ex(g, 4 * kKiB), y = alloc_ex(g, 4 * kKiB);
  ASSERT_EQ(offset_of(g, x.ptr), 0u);
  ASSERT_EQ(offset_of(g, y.ptr), 4 * kKiB);
  ASSERT_EQ(zarena_free(g, y.ptr), ZARENA_OK);
  // d freed at its last unpin: everything above x goes back to the bump space.
  ASSERT_EQ(zarena_free(g, d.ptr), ZARENA_OK);
  ASSERT_EQ(zarena_unpin(g, d.ptr), ZARENA_OK);
  ASSERT_EQ(region_of(g).top_bytes, 4 * kKiB);
  // A bump below t.
  const zarena_block z = alloc_ex(g, 4 * kKiB);
  ASSERT_EQ(offset_of(g, z.ptr), 4 * kKiB);
  ASSERT_EQ(region_of(g).top_bytes, 8 * kKiB);
  const zarena_stats before = stats_of(g);
  EXPECT_EQ(zarena_free(g, t.ptr), ZARENA_E_STALE) << zarena_last_error();
  EXPECT_EQ(zarena_free_at(g, t.ptr, t.epoch), ZARENA_E_STALE) << zarena_last_error();
  EXPECT_EQ(stats_of(g).stale_frees, before.stale_frees + 2);
  // Bumped over now, and freed again: any refusal, never OK.
  const zarena_block over = alloc_ex(g, 8 * kKiB);
  ASSERT_EQ(offset_of(g, over.ptr), 8 * kKiB);
  EXPECT_EQ(zarena_free(g, over.ptr), ZARENA_OK);
  EXPECT_NE(zarena_free(g, t.ptr), ZARENA_OK);
}

TEST_F(Semantics, FloorRaisedAndLoweredWithRegionInfoAndContains) {
  Arena g(host_config(64 * kKiB));
  zarena_region r = region_of(g);
  ASSERT_NE(r.base, nullptr);
  EXPECT_EQ(r.capacity_bytes, 64 * kKiB);
  EXPECT_EQ(r.top_bytes, 0u);
  EXPECT_EQ(r.floor_bytes, 0u);
  EXPECT_EQ(r.committed_bytes, 64 * kKiB);
  EXPECT_EQ(r.expandable, 0u);
  char* base = static_cast<char*>(r.base);
  EXPECT_EQ(zarena_contains(g, base), 1);
  EXPECT_EQ(zarena_contains(g, base + 64 * kKiB - 1), 1);
  EXPECT_EQ(zarena_contains(g, base + 64 * kKiB), 0);
  EXPECT_EQ(zarena_contains(g, base - 1), 0);
  EXPECT_EQ(zarena_contains(nullptr, base), 0);

  const zarena_block w = alloc_ex(g, 4 * kKiB);  // "weights"
  const zarena_block x = alloc_ex(g, 4 * kKiB);  // "a sample"
  const zarena_block t = alloc_ex(g, 4 * kKiB);  // "a step's tensor"
  r = region_of(g);
  EXPECT_EQ(r.top_bytes, 12 * kKiB);
  EXPECT_EQ(static_cast<char*>(w.ptr), base);

  EXPECT_EQ(zarena_set_floor(g, 8 * kKiB + 16), ZARENA_E_INVALID_ARGUMENT) << "not aligned";
  EXPECT_EQ(zarena_set_floor(g, 16 * kKiB), ZARENA_E_INVALID_ARGUMENT) << "above the top";
  EXPECT_EQ(zarena_set_floor(g, 2 * kKiB), ZARENA_E_INVALID_ARGUMENT) << "inside a block";
  EXPECT_EQ(region_of(g).floor_bytes, 0u) << "refusals change nothing";

  ASSERT_EQ(zarena_set_floor(g, 8 * kKiB), ZARENA_OK) << zarena_last_error();  // raise
  r = region_of(g);
  EXPECT_EQ(r.floor_bytes, 8 * kKiB);
  EXPECT_EQ(stats_of(g).floor_bytes, 8 * kKiB);
  fill_bytes(w.ptr, w.size, 1);
  fill_bytes(x.ptr, x.size, 2);
  ASSERT_EQ(zarena_reset(g), ZARENA_OK);
  r = region_of(g);
  EXPECT_EQ(r.top_bytes, 8 * kKiB) << "rewound to the floor";
  EXPECT_EQ(stats_of(g).live_allocs, 2u) << "w and x survive, t was reclaimed";
  EXPECT_EQ(zarena_free_at(g, t.ptr, t.epoch), ZARENA_E_STALE);
  EXPECT_TRUE(holds(w.ptr, w.size, 1));
  EXPECT_TRUE(holds(x.ptr, x.size, 2));
  const zarena_block t2 = alloc_ex(g, 4 * kKiB);
  EXPECT_EQ(t2.ptr, t.ptr) << "the next step starts at the floor";

  // Lower the floor under x: x belongs to the current epoch again, the next reset
  // reclaims it; w stays.
  ASSERT_EQ(zarena_set_floor(g, 4 * kKiB), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(region_of(g).floor_bytes, 4 * kKiB);
  ASSERT_EQ(zarena_reset(g), ZARENA_OK);
  r = region_of(g);
  EXPECT_EQ(r.floor_bytes, 4 * kKiB);
  EXPECT_EQ(r.top_bytes, 4 * kKiB);
  EXPECT_EQ(stats_of(g).live_allocs, 1u);
  EXPECT_EQ(zarena_free_at(g, x.ptr, x.epoch), ZARENA_E_STALE);
  EXPECT_TRUE(holds(w.ptr, w.size, 1));
  EXPECT_EQ(zarena_free_at(g, w.ptr, w.epoch), ZARENA_OK) << "below the floor, w keeps its epoch";

  // The overflow pool's blocks are not in the region.
  zarena_config c = host_config(4 * kKiB, ZARENA_OVERFLOW_SYNC);
  Arena o(c);
  const zarena_block big = alloc_ex(o, 8 * kKiB);
  ASSERT_TRUE(big.flags & ZARENA_BLOCK_OVERFLOW);
  EXPECT_EQ(zarena_contains(o, big.ptr), 0);
  EXPECT_EQ(zarena_contains(g, big.ptr), 0);
}

// --- 4. poison ---------------------------------------------------------------------------------

TEST_F(Semantics, PoisonSwitchedAtRunTimeWithItsWordReadBack) {
  Arena g(host_config(64 * kKiB));
  const zarena_block a = alloc_ex(g, 1 * kKiB);
  fill_bytes(a.ptr, a.size, 0);
  ASSERT_EQ(zarena_free(g, a.ptr), ZARENA_OK);
  EXPECT_EQ(word_at(a.ptr), 0u) << "poison is off by default";
  EXPECT_EQ(stats_of(g).poison_fills, 0u);

  ASSERT_EQ(zarena_set_poison(g, 1, 0xDEADBEEF), ZARENA_OK);
  const zarena_block b = alloc_ex(g, 1 * kKiB);
  fill_bytes(b.ptr, b.size, 0);
  ASSERT_EQ(zarena_free(g, b.ptr), ZARENA_OK);
  EXPECT_EQ(word_at(b.ptr), 0xDEADBEEFu);
  EXPECT_EQ(word_at(static_cast<char*>(b.ptr) + b.size - 4), 0xDEADBEEFu);
  EXPECT_GE(stats_of(g).poison_fills, 1u);

  ASSERT_EQ(zarena_set_poison(g, 1, 0), ZARENA_OK) << "0 selects the default word";
  const zarena_block c = alloc_ex(g, 1 * kKiB);
  const zarena_block keep = alloc_ex(g, 1 * kKiB);
  fill_bytes(c.ptr, c.size, 0);
  fill_bytes(keep.ptr, keep.size, 0);
  ASSERT_EQ(zarena_free(g, c.ptr), ZARENA_OK);
  EXPECT_EQ(word_at(c.ptr), 0x7FF80000u);
  float f;
  std::memcpy(&f, c.ptr, sizeof f);
  EXPECT_TRUE(std::isnan(f)) << "a stale activation reads as NaN";
  ASSERT_EQ(zarena_reset(g), ZARENA_OK);
  EXPECT_EQ(word_at(keep.ptr), 0x7FF80000u) << "reclaimed blocks are filled at the reset";

  ASSERT_EQ(zarena_set_poison(g, 0, 0x11111111), ZARENA_OK);
  const uint64_t fills = stats_of(g).poison_fills;
  const zarena_block d = alloc_ex(g, 1 * kKiB);
  fill_bytes(d.ptr, d.size, 0);
  ASSERT_EQ(zarena_free(g, d.ptr), ZARENA_OK);
  EXPECT_EQ(word_at(d.ptr), 0u) << "switched off";
  EXPECT_EQ(stats_of(g).poison_fills, fills);
}

TEST_F(Semantics, PoisonNeverTouchesPinnedBlocksOrWhatLiesBelowTheFloor) {
  zarena_config c = host_config(64 * kKiB);
  c.flags |= ZARENA_FLAG_POISON;
  Arena g(c);
  const zarena_block weights = alloc_ex(g, 4 * kKiB);
  fill_bytes(weights.ptr, weights.size, 0x11);
  ASSERT_EQ(zarena_mark_step_boundary(g), ZARENA_OK);
  const zarena_block act = alloc_ex(g, 4 * kKiB);
  const zarena_block tmp = alloc_ex(g, 4 * kKiB);
  fill_bytes(act.ptr, act.size, 0x22);
  fill_bytes(tmp.ptr, tmp.size, 0x33);
  ASSERT_EQ(zarena_pin(g, act.ptr), ZARENA_OK);
  ASSERT_EQ(zarena_reset(g), ZARENA_OK);
  EXPECT_TRUE(holds(weights.ptr, weights.size, 0x11));
  EXPECT_TRUE(holds(act.ptr, act.size, 0x22));
  EXPECT_EQ(word_at(tmp.ptr), 0x7FF80000u);
  // A pinned block freed is filled at its last unpin, not before.
  ASSERT_EQ(zarena_free(g, act.ptr), ZARENA_OK);
  EXPECT_TRUE(holds(act.ptr, act.size, 0x22));
  ASSERT_EQ(zarena_unpin(g, act.ptr), ZARENA_OK);
  EXPECT_EQ(word_at(act.ptr), 0x7FF80000u);
  EXPECT_TRUE(holds(weights.ptr, weights.size, 0x11));
}

TEST_F(Semantics, PoisonSkippedWhileTheEngineMarksACaptureWithOneWarning) {
  zarena_config c = host_config(64 * kKiB);
  c.flags |= ZARENA_FLAG_POISON;
  c.poison_word = 0xA5A5A5A5;
  Arena g(c);
  const uint64_t fills0 = g.calls(FaultSite::kFill32);
  ASSERT_EQ(zarena_set_capture_active(g, 1), ZARENA_OK);
  std::vector<zarena_block> blocks;
  for (int i = 0; i < 5; ++i) {
    blocks.push_back(alloc_ex(g, 1 * kKiB));
    fill_bytes(blocks.back().ptr, 1 * kKiB, 0);
  }
  ASSERT_EQ(zarena_free(g, blocks[0].ptr), ZARENA_OK);
  EXPECT_EQ(log_.of("poison.skipped").size(), 1u) << "the free that skipped a fill warns";
  for (int i = 1; i < 4; ++i) ASSERT_EQ(zarena_free(g, blocks[i].ptr), ZARENA_OK);
  ASSERT_EQ(zarena_reset(g), ZARENA_OK);  // reclaims blocks[4]: skipped as well
  for (const auto& b : blocks) EXPECT_EQ(word_at(b.ptr), 0u) << "no fill during a capture";
  EXPECT_EQ(g.calls(FaultSite::kFill32), fills0) << "not one backend fill call";
  zarena_stats s = stats_of(g);
  EXPECT_EQ(s.poison_skipped, 5u);
  EXPECT_EQ(s.poison_fills, 0u);
  EXPECT_EQ(log_.of("poison.skipped").size(), 1u) << "one warning per capture";

  ASSERT_EQ(zarena_set_capture_active(g, 0), ZARENA_OK);
  const zarena_block d = alloc_ex(g, 1 * kKiB);
  ASSERT_EQ(zarena_free(g, d.ptr), ZARENA_OK);
  EXPECT_EQ(word_at(d.ptr), 0xA5A5A5A5u) << "fills resume after the capture";
  EXPECT_EQ(stats_of(g).poison_fills, 1u);
  // A second capture warns again, once.
  ASSERT_EQ(zarena_set_capture_active(g, 1), ZARENA_OK);
  const zarena_block e = alloc_ex(g, 1 * kKiB);
  const zarena_block f = alloc_ex(g, 1 * kKiB);
  ASSERT_EQ(zarena_free(g, e.ptr), ZARENA_OK);
  ASSERT_EQ(zarena_free(g, f.ptr), ZARENA_OK);
  ASSERT_EQ(zarena_set_capture_active(g, 0), ZARENA_OK);
  EXPECT_EQ(log_.of("poison.skipped").size(), 2u);
  EXPECT_EQ(stats_of(g).poison_skipped, 7u);
}

// Issue 17 #5: overflow blocks are filled before they go back to the backend.
TEST_F(Semantics, OverflowBlocksArePoisonedBeforeTheyGoBack) {
  zarena_config c = host_config(4 * kKiB, ZARENA_OVERFLOW_SYNC);
  c.flags |= ZARENA_FLAG_POISON;
  Arena g(c);
  const zarena_block a = alloc_ex(g, 16 * kKiB);
  const zarena_block b = alloc_ex(g, 16 * kKiB);
  ASSERT_TRUE(a.flags & b.flags & ZARENA_BLOCK_OVERFLOW);
  const uint64_t fills0 = g.calls(FaultSite::kFill32);
  const uint64_t frees0 = g.calls(FaultSite::kOverflowFree);
  const uint64_t counted0 = stats_of(g).poison_fills;
  ASSERT_EQ(zarena_free(g, a.ptr), ZARENA_OK);
  EXPECT_EQ(g.calls(FaultSite::kFill32), fills0 + 1) << "freed: filled, then given back";
  EXPECT_EQ(stats_of(g).poison_fills, counted0 + 1) << "counted in stats";
  EXPECT_EQ(g.calls(FaultSite::kOverflowFree), frees0 + 1);
  ASSERT_EQ(zarena_reset(g), ZARENA_OK);
  EXPECT_EQ(g.calls(FaultSite::kFill32), fills0 + 2) << "reclaimed: filled, then given back";
  EXPECT_EQ(g.calls(FaultSite::kOverflowFree), frees0 + 2);
}

// --- 5. capture flag ---------------------------------------------------------------------------

TEST_F(Semantics, CaptureFlagRefusesSyncOverflowBeforeAnyBackendCall) {
  Arena g(host_config(4 * kKiB, ZARENA_OVERFLOW_SYNC));
  void* fill = nullptr;
  ASSERT_EQ(zarena_alloc(g, 4 * kKiB, &fill), ZARENA_OK);
  ASSERT_EQ(zarena_set_capture_active(g, 1), ZARENA_OK);
  const uint64_t allocs0 = g.calls(FaultSite::kOverflowAlloc);
  const uint64_t queries0 = g.calls(FaultSite::kCaptureStatus);
  const zarena_stats before = stats_of(g);
  void* p = reinterpret_cast<void*>(1);
  EXPECT_EQ(zarena_alloc(g, 1 * kKiB, &p), ZARENA_E_CAPTURE_UNSAFE);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(std::string(zarena_last_error()).find("capture"), std::string::npos)
      << zarena_last_error();
  EXPECT_EQ(g.calls(FaultSite::kOverflowAlloc), allocs0) << "no allocation was attempted";
  EXPECT_EQ(g.calls(FaultSite::kCaptureStatus), queries0) << "the flag is enough";
  const zarena_stats after = stats_of(g);
  EXPECT_EQ(after.overflow_failures, before.overflow_failures + 1);
  EXPECT_EQ(after.overflow_allocs, before.overflow_allocs);
  const auto first = log_.of("arena.first_overflow");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].str("path"), "capture_refused");
  EXPECT_EQ(first[0].str("verdict"), "capture_refused");

  ASSERT_EQ(zarena_set_capture_active(g, 0), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(g, 1 * kKiB, &p), ZARENA_OK) << "allowed again after the capture";
  EXPECT_EQ(g.calls(FaultSite::kOverflowAlloc), allocs0 + 1);
  EXPECT_EQ(zarena_set_capture_active(nullptr, 1), ZARENA_E_INVALID_ARGUMENT);
}

TEST_F(Semantics, AsyncOverflowIsNotRefusedByTheCaptureFlag) {
  Arena g(host_config(4 * kKiB, ZARENA_OVERFLOW_ASYNC));
  ASSERT_EQ(zarena_set_capture_active(g, 1), ZARENA_OK);
  const zarena_block b = alloc_ex(g, 8 * kKiB);
  EXPECT_TRUE(b.flags & ZARENA_BLOCK_OVERFLOW) << "stream-ordered: may run inside a capture";
  ASSERT_EQ(zarena_set_capture_active(g, 0), ZARENA_OK);
}

// Issue 17 #1 (backend-independent part): overflow blocks freed or reclaimed while a capture
// is active are deferred -- OK returned, nothing given back, counted -- and go back once the
// capture ends; at destroy nothing is left (deferred ones included).
TEST_F(Semantics, OverflowFreesDuringACaptureAreDeferredAndGivenBackAfterIt) {
  for (int32_t policy : {ZARENA_OVERFLOW_SYNC, ZARENA_OVERFLOW_ASYNC}) {
    SCOPED_TRACE(policy == ZARENA_OVERFLOW_SYNC ? "SYNC" : "ASYNC");
    Arena g(host_config(4 * kKiB, policy));
    const zarena_block a = alloc_ex(g, 8 * kKiB);  // before the capture
    const zarena_block b = alloc_ex(g, 8 * kKiB);
    const zarena_block c = alloc_ex(g, 8 * kKiB);
    ASSERT_TRUE(a.flags & b.flags & c.flags & ZARENA_BLOCK_OVERFLOW);
    const uint64_t frees0 = g.calls(FaultSite::kOverflowFree);
    ASSERT_EQ(zarena_set_capture_active(g, 1), ZARENA_OK);
    ASSERT_EQ(zarena_free(g, a.ptr), ZARENA_OK);
    EXPECT_EQ(zarena_free(g, a.ptr), ZARENA_E_DOUBLE_FREE) << "the free is recorded";
    ASSERT_EQ(zarena_reset(g), ZARENA_OK);  // reclaims b and c
    zarena_stats s = stats_of(g);
    EXPECT_EQ(g.calls(FaultSite::kOverflowFree), frees0) << "nothing goes back during a capture";
    EXPECT_EQ(s.overflow_deferred_gives, 3u);
    EXPECT_EQ(s.overflow_live_bytes, 0u) << "they are no longer the user's";
    EXPECT_EQ(s.live_allocs, 0u);
    ASSERT_EQ(zarena_set_capture_active(g, 0), ZARENA_OK);
    s = stats_of(g);
    EXPECT_EQ(s.overflow_deferred_gives, 0u);
    EXPECT_EQ(g.calls(FaultSite::kOverflowFree), frees0 + 3) << "given back after the capture";
  }
}

// Destroyed while the capture is still on: the two deferred blocks and the two live ones
// wait with the region for a safe point (deferred_release.h), then all go back; destroyed
// after it: at once. Nothing is left over either way.
TEST_F(Semantics, DeferredOverflowGivesAreReleasedAtDestroyOrTheSafePointAfterIt) {
  for (bool capture_on : {false, true}) {
    SCOPED_TRACE(capture_on ? "destroyed during the capture" : "destroyed after it");
    auto tally = std::make_shared<zarena_core::FaultTally>();
    zarena_core::FaultPlan plan;
    plan.tally = tally;
    zarena_core::arm_faults_for_next_create(plan);
    zarena* a = nullptr;
    const zarena_config c = host_config(4 * kKiB, ZARENA_OVERFLOW_SYNC);
    ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK);
    std::vector<zarena_block> blocks;
    for (int i = 0; i < 4; ++i) blocks.push_back(alloc_ex(a, 8 * kKiB));
    ASSERT_EQ(zarena_set_capture_active(a, 1), ZARENA_OK);
    ASSERT_EQ(zarena_free(a, blocks[0].ptr), ZARENA_OK);
    ASSERT_EQ(zarena_free(a, blocks[1].ptr), ZARENA_OK);
    EXPECT_EQ(stats_of(a).overflow_deferred_gives, 2u);
    const uint64_t allocs = tally->ok_at(FaultSite::kOverflowAlloc);
    EXPECT_EQ(tally->calls_at(FaultSite::kOverflowFree), 0u);
    if (!capture_on) {
      ASSERT_EQ(zarena_set_capture_active(a, 0), ZARENA_OK);
    }
    ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
    if (capture_on) {
      EXPECT_EQ(tally->calls_at(FaultSite::kOverflowFree), 0u) << "no give-back in the capture";
      zarena_core::release_deferred();  // the next create or destroy would
    }
    EXPECT_EQ(tally->ok_at(FaultSite::kOverflowFree), allocs) << "every block given back";
  }
}

// A backend that fails to take an overflow block back (a capture the arena could not see):
// zarena_free still answers OK, the block waits like a deferred one and goes back at the
// next safe point; nothing is lost.
TEST_F(Semantics, OverflowGiveBackThatFailsIsRetriedNotLost) {
  Arena g(host_config(4 * kKiB, ZARENA_OVERFLOW_SYNC));
  const zarena_block a = alloc_ex(g, 8 * kKiB);
  const zarena_block b = alloc_ex(g, 8 * kKiB);
  g.faults().arm(FaultSite::kOverflowFree, 1, zarena_core::Status::kCaptureUnsafe);
  const uint64_t frees0 = g.calls(FaultSite::kOverflowFree);
  ASSERT_EQ(zarena_free(g, a.ptr), ZARENA_OK);
  EXPECT_EQ(g.calls(FaultSite::kOverflowFree), frees0 + 1) << "tried once, refused";
  EXPECT_EQ(stats_of(g).overflow_deferred_gives, 1u) << "kept for a retry";
  ASSERT_EQ(zarena_free(g, b.ptr), ZARENA_OK);  // a safe point: both go back now
  EXPECT_EQ(stats_of(g).overflow_deferred_gives, 0u);
  EXPECT_EQ(g.calls(FaultSite::kOverflowFree), frees0 + 3);
}

// --- 5b. stream, managed ----------------------------------------------------------------------

TEST_F(Semantics, SetStreamOnTheHostBackendKeepsTheHandle) {
  Arena g(host_config(64 * kKiB, ZARENA_OVERFLOW_ASYNC));
  int tag1 = 0, tag2 = 0;
  EXPECT_EQ(g.a->arena->backend().stream(), nullptr);
  ASSERT_EQ(zarena_set_stream(g, &tag1), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(g.a->arena->backend().stream(), &tag1);
  const zarena_block b = alloc_ex(g, 128 * kKiB);  // overflow on the new "stream"
  ASSERT_TRUE(b.flags & ZARENA_BLOCK_OVERFLOW);
  ASSERT_EQ(zarena_set_stream(g, &tag2), ZARENA_OK);
  EXPECT_EQ(zarena_free(g, b.ptr), ZARENA_OK) << "blocks handed out before stay valid";
  ASSERT_EQ(zarena_set_stream(g, nullptr), ZARENA_OK);
  EXPECT_EQ(g.a->arena->backend().stream(), nullptr);
  // A refusal (injected: the host backend refuses nothing) changes nothing.
  g.faults().arm(FaultSite::kSetStream, 1);
  EXPECT_EQ(zarena_set_stream(g, &tag1), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(zarena_last_error()).find("zarena_set_stream"), std::string::npos);
  EXPECT_EQ(g.a->arena->backend().stream(), nullptr);
  EXPECT_EQ(zarena_set_stream(nullptr, nullptr), ZARENA_E_INVALID_ARGUMENT);
}

TEST_F(Semantics, ManagedFlagOnTheHostBackendIsHostMemoryAndSaysSo) {
  for (uint32_t flags : {ZARENA_FLAG_MANAGED, ZARENA_FLAG_MANAGED | ZARENA_FLAG_MANAGED_FALLBACK}) {
    log_.clear();
    zarena_config c = host_config(64 * kKiB);
    c.flags = flags;
    Arena g(c);
    ASSERT_NE(g.a, nullptr) << "host memory is what managed memory would give the CPU";
    const zarena_region r = region_of(g);
    EXPECT_EQ(r.managed, 0u) << "the region is not CUDA managed memory";
    const auto cfg = log_.of("arena.config");
    ASSERT_EQ(cfg.size(), 1u);
    const zarena_test::Field* m = cfg[0].field("flags.managed");
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->i, 1) << "the flag as asked";
    const zarena_test::Field* rm = cfg[0].field("region_managed");
    ASSERT_NE(rm, nullptr) << "arena.config says whether the region is managed";
    EXPECT_EQ(rm->kind, ZARENA_FIELD_BOOL);
    EXPECT_EQ(rm->i, 0);
    EXPECT_NE(cfg[0].message.find("host memory"), std::string::npos) << cfg[0].message;
  }
}

// --- the hazard --------------------------------------------------------------------------------

// Forward saves activations for backward (pinned), the engine resets between the passes
// (as ztensor does when it recycles a step's scratch), backward reads the activations and
// drops them, and tensors of the forward pass are freed by a finalizer long after. The
// activations' bytes must be intact after the resets and never handed out meanwhile; the
// finalizer's stale frees must never free a live block.
TEST_F(Semantics, ForwardResetBackwardHazard) {
  zarena_config c = host_config(512 * kKiB, ZARENA_OVERFLOW_SYNC);
  c.flags |= ZARENA_FLAG_POISON;  // a reclaimed activation would read as NaN
  Arena g(c);
  const zarena_block weights = alloc_ex(g, 32 * kKiB);
  fill_bytes(weights.ptr, weights.size, 0x57);
  ASSERT_EQ(zarena_mark_step_boundary(g), ZARENA_OK);

  std::vector<zarena_block> stale_tensors;  // what the finalizer frees later
  for (int step = 0; step < 20; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    // forward: four layers; each saves an activation (pinned) and makes scratch.
    std::vector<zarena_block> saved;
    for (int l = 0; l < 4; ++l) {
      zarena_block scratch = alloc_ex(g, 8 * kKiB);
      fill_bytes(scratch.ptr, scratch.size, 0xCC);
      zarena_block act = alloc_ex(g, (4 + l) * kKiB);
      fill_bytes(act.ptr, act.size, static_cast<unsigned char>(0x40 + l));
      ASSERT_EQ(zarena_pin(g, act.ptr), ZARENA_OK);
      saved.push_back(act);
      stale_tensors.push_back(scratch);  // dropped: a finalizer frees it some time later
    }
    if (step == 7) {
      // One activation too large for what is left of the region: an overflow block, pinned.
      zarena_block big = alloc_ex(g, 600 * kKiB);
      ASSERT_TRUE(big.flags & ZARENA_BLOCK_OVERFLOW);
      fill_bytes(big.ptr, big.size, 0x4F);
      ASSERT_EQ(zarena_pin(g, big.ptr), ZARENA_OK);
      saved.push_back(big);
    }
    // The reset between forward and backward.
    ASSERT_EQ(zarena_reset(g), ZARENA_OK);
    // backward: gradients fill the space the reset reclaimed; none may land on an activation.
    std::vector<zarena_block> grads;
    for (int k = 0; k < 24; ++k) {
      zarena_block gr;
      if (zarena_alloc_ex(g, 3 * kKiB, 0, &gr) != ZARENA_OK) break;
      for (const auto& a : saved) {
        ASSERT_FALSE(overlaps(gr.ptr, gr.size, a.ptr, a.size)) << "a gradient over an activation";
      }
      fill_bytes(gr.ptr, gr.size, 0xDD);
      grads.push_back(gr);
    }
    // The finalizer runs now, with frees of epochs long gone.
    std::thread finalizer([&] {
      for (const auto& t : stale_tensors) {
        const zarena_status st = zarena_free_at(g, t.ptr, t.epoch);
        EXPECT_TRUE(st == ZARENA_E_STALE) << "status " << st;
      }
    });
    finalizer.join();
    stale_tensors.clear();
    for (const auto& gr : grads) ASSERT_TRUE(holds(gr.ptr, gr.size, 0xDD)) << "a live gradient hit";
    for (size_t l = 0; l < saved.size(); ++l) {
      const unsigned char want = l < 4 ? static_cast<unsigned char>(0x40 + l) : 0x4F;
      ASSERT_TRUE(holds(saved[l].ptr, saved[l].size, want)) << "activation " << l;
      ASSERT_EQ(zarena_unpin(g, saved[l].ptr), ZARENA_OK);
      ASSERT_EQ(zarena_free_at(g, saved[l].ptr, saved[l].epoch), ZARENA_OK)
          << "an activation keeps its epoch across the reset: " << zarena_last_error();
    }
    for (const auto& gr : grads) ASSERT_EQ(zarena_free_at(g, gr.ptr, gr.epoch), ZARENA_OK);
    ASSERT_EQ(zarena_reset(g), ZARENA_OK);
    const zarena_stats s = stats_of(g);
    ASSERT_EQ(s.live_allocs, 1u) << "only the weights";
    ASSERT_EQ(s.pinned_blocks, 0u);
    ASSERT_EQ(s.overflow_live_bytes, 0u);
  }
  EXPECT_TRUE(holds(weights.ptr, weights.size, 0x57));
  EXPECT_EQ(g.a->arena->check_invariants(), "");
}

}  // namespace
