// zarena_format_live_blocks: JSON and TEXT from one snapshot, the same blocks
// zarena_for_each_live_block reports (address, offset, size, epoch, pins, flags, tag), and
// sound while other threads allocate and free: every dump parses, its blocks do not
// overlap, its totals add up, and blocks that stay live throughout are in every dump.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "zarena/zarena.h"

namespace {

using json = nlohmann::json;
constexpr uint64_t kKiB = 1024, kMiB = 1024 * kKiB;

zarena* make_arena(uint64_t capacity, const char* name) {
  zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_OFF);
  zarena_config c;
  zarena_config_init(&c);
  c.backend = ZARENA_BACKEND_HOST;
  c.capacity_bytes = capacity;
  c.overflow_policy = ZARENA_OVERFLOW_SYNC;
  c.overflow_limit_bytes = ZARENA_OVERFLOW_UNLIMITED;
  c.name = name;
  zarena* a = nullptr;
  EXPECT_EQ(zarena_create(&c, &a), ZARENA_OK) << zarena_last_error();
  return a;
}

// The retry loop the header describes: the size can grow between the query and the call.
std::string dump(zarena* a, int32_t format) {
  size_t need = 0;
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::vector<char> buf(need + need / 4 + 1);
    const zarena_status st = zarena_format_live_blocks(a, format, buf.data(), buf.size(), &need);
    if (st == ZARENA_OK) return std::string(buf.data());
    EXPECT_EQ(st, ZARENA_E_INVALID_ARGUMENT) << zarena_last_error();
    EXPECT_GT(need, buf.size());
  }
  ADD_FAILURE() << "the dump never fit";
  return "";
}

std::vector<zarena_live_block> walk(zarena* a) {
  std::vector<zarena_live_block> out;
  EXPECT_EQ(zarena_for_each_live_block(
                a,
                [](void* u, const zarena_live_block* b) {
                  static_cast<std::vector<zarena_live_block>*>(u)->push_back(*b);
                  return 0;
                },
                &out),
            ZARENA_OK);
  return out;
}

uint64_t address_of(const json& b) {
  return std::stoull(b["address"].get<std::string>(), nullptr, 16);
}

TEST(LiveBlocksFormat, JsonMatchesTheWalkFieldByField) {
  zarena* a = make_arena(1 * kMiB, "dump");
  uint32_t weights_tag = 0, act_tag = 0;
  ASSERT_EQ(zarena_tag_register("weights", &weights_tag), ZARENA_OK);
  ASSERT_EQ(zarena_tag_register("matmul.out", &act_tag), ZARENA_OK);
  zarena_block w, x, y, z, o;
  ASSERT_EQ(zarena_alloc_ex(a, 64 * kKiB, weights_tag, &w), ZARENA_OK);
  ASSERT_EQ(zarena_mark_step_boundary(a), ZARENA_OK);
  ASSERT_EQ(zarena_reset(a), ZARENA_OK);  // epoch 1
  ASSERT_EQ(zarena_alloc_ex(a, 1000, act_tag, &x), ZARENA_OK);
  ASSERT_EQ(zarena_alloc_ex(a, 5000, 0, &y), ZARENA_OK);
  ASSERT_EQ(zarena_alloc_ex(a, 300, act_tag, &z), ZARENA_OK);
  ASSERT_EQ(zarena_pin(a, y.ptr), ZARENA_OK);
  ASSERT_EQ(zarena_pin(a, z.ptr), ZARENA_OK);
  ASSERT_EQ(zarena_free(a, z.ptr), ZARENA_OK);                      // deferred: freed while pinned
  ASSERT_EQ(zarena_alloc_ex(a, 2 * kMiB, act_tag, &o), ZARENA_OK);  // overflow
  ASSERT_NE(o.flags & ZARENA_BLOCK_OVERFLOW, 0u);

  const json j = json::parse(dump(a, ZARENA_FORMAT_JSON));
  const auto blocks = walk(a);
  EXPECT_EQ(j["arena"], "dump");
  EXPECT_EQ(j["epoch"], 1u);
  ASSERT_EQ(j["count"], blocks.size());
  ASSERT_EQ(j["blocks"].size(), blocks.size());
  ASSERT_EQ(blocks.size(), 5u);
  zarena_region r;
  r.struct_size = sizeof r;
  ASSERT_EQ(zarena_region_info(a, &r), ZARENA_OK);
  uint64_t bytes = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const json& b = j["blocks"][i];
    const zarena_live_block& v = blocks[i];
    SCOPED_TRACE(b.dump());
    EXPECT_EQ(address_of(b), reinterpret_cast<uintptr_t>(v.ptr));
    const bool overflow = (v.flags & ZARENA_LIVE_OVERFLOW) != 0;
    EXPECT_EQ(b["overflow"], overflow);
    if (overflow) {
      EXPECT_TRUE(b["offset"].is_null());
    } else {
      EXPECT_EQ(b["offset"].get<uint64_t>(),
                static_cast<uint64_t>(static_cast<char*>(v.ptr) - static_cast<char*>(r.base)));
    }
    EXPECT_EQ(b["size"], v.size);
    EXPECT_EQ(b["epoch"], v.epoch);
    EXPECT_EQ(b["pins"], v.pins);
    EXPECT_EQ(b["pinned"], v.pins > 0);
    EXPECT_EQ(b["persistent"], (v.flags & ZARENA_LIVE_PERSISTENT) != 0);
    EXPECT_EQ(b["freed"], (v.flags & ZARENA_LIVE_FREED) != 0);
    EXPECT_EQ(b["tag_id"], v.tag);
    if (v.tag == 0) {
      EXPECT_TRUE(b["tag"].is_null());
    } else {
      EXPECT_EQ(b["tag"], zarena_tag_name(v.tag));
    }
    bytes += v.size;
  }
  EXPECT_EQ(j["bytes"], bytes);
  // What the setup made, by address.
  const json& jw = j["blocks"][0];
  EXPECT_EQ(address_of(jw), reinterpret_cast<uintptr_t>(w.ptr));
  EXPECT_EQ(jw["tag"], "weights");
  EXPECT_EQ(jw["persistent"], true);
  EXPECT_EQ(jw["epoch"], 0u);
  EXPECT_EQ(j["blocks"][2]["pinned"], true);    // y
  EXPECT_EQ(j["blocks"][2]["tag"], nullptr);    // y is untagged
  EXPECT_EQ(j["blocks"][3]["freed"], true);     // z
  EXPECT_EQ(j["blocks"][4]["overflow"], true);  // o
  EXPECT_EQ(j["blocks"][4]["tag"], "matmul.out");
  EXPECT_EQ(j["blocks"][4]["size"], 2 * kMiB);

  ASSERT_EQ(zarena_unpin(a, y.ptr), ZARENA_OK);
  ASSERT_EQ(zarena_unpin(a, z.ptr), ZARENA_OK);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

