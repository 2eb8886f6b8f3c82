// zarena-replay as CI runs it: exit status 0 when the trace fits, 1 when it would
// overflow at the capacity replayed, 2 for bad input (with the reason on stderr), 4 when
// nothing overflowed but the trace is incomplete; the JSON report carries the numbers;
// what-if options take effect.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct ToolRun {
  int status = -1;
  std::string out;  // stdout and stderr
};

std::string tool() {
  const char* p = std::getenv("ZTEST_REPLAY");
  return p != nullptr ? p : "";
}

ToolRun run(const std::string& args) {
  ToolRun r;
  const std::string cmd = tool() + " " + args + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string temp(const std::string& name) {
  return ::testing::TempDir() + "zarena_tool_" + std::to_string(getpid()) + "_" + name;
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

class ReplayTool : public ::testing::Test {
 protected:
  void SetUp() override {
    if (tool().empty()) GTEST_SKIP() << "ZTEST_REPLAY (set by CTest) names the tool";
    const char* sample = std::getenv("ZTEST_TRACE_SAMPLE");
    ASSERT_NE(sample, nullptr);
    never_ = temp("never.zat");
    reset_ = temp("reset.zat");
    ASSERT_EQ(std::system((std::string(sample) + " " + never_ + " never_reset").c_str()), 0);
    ASSERT_EQ(std::system((std::string(sample) + " " + reset_ + " reset").c_str()), 0);
  }
  void TearDown() override {
    std::remove(never_.c_str());
    std::remove(reset_.c_str());
  }
  std::string never_, reset_;
};

TEST_F(ReplayTool, ExitZeroWhenItFits) {
  const std::string json = temp("fits.json");
  const ToolRun r = run(reset_ + " --json " + json);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("verdict: fits"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("result: fits in 48.0 MiB (exit 0)"), std::string::npos) << r.out;
  const auto j = read_json(json);
  EXPECT_EQ(j.at("verdict"), "fits");
  EXPECT_EQ(j.at("replay").at("resets"), 16);
  EXPECT_EQ(j.at("replay").at("epochs").size(), 17u);
  EXPECT_EQ(j.at("reset_per_step").at("ran"), false);  // it resets already
  std::remove(json.c_str());
}

TEST_F(ReplayTool, ExitOneWhenItWouldOverflow) {
  const std::string json = temp("over.json");
  const ToolRun r = run(never_ + " --json " + json);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("verdict: never_reset"), std::string::npos) << r.out;
  const auto j = read_json(json);
  EXPECT_EQ(j.at("exit_code"), 1);
  EXPECT_GT(j.at("replay").at("overflow_allocs").get<uint64_t>(), 0u);
  // The sizing answer: the unlimited top; with a reset per step, far less.
  const uint64_t need = j.at("sizing").at("capacity_bytes");
  EXPECT_TRUE(j.at("sizing").at("found").get<bool>());
  EXPECT_EQ(j.at("reset_per_step").at("step_method"), "step_begin");
  const uint64_t need_with_resets = j.at("reset_per_step").at("sizing").at("capacity_bytes");
  EXPECT_LT(need_with_resets, need / 3);

  // What-if: at the capacity it said, it fits; one granule less, it does not.
  EXPECT_EQ(run(never_ + " --no-what-if --no-sizing --capacity " + std::to_string(need)).status, 0);
  EXPECT_EQ(
      run(never_ + " --no-what-if --no-sizing --capacity " + std::to_string(need - 256)).status, 1);
  std::remove(json.c_str());
}

TEST_F(ReplayTool, WhatIfOptionsApply) {
  const std::string json = temp("whatif.json");
  const ToolRun r = run(reset_ +
                        " --capacity 8MiB --alignment 4096 --policy refuse --no-what-if "
                        "--json " +
                        json);
  EXPECT_EQ(r.status, 1) << r.out;  // 12.6 MiB of top does not fit 8 MiB
  const auto j = read_json(json);
  EXPECT_EQ(j.at("capacity_bytes"), 8u << 20);
  EXPECT_EQ(j.at("alignment"), 4096);
  EXPECT_EQ(j.at("overflow_policy"), "refuse");
  EXPECT_EQ(j.at("exact_config"), false);
  EXPECT_GT(j.at("replay").at("refused").get<uint64_t>(), 0u);
  EXPECT_EQ(j.at("replay").at("overflow_allocs"), 0);
  std::remove(json.c_str());
}

// Sizes are read as ZARENA_CAPACITY_BYTES reads them: MB is 10^6, MiB 2^20, fractions and
// any case allowed, a typo refused with the reason.
TEST_F(ReplayTool, SizesHaveTheEnvironmentsSyntax) {
  const std::string json = temp("sizes.json");
  const char* const cases[][2] = {
      {"64MB", "64000000"}, {"64MiB", "67108864"}, {"64m", "67108864"}, {"1.5GiB", "1610612736"}};
  for (const auto& c : cases) {
    const ToolRun r =
        run(reset_ + " --capacity " + c[0] + " --no-what-if --no-sizing -q --json " + json);
    EXPECT_LE(r.status, 1) << c[0] << ": " << r.out;
    EXPECT_EQ(read_json(json).at("capacity_bytes").get<uint64_t>(), std::stoull(c[1])) << c[0];
  }
  ToolRun r = run(reset_ + " --capacity 64XB");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--capacity '64XB': unknown unit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("e.g. 2GiB"), std::string::npos) << r.out;
  r = run(reset_ + " --policy REFUSE --no-what-if --no-sizing -q --json " + json);
  EXPECT_LE(r.status, 1) << r.out;
  EXPECT_EQ(read_json(json).at("overflow_policy"), "refuse");
  std::remove(json.c_str());
}

