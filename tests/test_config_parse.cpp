// The value syntax of environment variables (zarena.h, above zarena_config_init): what is
// read, what is refused and why. The refusals of issue 13 #2 (" -1", " -5", "010", hex)
// were all accepted by the 1.0 parser, as other numbers.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "config/config_parse.h"

using zarena_core::parse_value;
using zarena_core::Syntax;

namespace {

struct Parsed {
  bool ok;
  uint64_t value;
  std::string why;
};

Parsed parse(Syntax s, const char* text) {
  Parsed p{false, 0xDEAD, ""};
  p.ok = parse_value(s, text, zarena_core::kPolicyNames, 4, &p.value, &p.why);
  return p;
}

void expect_value(Syntax s, const char* text, uint64_t want) {
  const Parsed p = parse(s, text);
  EXPECT_TRUE(p.ok) << "'" << text << "': " << p.why;
  EXPECT_EQ(p.value, want) << "'" << text << "'";
}

void expect_refused(Syntax s, const char* text, const std::string& why_part) {
  const Parsed p = parse(s, text);
  EXPECT_FALSE(p.ok) << "'" << text << "' read as " << p.value;
  EXPECT_EQ(p.value, 0xDEADu) << "a refused value must not be written";
  EXPECT_NE(p.why.find(why_part), std::string::npos) << "'" << text << "': " << p.why;
}

constexpr uint64_t kKi = 1024, kMi = kKi * 1024, kGi = kMi * 1024, kTi = kGi * 1024;

TEST(ParseBytes, UnitsBinaryAndDecimal) {
  expect_value(Syntax::kBytes, "0", 0);
  expect_value(Syntax::kBytes, "4096", 4096);
  expect_value(Syntax::kBytes, "2GB", 2'000'000'000);
  expect_value(Syntax::kBytes, "2gb", 2'000'000'000);
  expect_value(Syntax::kBytes, "2GiB", 2 * kGi);
  expect_value(Syntax::kBytes, "2G", 2 * kGi);
  expect_value(Syntax::kBytes, "512MiB", 512 * kMi);
  expect_value(Syntax::kBytes, "512MB", 512'000'000);
  expect_value(Syntax::kBytes, "64k", 64 * kKi);
  expect_value(Syntax::kBytes, "64KB", 64'000);
  expect_value(Syntax::kBytes, "1.5GiB", 3 * kGi / 2);
  expect_value(Syntax::kBytes, "0.5M", kMi / 2);
  expect_value(Syntax::kBytes, "3TiB", 3 * kTi);
  expect_value(Syntax::kBytes, "1TB", 1'000'000'000'000);
  expect_value(Syntax::kBytes, "100B", 100);
  expect_value(Syntax::kBytes, "18446744073709551615", UINT64_MAX);
}

TEST(ParseBytes, FractionsRoundToTheNearestByte) {
  expect_value(Syntax::kBytes, "0.001K", 1);                         // 1.024 bytes
  expect_value(Syntax::kBytes, "1.0000000000000000000001GiB", kGi);  // digits beyond 18 drop
}

// "1.5" read as 2 bytes, and create then failed with "capacity_bytes 2 is smaller than the
// alignment 256", naming neither the variable nor the rule (issue 34).
TEST(ParseBytes, AFractionNeedsAUnit) {
  expect_refused(Syntax::kBytes, "1.5", "a fraction needs a unit");
  expect_refused(Syntax::kBytes, "1.5B", "a size without one is in bytes");
  expect_refused(Syntax::kBytesOrUnlimited, "0.5", "a fraction needs a unit");
  expect_value(Syntax::kBytes, "1.5K", 1536);
  expect_value(Syntax::kGiB, "1.5", 3 * kGi / 2);  // ztensor's *_GB: the unit is GiB
}

TEST(ParseBytes, Issue13Defect2Regressions) {
  // strtoull skipped the blank and wrapped the sign: " -1" became 2^64-1.
  expect_refused(Syntax::kBytes, " -1", "blanks");
  expect_refused(Syntax::kBytes, "-1", "negative");
  expect_refused(Syntax::kBytes, " -5", "blanks");
  expect_refused(Syntax::kBytes, "-5", "negative");
  // Base 0 read "010" as 8 and accepted hexadecimal.
  expect_refused(Syntax::kBytes, "010", "leading zero");
  expect_refused(Syntax::kCount, "010", "leading zero");
  expect_refused(Syntax::kBytes, "0x10", "hexadecimal");
  expect_refused(Syntax::kCount, "0X1F", "hexadecimal");
}

TEST(ParseBytes, RefusesWhatAPersonDidNotMean) {
  expect_refused(Syntax::kBytes, "", "empty");
  expect_refused(Syntax::kBytes, "1024 ", "blanks");
  expect_refused(Syntax::kBytes, "\t1024", "blanks");
  expect_refused(Syntax::kBytes, "2 GiB", "a blank inside");
  expect_refused(Syntax::kBytes, "+5", "sign");
  expect_refused(Syntax::kBytes, "2XB", "unknown unit \"XB\"");
  expect_refused(Syntax::kBytes, "2GiBs", "unknown unit");
  expect_refused(Syntax::kBytes, "1e9", "unknown unit");
  expect_refused(Syntax::kBytes, ".5G", "not a number");
  expect_refused(Syntax::kBytes, "5.G", "no digits after");
  expect_refused(Syntax::kBytes, "banana", "not a number");
  expect_refused(Syntax::kBytes, "18446744073709551616", "too large");
  expect_refused(Syntax::kBytes, "17179869184GiB", "too large");
  expect_refused(Syntax::kBytes, "99999999999999999999999", "too large");
}

TEST(ParseCount, WholeDecimalOnly) {
  expect_value(Syntax::kCount, "7", 7);
  expect_value(Syntax::kCount, "0", 0);
  expect_refused(Syntax::kCount, "1.5", "not a whole number");
  expect_refused(Syntax::kCount, "3k", "unexpected \"k\"");
  expect_value(Syntax::kMillis, "25", 25'000'000);
  expect_refused(Syntax::kMillis, "25ms", "unexpected \"ms\"");
}

TEST(ParseGiB, ZtensorNamesTakeAPlainNumberOfGiB) {
  expect_value(Syntax::kGiB, "4", 4 * kGi);
  expect_value(Syntax::kGiB, "0.5", kGi / 2);
  expect_refused(Syntax::kGiB, "4GB", "no unit");
  expect_refused(Syntax::kGiB, " 4", "blanks");
}

TEST(ParseOther, UnlimitedWordsSwitchesNamesText) {
  expect_value(Syntax::kBytesOrUnlimited, "unlimited", UINT64_MAX);
  expect_value(Syntax::kBytesOrUnlimited, "Unlimited", UINT64_MAX);
  expect_value(Syntax::kBytesOrUnlimited, "1GiB", kGi);
  expect_refused(Syntax::kBytesOrUnlimited, "none", "not a number");

  expect_value(Syntax::kWord, "0x7FF80000", 0x7FF80000u);
  expect_value(Syntax::kWord, "0xa5a5a5a5", 0xA5A5A5A5u);
  expect_value(Syntax::kWord, "165", 165);
  expect_refused(Syntax::kWord, "0x100000000", "32 bits");
  expect_refused(Syntax::kWord, "4294967296", "32 bits");
  expect_refused(Syntax::kWord, "0x", "hexadecimal");
  expect_refused(Syntax::kWord, "0xZZ", "hexadecimal");
  expect_refused(Syntax::kWord, "-1", "negative");

  expect_value(Syntax::kSwitch, "ON", 1);
  expect_value(Syntax::kSwitch, "no", 0);
  expect_value(Syntax::kSwitch, "", 0);
  expect_refused(Syntax::kSwitch, " 1", "not a switch");
  expect_refused(Syntax::kSwitch, "2", "not a switch");

  expect_value(Syntax::kEnumName, "REFUSE", 3);
  expect_refused(Syntax::kEnumName, "refused", "not one of default, async, sync or refuse");

  expect_value(Syntax::kLogLevel, "warning", ZARENA_LOG_WARN);
  expect_refused(Syntax::kLogLevel, "loud", "not one of");

  uint64_t untouched = 0xDEAD;
  std::string why;
  EXPECT_TRUE(parse_value(Syntax::kText, "train run 1", nullptr, 0, &untouched, &why));
  EXPECT_EQ(untouched, 0xDEADu);
  expect_refused(Syntax::kText, "", "empty");
  expect_refused(Syntax::kText, "name ", "blanks");
  expect_refused(Syntax::kBytes, nullptr, "not set");
}

TEST(EditDistance, CountsEdits) {
  EXPECT_EQ(zarena_core::edit_distance("ZARENA_CAPACTY_BYTES", "ZARENA_CAPACITY_BYTES"), 1u);
  EXPECT_EQ(zarena_core::edit_distance("abc", "abc"), 0u);
  EXPECT_EQ(zarena_core::edit_distance("", "abc"), 3u);
  EXPECT_EQ(zarena_core::edit_distance("kitten", "sitting"), 3u);
}

}  // namespace
