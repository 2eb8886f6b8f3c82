// fork() (item 15, zarena.h FORK): a child inherits the parent's arenas in the state of
// that instant, with locks held by parent threads that do not exist in the child. Every
// call on such an arena is refused at once (never a wait on a lock nobody will release),
// the child may create and use arenas of its own, and its exit touches nothing of the
// parent's (traces, the reporter).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "backend/backend_faults_testing.h"
#include "support.h"
#include "trace_test_support.h"
#include "zarena/zarena.h"

namespace {

using zarena_test::kKiB;
using zarena_test::kMiB;

constexpr auto kWatchdog = std::chrono::minutes(2);

// Holds a region poison fill, so its thread holds its slot lock, until released.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool inside = false, open = false, armed = false;
};

void hold_fill(void* ctx, zarena_core::FaultSite site, const void*, void*) {
  auto* g = static_cast<Gate*>(ctx);
  if (site != zarena_core::FaultSite::kFill32) return;
  std::unique_lock<std::mutex> lock(g->mu);
  if (!g->armed) return;
  g->armed = false;
  g->inside = true;
  g->cv.notify_all();
  g->cv.wait(lock, [&] { return g->open; });
}

// The child's checks, as an exit status (0: all held).
int child_checks(zarena* inherited) {
  void* p = nullptr;
  if (zarena_alloc(inherited, 256, &p) != ZARENA_E_INVALID_ARGUMENT) return 10;
  if (std::string(zarena_last_error()).find("fork") == std::string::npos) return 11;
  // A reset takes every slot lock: one is held by a parent thread that is not here.
  if (zarena_reset(inherited) != ZARENA_E_INVALID_ARGUMENT) return 12;
  if (zarena_free(inherited, p) != ZARENA_E_INVALID_ARGUMENT) return 13;
  zarena_stats s;
  s.struct_size = sizeof s;
  if (zarena_get_stats(inherited, &s) != ZARENA_E_INVALID_ARGUMENT) return 14;
  if (zarena_trace_status(inherited) != ZARENA_E_INVALID_ARGUMENT) return 15;
  if (zarena_epoch(inherited) != 0) return 16;
  if (zarena_destroy(inherited) != ZARENA_E_INVALID_ARGUMENT) return 17;  // the parent's
  // An arena of the child's own works.
  zarena* mine = zarena_test::make_host_arena(1 * kMiB, "child");
  if (mine == nullptr) return 20;
  if (zarena_alloc(mine, 4 * kKiB, &p) != ZARENA_OK) return 21;
  if (zarena_free(mine, p) != ZARENA_OK) return 22;
  if (zarena_reset(mine) != ZARENA_OK) return 23;
  if (zarena_destroy(mine) != ZARENA_OK) return 24;
  return 0;
}

TEST(Fork, TheChildRefusesTheParentsArenasAndUsesItsOwn) {
  zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_OFF);
  Gate gate;
  zarena_core::FaultPlan plan;
  plan.observe = &hold_fill;
  plan.observe_ctx = &gate;
  zarena_core::arm_faults_for_next_create(plan);
  const std::string path = zarena_test::trace_temp_path("zarena_fork_", "parent");
  zarena_config c;
  zarena_config_init(&c);
  c.backend = ZARENA_BACKEND_HOST;
  c.capacity_bytes = 4 * kMiB;
  c.flags |= ZARENA_FLAG_POISON;  // a free fills the block under its slot lock
  c.name = "parent";
  c.trace_file = path.c_str();  // its writer thread does not survive the fork either
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  void* blocks[64];
  for (void*& p : blocks) ASSERT_EQ(zarena_alloc(a, 16 * kKiB, &p), ZARENA_OK);
  {
    std::lock_guard<std::mutex> lock(gate.mu);
    gate.armed = true;
  }
  std::thread holder([&] { EXPECT_EQ(zarena_free(a, blocks[0]), ZARENA_OK); });
  {
    std::unique_lock<std::mutex> lock(gate.mu);
    gate.cv.wait(lock, [&] { return gate.inside; });  // the holder is in the fill now
  }
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) std::exit(child_checks(a));  // exit handlers run
  {
    std::lock_guard<std::mutex> lock(gate.mu);
    gate.open = true;
  }
  gate.cv.notify_all();
  holder.join();
  const int status = zarena_test::wait_child(pid, kWatchdog);
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's check that failed (child_checks)";
  // The parent's arena and trace are whole.
  for (int i = 1; i < 64; ++i) EXPECT_EQ(zarena_free(a, blocks[i]), ZARENA_OK);
  EXPECT_EQ(zarena_reset(a), ZARENA_OK);
  ASSERT_EQ(zarena_destroy(a), ZARENA_OK);
  zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_INFO);
  const zarena_trace::Trace t = zarena_test::read_or_die(path);
  EXPECT_TRUE(t.summary.whole());
  EXPECT_EQ(t.events.size(), 64u + 64u + 1u);  // allocations, frees, the reset
  std::remove(path.c_str());
}

}  // namespace