TEST(LiveBlocksFormat, TextHasATitleAndALinePerBlock) {
  zarena* a = make_arena(1 * kMiB, "text");
  const std::string empty = dump(a, ZARENA_FORMAT_TEXT);
  EXPECT_EQ(empty, "zarena live blocks, arena 'text': 0 blocks, 0 B (0 bytes), epoch 0\n");
  uint32_t tag = 0;
  ASSERT_EQ(zarena_tag_register("attn.scores", &tag), ZARENA_OK);
  zarena_block b1, b2;
  ASSERT_EQ(zarena_alloc_ex(a, 4096, tag, &b1), ZARENA_OK);
  ASSERT_EQ(zarena_alloc_ex(a, 8192, 0, &b2), ZARENA_OK);
  ASSERT_EQ(zarena_pin(a, b2.ptr), ZARENA_OK);
  const std::string text = dump(a, ZARENA_FORMAT_TEXT);
  std::istringstream in(text);
  std::string title, header, l1, l2, rest;
  ASSERT_TRUE(std::getline(in, title));
  ASSERT_TRUE(std::getline(in, header));
  ASSERT_TRUE(std::getline(in, l1));
  ASSERT_TRUE(std::getline(in, l2));
  EXPECT_FALSE(std::getline(in, rest));
  EXPECT_EQ(title, "zarena live blocks, arena 'text': 2 blocks, 12.0 KiB (12288 bytes), epoch 0");
  EXPECT_NE(header.find("address"), std::string::npos);
  EXPECT_NE(l1.find("attn.scores"), std::string::npos) << l1;
  EXPECT_NE(l1.find("4.0 KiB"), std::string::npos) << l1;
  EXPECT_NE(l2.find("pinned"), std::string::npos) << l2;
  std::ostringstream addr;
  addr << b2.ptr;
  EXPECT_EQ(l2.find("  " + addr.str()), 0u) << l2;
  ASSERT_EQ(zarena_unpin(a, b2.ptr), ZARENA_OK);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

TEST(LiveBlocksFormat, ArgumentsAreChecked) {
  zarena* a = make_arena(1 * kMiB, "args");
  size_t need = 0;
  char buf[8];
  EXPECT_EQ(zarena_format_live_blocks(nullptr, ZARENA_FORMAT_JSON, buf, sizeof buf, &need),
            ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(zarena_format_live_blocks(a, -1, buf, sizeof buf, &need), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(zarena_format_live_blocks(a, ZARENA_FORMAT_JSON, nullptr, 3, &need),
            ZARENA_E_INVALID_ARGUMENT);
  // Too small: "" and the need.
  EXPECT_EQ(zarena_format_live_blocks(a, ZARENA_FORMAT_JSON, buf, sizeof buf, &need),
            ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(buf[0], '\0');
  EXPECT_GT(need, sizeof buf);
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

// Dumps taken while four threads allocate and free: each is a consistent snapshot.
TEST(LiveBlocksFormat, SnapshotsWhileManyThreadsAllocate) {
  zarena* a = make_arena(64 * kMiB, "threads");
  constexpr int kThreads = 4;
  constexpr int kAnchors = 8;
  uint32_t anchor_tag = 0;
  ASSERT_EQ(zarena_tag_register("anchor", &anchor_tag), ZARENA_OK);
  // Blocks each thread keeps live for the whole test (address -> size).
  std::map<uint64_t, uint64_t> anchors;
  std::mutex anchors_mu;
  std::atomic<int> ready{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < kThreads; ++w) {
    workers.emplace_back([&, w] {
      std::vector<zarena_block> keep(kAnchors);
      for (auto& k : keep) {
        ASSERT_EQ(zarena_alloc_ex(a, 1000 + 256 * w, anchor_tag, &k), ZARENA_OK);
        std::lock_guard<std::mutex> lock(anchors_mu);
        anchors[reinterpret_cast<uintptr_t>(k.ptr)] = k.size;
      }
      ++ready;
      std::mt19937_64 rng(w);
      std::vector<void*> churn;
      while (!stop.load()) {
        if (churn.size() < 200 && rng() % 2 == 0) {
          void* p = nullptr;
          if (zarena_alloc(a, 1 + rng() % (16 * kKiB), &p) == ZARENA_OK) churn.push_back(p);
        } else if (!churn.empty()) {
          const size_t k = rng() % churn.size();
          EXPECT_EQ(zarena_free(a, churn[k]), ZARENA_OK);
          churn[k] = churn.back();
          churn.pop_back();
        }
      }
      for (void* p : churn) EXPECT_EQ(zarena_free(a, p), ZARENA_OK);
    });
  }
  while (ready.load() < kThreads) std::this_thread::yield();
  const std::map<uint64_t, uint64_t> expected = anchors;
  ASSERT_EQ(expected.size(), static_cast<size_t>(kThreads * kAnchors));
  int dumps = 0;
  uint64_t max_count = 0;
  for (; dumps < 200; ++dumps) {
    const std::string text = dump(a, dumps % 5 == 4 ? ZARENA_FORMAT_TEXT : ZARENA_FORMAT_JSON);
    if (dumps % 5 == 4) {
      ASSERT_EQ(text.rfind("zarena live blocks, arena 'threads': ", 0), 0u);
      continue;
    }
    const json j = json::parse(text);
    const json& blocks = j["blocks"];
    ASSERT_EQ(j["count"].get<size_t>(), blocks.size());
    max_count = std::max<uint64_t>(max_count, blocks.size());
    uint64_t bytes = 0, prev_end = 0, anchors_seen = 0;
    for (const json& b : blocks) {
      const uint64_t addr = address_of(b), size = b["size"].get<uint64_t>();
      ASSERT_FALSE(b["overflow"].get<bool>()) << "the arena is big enough";
      ASSERT_GE(addr, prev_end) << "region blocks in address order, not overlapping";
      prev_end = addr + size;
      bytes += size;
      const auto it = expected.find(addr);
      if (it != expected.end()) {
        ASSERT_EQ(size, it->second);
        ASSERT_EQ(b["tag"], "anchor");
        ++anchors_seen;
      }
    }
    ASSERT_EQ(anchors_seen, expected.size()) << "every anchor in every snapshot";
    ASSERT_EQ(j["bytes"].get<uint64_t>(), bytes);
  }
  stop = true;
  for (auto& t : workers) t.join();
  EXPECT_GT(max_count, expected.size()) << "the dumps did see churn";
  // Quiet now: the dump is exactly the anchors.
  const json j = json::parse(dump(a, ZARENA_FORMAT_JSON));
  ASSERT_EQ(j["count"].get<size_t>(), expected.size());
  for (const json& b : j["blocks"]) EXPECT_EQ(expected.count(address_of(b)), 1u);
  EXPECT_EQ(walk(a).size(), expected.size());
  EXPECT_EQ(zarena_destroy(a), ZARENA_OK);
}

}  // namespace