// Item 13: the table lists the epochs that needed the most, not the first and last; the
// sizing answer ends in a line to paste, with headroom; the picture's y axis reaches the
// capacity of a run that fits, and its x axis counts steps.
TEST_F(ReplayTool, TheReportShowsTheWorstEpochsAndALineToPaste) {
  const std::string json = temp("worst.json");
  const std::string svg = temp("worst.svg");
  const ToolRun r = run(reset_ + " --epochs 3 --svg " + svg + " --json " + json);
  ASSERT_LE(r.status, 1) << r.out;
  const auto j = read_json(json);
  const auto& epochs = j.at("replay").at("epochs");
  ASSERT_GT(epochs.size(), 3u);
  // The three epochs with the highest peak top (plus overflow), by the JSON's numbers.
  std::vector<std::pair<uint64_t, uint64_t>> need;
  for (const auto& e : epochs) {
    need.push_back({e.at("peak_top_bytes").get<uint64_t>() + e.at("overflow_bytes").get<uint64_t>(),
                    e.at("epoch").get<uint64_t>()});
  }
  std::stable_sort(need.begin(), need.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; i < 3; ++i) {
    char row[32];
    std::snprintf(row, sizeof row, "\n%7llu ", static_cast<unsigned long long>(need[i].second));
    EXPECT_NE(r.out.find(row), std::string::npos) << "epoch " << need[i].second << "\n" << r.out;
  }
  EXPECT_NE(
      r.out.find("the 3 of " + std::to_string(epochs.size()) + " epochs that needed the most"),
      std::string::npos)
      << r.out;
  // The line to paste: the smallest capacity plus 10 %, in a unit people write.
  const uint64_t smallest = j.at("sizing").at("capacity_bytes");
  const uint64_t suggested = j.at("sizing").at("suggested_capacity_bytes");
  EXPECT_GE(suggested, smallest + smallest / 10);
  EXPECT_LE(suggested, smallest + smallest / 10 + (1u << 20));
  const std::string setting = j.at("sizing").at("suggested_setting");
  EXPECT_EQ(setting.rfind("ZARENA_CAPACITY_BYTES=", 0), 0u) << setting;
  EXPECT_NE(r.out.find("with 10% headroom: " + setting), std::string::npos) << r.out;
  // The picture: the axis reaches the capacity (48 MiB) and counts steps.
  std::ifstream in(svg);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find(">48.0 MiB<"), std::string::npos) << "no capacity on the axis";
  EXPECT_NE(text.str().find(">step ("), std::string::npos) << "x axis not in steps";
  std::remove(json.c_str());
  std::remove(svg.c_str());
}

