// zarena_format_stats: the TEXT table and the JSON object use the zarena_stats field
// names, every field once, with the snapshot's numbers; the buffer protocol (size query,
// too small, exact fit) and argument checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "format/stats_fields.h"
#include "format/stats_format.h"
#include "zarena/zarena.h"

namespace {

using zarena_core::kStatsFields;

class StatsFormat : public ::testing::Test {
 protected:
  void SetUp() override {
    zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_OFF);
    zarena_config c;
    zarena_config_init(&c);
    c.backend = ZARENA_BACKEND_HOST;
    c.capacity_bytes = 1 << 20;
    c.overflow_policy = ZARENA_OVERFLOW_SYNC;
    c.overflow_limit_bytes = ZARENA_OVERFLOW_UNLIMITED;
    c.name = "fmt \"test\"";
    ASSERT_EQ(zarena_create(&c, &a_), ZARENA_OK) << zarena_last_error();
    // Something in every group: blocks, a floor, reuse, an overflow block, a refused free.
    void* w = nullptr;
    ASSERT_EQ(zarena_alloc(a_, 4096, &w), ZARENA_OK);
    ASSERT_EQ(zarena_mark_step_boundary(a_), ZARENA_OK);
    void* p0 = nullptr;
    void* p1 = nullptr;
    void* p2 = nullptr;
    ASSERT_EQ(zarena_alloc(a_, 4000, &p0), ZARENA_OK);
    ASSERT_EQ(zarena_alloc(a_, 4000, &p1), ZARENA_OK);
    ASSERT_EQ(zarena_free(a_, p0), ZARENA_OK);          // below p1: stays a free block
    ASSERT_EQ(zarena_alloc(a_, 3000, &p2), ZARENA_OK);  // reuses it
    void* o = nullptr;
    ASSERT_EQ(zarena_alloc(a_, 2 << 20, &o), ZARENA_OK);  // past the capacity: overflow
    int not_ours = 0;
    EXPECT_EQ(zarena_free(a_, &not_ours), ZARENA_E_NOT_OWNED);
  }
  void TearDown() override {
    EXPECT_EQ(zarena_destroy(a_), ZARENA_OK);
    zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_INFO);
  }

  zarena_stats stats() const {
    zarena_stats s;
    std::memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    EXPECT_EQ(zarena_get_stats(a_, &s), ZARENA_OK);
    return s;
  }

  std::string format(int32_t f) const {
    size_t need = 0;
    EXPECT_EQ(zarena_format_stats(a_, f, nullptr, 0, &need), ZARENA_OK) << zarena_last_error();
    std::vector<char> buf(need);
    EXPECT_EQ(zarena_format_stats(a_, f, buf.data(), buf.size(), &need), ZARENA_OK)
        << zarena_last_error();
    return std::string(buf.data());
  }

  zarena* a_ = nullptr;
};

// The field list is the struct: one entry per uint64_t member, at every offset, once.
TEST(StatsFields, CoverEveryMemberOnce) {
  std::set<size_t> offsets;
  std::set<std::string> names;
  const zarena_stats s{};
  for (const auto& f : kStatsFields) {
    const size_t off = static_cast<size_t>(reinterpret_cast<const char*>(&(s.*f.member)) -
                                           reinterpret_cast<const char*>(&s));
    EXPECT_TRUE(offsets.insert(off).second) << f.name;
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    EXPECT_EQ(off % 8, 0u);
  }
  size_t expect = offsetof(zarena_stats, capacity_bytes);
  for (size_t off : offsets) {
    EXPECT_EQ(off, expect);
    expect += 8;
  }
  EXPECT_EQ(expect, sizeof(zarena_stats));
  EXPECT_EQ(std::string(kStatsFields[0].name), "capacity_bytes");
  EXPECT_EQ(names.count("used_peak_bytes"), 1u);
}

