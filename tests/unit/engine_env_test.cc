// ResolveOptions: every WASTE_* variable the library reads is read there
// (docs/ENV.md), an explicit Config value beats the variable, and garbage
// falls back to the default.
#include "base/engine_env.h"

#include <gtest/gtest.h>

#include "scoped_env.h"

namespace waste {
namespace {

using testing::ScopedEnv;

TEST(EngineEnv, DefaultsWithNothingSet) {
  ScopedEnv a("WASTE_THREADS", nullptr), b("WASTE_SPIN", nullptr), c("WASTE_IO_DEPTH", nullptr),
      d("WASTE_IO", nullptr), e("WASTE_IO_FIXED", nullptr), f("WASTE_CACHE_POLICY", nullptr),
      g("WASTE_CACHE_TRACE", nullptr), h("WASTE_WARM_WAIT", nullptr),
      i("WASTE_HUGE_PAGES", nullptr), j("WASTE_DIRECT", nullptr), k("WASTE_LOOKAHEAD", nullptr);
  EngineOptions o = ResolveOptions(Config{});
  EXPECT_EQ(o.threads, 0);
  EXPECT_EQ(o.spin_us, -1);
  EXPECT_EQ(o.io_depth, 8);
  EXPECT_EQ(o.io_backend, "");
  EXPECT_FALSE(o.io_fixed_buffers);
  EXPECT_EQ(o.cache_policy, "");
  EXPECT_EQ(o.cache_trace, "");
  EXPECT_FALSE(o.warm_wait);
  EXPECT_TRUE(o.huge_pages);
  EXPECT_TRUE(o.direct_io);
  EXPECT_EQ(o.lookahead, 6);
}

TEST(EngineEnv, EveryVariableIsRead) {
  ScopedEnv a("WASTE_THREADS", "5"), b("WASTE_SPIN", "250"), c("WASTE_IO_DEPTH", "16"),
      d("WASTE_IO", "sync"), e("WASTE_IO_FIXED", "1"), f("WASTE_CACHE_POLICY", "lru"),
      g("WASTE_CACHE_TRACE", "/tmp/trace"), h("WASTE_WARM_WAIT", "1"), i("WASTE_HUGE_PAGES", "0"),
      j("WASTE_DIRECT", "0"), k("WASTE_LOOKAHEAD", "3");
  EngineOptions o = ResolveOptions(Config{});
  EXPECT_EQ(o.threads, 5);
  EXPECT_EQ(o.spin_us, 250);
  EXPECT_EQ(o.io_depth, 16);
  EXPECT_EQ(o.io_backend, "sync");
  EXPECT_TRUE(o.io_fixed_buffers);
  EXPECT_EQ(o.cache_policy, "lru");
  EXPECT_EQ(o.cache_trace, "/tmp/trace");
  EXPECT_TRUE(o.warm_wait);
  EXPECT_FALSE(o.huge_pages);
  EXPECT_FALSE(o.direct_io);
  EXPECT_EQ(o.lookahead, 3);
}

TEST(EngineEnv, ExplicitConfigWinsAndBadValuesFallBack) {
  ScopedEnv a("WASTE_THREADS", "5"), b("WASTE_SPIN", "junk"), c("WASTE_IO_DEPTH", "1000"),
      d("WASTE_LOOKAHEAD", "3");
  Config cfg;
  cfg.threads = 2;
  cfg.lookahead = 0;
  EngineOptions o = ResolveOptions(cfg);
  EXPECT_EQ(o.threads, 2);
  EXPECT_EQ(o.lookahead, 0);
  EXPECT_EQ(o.spin_us, -1);    // not a number: the pool's default
  EXPECT_EQ(o.io_depth, 64);   // clamped
  {
    ScopedEnv junk("WASTE_THREADS", "junk");
    EXPECT_EQ(ResolveOptions(Config{}).threads, 0);  // atoi's garbage = unset
  }
  {
    ScopedEnv huge("WASTE_SPIN", "99999999");
    EXPECT_EQ(ResolveOptions(Config{}).spin_us, 100000);  // capped
  }
}

}  // namespace
}  // namespace waste
