// Step plans through the C API (ZARENA_FLAG_PLAN): a model test. Training-like steps
// repeat with random deviations (another size, an extra or a missing allocation, a late
// free, frees out of order, resets and pins mid-step, floors raised over the zone), from
// one thread and from threads taking turns or freeing each other's blocks at random
// moments. The model knows every block the arena handed out and not yet gave back; every
// block handed out must lie in the region and overlap none of them, and every block keeps
// the bytes written into it until it is freed or reclaimed. Stats are checked against the
// model at quiet points; the plans must actually serve (plan_hits), or the test proves
// nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "plan_model.h"
#include "support.h"
#include "zarena/zarena_plan.h"

namespace {

using namespace zarena_test;

constexpr uint64_t kCapacity = 64 * kMiB;

// A long run (docs/PLANS.md): ZTEST_PLAN_SEEDS=N runs N seeds of the model test, and
// N/4 steps in the threads test, from ZTEST_PLAN_SEED_BASE (default 1000).
uint64_t env_or(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != 0 ? std::strtoull(v, nullptr, 10) : fallback;
}
constexpr uint64_t kAlign = 256;

zarena* make_plan_arena(const char* name, uint32_t flags = 0) {
  zarena_config cfg;
  zarena_config_init(&cfg);
  cfg.backend = ZARENA_BACKEND_HOST;
  cfg.capacity_bytes = kCapacity;
  cfg.alignment = kAlign;
  cfg.overflow_policy = ZARENA_OVERFLOW_REFUSE;
  cfg.flags |= ZARENA_FLAG_PLAN | flags;
  cfg.name = name;
  zarena* a = nullptr;
  EXPECT_EQ(zarena_create(&cfg, &a), ZARENA_OK) << zarena_last_error();
  return a;
}

// One allocation of a step: its size, tag, and where it is freed (before allocation
// `free_before` of the same step; n: at the step's end; kKeep: left to the reset).
struct Item {
  uint64_t size;
  uint32_t tag;
  uint32_t free_before;
};
constexpr uint32_t kKeep = ~0u;

std::vector<Item> make_step(std::mt19937_64& rng, uint32_t n) {
  std::vector<Item> items(n);
  for (uint32_t i = 0; i < n; ++i) {
    items[i].size = (1 + rng() % 64) * kAlign * (rng() % 8 == 0 ? 16 : 1);
    items[i].tag = static_cast<uint32_t>(rng() % 3);
    const uint32_t r = static_cast<uint32_t>(rng() % 10);
    items[i].free_before = r == 0 ? kKeep : r < 3 ? n : i + 1 + static_cast<uint32_t>(rng() % 8);
    if (items[i].free_before != kKeep && items[i].free_before > n) items[i].free_before = n;
  }
  return items;
}

// Planned blocks handed out over the bytes of a dynamic block freed earlier in the same
// step: a leftover's bytes, which the zone claimed once it was freed (nothing else puts a
// planned block where a dynamic one was during a step).
std::atomic<uint64_t> g_leftover_reuses{0};

struct Driver {
  zarena* a;
  BlockModel& m;
  std::mt19937_64& rng;
  std::vector<std::pair<uintptr_t, uint32_t>> pinned;         // pinned blocks and the step to unpin
  std::map<uintptr_t, uint64_t> dynamic;                      // dynamic blocks held: their sizes
  std::vector<std::pair<uintptr_t, uint64_t>> freed_dynamic;  // ... freed in this step