TEST_F(StatsFormat, JsonKeysAreTheFieldNamesWithTheSnapshotsNumbers) {
  const std::string text = format(ZARENA_FORMAT_JSON);
  const zarena_stats s = stats();  // nothing changes in between: one thread
  EXPECT_EQ(text.find('\n'), std::string::npos) << "one line";
  const auto j = nlohmann::ordered_json::parse(text);
  ASSERT_TRUE(j.is_object());
  ASSERT_EQ(j.size(), std::size(kStatsFields));
  size_t i = 0;
  for (auto it = j.begin(); it != j.end(); ++it, ++i) {
    EXPECT_EQ(it.key(), kStatsFields[i].name) << "struct order";
    ASSERT_TRUE(it.value().is_number_unsigned()) << it.key();
    EXPECT_EQ(it.value().get<uint64_t>(), s.*kStatsFields[i].member) << it.key();
  }
  // The setup did move the figures the groups are about.
  EXPECT_GT(j["overflow_live_bytes"].get<uint64_t>(), 0u);
  EXPECT_GT(j["reuses"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["invalid_frees"].get<uint64_t>(), 1u);
  EXPECT_EQ(j["floor_bytes"].get<uint64_t>(), 4096u);
}

TEST_F(StatsFormat, TextShowsEveryFieldOnceWithItsValue) {
  const std::string text = format(ZARENA_FORMAT_TEXT);
  const zarena_stats s = stats();
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(text.rfind("zarena stats, arena 'fmt \"test\"'\n", 0), 0u) << text;
  std::istringstream in(text);
  std::string line;
  std::set<std::string> seen;
  std::string zero_groups;  // "all zero, not shown: a, b"
  while (std::getline(in, line)) {
    if (line.rfind("all zero, not shown: ", 0) == 0) zero_groups = line.substr(21);
    if (line.rfind("  ", 0) != 0) continue;  // titles
    std::istringstream fields(line);
    std::string name;
    uint64_t value = 0;
    fields >> name >> value;
    ASSERT_TRUE(fields) << line;
    bool known = false;
    for (const auto& f : kStatsFields) {
      if (name == f.name) {
        known = true;
        EXPECT_EQ(value, s.*f.member) << line;
      }
    }
    EXPECT_TRUE(known) << line;
    EXPECT_TRUE(seen.insert(name).second) << "twice: " << name;
  }
  // Every field is shown, or all zero in a group the last line names.
  for (const auto& f : kStatsFields) {
    if (seen.count(f.name) != 0) continue;
    EXPECT_TRUE(s.*f.member == 0 || (f.member == &zarena_stats::committed_bytes &&
                                     s.committed_bytes == s.capacity_bytes))
        << f.name;
    const std::string title = zarena_core::kStatsGroupTitles[static_cast<size_t>(f.group)];
    EXPECT_NE(zero_groups.find(title), std::string::npos) << f.name << " in " << title;
  }
  EXPECT_NE(text.find("  capacity_bytes"), std::string::npos);
  EXPECT_NE(text.find("1.0 MiB"), std::string::npos) << "capacity in binary units";
  EXPECT_NE(text.find("% of capacity"), std::string::npos);
  EXPECT_NE(text.find("\noverflow\n"), std::string::npos) << "group titles";

  // One value column, right-aligned, as wide as the longest number: no fixed 20 columns.
  size_t name_width = 0, digits = 0;
  for (const auto& f : kStatsFields) {
    name_width = std::max(name_width, std::string(f.name).size());
    digits = std::max(digits, std::to_string(s.*f.member).size());
  }
  std::istringstream again(text);
  while (std::getline(again, line)) {
    if (line.rfind("  ", 0) != 0) continue;
    const size_t value_start = line.find_first_not_of(' ', line.find(' ', 2));
    const size_t value_end = line.find_first_not_of("0123456789", value_start);
    EXPECT_EQ(value_end == std::string::npos ? line.size() : value_end, 2 + name_width + 2 + digits)
        << line;
  }
}

// An arena that never overflowed, pinned or grew: those groups are named in one line
// instead of printed as rows of zeros; every field it shows is non-zero or always shown.
TEST(StatsFormatText, GroupsOfZerosAreNamedNotPrinted) {
  zarena_stats s{};
  s.struct_size = sizeof s;
  s.capacity_bytes = 1 << 20;
  s.hits = 3;
  const std::string text = zarena_core::stats_text(s, "quiet");
  EXPECT_NE(text.find("\nregion\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nrequests and frees\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("\noverflow\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("committed_bytes"), std::string::npos) << text;
  EXPECT_NE(text.find("all zero, not shown: free index, overflow, pins and poison, expandable "
                      "region, diagnosis\n"),
            std::string::npos)
      << text;
  s.committed_bytes = s.capacity_bytes;  // a fixed arena: committed whole at create
  EXPECT_EQ(zarena_core::stats_text(s, "fixed").find("committed_bytes"), std::string::npos);
  s.commit_events = 1;
  EXPECT_NE(zarena_core::stats_text(s, "grew").find("\nexpandable region\n  "), std::string::npos);
}

TEST_F(StatsFormat, BufferProtocol) {
  size_t need = 0;
  ASSERT_EQ(zarena_format_stats(a_, ZARENA_FORMAT_JSON, nullptr, 0, &need), ZARENA_OK);
  ASSERT_GT(need, 2u);
  // Too small by one: refused, "" written, the need reported again.
  std::vector<char> buf(need + 8, 'x');
  size_t need2 = 0;
  EXPECT_EQ(zarena_format_stats(a_, ZARENA_FORMAT_JSON, buf.data(), need - 1, &need2),
            ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(need2, need);
  EXPECT_EQ(buf[0], '\0');
  EXPECT_EQ(buf[1], 'x') << "nothing past the terminator";
  EXPECT_NE(std::string(zarena_last_error()).find("needs"), std::string::npos);
  // Exact fit, and `needed` may be NULL when a buffer is given.
  std::fill(buf.begin(), buf.end(), 'x');
  EXPECT_EQ(zarena_format_stats(a_, ZARENA_FORMAT_JSON, buf.data(), need, nullptr), ZARENA_OK);
  EXPECT_EQ(std::strlen(buf.data()), need - 1);
  EXPECT_EQ(buf[need], 'x');
  // cap 0 with a buffer: too small, nothing written.
  EXPECT_EQ(zarena_format_stats(a_, ZARENA_FORMAT_JSON, buf.data(), 0, &need2),
            ZARENA_E_INVALID_ARGUMENT);
}

TEST_F(StatsFormat, ArgumentsAreChecked) {
  char buf[64];
  size_t need = 0;
  EXPECT_EQ(zarena_format_stats(nullptr, ZARENA_FORMAT_TEXT, buf, sizeof buf, &need),
            ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(zarena_format_stats(a_, 7, buf, sizeof buf, &need), ZARENA_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(zarena_last_error()).find("unknown format 7"), std::string::npos);
  EXPECT_EQ(zarena_format_stats(a_, ZARENA_FORMAT_TEXT, nullptr, 10, &need),
            ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(zarena_format_stats(a_, ZARENA_FORMAT_TEXT, nullptr, 0, nullptr),
            ZARENA_E_INVALID_ARGUMENT);
  EXPECT_EQ(zarena_reset_peak_stats(nullptr), ZARENA_E_INVALID_ARGUMENT);
}

}  // namespace
