// The two stderr formats, record by record: every record type the library emits has a
// human line of at most kHumanLineMax characters (prefix included) even with extreme
// values and long names, the line keeps what a person must read (verdict and fix), and
// the JSON line parses back with every field, typed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config_records.h"
#include "diagnosis/diagnostics.h"
#include "log/log.h"
#include "support.h"

using nlohmann::json;
using zarena_core::LogRecord;

namespace {

constexpr uint64_t kHuge = UINT64_MAX;
// Records of this test only, for the format's edge cases.
constexpr zarena_core::LogEvent kTestCut =
    zarena_core::log_event("test.cut", ZARENA_LOG_INFO, zarena_core::kNeverDropped, "");
constexpr zarena_core::LogEvent kTestOnly =
    zarena_core::log_event("test.only", ZARENA_LOG_INFO, zarena_core::kNeverDropped, "");
constexpr zarena_core::LogEvent kTestWarn =
    zarena_core::log_event("test.ctl", ZARENA_LOG_WARN, zarena_core::kNeverDropped, "");
constexpr zarena_core::LogEvent kTestError =
    zarena_core::log_event("test.escape", ZARENA_LOG_ERROR, zarena_core::kNeverDropped, "");
const std::string kLongName(100, 'n');

zarena_core::ExhaustionFacts huge_facts(const char* path) {
  zarena_core::ExhaustionFacts f;
  f.path = path;
  f.requested_bytes = f.aligned_bytes = kHuge - 4095;
  f.capacity_bytes = kHuge;
  f.offset_bytes = kHuge - 1;
  f.floor_bytes = 0;
  f.epoch_allocs = f.epoch_max_alloc_bytes = f.step_max_alloc_bytes = kHuge;
  f.hits = f.misses = f.reuses = f.free_list_len = f.free_list_bytes = kHuge;
  f.largest_free_block_bytes = 1;
  f.steps = f.kept_bytes = f.overflow_live_bytes = kHuge - 1;
  f.prior_epochs = f.prior_allocs = f.prior_peak_bytes = f.epoch_peak_bytes = kHuge;
  return f;
}

zarena_core::ResolvedConfig everything_set() {
  zarena_config c = zarena_core::default_config();
  c.backend = ZARENA_BACKEND_HOST;
  c.capacity_bytes = 1ull << 40;
  c.flags = ZARENA_FLAG_MANAGED | ZARENA_FLAG_POISON | ZARENA_FLAG_EXPANDABLE;
  c.name = "x";
  zarena_core::ResolvedConfig rc;
  EXPECT_TRUE(zarena_core::resolve_config(&c, &rc).is_ok());
  rc.name = kLongName;
  // As if every field had come from a long-named source.
  for (auto& s : rc.sources) s.origin = "env:ZARENA_SOME_RATHER_LONG_VARIABLE_NAME";
  rc.warnings.assign(5, std::string(300, 'w'));
  return rc;
}

// Every builder the library emits records from, at its most verbose.
std::vector<LogRecord> every_record_type() {
  std::vector<LogRecord> out;
  for (const char* path : {"async", "sync", "capture_refused", "refused", "limit"}) {
    out.push_back(zarena_core::first_overflow_record(huge_facts(path), kLongName,
                                                     std::string(300, 't') + " 1.0 GiB"));
    zarena_core::ExhaustionFacts resets = huge_facts(path);
    resets.resets = kHuge;  // reset_stopped
    out.push_back(zarena_core::first_overflow_record(resets, kLongName));
    zarena_core::OverflowSummaryFacts sum;
    sum.last = resets;
    sum.overflow_epochs = sum.epochs = sum.unreported = kHuge;
    out.push_back(zarena_core::overflow_summary_record(sum, kLongName));
  }
  for (const char* verdict : {"never_reset", "reset_stopped"}) {
    zarena_core::CadenceFacts c;
    c.verdict = verdict;
    c.steps = c.step_repeats = c.step_allocs = c.step_bytes = c.grown_bytes = kHuge;
    c.offset_bytes = c.capacity_bytes = c.epoch_allocs = c.steps_to_full = kHuge;
    c.resets = c.prior_epochs = kHuge;
    c.steps_explicit = true;
    out.push_back(zarena_core::reset_cadence_record(c, kLongName));
  }
  zarena_core::StepRecordFacts step;
  step.epoch = step.steps = step.allocs = step.reuses = step.peak_bytes = kHuge;
  step.capacity_bytes = step.overflow_allocs = step.overflow_peak_bytes = kHuge;
  step.needed_bytes = kHuge;
  out.push_back(zarena_core::step_record(step, kLongName));
  out.push_back(
      zarena_core::overflow_slow_record(kHuge, kHuge, kHuge, "capture_refused", kLongName));
  out.push_back(zarena_core::config_record(everything_set(), std::string(200, 'd'),
                                           ZARENA_BACKEND_CUDA, ZARENA_OVERFLOW_ASYNC,
                                           std::string(200, 'f'), kHuge, kHuge));
  zarena_stats s;
  std::memset(&s, 0xFF, sizeof s);
  out.push_back(zarena_core::destroy_record(s, {kHuge, kHuge}, kLongName));
  zarena_core::ConfigProblem invalid{
      false, "ZARENA_OVERFLOW_RETAIN_BYTES", std::string(500, '9'), "too large", "512MiB", ""};
  out.push_back(zarena_core::config_problem_record(invalid, kLongName));
  zarena_core::ConfigProblem unknown{true, "ZARENA_" + std::string(200, 'Q'),
                                     "v",  "unknown variable",
                                     "",   "ZARENA_OVERFLOW_RETAIN_BYTES"};
  out.push_back(zarena_core::config_problem_record(unknown, kLongName));
  return out;
}

// Every record the builders make is what the catalogue (log_events.h, docs/LOGGING.md)
// says: its event is listed, at that level, and each field is listed with its kind.
TEST(Catalogue, EveryRecordTypeIsDocumented) {
  for (const LogRecord& r : every_record_type()) {
    zarena_test::Record copy;
    copy.level = r.level();
    copy.event = r.event();
    for (const auto& f : r.fields()) copy.fields.push_back({f.key, f.kind, f.i, f.f, f.s});
    EXPECT_EQ(zarena_test::undocumented(copy), "");
  }
}

TEST(Catalogue, EventsAreUniqueAndDescribed) {
  std::vector<std::string> names;
  for (const zarena_core::LogEvent* e : zarena_core::kLogEvents) {
    EXPECT_EQ(std::count(names.begin(), names.end(), e->name), 0) << e->name;
    names.push_back(e->name);
    EXPECT_GT(std::strlen(e->when), 20u) << e->name;
    for (size_t i = 0; i < e->field_count; ++i) {
      EXPECT_GT(std::strlen(e->fields[i].doc), 3u) << e->name << " " << e->fields[i].key;
      for (size_t k = 0; k < i; ++k) {
        EXPECT_STRNE(e->fields[i].key, e->fields[k].key) << e->name;
      }
    }
  }
}

TEST(HumanLine, EveryRecordTypeFitsTheBound) {
  std::vector<std::string> events;
  for (const LogRecord& r : every_record_type()) {
    const std::string line = zarena_core::log_format_line(r);
    EXPECT_LE(line.size() + zarena_core::kHumanPrefixMax, zarena_core::kHumanLineMax)
        << line.size() << ": " << line;
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
    EXPECT_EQ(line.rfind(r.event(), 0), 0u) << line;
    events.push_back(r.event());
  }
  for (const char* e : {"arena.config", "arena.first_overflow", "arena.reset_cadence",
                        "overflow.slow", "arena.destroy", "config.invalid_value",
                        "config.unknown_variable", "arena.overflow_summary", "arena.step"}) {
    EXPECT_NE(std::find(events.begin(), events.end(), e), events.end()) << e;
  }
}

TEST(HumanLine, FirstOverflowLeadsWithTheVerdictAndItsFix) {
  zarena_core::ExhaustionFacts f;
  f.path = "sync";
  f.requested_bytes = f.aligned_bytes = 16384;
  f.capacity_bytes = 4 << 20;
  f.offset_bytes = 4 << 20;
  f.epoch_allocs = 1000;
  f.steps = 41;
  f.kept_bytes = 3 << 20;
  const LogRecord r = zarena_core::first_overflow_record(f, "train");
  const std::string line = zarena_core::log_format_line(r);
  EXPECT_NE(line.find("verdict never_reset. Fix: call zarena_reset after every step"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find(" requested_bytes=16384"), std::string::npos) << line;
  EXPECT_NE(line.find(" verdict=never_reset"), std::string::npos) << line;
  EXPECT_EQ(line.find("hits="), std::string::npos) << "not a headline field: " << line;
  // Callbacks still get the whole message, cause included.
  EXPECT_NE(r.text().find("while 41 steps ran"), std::string::npos) << r.text();
}

TEST(HumanLine, LongSentenceIsCutAtAWordAndMarked) {
  LogRecord r(kTestCut, "");
  std::string words;
  for (int i = 0; i < 60; ++i) words += "word" + std::to_string(i) + " ";
  r.message(words).add_uint("n", 7).headline({"n"});
  const std::string line = zarena_core::log_format_line(r);
  const size_t budget = zarena_core::kHumanLineMax - zarena_core::kHumanPrefixMax;
  EXPECT_LE(line.size(), budget) << line;
  EXPECT_GT(line.size(), budget - 10) << "cut at the last word that fits: " << line;
  const size_t dots = line.find("... n=7");
  ASSERT_NE(dots, std::string::npos) << line;
  EXPECT_NE(line[dots - 1], ' ');
  EXPECT_EQ(line.substr(dots - 1, 1).find_first_of("0123456789"), 0u) << "cut after a word";
}

TEST(HumanLine, ControlCharactersNeverBreakTheLine) {
  LogRecord r(kTestWarn, "two\nlines");
  r.message("a\nb\rc").add_string("s", "x\ny").headline({"s"});
  EXPECT_EQ(zarena_core::log_format_line(r), "test.ctl [two lines]: a b c s=\"x y\"");
}

TEST(HumanLine, StderrMessageOnlyHidesHeadlineFields) {
  LogRecord r(kTestOnly, "a");
  r.message("m").add_uint("n", 1).headline({"n"}).stderr_message_only();
  EXPECT_EQ(zarena_core::log_format_line(r), "test.only [a]: m");
}

TEST(JsonLine, EveryRecordParsesBackWithEveryFieldTyped) {
  for (const LogRecord& r : every_record_type()) {
    const std::string line = zarena_core::log_format_json(r, 1'700'000'000'123);
    EXPECT_EQ(line.find('\n'), std::string::npos);
    json j;
    ASSERT_NO_THROW(j = json::parse(line)) << line;
    EXPECT_EQ(j["time"], "2023-11-14T22:13:20.123Z");
    EXPECT_EQ(j["event"], r.event());
    EXPECT_EQ(j["arena"], r.arena_name());
    EXPECT_EQ(j["message"], r.text()) << "JSON carries the full message, not the human line";
    const json& fields = j["fields"];
    ASSERT_EQ(fields.size(), r.fields().size()) << r.event();
    for (const auto& f : r.fields()) {
      ASSERT_TRUE(fields.contains(f.key)) << f.key;
      const json& v = fields[f.key];
      switch (f.kind) {
        case ZARENA_FIELD_INT:
          EXPECT_TRUE(v.is_number_integer()) << f.key;
          EXPECT_EQ(v.get<int64_t>(), f.i) << f.key;
          break;
        case ZARENA_FIELD_UINT:
          EXPECT_TRUE(v.is_number_unsigned()) << f.key;
          EXPECT_EQ(v.get<uint64_t>(), static_cast<uint64_t>(f.i)) << f.key;
          break;
        case ZARENA_FIELD_DOUBLE:
          EXPECT_TRUE(v.is_number_float()) << f.key;
          break;
        case ZARENA_FIELD_BOOL:
          EXPECT_TRUE(v.is_boolean()) << f.key;
          break;
        default:
          EXPECT_EQ(v.get<std::string>(), f.s) << f.key;
      }
    }
  }
}

TEST(JsonLine, StringsAreEscapedNotTrusted) {
  LogRecord r(kTestError, "quote\"back\\slash\nnew");
  r.message("tab\there \x01 ctl").add_string("bad_utf8", "\xff\xfe ok").add_double("d", 0.5);
  const json j = json::parse(zarena_core::log_format_json(r, 0));
  EXPECT_EQ(j["level"], "error");
  EXPECT_EQ(j["arena"], "quote\"back\\slash\nnew");
  EXPECT_EQ(j["message"], "tab\there \x01 ctl");
  EXPECT_EQ(j["fields"]["bad_utf8"], "\xEF\xBF\xBD\xEF\xBF\xBD ok");  // U+FFFD twice
  EXPECT_EQ(j["fields"]["d"], 0.5);
}

TEST(LogFormat, ParseNames) {
  bool json_on = false;
  EXPECT_TRUE(zarena_core::log_parse_format("JSON", &json_on));
  EXPECT_TRUE(json_on);
  EXPECT_TRUE(zarena_core::log_parse_format("text", &json_on));
  EXPECT_FALSE(json_on);
  EXPECT_FALSE(zarena_core::log_parse_format("yaml", &json_on));
  EXPECT_FALSE(zarena_core::log_parse_format(nullptr, &json_on));
}

}  // namespace
