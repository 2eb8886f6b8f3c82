// The configuration table itself (src/config/config_fields.h): it covers every field of
// zarena_config, its variable names are unique and zarena's, each example it shows in a
// warning is a valid value, and its names match the header's numbers.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"

using zarena_core::FieldSpec;
using zarena_core::kConfigFields;
using zarena_core::Storage;

namespace {

size_t storage_size(const FieldSpec& f) {
  switch (f.storage) {
    case Storage::kI32:
    case Storage::kU32:
    case Storage::kFlag:
      return 4;
    default:
      return 8;
  }
}

// A field added to zarena_config without a row would be invisible to the environment, the
// record and the Go mirror: every byte must belong to a row, struct_size, reserved0, or
// the padding between fields.
TEST(ConfigTable, CoversEveryByteOfTheStruct) {
  std::vector<int> owner(sizeof(zarena_config), 0);
  auto claim = [&](size_t off, size_t n) {
    for (size_t i = off; i < off + n; ++i) owner[i] = 1;
  };
  claim(offsetof(zarena_config, struct_size), sizeof(uint32_t));
  claim(offsetof(zarena_config, reserved0), sizeof(uint32_t));
  for (const FieldSpec& f : kConfigFields) claim(f.offset, storage_size(f));
  // What is left must be padding, which lies only before 8-byte members.
  for (size_t i = 0; i < owner.size(); ++i) {
    if (owner[i] != 0) continue;
    size_t end = i;
    while (end < owner.size() && owner[end] == 0) ++end;
    EXPECT_LT(end - i, 8u) << "bytes [" << i << ", " << end << ") of zarena_config have no row";
    EXPECT_EQ(end % 8, 0u) << "bytes [" << i << ", " << end << ") are not alignment padding";
    i = end;
  }
}

TEST(ConfigTable, RowsAreInStructOrderWithUniqueKeysAndFlagBits) {
  std::set<std::string> keys;
  uint32_t bits = 0;
  size_t last = 0;
  for (const FieldSpec& f : kConfigFields) {
    EXPECT_TRUE(keys.insert(f.key).second) << f.key;
    EXPECT_GE(f.offset, last) << f.key;
    last = f.offset;
    if (f.storage == Storage::kFlag) {
      EXPECT_EQ(f.bit & (f.bit - 1), 0u) << f.key << ": one bit";
      EXPECT_EQ(bits & f.bit, 0u) << f.key << ": bit used twice";
      bits |= f.bit;
      EXPECT_EQ(std::string(f.key).rfind("flags.", 0), 0u) << f.key;
    }
    EXPECT_NE(f.go_name, nullptr) << f.key;
    EXPECT_STRNE(f.doc, "") << f.key;
  }
  EXPECT_EQ(bits, ZARENA_FLAG_MANAGED | ZARENA_FLAG_POISON | ZARENA_FLAG_OVERFLOW_PREWARM |
                      ZARENA_FLAG_EXPANDABLE | ZARENA_FLAG_MANAGED_FALLBACK |
                      ZARENA_FLAG_STRICT_CONFIG | ZARENA_FLAG_STEP_RECORDS | ZARENA_FLAG_NO_RESETS |
                      ZARENA_FLAG_PLAN | ZARENA_FLAG_DIAGNOSE_SYNC | ZARENA_FLAG_NO_PLAN);
}

TEST(ConfigTable, EveryVariableIsUniqueAndItsExampleIsValid) {
  std::set<std::string> names;
  for (const FieldSpec& f : kConfigFields) {
    for (int k = 0; k < f.env_count; ++k) {
      const zarena_core::EnvVar& v = f.env[k];
      EXPECT_TRUE(names.insert(v.name).second) << v.name;
      const std::string n = v.name;
      EXPECT_TRUE(n.rfind("ZARENA_", 0) == 0 || n.rfind("ZERFOO_", 0) == 0 ||
                  n.rfind("ZTENSOR_", 0) == 0)
          << n;
      EXPECT_TRUE(zarena_core::is_known_variable(n)) << n;
      // The example a warning offers must itself pass, range and checks included.
      uint64_t value = 0;
      std::string why;
      ASSERT_NE(v.example, nullptr) << n;
      EXPECT_TRUE(
          zarena_core::parse_value(v.syntax, v.example, f.enum_names, f.enum_count, &value, &why))
          << n << "=" << v.example << ": " << why;
      if (f.storage != Storage::kString) {
        EXPECT_GE(value, f.min) << n;
        EXPECT_LE(value, f.max) << n;
        if (f.check != nullptr) {
          EXPECT_EQ(f.check(value), nullptr) << n;
        }
      }
    }
  }
  for (const zarena_core::OtherVariable& o : zarena_core::kOtherVariables) {
    EXPECT_TRUE(names.insert(o.name).second) << o.name;
    if (o.syntax == zarena_core::Syntax::kNone) continue;
    uint64_t value = 0;
    std::string why;
    EXPECT_TRUE(
        zarena_core::parse_value(o.syntax, o.example, o.enum_names, o.enum_count, &value, &why))
        << o.name << ": " << why;
  }
}

TEST(ConfigTable, EnumNamesFollowTheHeadersNumbers) {
  EXPECT_STREQ(zarena_core::kBackendNames[ZARENA_BACKEND_AUTO], "auto");
  EXPECT_STREQ(zarena_core::kBackendNames[ZARENA_BACKEND_HOST], "host");
  EXPECT_STREQ(zarena_core::kBackendNames[ZARENA_BACKEND_CUDA], "cuda");
  EXPECT_STREQ(zarena_core::kPolicyNames[ZARENA_OVERFLOW_DEFAULT], "default");
  EXPECT_STREQ(zarena_core::kPolicyNames[ZARENA_OVERFLOW_ASYNC], "async");
  EXPECT_STREQ(zarena_core::kPolicyNames[ZARENA_OVERFLOW_SYNC], "sync");
  EXPECT_STREQ(zarena_core::kPolicyNames[ZARENA_OVERFLOW_REFUSE], "refuse");
}

TEST(ConfigTable, DefaultsComeFromTheTable) {
  const zarena_config c = zarena_core::default_config();
  EXPECT_EQ(c.struct_size, sizeof(zarena_config));
  EXPECT_EQ(c.capacity_bytes, zarena_core::kDefaultCapacity);
  EXPECT_EQ(c.alignment, zarena_core::kDefaultAlignment);
  EXPECT_EQ(c.backend, ZARENA_BACKEND_AUTO);
  // "0 = default" fields stay 0 until create resolves them.
  EXPECT_EQ(c.overflow_limit_bytes, 0u);
  EXPECT_EQ(c.poison_word, 0u);
  EXPECT_EQ(c.commit_chunk_bytes, 0u);
  EXPECT_EQ(c.trace_file, nullptr);
  EXPECT_EQ(c.reserved0, 0u);
}

TEST(ConfigTable, GenericAccessRoundTrips) {
  zarena_config c = zarena_core::default_config();
  for (const FieldSpec& f : kConfigFields) {
    if (f.storage == Storage::kString) {
      zarena_core::set_field_text(&c, f, "x");
      EXPECT_STREQ(zarena_core::field_text(c, f), "x") << f.key;
      continue;
    }
    const uint64_t v = f.storage == Storage::kFlag ? 1 : f.enum_count > 0 ? f.enum_count - 1 : 7;
    zarena_core::set_field_number(&c, f, v);
    EXPECT_EQ(zarena_core::field_number(c, f), v) << f.key;
  }
  EXPECT_EQ(c.flags, 0xFFu | ZARENA_FLAG_PLAN | ZARENA_FLAG_DIAGNOSE_SYNC | ZARENA_FLAG_NO_PLAN);
  EXPECT_EQ(c.overflow_policy, ZARENA_OVERFLOW_REFUSE);
  EXPECT_EQ(c.poison_word, 7u);
  EXPECT_EQ(c.trim_keep_bytes, 7u);
  EXPECT_EQ(c.reserved0, 0u) << "no row writes reserved0";
}

}  // namespace
