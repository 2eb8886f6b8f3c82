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

// Records of this test only, for the format's edge cases.
constexpr zarena_core::LogEvent kTestOnly =
    zarena_core::log_event("test.only", ZARENA_LOG_INFO, zarena_core::kNeverDropped, "");
constexpr zarena_core::LogEvent kTestWarn =
    zarena_core::log_event("test.ctl", ZARENA_LOG_WARN, zarena_core::kNeverDropped, "");
constexpr zarena_core::LogEvent kTestWhole =
    zarena_core::log_event("test.whole", ZARENA_LOG_WARN, zarena_core::kNeverDropped, "");
constexpr zarena_core::LogEvent kTestLong =
    zarena_core::log_event("test.long", ZARENA_LOG_INFO, zarena_core::kNeverDropped, "");
constexpr zarena_core::LogEvent kTestHint =
    zarena_core::log_event("test.hint", ZARENA_LOG_WARN, zarena_core::kNeverDropped, "");
constexpr zarena_core::LogEvent kTestAll =
    zarena_core::log_event("test.all", ZARENA_LOG_WARN, zarena_core::kNeverDropped, "");
constexpr zarena_core::LogEvent kTestError =
    zarena_core::log_event("test.escape", ZARENA_LOG_ERROR, zarena_core::kNeverDropped, "");

// The values every_record_type() builds records from: extreme ones (the largest numbers,
// names and texts hundreds of characters long), or realistic ones.
struct Values {
  uint64_t big;  // every count and size
  size_t name;   // arena name length
  size_t text;   // free text: tags, backend description, warnings, bad values
};
constexpr Values kExtreme{UINT64_MAX, 100, 300};
constexpr Values kRealistic{1'033'676, 20, 40};
Values g = kExtreme;

zarena_core::ExhaustionFacts huge_facts(const char* path) {
  zarena_core::ExhaustionFacts f;
  f.path = path;
  f.requested_bytes = f.aligned_bytes = g.big - 4095;
  f.capacity_bytes = g.big;
  f.offset_bytes = g.big - 1;
  f.floor_bytes = 0;
  f.epoch_allocs = f.epoch_max_alloc_bytes = f.step_max_alloc_bytes = g.big;
  f.hits = f.misses = f.reuses = f.free_list_len = f.free_list_bytes = g.big;
  f.largest_free_block_bytes = 1;
  f.steps = f.kept_bytes = f.overflow_live_bytes = g.big - 1;
  f.prior_epochs = f.prior_allocs = f.prior_peak_bytes = f.epoch_peak_bytes = g.big;
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
  rc.name = std::string(g.name, 'n');
  // As if every field had come from a long-named source.
  for (auto& s : rc.sources) s.origin = "env:ZARENA_SOME_RATHER_LONG_VARIABLE_NAME";
  rc.warnings.assign(5, std::string(g.text, 'w'));
  return rc;
}

// The longest arena name a record can carry, with an identity as the arena gives it.
zarena_core::LogSource long_source() {
  return zarena_core::LogSource(std::string(g.name, 'n'), 1, nullptr);
}

