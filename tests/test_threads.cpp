// 8 threads hammer one host arena with alloc/free while another reads stats. Every
// block is tagged with its owner and serial at both ends and verified before it is
// freed: an overlap or a block handed out twice would show as a foreign tag.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "engine/arena.h"
#include "zarena/zarena.h"

namespace {

struct Tag {
  uint64_t owner;
  uint64_t serial;
};

TEST(Threads, EightThreadsAllocFreeWithTags) {
  zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_OFF);
  zarena_config c;
  zarena_config_init(&c);
  c.backend = ZARENA_BACKEND_HOST;
  c.capacity_bytes = 256 << 10;  // below one thread's peak (~64 x 4 KiB): overflow is certain
  c.overflow_policy = ZARENA_OVERFLOW_SYNC;            // a full region spills to host overflow
  c.overflow_limit_bytes = ZARENA_OVERFLOW_UNLIMITED;  // 8 threads' peaks exceed the capacity
  zarena* a = nullptr;
  ASSERT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();

  constexpr int kThreads = 8;
  constexpr int kIters = 40000;
  std::atomic<uint64_t> corrupt{0}, failures{0};
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      zarena_stats s;
      s.struct_size = sizeof s;
      if (zarena_get_stats(a, &s) != ZARENA_OK || s.used_bytes > s.capacity_bytes)
        failures.fetch_add(1);
    }
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t) * 7919 + 1);
      struct Live {
        char* p;
        uint64_t size;
        Tag tag;
      };
      std::vector<Live> live;
      uint64_t serial = 0;
      auto check_and_free = [&](size_t i) {
        Tag head, tail;
        std::memcpy(&head, live[i].p, sizeof head);
        std::memcpy(&tail, live[i].p + live[i].size - sizeof tail, sizeof tail);
        if (head.owner != live[i].tag.owner || head.serial != live[i].tag.serial ||
            tail.owner != live[i].tag.owner || tail.serial != live[i].tag.serial)
          corrupt.fetch_add(1);
        if (zarena_free(a, live[i].p) != ZARENA_OK) failures.fetch_add(1);
        live[i] = live.back();
        live.pop_back();
      };
      for (int i = 0; i < kIters; ++i) {
        if (live.size() < 64 && (live.empty() || rng() % 2 == 0)) {
          const uint64_t size = 2 * sizeof(Tag) + rng() % 8192;  // head and tail tags never overlap
          void* p = nullptr;
          if (zarena_alloc(a, size, &p) != ZARENA_OK) {
            failures.fetch_add(1);
            continue;
          }
          Tag tag{static_cast<uint64_t>(t), ++serial};
          std::memcpy(p, &tag, sizeof tag);
          std::memcpy(static_cast<char*>(p) + size - sizeof tag, &tag, sizeof tag);
          live.push_back({static_cast<char*>(p), size, tag});
        } else {
          check_and_free(rng() % live.size());
        }
      }
      while (!live.empty()) check_and_free(live.size() - 1);
    });
  }
  for (auto& w : workers) w.join();
  done = true;
  reader.join();
  EXPECT_EQ(corrupt.load(), 0u);
  EXPECT_EQ(failures.load(), 0u);
  zarena_stats s;
  s.struct_size = sizeof s;
  ASSERT_EQ(zarena_get_stats(a, &s), ZARENA_OK);
  EXPECT_EQ(s.live_allocs, 0u);
  EXPECT_EQ(s.used_bytes, 0u);
  EXPECT_EQ(s.invalid_frees, 0u);
  EXPECT_GT(s.reuses, 0u);
  EXPECT_GT(s.overflow_allocs, 0u);
  EXPECT_EQ(s.overflow_live_bytes, 0u);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
  zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_INFO);
}

}  // namespace
