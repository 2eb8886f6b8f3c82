// Configuration: defaults, environment overrides (zarena's and ztensor's names),
// validation, struct_size handling and source attribution.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "config.h"

using zarena_core::ResolvedConfig;

namespace {

class Env {
 public:
  Env(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~Env() { unsetenv(name_); }

 private:
  const char* name_;
};

std::string source_of(const ResolvedConfig& r, const std::string& field) {
  for (const auto& s : r.sources) {
    if (s.field == field) return s.value + " (" + s.origin + ")";
  }
  return "missing";
}

TEST(Config, DefaultsWithoutEnvironment) {
  zarena_config c;
  zarena_config_init(&c);
  EXPECT_EQ(c.backend, ZARENA_BACKEND_AUTO);
  EXPECT_EQ(c.capacity_bytes, 1ull << 30);
  EXPECT_EQ(c.alignment, 256u);
  EXPECT_EQ(c.overflow_policy, ZARENA_OVERFLOW_DEFAULT);
  EXPECT_EQ(c.flags, 0u);
  ResolvedConfig r;
  ASSERT_TRUE(zarena_core::resolve_config(&c, &r).is_ok());
  EXPECT_EQ(r.cfg.overflow_retain_bytes, 1ull << 30);  // = capacity
  EXPECT_EQ(r.cfg.overflow_slow_ns, 10'000'000u);
  EXPECT_EQ(r.name, "zarena");
  EXPECT_EQ(source_of(r, "capacity_bytes"), "1073741824 (default)");
}

TEST(Config, RetainDefaultsToCapacityButAtLeast64MiB) {
  zarena_config c;
  zarena_config_init(&c);
  c.capacity_bytes = 1 << 20;
  ResolvedConfig r;
  ASSERT_TRUE(zarena_core::resolve_config(&c, &r).is_ok());
  EXPECT_EQ(r.cfg.overflow_retain_bytes, 64u << 20);
  EXPECT_EQ(source_of(r, "overflow_retain_bytes"), "67108864 (default)");
  c.overflow_retain_bytes = 4096;
  ASSERT_TRUE(zarena_core::resolve_config(&c, &r).is_ok());
  EXPECT_EQ(r.cfg.overflow_retain_bytes, 4096u);
  EXPECT_EQ(source_of(r, "overflow_retain_bytes"), "4096 (config)");
}

TEST(Config, ZtensorEnvironmentNames) {
  Env a("ZERFOO_ARENA_SIZE_GB", "0.5");
  Env b("ZERFOO_OVERFLOW_POOL_RETAIN_GB", "2");
  Env c("ZTENSOR_ARENA_POISON", "1");
  Env d("ZERFOO_ENABLE_MANAGED_MEM", "true");
  zarena_config cfg;
  zarena_config_init(&cfg);
  EXPECT_EQ(cfg.capacity_bytes, 512ull << 20);
  EXPECT_EQ(cfg.overflow_retain_bytes, 2ull << 30);
  EXPECT_TRUE(cfg.flags & ZARENA_FLAG_POISON);
  EXPECT_TRUE(cfg.flags & ZARENA_FLAG_MANAGED);
  ResolvedConfig r;
  ASSERT_TRUE(zarena_core::resolve_config(&cfg, &r).is_ok());
  EXPECT_EQ(source_of(r, "capacity_bytes"), "536870912 (env:ZERFOO_ARENA_SIZE_GB)");
  EXPECT_EQ(source_of(r, "flags.poison"), "on (env:ZTENSOR_ARENA_POISON)");
  EXPECT_EQ(source_of(r, "overflow_retain_bytes"),
            "2147483648 (env:ZERFOO_OVERFLOW_POOL_RETAIN_GB)");
}

TEST(Config, ZarenaNamesWinAndBadValuesAreIgnoredAndReported) {
  Env a("ZERFOO_ARENA_SIZE_GB", "4");
  Env b("ZARENA_CAPACITY_BYTES", "1048576");
  Env c("ZARENA_OVERFLOW_POLICY", "refuse");
  Env d("ZARENA_ALIGNMENT", "banana");
  Env e("ZARENA_BACKEND", "host");
  Env f("ZARENA_OVERFLOW_SLOW_MS", "25");
  zarena_config cfg;
  zarena_config_init(&cfg);
  EXPECT_EQ(cfg.capacity_bytes, 1u << 20);
  EXPECT_EQ(cfg.overflow_policy, ZARENA_OVERFLOW_REFUSE);
  EXPECT_EQ(cfg.alignment, 256u);
  EXPECT_EQ(cfg.backend, ZARENA_BACKEND_HOST);
  EXPECT_EQ(cfg.overflow_slow_ns, 25'000'000u);
  ResolvedConfig r;
  ASSERT_TRUE(zarena_core::resolve_config(&cfg, &r).is_ok());
  EXPECT_EQ(source_of(r, "capacity_bytes"), "1048576 (env:ZARENA_CAPACITY_BYTES)");
  EXPECT_EQ(source_of(r, "overflow_policy"), "refuse (env:ZARENA_OVERFLOW_POLICY)");
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("ZARENA_ALIGNMENT='banana'"), std::string::npos);
}

TEST(Config, CallerValueOverEnvironmentIsAttributedToConfig) {
  Env a("ZARENA_CAPACITY_BYTES", "1048576");
  zarena_config cfg;
  zarena_config_init(&cfg);
  cfg.capacity_bytes = 2 << 20;
  ResolvedConfig r;
  ASSERT_TRUE(zarena_core::resolve_config(&cfg, &r).is_ok());
  EXPECT_EQ(source_of(r, "capacity_bytes"), "2097152 (config)");
}

TEST(Config, CapacityIsRoundedDownToWholeGranules) {
  zarena_config cfg;
  zarena_config_init(&cfg);
  cfg.capacity_bytes = 1000;
  cfg.alignment = 256;
  ResolvedConfig r;
  ASSERT_TRUE(zarena_core::resolve_config(&cfg, &r).is_ok());
  EXPECT_EQ(r.cfg.capacity_bytes, 768u);
  cfg.capacity_bytes = 100;
  EXPECT_EQ(zarena_core::resolve_config(&cfg, &r).status, zarena_core::Status::kInvalidArgument);
}

}  // namespace