  void step_begins() { freed_dynamic.clear(); }
  uintptr_t alloc(uint64_t size, uint32_t tag, const std::string& where) {
    zarena_block b;
    const zarena_status st = zarena_alloc_ex(a, size, tag, &b);
    EXPECT_EQ(st, ZARENA_OK) << where << ": " << zarena_last_error();
    if (st != ZARENA_OK) return 0;
    m.handed_out(b, where);
    const uintptr_t p = reinterpret_cast<uintptr_t>(b.ptr);
    if (b.flags & ZARENA_BLOCK_PLANNED) {
      dynamic.erase(p);
      for (const auto& [q, n] : freed_dynamic) {
        if (p < q + n && q < p + b.size) {
          ++g_leftover_reuses;
          break;
        }
      }
    } else {
      dynamic[p] = b.size;
    }
    return p;
  }
  void free(uintptr_t p, const std::string& where) {
    uint64_t epoch = 0;
    bool pinned_now = false;
    if (p == 0 || !m.take_for_free(p, &epoch, &pinned_now)) return;
    if (auto it = dynamic.find(p); it != dynamic.end()) {
      if (!pinned_now) freed_dynamic.push_back(*it);
      dynamic.erase(it);
    }
    const bool checked = rng() % 2 == 0;
    const zarena_status st = checked ? zarena_free_at(a, reinterpret_cast<void*>(p), epoch)
                                     : zarena_free(a, reinterpret_cast<void*>(p));
    EXPECT_EQ(st, ZARENA_OK) << where << ": " << zarena_last_error();
  }
};

// Steps after which the zone was in pieces (laid out around long-lived blocks).
std::atomic<uint64_t> g_zone_in_pieces{0};

// Runs `steps` steps of one base step with deviations at rate `dev` (0: none).
// resets: a zarena_reset ends every step (else everything is freed explicitly and the
// step's kept blocks are freed early in the next one). The first step also makes
// long-lived blocks between its own (parameters: pinned when resets would reclaim them),
// which the plan's zone is laid out around; later steps now and then free one (its hole
// goes to the dynamic engine) or pin it for a while.
// carry_mid_step (no resets): each kept item is freed at a point of its own in the next
// step (else before its first allocation), and a late free (deviation kind 2) holds one of
// the carried blocks to the step's end too: leftovers the plan reuses once they are freed.
void run_steps(zarena* a, BlockModel& m, std::mt19937_64& rng, uint32_t steps, double dev,
               bool resets, const std::string& name, bool carry_mid_step = false) {
  Driver d{a, m, rng, {}, {}, {}};
  const std::vector<Item> base = make_step(rng, 20 + static_cast<uint32_t>(rng() % 120));
  std::vector<uint32_t> carry_before(base.size(), 0);
  if (carry_mid_step) {
    for (uint32_t& k : carry_before) k = static_cast<uint32_t>(rng() % (base.size() + 1));
  }
  std::uniform_real_distribution<double> u(0, 1);
  // No resets: the previous step's kept blocks, and before which allocation each is freed.
  std::vector<std::pair<uintptr_t, uint32_t>> carried;
  std::vector<uintptr_t> long_lived;
  for (uint32_t step = 0; step < steps; ++step) {
    const std::string where = name + " step " + std::to_string(step);
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    d.step_begins();
    if (step >= 3 && !long_lived.empty() && rng() % 6 == 0) {
      const size_t k = rng() % long_lived.size();
      const uintptr_t p = long_lived[k];
      if (rng() % 2 == 0) {  // freed: a hole in the zone's window, the region's
        if (resets) {
          m.unpin(p);
          ASSERT_EQ(zarena_unpin(a, reinterpret_cast<void*>(p)), ZARENA_OK) << zarena_last_error();
        }
        d.free(p, where + " long-lived");
        long_lived.erase(long_lived.begin() + static_cast<long>(k));
      } else if (m.pin(p)) {  // pinned for a while: the region's pin, not the zone's
        ASSERT_EQ(zarena_pin(a, reinterpret_cast<void*>(p)), ZARENA_OK) << zarena_last_error();
        d.pinned.push_back({p, step + 1 + static_cast<uint32_t>(rng() % 3)});
      }
    }
    std::vector<Item> items = base;
    const bool deviate = dev > 0 && u(rng) < dev;
    const uint32_t kind = static_cast<uint32_t>(rng() % 8);
    const uint32_t at = static_cast<uint32_t>(rng() % items.size());
    if (deviate) {
      switch (kind) {
        case 0:  // another size
          items[at].size += kAlign;
          break;
        case 1:  // an extra allocation
          items.insert(items.begin() + at, Item{kAlign * 3, 1, at + 2});
          for (Item& it : items) {
            if (it.free_before != kKeep && it.free_before > at) ++it.free_before;
          }
          break;
        case 2:  // a late free: held to the step's end
          items[at].free_before = static_cast<uint32_t>(items.size());
          if (carry_mid_step && !carried.empty()) {
            carried[rng() % carried.size()].second = static_cast<uint32_t>(items.size());
          }
          break;
        default:
          break;  // kinds 3..7 act below (mid-step)
      }
    }
    const uint32_t n = static_cast<uint32_t>(items.size());
    std::vector<uintptr_t> ptr(n, 0);
    std::vector<std::vector<uint32_t>> frees_before(n + 1);
    for (uint32_t i = 0; i < n; ++i) {
      if (items[i].free_before != kKeep) {
        frees_before[std::min(items[i].free_before, n)].push_back(i);
      }
    }
    for (uint32_t i = 0; i <= n; ++i) {
      std::vector<uint32_t>& f = frees_before[i];
      if (deviate && kind == 3 && f.size() > 1) std::reverse(f.begin(), f.end());  // out of order
      for (uint32_t j : f) d.free(ptr[j], where);
      for (auto& [p, k] : carried) {
        if (p != 0 && std::min(k, n) == i) {
          d.free(p, where + " carried");
          p = 0;
        }
      }
      if (i == n) break;
      if (deviate && kind == 4 && i == at) continue;  // a missing allocation
      ptr[i] = d.alloc(items[i].size, items[i].tag, where + " item " + std::to_string(i));
      if (step == 0 && rng() % 3 == 0) {
        const uintptr_t p = d.alloc((1 + rng() % 32) * kAlign, 2, where + " long-lived");
        if (p != 0 && resets && m.pin(p)) {
          ASSERT_EQ(zarena_pin(a, reinterpret_cast<void*>(p)), ZARENA_OK) << zarena_last_error();
        }
        if (p != 0) long_lived.push_back(p);
      }
      if (deviate && kind == 5 && i == at && ptr[i] != 0 && m.pin(ptr[i])) {  // pinned mid-step
        ASSERT_EQ(zarena_pin(a, reinterpret_cast<void*>(ptr[i])), ZARENA_OK) << zarena_last_error();
        d.pinned.push_back({ptr[i], step + 1 + static_cast<uint32_t>(rng() % 3)});
      }
      if (deviate && kind == 6 && i == at && resets) {  // a reset mid-step
        m.reset();
        ASSERT_EQ(zarena_reset(a), ZARENA_OK);
        std::fill(ptr.begin(), ptr.begin() + i + 1, 0);  // reclaimed (pinned ones stay held)
      }
      if (deviate && kind == 7 && i == at && rng() % 4 == 0) {  // the floor over everything
        m.floor_to_top();
        ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
      }
    }
    carried.clear();
    for (uint32_t i = 0; i < n; ++i) {
      if (items[i].free_before == kKeep && ptr[i] != 0 && !resets) {
        carried.push_back({ptr[i], i < carry_before.size() ? carry_before[i] : 0});
      }
    }
    for (auto it = d.pinned.begin(); it != d.pinned.end();) {
      if (it->second <= step) {
        m.unpin(it->first);
        ASSERT_EQ(zarena_unpin(a, reinterpret_cast<void*>(it->first)), ZARENA_OK)
            << where << ": " << zarena_last_error();
        it = d.pinned.erase(it);
      } else {
        ++it;
      }
    }
    if (resets) {
      // A free naming an epoch that ended is refused, whether the plan or the region
      // held the block.
      std::vector<uintptr_t> held = m.live_unpinned();
      const uint64_t epoch = zarena_epoch(a);
      m.reset();
      ASSERT_EQ(zarena_reset(a), ZARENA_OK);
      if (!held.empty() && rng() % 4 == 0) {
        const uintptr_t p = held[rng() % held.size()];
        if (!m.holds(p)) {  // reclaimed (a block that survived is not this case's business)
          EXPECT_EQ(zarena_free_at(a, reinterpret_cast<void*>(p), epoch), ZARENA_E_STALE)
              << where << ": " << zarena_last_error();
        }
      }
    }
    m.check_all();
    if (d.pinned.empty()) m.check_stats(where);
    const zarena_plan_view* v = zarena_plan_view_get(a);
    const zarena_stats st = stats_of(a);
    if (v != nullptr && st.plan_zone_bytes != 0 && st.plan_zone_bytes < v->zone_bytes) {
      ++g_zone_in_pieces;
    }
  }
  for (auto& [p, s] : d.pinned) {
    m.unpin(p);
    EXPECT_EQ(zarena_unpin(a, reinterpret_cast<void*>(p)), ZARENA_OK);
  }
}

TEST(ArenaPlans, RepeatingStepsAreServedFromThePlan) {
  LogCapture logs;
  for (bool resets : {true, false}) {
    std::mt19937_64 rng(resets ? 1 : 2);
    zarena* a = make_plan_arena("plans");
    BlockModel m(a);
    run_steps(a, m, rng, 12, 0, resets, resets ? "resets" : "frees");
    const zarena_stats s = stats_of(a);
    // Two steps to learn, then every step under the plan.
    EXPECT_GE(s.plans_learned, 1u);
    EXPECT_GE(s.plan_steps, 8u);
    EXPECT_EQ(s.plan_misses, 0u);
    EXPECT_GT(m.planned(), 0u);
    EXPECT_EQ(s.plan_hits, m.planned());
    EXPECT_GE(s.plan_bytes, s.plan_lower_bound_bytes);
    // Laid out in the holes between the first step's long-lived blocks: what the holes
    // cannot use counts too. The layout differs between machines (1.31x on the H200 host,
    // within 1.25x on the development machine), most likely because the background planner's
    // layout arrives at another boundary, with other blocks live; the bound is one that
    // holds for both, and the quality figures are the replay benchmarks'.
    EXPECT_LE(s.plan_bytes, s.plan_lower_bound_bytes * 3 / 2);
    EXPECT_NE(zarena_plan_view_get(a), nullptr);
    EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
  }
  EXPECT_GE(logs.count("arena.plan_learned"), 2u);
}

// Blocks a reset reclaims end with their step (docs/PLANS.md): a step that frees nothing
// and relies on the reset (a bump-and-reset loop), or frees a third and leaves the rest to
// it, is planned whole. (Blocks pinned across a reset, mid-step resets and floors: the
// model test below, whose kept items are left to the resets.)
TEST(ArenaPlans, BlocksAResetReclaimsArePlanned) {
  LogCapture logs(ZARENA_LOG_OFF);
  for (const char* kind : {"bump", "a third freed"}) {
    zarena* a = make_plan_arena("plans-reset");
    BlockModel m(a);
    std::mt19937_64 rng(9);
    Driver d{a, m, rng, {}, {}, {}};
    constexpr uint32_t kN = 48;
    const std::string k = kind;
    uint64_t last_hits = 0, step_hits = 0;
    for (int step = 0; step < 8; ++step) {
      const std::string where = k + " step " + std::to_string(step);
      std::vector<uintptr_t> ptr(kN, 0);
      for (uint32_t i = 0; i < kN; ++i) {
        if (k == "a third freed" && i >= 1 && (i - 1) % 3 == 0) d.free(ptr[i - 1], where);
        ptr[i] = d.alloc(kAlign * (1 + (i * 5) % 17), i % 2, where + " item " + std::to_string(i));
      }
      m.reset();
      ASSERT_EQ(zarena_reset(a), ZARENA_OK);
      m.check_all();
      m.check_stats(where);
      const uint64_t hits = stats_of(a).plan_hits;
      step_hits = hits - last_hits;
      last_hits = hits;
    }
    const zarena_stats s = stats_of(a);
    EXPECT_GE(s.plans_learned, 1u) << kind;
    EXPECT_EQ(s.plan_misses, 0u) << kind;
    // The last step: every allocation from the plan (before: only the freed third).
    EXPECT_EQ(step_hits, kN) << kind;
    EXPECT_EQ(s.plan_hits, m.planned()) << kind;
    EXPECT_LE(s.plan_bytes, s.plan_lower_bound_bytes * 11 / 10) << kind;
    EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
  }
}

// Stats while a planned step runs on another thread: plan_hits and the planned blocks live
// (plan_live_bytes) come from one instant, so with every block left to the reset, the hits
// not live are whole steps.
TEST(ArenaPlans, StatsSeePlannedAllocationsWhole) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena* a = make_plan_arena("plans-stats");
  constexpr uint64_t kBlock = 4096, kN = 64;
  std::atomic<bool> done{false};
  std::atomic<uint64_t> mid_step{0};  // samples taken in the middle of a planned step
  std::thread worker([&] {
    // Until the sampler saw enough planned steps in flight (bounded: a busy machine may
    // give it few turns, and then the test checks less, never wrongly).
    for (int step = 0; step < 400 || (step < 100000 && mid_step.load() < 200); ++step) {
      for (uint64_t i = 0; i < kN; ++i) {
        void* p = nullptr;
        EXPECT_EQ(zarena_alloc(a, kBlock, &p), ZARENA_OK);
      }
      EXPECT_EQ(zarena_reset(a), ZARENA_OK);
    }
    done.store(true);
  });
  uint64_t samples = 0;
  while (!done.load()) {
    const zarena_stats s = stats_of(a);
    ASSERT_EQ(s.plan_live_bytes % kBlock, 0u);
    const uint64_t live = s.plan_live_bytes / kBlock;
    ASSERT_LE(live, s.plan_hits);
    ASSERT_EQ((s.plan_hits - live) % kN, 0u)
        << "plan_hits " << s.plan_hits << ", " << live << " planned blocks live";
    ++samples;
    if (live != 0) mid_step.fetch_add(1);
  }
  worker.join();
  const zarena_stats s = stats_of(a);
  EXPECT_GT(s.plan_hits, 0u);
  EXPECT_EQ(s.plan_misses, 0u);
  std::printf("%llu samples, %llu in the middle of a planned step\n",
              static_cast<unsigned long long>(samples),
              static_cast<unsigned long long>(mid_step.load()));
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// Plans are on by default (1.3): a host arena made with no flag at all plans the steps;
// ZARENA_FLAG_NO_PLAN, or ZARENA_PLAN=0, turns them off.
TEST(ArenaPlans, OnByDefault) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena* a = make_host_arena(kCapacity, "plans-default");
  std::mt19937_64 rng(3);
  BlockModel m(a);
  run_steps(a, m, rng, 6, 0, true, "default");
  EXPECT_GT(m.planned(), 0u);
  EXPECT_GE(stats_of(a).plans_learned, 1u);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

TEST(ArenaPlans, NoPlanTurnsThemOff) {
  EnvGuard env("ZARENA_PLAN", "0");
  zarena_config cfg;
  zarena_config_init(&cfg);
  EXPECT_NE(cfg.flags & ZARENA_FLAG_NO_PLAN, 0u) << "ZARENA_PLAN=0";
  zarena* a = make_host_arena(kCapacity, "no-plans", ZARENA_OVERFLOW_REFUSE, ZARENA_FLAG_NO_PLAN);
  std::mt19937_64 rng(3);
  BlockModel m(a);
  run_steps(a, m, rng, 6, 0, true, "off");
  const zarena_stats s = stats_of(a);
  EXPECT_EQ(s.plans_learned, 0u);
  EXPECT_EQ(m.planned(), 0u);
  EXPECT_EQ(zarena_plan_view_get(a), nullptr);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// The model test: random deviations of every kind, resets or explicit frees, poison on
// or off; never an overlap, never a block written over, stats that agree.
TEST(ArenaPlans, RandomDeviationsNeverOverlap) {
  LogCapture logs(ZARENA_LOG_OFF);
  const uint64_t seeds = env_or("ZTEST_PLAN_SEEDS", 120 / kSanitizerSlowdown);
  const uint64_t seed_base = env_or("ZTEST_PLAN_SEED_BASE", 1000);
  uint64_t planned = 0, misses = 0;
  for (uint64_t seed = 0; seed < seeds; ++seed) {
    std::mt19937_64 rng(seed_base + seed);
    const bool poison = seed % 5 == 0;
    zarena* a = make_plan_arena("plans-model", poison ? ZARENA_FLAG_POISON : 0);
    BlockModel m(a);
    run_steps(a, m, rng, 30, 0.2, seed % 2 == 0, "seed " + std::to_string(seed));
    const zarena_stats s = stats_of(a);
    planned += s.plan_hits;
    misses += s.plan_misses;
    EXPECT_EQ(s.plan_hits, m.planned());
    EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
    if (HasFatalFailure()) return;
  }
  // The test proves something only if plans served and deviations left them, and zones
  // were laid out around long-lived blocks.
  EXPECT_GT(planned, 1000u);
  EXPECT_GT(misses, 10u);
  EXPECT_GT(g_zone_in_pieces.load(), seeds);
}

// Leftovers (docs/PLANS.md): blocks of the learned step still live at its end, freed at
// points of their own in the next step, whose bytes the plan reuses once the zone claimed
// them. Deviations free them late (to the step's end), pin, or skip them; the planned
// block over a leftover is handed out only once the leftover is dead, never over it.
TEST(ArenaPlans, LeftoversFreedMidStepNeverOverlap) {
  LogCapture logs(ZARENA_LOG_OFF);
  const uint64_t seeds = env_or("ZTEST_PLAN_SEEDS", 120 / kSanitizerSlowdown);
  const uint64_t seed_base = env_or("ZTEST_PLAN_SEED_BASE", 1000);
  const uint64_t reuses_before = g_leftover_reuses.load();
  uint64_t planned = 0, late = 0;
  for (uint64_t seed = 0; seed < seeds; ++seed) {
    std::mt19937_64 rng(seed_base + 7919 * seed);
    const bool poison = seed % 5 == 0;
    zarena* a = make_plan_arena("plans-leftovers", poison ? ZARENA_FLAG_POISON : 0);
    BlockModel m(a);
    run_steps(a, m, rng, 30, 0.25, false, "seed " + std::to_string(seed), true);
    const zarena_stats s = stats_of(a);
    planned += s.plan_hits;
    late += s.plan_first_miss == ZARENA_PLAN_MISS_LATE;
    EXPECT_EQ(s.plan_hits, m.planned());
    EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
    if (HasFatalFailure()) return;
  }
  const uint64_t reuses = g_leftover_reuses.load() - reuses_before;
  std::printf("%llu planned, %llu planned over a leftover freed in the step, %llu late\n",
              static_cast<unsigned long long>(planned), static_cast<unsigned long long>(reuses),
              static_cast<unsigned long long>(late));
  EXPECT_GT(planned, 1000u);
  EXPECT_GT(reuses, seeds);  // leftovers' bytes were reused
  EXPECT_GT(late, 0u);
}

// A leftover freed where the learned steps freed it gives its bytes to the plan's first
// step; one freed late ends the plan at the first allocation over it (late), and the
// plan is taken up again at the next step.
TEST(ArenaPlans, ALeftoverIsReusedOnceFreedAndALateOneEndsThePlan) {
  LogCapture logs(ZARENA_LOG_OFF);
  for (bool late : {false, true}) {
    zarena* a = make_plan_arena(late ? "leftover-late" : "leftover");
    BlockModel m(a);
    std::mt19937_64 rng(5);
    Driver d{a, m, rng, {}, {}, {}};
    const uint64_t reuses_before = g_leftover_reuses.load();
    bool withheld = false;  // a plan learned, its view not given: a leftover pending
    uintptr_t grad = 0;
    const uint64_t grad_size = 64 * kAlign;
    for (int step = 0; step < 6; ++step) {
      const std::string where =
          std::string(late ? "late" : "on time") + " step " + std::to_string(step);
      ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
      d.step_begins();
      withheld |= stats_of(a).plans_learned >= 1 && zarena_plan_view_get(a) == nullptr;
      const uintptr_t x = d.alloc(8 * kAlign, 0, where + " x");
      if (!(late && step == 2)) d.free(grad, where + " grad");      // before allocation 1
      const uintptr_t act = d.alloc(grad_size, 0, where + " act");  // fits the grad's bytes
      const uintptr_t y = d.alloc(4 * kAlign, 0, where + " y");
      d.free(act, where);
      if (late && step == 2) d.free(grad, where + " grad, late");
      grad = d.alloc(grad_size, 1, where + " grad");
      d.free(x, where);
      d.free(y, where);
      m.check_all();
    }
    const zarena_stats s = stats_of(a);
    EXPECT_GE(s.plans_learned, 1u);
    EXPECT_GT(m.planned(), 0u);
    // Bindings get no view while the leftover is pending, and get it at the first
    // boundary after its claim.
    EXPECT_TRUE(withheld);
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    EXPECT_NE(zarena_plan_view_get(a), nullptr);
    if (late) {
      EXPECT_EQ(s.plan_first_miss, static_cast<uint64_t>(ZARENA_PLAN_MISS_LATE));
    } else {
      EXPECT_EQ(s.plan_misses, 0u);
      EXPECT_GT(g_leftover_reuses.load(), reuses_before);  // the act over the grad's bytes
    }
    d.free(grad, "end");
    EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
  }
}

// Leftovers freed by another thread at moments of its own, racing the claims of the
// planned path (and the planned frees, pins and stats): never an overlap; the claims and
// the late ones both happen. Under TSan too.
TEST(ArenaPlans, LeftoversFreedByAnotherThreadRaceTheClaims) {
  LogCapture logs(ZARENA_LOG_INFO);
  zarena* a = make_plan_arena("plans-leftover-race");
  BlockModel m(a);
  std::mutex mu;
  std::condition_variable cv;
  std::deque<uintptr_t> handoff;
  bool stop = false;
  uint64_t picked = 0;  // blocks the freer took
  std::thread freer([&] {
    std::mt19937_64 rng(17);
    for (;;) {
      uintptr_t p = 0;
      {
        std::unique_lock<std::mutex> g(mu);
        cv.wait(g, [&] { return stop || !handoff.empty(); });
        if (handoff.empty()) return;
        p = handoff.front();
        handoff.pop_front();
        ++picked;
      }
      cv.notify_all();
      // Mostly soon, now and then much later (past the learned free point: late).
      for (uint64_t k = rng() % (rng() % 16 == 0 ? 512 : 16); k > 0; --k) std::this_thread::yield();
      uint64_t epoch = 0;
      bool pinned = false;
      if (m.take_for_free(p, &epoch, &pinned)) {
        EXPECT_EQ(zarena_free(a, reinterpret_cast<void*>(p)), ZARENA_OK) << zarena_last_error();
      }
    }
  });
  std::mt19937_64 rng(23);
  constexpr uint32_t kN = 24, kKept = 6;
  std::vector<uintptr_t> kept;
  // The dynamic blocks handed to the freer at this step's start, and the planned blocks
  // handed out over their bytes since (after their free: the model checks that).
  std::vector<std::pair<uintptr_t, uint64_t>> dynamic_kept, handed_off;
  uint64_t over_leftovers = 0;
  const int steps = 600 / kSanitizerSlowdown;
  for (int step = 0; step < steps && !HasFatalFailure(); ++step) {
    const std::string where = "step " + std::to_string(step);
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    {
      // Handed over, and the freer awake (it took the first) before the step goes on:
      // its frees race the step's allocations, not the next boundary.
      std::unique_lock<std::mutex> g(mu);
      const uint64_t want = picked + (kept.empty() ? 0 : 1);
      handoff.insert(handoff.end(), kept.begin(), kept.end());
      cv.notify_all();
      cv.wait(g, [&] { return picked >= want; });
    }
    kept.clear();
    handed_off.swap(dynamic_kept);
    dynamic_kept.clear();
    std::vector<uintptr_t> live;
    for (uint32_t i = 0; i < kN; ++i) {
      zarena_block b;
      // Three shapes in turn, six steps each: each is learned and laid out anew, with
      // the previous step's kept blocks as its leftovers.
      const uint64_t shape = 1 + static_cast<uint64_t>(step / 6) % 3;
      ASSERT_EQ(zarena_alloc_ex(a, kAlign * (4 + i % 5) * (i >= kN - kKept ? 8 : shape), 0, &b),
                ZARENA_OK);
      m.handed_out(b, where);
      const uintptr_t p = reinterpret_cast<uintptr_t>(b.ptr);
      if (b.flags & ZARENA_BLOCK_PLANNED) {
        for (const auto& [q, n] : handed_off) over_leftovers += p < q + n && q < p + b.size;
      }
      if (i >= kN - kKept) {  // gradients: made last, freed in the next step
        kept.push_back(p);
        if (!(b.flags & ZARENA_BLOCK_PLANNED)) dynamic_kept.push_back({p, b.size});
      } else {
        live.push_back(p);
      }
      if (live.size() > 3) {  // activations die a few allocations later
        uint64_t epoch = 0;
        bool pinned = false;
        const uintptr_t q = live.front();  // the same free points every step
        live.erase(live.begin());
        if (m.take_for_free(q, &epoch, &pinned)) {
          ASSERT_EQ(zarena_free(a, reinterpret_cast<void*>(q)), ZARENA_OK) << zarena_last_error();
        }
      }
      if (rng() % 64 == 0) (void)stats_of(a);
      for (uint64_t k = rng() % 16; k > 0; --k) std::this_thread::yield();
    }
    for (uintptr_t q : live) {
      uint64_t epoch = 0;
      bool pinned = false;
      if (m.take_for_free(q, &epoch, &pinned)) {
        ASSERT_EQ(zarena_free(a, reinterpret_cast<void*>(q)), ZARENA_OK);
      }
    }
  }
  {
    std::lock_guard<std::mutex> g(mu);
    stop = true;
  }
  cv.notify_all();
  freer.join();
  m.check_all();
  const zarena_stats s = stats_of(a);
  size_t late = 0;
  for (const Record& r : logs.of("arena.plan_abandoned")) {
    const Field* f = r.field("reason");
    late += f != nullptr && f->s == "late";
  }
  // How many leftovers are reused and how many claims lose the race depends on the
  // machine's timing (a few of each on the development host): printed, not checked.
  std::printf("%llu planned (%llu over a leftover), %llu plans learned, %llu left, %zu late\n",
              static_cast<unsigned long long>(s.plan_hits),
              static_cast<unsigned long long>(over_leftovers),
              static_cast<unsigned long long>(s.plans_learned),
              static_cast<unsigned long long>(s.plan_misses), late);
  EXPECT_GT(s.plan_hits, 0u);
  EXPECT_GT(s.plans_learned, 3u);
  EXPECT_EQ(s.plan_hits, m.planned());
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// Two threads take turns within each step (the plan follows both), and each frees some
// of the other's blocks; a third thread frees blocks handed to it at moments of its own,
// racing the planned path (late frees).
TEST(ArenaPlans, ThreadsTakingTurnsAndRacingFrees) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena* a = make_plan_arena("plans-threads");
  BlockModel m(a);
  std::mutex mu;
  std::condition_variable cv;
  int turn = 0;  // whose turn: 0 or 1
  std::deque<uintptr_t> handoff;
  std::atomic<bool> done{false};
  std::atomic<uint64_t> racing_frees{0};
  const uint32_t steps = static_cast<uint32_t>(
      std::max<uint64_t>(60 / kSanitizerSlowdown + 10, env_or("ZTEST_PLAN_SEEDS", 0) / 4));
  const uint32_t per_turn = 12, turns = 6;

  std::thread freer([&] {
    std::mt19937_64 rng(77);
    Driver d{a, m, rng, {}, {}, {}};
    for (;;) {
      uintptr_t p = 0;
      {
        std::lock_guard<std::mutex> g(mu);
        if (!handoff.empty()) {
          p = handoff.front();
          handoff.pop_front();
        }
      }
      if (p != 0) {
        d.free(p, "freer");
        racing_frees.fetch_add(1);
      } else if (done.load()) {
        return;
      } else {
        std::this_thread::yield();
      }
    }
  });
  auto worker = [&](int me) {
    std::mt19937_64 rng(static_cast<uint64_t>(me) + 5);
    Driver d{a, m, rng, {}, {}, {}};
    std::vector<uintptr_t> mine;
    for (uint32_t step = 0; step < steps; ++step) {
      for (uint32_t t = 0; t < turns; ++t) {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return turn == me; });
        lk.unlock();
        if (me == 0 && t == 0) {
          EXPECT_EQ(zarena_step_begin(a), ZARENA_OK);
        }
        // The same sizes every step; after step 20, one block a turn goes to the freer
        // (freed whenever it gets to it: the plan may see it late).
        for (uint32_t i = 0; i < per_turn; ++i) {
          const uint64_t size = kAlign * (1 + (i * 7 + t * 3 + me) % 40);
          const uintptr_t p = d.alloc(size, 0, "thread " + std::to_string(me));
          if (p == 0) continue;
          if (step >= 20 && i == 0) {
            std::lock_guard<std::mutex> g(mu);
            handoff.push_back(p);
          } else {
            mine.push_back(p);
          }
          if (mine.size() > 6) {
            d.free(mine.front(), "thread free");
            mine.erase(mine.begin());
          }
        }
        lk.lock();
        turn = 1 - me;
        cv.notify_all();
      }
    }
    for (uintptr_t p : mine) d.free(p, "thread end");
  };
  std::thread t0(worker, 0), t1(worker, 1);
  t0.join();
  t1.join();
  done.store(true);
  freer.join();
  m.check_all();
  m.check_stats("threads");
  const zarena_stats s = stats_of(a);
  EXPECT_GT(s.plan_hits, 0u) << "the plan never served: the test proved nothing";
  EXPECT_EQ(s.plan_hits, m.planned());
  EXPECT_GT(racing_frees.load(), 0u);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// Bad input on planned blocks: double frees, interior pointers, frees naming another epoch,
// unpins of unpinned blocks: a clear status, no state change.
TEST(ArenaPlans, MisuseOfPlannedBlocks) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena* a = make_plan_arena("plans-misuse");
  std::vector<zarena_block> blocks(4);
  for (int step = 0; step < 4; ++step) {
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    for (auto& b : blocks) ASSERT_EQ(zarena_alloc_ex(a, 4096, 0, &b), ZARENA_OK);
    for (auto& b : blocks) ASSERT_EQ(zarena_free(a, b.ptr), ZARENA_OK);
  }
  ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
  for (auto& b : blocks) ASSERT_EQ(zarena_alloc_ex(a, 4096, 0, &b), ZARENA_OK);
  ASSERT_NE(blocks[0].flags & ZARENA_BLOCK_PLANNED, 0u) << "the plan did not serve";
  const zarena_stats before = stats_of(a);
  char* p = static_cast<char*>(blocks[1].ptr);
  EXPECT_EQ(zarena_free(a, p + 256), ZARENA_E_NOT_OWNED);
  EXPECT_EQ(zarena_free_at(a, p, blocks[1].epoch + 1), ZARENA_E_STALE);
  EXPECT_EQ(zarena_unpin(a, p), ZARENA_E_NOT_PINNED);
  const zarena_stats mid = stats_of(a);
  EXPECT_EQ(mid.live_allocs, before.live_allocs);
  EXPECT_EQ(mid.used_bytes, before.used_bytes);
  EXPECT_EQ(zarena_pin(a, p), ZARENA_OK);
  EXPECT_EQ(zarena_free(a, p), ZARENA_OK);  // deferred to the unpin
  EXPECT_EQ(zarena_free(a, p), ZARENA_E_DOUBLE_FREE);
  EXPECT_EQ(zarena_unpin(a, p), ZARENA_OK);
  EXPECT_EQ(zarena_free(a, p), ZARENA_E_DOUBLE_FREE);
  EXPECT_EQ(stats_of(a).live_allocs, before.live_allocs - 1);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// Two planned instances of a step share a start (the second reuses the first's space).
// After a reset reclaimed the second, a free naming its epoch is STALE, whichever of the
// two the address leads to: the one freed earlier in that step is no "double free" then.
TEST(ArenaPlans, FreeNamingAnEndedEpochIsStaleWhereInstancesShareAStart) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena* a = make_plan_arena("plans-shared-start");
  zarena_block first{}, second{};
  bool shared = false;
  for (int step = 0; step < 6; ++step) {
    ASSERT_EQ(zarena_alloc_ex(a, 4096, 0, &first), ZARENA_OK);
    ASSERT_EQ(zarena_free(a, first.ptr), ZARENA_OK);
    ASSERT_EQ(zarena_alloc_ex(a, 4096, 0, &second), ZARENA_OK);
    shared = (second.flags & ZARENA_BLOCK_PLANNED) != 0 && second.ptr == first.ptr;
    const uint64_t epoch = zarena_epoch(a);
    ASSERT_EQ(zarena_reset(a), ZARENA_OK);
    EXPECT_EQ(zarena_free_at(a, second.ptr, epoch), ZARENA_E_STALE) << "step " << step;
    EXPECT_EQ(zarena_free_at(a, first.ptr, epoch), ZARENA_E_STALE) << "step " << step;
  }
  EXPECT_TRUE(shared) << "the plan did not serve both instances at one start";
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// zarena_plan_alloc_unplanned serves a request with the dynamic engine and leaves the plan
// alone: under an engaged plan, its block is not planned, plan_hits do not move, and the
// plan's next item is still served from the plan.
TEST(ArenaPlans, AllocUnplannedDoesNotAskThePlan) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena* a = make_plan_arena("plans-unplanned");
  zarena_block b;
  for (int step = 0; step < 4; ++step) {
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(zarena_alloc_ex(a, 4096, 0, &b), ZARENA_OK);
      ASSERT_EQ(zarena_free(a, b.ptr), ZARENA_OK);
    }
  }
  ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
  const uint64_t hits = stats_of(a).plan_hits;
  ASSERT_EQ(zarena_plan_alloc_unplanned(a, 4096, 0, &b), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(b.flags & ZARENA_BLOCK_PLANNED, 0u);
  EXPECT_EQ(b.size, 4096u);
  EXPECT_EQ(stats_of(a).plan_hits, hits);
  zarena_block planned;
  ASSERT_EQ(zarena_alloc_ex(a, 4096, 0, &planned), ZARENA_OK);
  EXPECT_NE(planned.flags & ZARENA_BLOCK_PLANNED, 0u) << "the plan did not serve item 0";
  EXPECT_EQ(stats_of(a).plan_hits, hits + 1);
  EXPECT_EQ(zarena_free(a, b.ptr), ZARENA_OK);
  EXPECT_EQ(zarena_free(a, planned.ptr), ZARENA_OK);
  EXPECT_EQ(zarena_plan_alloc_unplanned(a, 4096, 0, nullptr), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(zarena_plan_alloc_unplanned(nullptr, 4096, 0, &b), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// The zone is pinned region blocks to the region, but no user pin: pinned_bytes and
// pinned_peak_bytes count only the blocks the user pinned, planned or dynamic.
TEST(ArenaPlans, ZoneIsNoUserPin) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena* a = make_plan_arena("plans-pins");
  constexpr uint64_t kPlanned = 4096, kDynamic = 8192;
  zarena_block b[3];
  for (int step = 0; step < 6; ++step) {
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    for (auto& x : b) ASSERT_EQ(zarena_alloc_ex(a, kPlanned, 0, &x), ZARENA_OK);
    for (auto& x : b) ASSERT_EQ(zarena_free(a, x.ptr), ZARENA_OK);
  }
  zarena_stats s = stats_of(a);
  ASSERT_GT(s.plan_zone_bytes, 0u) << "no zone: the test proves nothing";
  ASSERT_GT(s.plan_hits, 0u);
  EXPECT_EQ(s.pinned_bytes, 0u);
  EXPECT_EQ(s.pinned_blocks, 0u);
  EXPECT_EQ(s.pinned_peak_bytes, 0u);
  ASSERT_EQ(zarena_reset_peak_stats(a), ZARENA_OK);
  s = stats_of(a);
  EXPECT_EQ(s.pinned_bytes, 0u);
  EXPECT_EQ(s.pinned_peak_bytes, 0u);

  // A planned block and a dynamic block pinned by the user: exactly their bytes.
  ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
  zarena_block dyn;
  ASSERT_EQ(zarena_plan_alloc_unplanned(a, kDynamic, 0, &dyn), ZARENA_OK) << zarena_last_error();
  ASSERT_EQ(dyn.flags & ZARENA_BLOCK_PLANNED, 0u);
  for (auto& x : b) ASSERT_EQ(zarena_alloc_ex(a, kPlanned, 0, &x), ZARENA_OK);
  ASSERT_NE(b[0].flags & ZARENA_BLOCK_PLANNED, 0u) << "the plan did not serve";
  ASSERT_EQ(zarena_pin(a, b[0].ptr), ZARENA_OK);
  ASSERT_EQ(zarena_pin(a, b[0].ptr), ZARENA_OK);  // a second pin: no more bytes
  ASSERT_EQ(zarena_pin(a, dyn.ptr), ZARENA_OK);
  s = stats_of(a);
  EXPECT_EQ(s.pinned_bytes, kPlanned + kDynamic);
  EXPECT_EQ(s.pinned_blocks, 2u);
  EXPECT_EQ(s.pinned_peak_bytes, kPlanned + kDynamic);
  ASSERT_EQ(zarena_reset_peak_stats(a), ZARENA_OK);
  EXPECT_EQ(stats_of(a).pinned_peak_bytes, kPlanned + kDynamic);
  ASSERT_EQ(zarena_unpin(a, b[0].ptr), ZARENA_OK);
  ASSERT_EQ(zarena_unpin(a, b[0].ptr), ZARENA_OK);
  s = stats_of(a);
  EXPECT_EQ(s.pinned_bytes, kDynamic);
  EXPECT_EQ(s.pinned_peak_bytes, kPlanned + kDynamic);
  ASSERT_EQ(zarena_unpin(a, dyn.ptr), ZARENA_OK);
  for (auto& x : b) ASSERT_EQ(zarena_free(a, x.ptr), ZARENA_OK);
  ASSERT_EQ(zarena_free(a, dyn.ptr), ZARENA_OK);
  ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
  s = stats_of(a);
  EXPECT_EQ(s.pinned_bytes, 0u);
  EXPECT_EQ(s.pinned_blocks, 0u);
  ASSERT_EQ(zarena_reset_peak_stats(a), ZARENA_OK);
  EXPECT_EQ(stats_of(a).pinned_peak_bytes, 0u);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// A step is a step: a loop that marks both ends of each step (zarena_step_begin, then
// zarena_reset: Go's Step(), Python's `with arena.step()`) counts each step once in
// plan_steps, as a loop that marks only one end does (it counted two: the empty stretch
// between the reset and the next step_begin was a step "served whole").
TEST(ArenaPlans, PlanStepsCountsAStepMarkedAtBothEndsOnce) {
  LogCapture logs(ZARENA_LOG_OFF);
  constexpr int kSteps = 10;
  uint64_t counted[3] = {};
  for (int marks = 0; marks < 3; ++marks) {  // 0: reset only, 1: step_begin only, 2: both
    zarena* a = make_plan_arena("plans-step-count");
    for (int step = 0; step < kSteps; ++step) {
      if (marks != 0) {
        ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
      }
      void* p[4];
      for (int i = 0; i < 4; ++i) ASSERT_EQ(zarena_alloc(a, 4096u * (1 + i), &p[i]), ZARENA_OK);
      for (void* x : p) ASSERT_EQ(zarena_free(a, x), ZARENA_OK);
      if (marks != 1) {
        ASSERT_EQ(zarena_reset(a), ZARENA_OK);
      }
    }
    if (marks == 1) {
      ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);  // ends the last step
    }
    const zarena_stats s = stats_of(a);
    ASSERT_GT(s.plan_hits, 0u) << "marks " << marks << ": the plan never served";
    EXPECT_EQ(s.plan_misses, 0u) << "marks " << marks;
    EXPECT_EQ(s.plan_hits % 4, 0u) << "marks " << marks;
    // Every step the plan served is one step, served whole.
    EXPECT_EQ(s.plan_steps, s.plan_hits / 4) << "marks " << marks;
    EXPECT_LE(s.plan_steps, static_cast<uint64_t>(kSteps)) << "marks " << marks;
    counted[marks] = s.plan_steps;
    EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
  }
  EXPECT_EQ(counted[2], counted[0]);
  EXPECT_EQ(counted[2], counted[1]);
}

// A step of three `size` blocks, allocated and freed six times (each after a step_begin)
// so that a plan learns it, then begun once more with its three blocks allocated into b.
void learned_step_of_three(zarena* a, uint64_t size, zarena_block (&b)[3]) {
  for (int step = 0; step < 6; ++step) {
    ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
    for (auto& x : b) ASSERT_EQ(zarena_alloc_ex(a, size, 0, &x), ZARENA_OK);
    for (auto& x : b) ASSERT_EQ(zarena_free(a, x.ptr), ZARENA_OK);
  }
  ASSERT_EQ(zarena_step_begin(a), ZARENA_OK);
  for (auto& x : b) ASSERT_EQ(zarena_alloc_ex(a, size, 0, &x), ZARENA_OK);
}

}  // namespace

// A floor set between two pieces of the zone (at an obstacle the step was laid out around)
// keeps only the planned blocks under it: those above it stay the epoch's, as region blocks
// do (zarena.h, FLOORS and zarena_reset: every block above the floor is reclaimed). It kept
// every live planned block of the zone (the fuzz replay's "persistent flag disagrees with
// the model after set_floor", when its random inputs laid a zone around a live block).
TEST(ArenaPlans, AFloorInsideTheZoneKeepsOnlyThePlannedBlocksUnderIt) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena* a = make_plan_arena("plans-floor-inside");
  const uintptr_t base = reinterpret_cast<uintptr_t>(region_of(a).base);
  constexpr uint64_t kSize = 4096;
  // A hole at 0 and a live block (the obstacle) right above it.
  void* hole = nullptr;
  void* obstacle = nullptr;
  ASSERT_EQ(zarena_alloc(a, kSize, &hole), ZARENA_OK);
  ASSERT_EQ(zarena_alloc(a, kSize, &obstacle), ZARENA_OK);
  ASSERT_EQ(zarena_free(a, hole), ZARENA_OK);
  const uint64_t obstacle_off = reinterpret_cast<uintptr_t>(obstacle) - base;
  zarena_block b[3];
  ASSERT_NO_FATAL_FAILURE(learned_step_of_three(a, kSize, b));
  int below = 0, above = 0;
  for (const auto& x : b) {
    ASSERT_NE(x.flags & ZARENA_BLOCK_PLANNED, 0u) << "the plan did not serve";
    (reinterpret_cast<uintptr_t>(x.ptr) - base < obstacle_off ? below : above) += 1;
  }
  ASSERT_GT(below, 0) << "no planned block under the obstacle: the test proves nothing";
  ASSERT_GT(above, 0) << "no planned block above the obstacle: the test proves nothing";

  ASSERT_EQ(zarena_set_floor(a, obstacle_off), ZARENA_OK) << zarena_last_error();
  struct Seen {
    uintptr_t base;
    uint64_t floor;
    int wrong = 0;
  } seen{base, obstacle_off};
  ASSERT_EQ(zarena_for_each_live_block(
                a,
                [](void* u, const zarena_live_block* lb) {
                  auto* s = static_cast<Seen*>(u);
                  const uint64_t off = reinterpret_cast<uintptr_t>(lb->ptr) - s->base;
                  const bool persistent = (lb->flags & ZARENA_LIVE_PERSISTENT) != 0;
                  if (persistent != (off + lb->size <= s->floor)) ++s->wrong;
                  return 0;
                },
                &seen),
            ZARENA_OK);
  EXPECT_EQ(seen.wrong, 0) << "a live block's persistent flag disagrees with the floor";
  // The reset keeps the blocks under the floor and reclaims those above it.
  ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  for (const auto& x : b) {
    const bool under = reinterpret_cast<uintptr_t>(x.ptr) - base < obstacle_off;
    EXPECT_EQ(zarena_free(a, x.ptr), under ? ZARENA_OK : ZARENA_E_STALE)
        << "planned block at +" << (reinterpret_cast<uintptr_t>(x.ptr) - base);
  }
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// Blocks a reset reclaimed, whose starts a zone claimed at that same reset covers inside
// one of its pieces (not at the piece's start), read STALE through the next epoch, as
// zarena.h promises ("a pointer to a region block reclaimed before a zone was laid over
// it is STALE, not NOT_OWNED"). Before, only each piece's start kept its history: with
// 4 KiB granules the piece's end tag hid the second block's record (fuzz_arena_replay).
TEST(ArenaPlans, ReclaimedStartsInsideAZonePieceStayStale) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena_config cfg;
  zarena_config_init(&cfg);
  cfg.backend = ZARENA_BACKEND_HOST;
  cfg.capacity_bytes = 256 * 1024;
  cfg.alignment = 4096;
  cfg.overflow_policy = ZARENA_OVERFLOW_REFUSE;
  cfg.flags |= ZARENA_FLAG_PLAN;
  cfg.name = "plans-buried";
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&cfg, &a), ZARENA_OK) << zarena_last_error();
  const uintptr_t base = reinterpret_cast<uintptr_t>(region_of(a).base);
  bool claimed = false;
  for (int step = 0; step < 8 && !claimed; ++step) {
    zarena_block b[3];
    for (auto& x : b) ASSERT_EQ(zarena_alloc_ex(a, 4096, 0, &x), ZARENA_OK);
    ASSERT_EQ(zarena_reset(a), ZARENA_OK);  // reclaims all three
    const zarena_stats s = stats_of(a);
    if (s.plan_zone_bytes == 0) continue;
    claimed = true;
    ASSERT_EQ(s.plan_hits, 0u) << "the step was planned before the zone's first claim";
    // The zone lies over the reclaimed blocks (the window starts at the floor, 0).
    const zarena_region r = region_of(a);
    for (const auto& x : b) {
      const uint64_t off = reinterpret_cast<uintptr_t>(x.ptr) - base;
      ASSERT_LT(off, r.top_bytes);
      EXPECT_EQ(zarena_free(a, x.ptr), ZARENA_E_STALE) << "reclaimed block at +" << off;
      EXPECT_EQ(zarena_free_at(a, x.ptr, x.epoch), ZARENA_E_STALE) << "reclaimed block at +" << off;
      EXPECT_EQ(zarena_pin(a, x.ptr), ZARENA_E_STALE) << "reclaimed block at +" << off;
    }
  }
  EXPECT_TRUE(claimed) << "no zone was claimed: the test proves nothing";
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// A floor at a planned block's start inside one piece of the zone is a block boundary, as
// at a region block's start (zarena.h, zarena_set_floor refuses only offsets inside a
// block): the piece is cut there, the blocks under the floor survive resets and the others
// are reclaimed, the counts stay exact. A floor inside a live planned block is still
// refused, with nothing changed. Before, the region refused any offset inside a piece
// (fuzz_arena_replay: "set_floor refused a block boundary").
TEST(ArenaPlans, AFloorAtAPlannedStartInsideAPieceCutsThePiece) {
  LogCapture logs(ZARENA_LOG_OFF);
  zarena* a = make_plan_arena("plans-floor-cut");
  const uintptr_t base = reinterpret_cast<uintptr_t>(region_of(a).base);
  constexpr uint64_t kSize = 4096;
  zarena_block b[3];
  ASSERT_NO_FATAL_FAILURE(learned_step_of_three(a, kSize, b));
  std::sort(std::begin(b), std::end(b),
            [](const zarena_block& x, const zarena_block& y) { return x.ptr < y.ptr; });
  for (const auto& x : b) ASSERT_NE(x.flags & ZARENA_BLOCK_PLANNED, 0u) << "the plan did not serve";
  const zarena_stats s0 = stats_of(a);
  ASSERT_EQ(s0.live_allocs, 3u);
  const uint64_t mid = reinterpret_cast<uintptr_t>(b[1].ptr) - base;
  ASSERT_EQ(s0.plan_zone_bytes, 3 * kSize) << "not one piece: the test proves nothing";

  // Inside a live planned block: refused, nothing changed.
  EXPECT_EQ(zarena_set_floor(a, mid + kAlign), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(region_of(a).floor_bytes, 0u);
  // At its start: a boundary.
  ASSERT_EQ(zarena_set_floor(a, mid), ZARENA_OK) << zarena_last_error();
  EXPECT_EQ(region_of(a).floor_bytes, mid);
  zarena_stats s1 = stats_of(a);
  EXPECT_EQ(s1.live_allocs, 3u);
  EXPECT_EQ(s1.used_bytes, 3 * kSize);
  ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  s1 = stats_of(a);
  EXPECT_EQ(s1.live_allocs, 1u) << "only the block under the floor survives";
  EXPECT_EQ(s1.used_bytes, kSize);
  EXPECT_EQ(zarena_free(a, b[0].ptr), ZARENA_OK);
  EXPECT_EQ(zarena_free(a, b[1].ptr), ZARENA_E_STALE);
  EXPECT_EQ(zarena_free(a, b[2].ptr), ZARENA_E_STALE);
  EXPECT_EQ(stats_of(a).live_allocs, 0u);
  // Lowered again, a new epoch: the zone's cut pieces go back whole (nothing leaks).
  ASSERT_EQ(zarena_set_floor(a, 0), ZARENA_OK);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(zarena_reset(a), ZARENA_OK);
  const zarena_stats s2 = stats_of(a);
  EXPECT_EQ(s2.live_allocs, 0u);
  EXPECT_EQ(s2.pinned_bytes, 0u);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}