// --plan with --svg: the picture is the replay under step plans, planned blocks in it.
TEST_F(ReplayTool, PlanPictureDrawsPlannedBlocks) {
  const std::string svg = temp("plan.svg");
  const ToolRun r = run(reset_ + " --plan --no-sizing --no-what-if --svg " + svg);
  ASSERT_LE(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("under step plans"), std::string::npos) << r.out;
  std::ifstream in(svg);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("under step plans"), std::string::npos);
  EXPECT_EQ(r.out.find(" 0 allocations from the plan"), std::string::npos) << r.out;
  EXPECT_NE(text.str().find(">planned blocks (live)<"), std::string::npos) << r.out;
  std::remove(svg.c_str());
}

TEST_F(ReplayTool, RmmLogIsSizedAndReplayed) {
  const std::string csv = temp("rmm.csv");
  std::ostringstream text;
  text << "Thread,Time,Action,Pointer,Size,Stream\n";
  // Ten steps of three buffers each, freed in the step: 3 MiB at most.
  for (int step = 0; step < 10; ++step) {
    for (int k = 0; k < 3; ++k) {
      text << "7,10:00:0" << step << ":00000" << k << ",allocate,0x" << std::hex
           << (0x10000000 + k * 0x100000) << std::dec << "," << (1 << 20) << ",0x0\n";
    }
    for (int k = 0; k < 3; ++k) {
      text << "7,10:00:0" << step << ":10000" << k << ",free,0x" << std::hex
           << (0x10000000 + k * 0x100000) << std::dec << "," << (1 << 20) << ",0x0\n";
    }
  }
  write(csv, text.str());
  const std::string json = temp("rmm.json");
  ToolRun r = run(csv + " --json " + json);
  EXPECT_EQ(r.status, 0) << r.out;
  auto j = read_json(json);
  EXPECT_EQ(j.at("source"), "rmm csv");
  EXPECT_EQ(j.at("capacity_known"), false);
  EXPECT_EQ(j.at("sizing").at("capacity_bytes"), 3u << 20);
  EXPECT_EQ(j.at("replay").at("allocs"), 30);
  EXPECT_EQ(j.at("replay").at("peak_live_bytes"), 3u << 20);

  // With a capacity to test: 2 MiB is too small.
  r = run(csv + " --capacity 2M");
  EXPECT_EQ(r.status, 1) << r.out;
  std::remove(csv.c_str());
  std::remove(json.c_str());
}