// Every builder the library emits records from, at its most verbose.
std::vector<LogRecord> every_record_type() {
  std::vector<LogRecord> out;
  for (const char* path : {"async", "sync", "capture_refused", "refused", "limit"}) {
    out.push_back(zarena_core::first_overflow_record(huge_facts(path), long_source(),
                                                     std::string(g.text, 't') + " 1.0 GiB"));
    zarena_core::ExhaustionFacts resets = huge_facts(path);
    resets.resets = g.big;  // reset_stopped
    out.push_back(zarena_core::first_overflow_record(resets, long_source()));
    zarena_core::OverflowSummaryFacts sum;
    sum.last = resets;
    sum.overflow_epochs = sum.epochs = sum.unreported = g.big;
    out.push_back(zarena_core::overflow_summary_record(sum, long_source()));
  }
  for (const char* verdict : {"never_reset", "reset_stopped"}) {
    zarena_core::CadenceFacts c;
    c.verdict = verdict;
    c.steps = c.step_repeats = c.step_allocs = c.step_bytes = c.grown_bytes = g.big;
    c.offset_bytes = c.capacity_bytes = c.epoch_allocs = c.steps_to_full = g.big;
    c.resets = c.prior_epochs = g.big;
    c.steps_explicit = true;
    out.push_back(zarena_core::reset_cadence_record(c, long_source()));
  }
  zarena_core::StepRecordFacts step;
  step.epoch = step.steps = step.allocs = step.reuses = step.peak_bytes = g.big;
  step.capacity_bytes = step.overflow_allocs = step.overflow_peak_bytes = g.big;
  step.needed_bytes = g.big;
  out.push_back(zarena_core::step_record(step, long_source()));
  out.push_back(zarena_core::overflow_slow_record(g.big, g.big, g.big, "capture_refused",
                                                  long_source()));
  out.push_back(zarena_core::config_record(everything_set(), std::string(g.text, 'd'),
                                           ZARENA_BACKEND_CUDA, ZARENA_OVERFLOW_ASYNC,
                                           std::string(g.text, 'f'), g.big, g.big));
  zarena_stats s;
  std::memset(&s, 0, sizeof s);
  s.epoch = s.high_water_bytes = s.capacity_bytes = s.overflow_allocs = g.big;
  s.overflow_peak_bytes = s.stale_frees = s.invalid_frees = s.live_allocs = s.resets = g.big;
  out.push_back(zarena_core::destroy_record(s, {g.big, g.big}, long_source()));
  zarena_core::ConfigProblem invalid{
      false, "ZARENA_OVERFLOW_RETAIN_BYTES", std::string(g.text, '9'), "too large", "512MiB", ""};
  out.push_back(zarena_core::config_problem_record(invalid, long_source()));
  zarena_core::ConfigProblem unknown{true, "ZARENA_" + std::string(g.text, 'Q'),
                                     "v",  "unknown variable",
                                     "",   "ZARENA_OVERFLOW_RETAIN_BYTES"};
  out.push_back(zarena_core::config_problem_record(unknown, long_source()));
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

// Extreme values: the sentence is whole, whatever its length, and one line.
TEST(HumanLine, EveryRecordTypeKeepsItsSentenceWhole) {
  g = kExtreme;
  for (const LogRecord& r : every_record_type()) {
    const std::string line = zarena_core::log_format_line(r);
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
    std::string sentence = r.human_text();
    for (char& c : sentence) {
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    }
    EXPECT_NE(line.find(sentence), std::string::npos) << line;
  }
}

// Realistic values (a million allocations, 20-character names, 40-character texts): every
// line fits the bound, sentence whole.
TEST(HumanLine, EveryRecordTypeFitsTheBound) {
  g = kRealistic;
  std::vector<std::string> events;
  for (const LogRecord& r : every_record_type()) {
    const std::string line = zarena_core::log_format_line(r);
    EXPECT_LE(line.size() + zarena_core::kHumanPrefixMax, zarena_core::kHumanLineMax)
        << line.size() << ": " << line;
    // The sentence is there whole (control characters become blanks).
    std::string sentence = r.human_text();
    for (char& c : sentence) {
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    }
    EXPECT_NE(line.find(sentence), std::string::npos) << line;
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
    EXPECT_EQ(line.rfind(r.event(), 0), 0u) << line;
    events.push_back(r.event());
  }
  g = kExtreme;
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

// The sentence is never cut (its advice is what a person must read whole); headline
// fields follow it after a visible separator, as many as fit the line.
TEST(HumanLine, SentenceIsWholeAndFieldsComeAfterASeparator) {
  LogRecord r(kTestWhole, "");
  r.message(
       "arena full, verdict working_set_full. Fix: raise the capacity beyond 5.4 GiB (a "
       "reset would not help)")
      .add_uint("requested_bytes", 262144)
      .add_string("verdict", "working_set_full")
      .headline({"requested_bytes", "verdict"});
  EXPECT_EQ(zarena_core::log_format_line(r),
            "test.whole: arena full, verdict working_set_full. Fix: raise the capacity beyond "
            "5.4 GiB (a reset would not help) | requested_bytes=262144")
      << "the field that does not fit is left out";

  LogRecord long_one(kTestLong, "");
  std::string words;
  for (int i = 0; i < 60; ++i) words += "word" + std::to_string(i) + " ";
  words += "end.";
  long_one.message(words).add_uint("n", 7).headline({"n"});
  const std::string line = zarena_core::log_format_line(long_one);
  EXPECT_EQ(line, "test.long: " + words) << "whole, and no room left for the fields";
}

// Once per process the stderr line that leaves fields out says how to get them all.
TEST(HumanLine, TheJsonHintIsAppendedWhenAsked) {
  LogRecord r(kTestHint, "a");
  r.message("m").add_uint("n", 1).add_uint("hidden", 2).headline({"n"});
  EXPECT_TRUE(zarena_core::log_line_omits_fields(r));
  EXPECT_EQ(zarena_core::log_format_line(r, true),
            "test.hint [a]: m | n=1 (every field: ZARENA_LOG_FORMAT=json)");
  LogRecord all(kTestAll, "");
  all.message("m").add_uint("n", 1).headline({"n"});
  EXPECT_FALSE(zarena_core::log_line_omits_fields(all));
}

TEST(HumanLine, ControlCharactersNeverBreakTheLine) {
  LogRecord r(kTestWarn, "two\nlines");
  r.message("a\nb\rc").add_string("s", "x\ny").headline({"s"});
  EXPECT_EQ(zarena_core::log_format_line(r), "test.ctl [two lines]: a b c | s=\"x y\"");
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