// A trace cut short (a crash, a failed write) replays what it holds, but never says
// "fits": exit 4, verdict incomplete_trace.
TEST_F(ReplayTool, AnIncompleteTraceIsNeverSaidToFit) {
  std::ifstream in(reset_, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = temp("cut.zat");
  write(cut, bytes.substr(0, bytes.size() - 5));  // inside the end record
  const std::string json = temp("cut.json");
  const ToolRun r = run(cut + " --json " + json);
  EXPECT_EQ(r.status, 4) << r.out;
  EXPECT_NE(r.out.find("verdict: incomplete_trace"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the trace is incomplete"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("fits in"), std::string::npos) << r.out;
  const auto j = read_json(json);
  EXPECT_EQ(j.at("verdict"), "incomplete_trace");
  EXPECT_EQ(j.at("incomplete"), true);
  EXPECT_EQ(j.at("exit_code"), 4);
  std::remove(cut.c_str());
  std::remove(json.c_str());
}

TEST_F(ReplayTool, BadInputIsExitTwoWithTheReason) {
  const std::string csv = temp("bad.csv");
  write(csv,
        "Thread,Time,Action,Pointer,Size,Stream\n1,00:00:00:000001,allocate,0x10,64,0\n"
        "1,00:00:00:000002,allocate,0x20\n");
  ToolRun r = run(csv);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find(csv + ":3: 4 fields, the header has 6"), std::string::npos) << r.out;

  r = run(temp("does-not-exist.zat"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("cannot open"), std::string::npos) << r.out;

  write(csv, std::string("ZARENATR") + std::string(100, '\x01'));
  r = run(csv);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("not readable"), std::string::npos) << r.out;

  r = run(never_ + " --alignment 100");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("power of two"), std::string::npos) << r.out;

  // A header the engine refuses is bad input too, not a failed replay (3): an alignment
  // above 1 GiB, a capacity above 2^62.
  {
    std::ifstream in(never_, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string bad = temp("bad-header.zat");
    std::string b = bytes;
    const uint64_t alignment = 2ull << 30;  // FileHeader::alignment at byte 32
    std::memcpy(&b[32], &alignment, 8);
    write(bad, b);
    r = run(bad);
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find("from the trace's header"), std::string::npos) << r.out;
    b = bytes;
    const uint64_t capacity = (1ull << 62) + 4096;  // FileHeader::capacity_bytes at byte 24
    std::memcpy(&b[24], &capacity, 8);
    write(bad, b);
    r = run(bad + " --no-sizing");
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find("capacity_bytes"), std::string::npos) << r.out;
    std::remove(bad.c_str());
  }

  r = run(never_ + " --policy sometimes");
  EXPECT_EQ(r.status, 2) << r.out;
  r = run("");
  EXPECT_EQ(r.status, 2) << r.out;
  r = run("--help");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("Exit status"), std::string::npos) << r.out;
  std::remove(csv.c_str());
}

// A file that is neither format was read as CSV ("header has no 'Thread' column"); a
// mistyped option got CLI11's message alone (issue 34).
TEST_F(ReplayTool, AnInputOfNeitherFormatIsSaidToBeNeither) {
  const std::string bad = temp("bad.zat");
  write(bad, "this is no trace\n");
  ToolRun r = run(bad);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("is neither a zarena trace"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nor an RMM CSV log"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("header has no"), std::string::npos) << r.out;
  write(bad, "\x7f" + std::string("ELF") + std::string(64, '\0'));  // a binary of another kind
  r = run(bad);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("is neither a zarena trace"), std::string::npos) << r.out;
  write(bad, "");
  r = run(bad);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("is empty"), std::string::npos) << r.out;
  // Asked for by name, a format is read as that one.
  write(bad, "this is no trace\n");
  r = run(bad + " --format rmm");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("header has no"), std::string::npos) << r.out;
  // An RMM log under another name is still recognised by its header.
  const std::string log = temp("memory.log");
  write(log, "Thread,Time,Action,Pointer,Size,Stream\n7,10:00:00:000001,allocate,0x10,64,0x0\n");
  r = run(log + " -q");
  EXPECT_LE(r.status, 1) << r.out;
  std::remove(log.c_str());
  std::remove(bad.c_str());
}

TEST_F(ReplayTool, AMistypedOptionGetsTheNearestOne) {
  ToolRun r = run(never_ + " --capcity 64MiB");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("did you mean --capacity?"), std::string::npos) << r.out;
  r = run(never_ + " --no-sizng");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("did you mean --no-sizing?"), std::string::npos) << r.out;
  r = run(never_ + " --zebra-stripes");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(r.out.find("did you mean"), std::string::npos) << r.out;
}

// A fraction without a unit was read as 2 bytes, and the replay then refused "capacity_bytes
// 2 is smaller than the alignment 256".
TEST_F(ReplayTool, ACapacityFractionNeedsAUnit) {
  const ToolRun r = run(never_ + " --capacity 1.5");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--capacity '1.5': a fraction needs a unit"), std::string::npos) << r.out;
}

}  // namespace
