// PlanMemory and ResolveBudget (ENGINE.md §4) on the fixture and on the
// generator's Kimi-Linear manifest.
#include "waste/memplan.h"

#include <gtest/gtest.h>

#include <string>

#include "container/container.h"
#include "container_test_util.h"
#include "generator.h"
#include "engine/memplan_internal.h"
#include "shared_fixtures.h"

namespace waste {
namespace {

using testing::FixtureDir;

MemPlan TinyPlan(uint32_t ctx = 4096) {
  Result<MemPlan> p = PlanMemory(FixtureDir("warp-tiny"), ctx);
  EXPECT_TRUE(p.has_value()) << p.error().ToString();
  return p.has_value() ? *p : MemPlan{};
}

TEST(PlanMemory, TinyFixtureTerms) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  MemPlan p = TinyPlan();
  EXPECT_EQ(p.ctx, 4096u);
  // Trunk: the 352872 resident bytes of the reference, plus our alignment.
  EXPECT_GE(p.trunk_bytes, 352872u);
  EXPECT_LE(p.trunk_bytes, 352872u + 2 * 64 * 78);
  auto c = Container::Open(FixtureDir("warp-tiny"));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(p.trunk_bytes, (*c)->resident_trunk_bytes());  // plan == what open allocates
  EXPECT_EQ(p.state_bytes, 718336u);                          // the reference's figure
  EXPECT_EQ(p.record_bytes, 12288u);
  EXPECT_EQ(p.min_expert_cache, 49152u);
  EXPECT_EQ(p.working_set_bytes, 98304u);
  EXPECT_EQ(p.all_experts_bytes, 3u * 98304u);
  EXPECT_EQ(p.floor_bytes, p.trunk_bytes + p.state_bytes + p.scratch_bytes + p.min_expert_cache);
  EXPECT_EQ(p.recommended_bytes, p.floor_bytes + 3 * 98304u);
  // The reference's own scratch for this shape is 9.58 MB; ours counts our
  // buffers, and must be of that order.
  EXPECT_GT(p.scratch_bytes, 4u << 20);
  EXPECT_LT(p.scratch_bytes, 32u << 20);
}

TEST(PlanMemory, ContextScalesOnlyMlaState) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  MemPlan a = TinyPlan(4096), b = TinyPlan(8192);
  EXPECT_EQ(b.state_bytes - a.state_bytes, 1u * 4096 * (32 + 8) * 4);
  EXPECT_GT(b.scratch_bytes, a.scratch_bytes);  // per-head scores over the context
  EXPECT_EQ(a.trunk_bytes, b.trunk_bytes);
}

TEST(PlanMemory, RefusesWhatOpenRefuses) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  testing::FixtureCopy copy;
  auto m = copy.Manifest();
  m["format_version"] = 2;
  copy.SetManifest(m);
  Result<MemPlan> p = PlanMemory(copy.path(), 4096);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code(), Errc::kFormat);
  EXPECT_EQ(PlanMemory("/nonexistent/dir", 4096).error().code(), Errc::kIo);
}

TEST(ResolveBudget, BelowTheFloorIsRefused) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  MemPlan p = TinyPlan();
  Result<BudgetResolution> r = ResolveBudget(p, 1 << 20);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), Errc::kRamBudget);
  EXPECT_NE(r.error().ToString().find("below the model's floor"), std::string::npos);
  EXPECT_NE(r.error().message().find("floor of"), std::string::npos);
}

TEST(ResolveBudget, GivenBudgetBecomesWholeSlots) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  MemPlan p = TinyPlan();
  Result<BudgetResolution> r = ResolveBudget(p, p.floor_bytes);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->defaulted);
  EXPECT_EQ(r->budget_bytes, p.floor_bytes);
  EXPECT_EQ(r->slots, 4u);  // the minimum cache: top_k x 2
  EXPECT_EQ(r->expert_cache_bytes, 4u * 12288);
  r = ResolveBudget(p, p.floor_bytes + 12288 + 100);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->slots, 5u);
  EXPECT_EQ(r->expert_cache_bytes, 5u * 12288);
}

TEST(ResolveBudget, DefaultRuleStepsDownInWorkingSets) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  MemPlan p = TinyPlan();
  const uint64_t ws = p.working_set_bytes;
  auto with_usable = [&](uint64_t usable) {
    MemPlan q = p;
    q.usable_ram_bytes = usable;
    Result<BudgetResolution> r = ResolveBudget(q, 0);
    EXPECT_TRUE(r.has_value());
    EXPECT_TRUE(r->defaulted);
    return *r;
  };
  // cap = usable - usable/4
  EXPECT_EQ(with_usable(uint64_t{64} << 30).budget_bytes, p.floor_bytes + 3 * ws);
  EXPECT_EQ(with_usable((p.floor_bytes + 2 * ws) * 4 / 3 + 4).budget_bytes, p.floor_bytes + 2 * ws);
  EXPECT_EQ(with_usable((p.floor_bytes + ws) * 4 / 3 + 4).budget_bytes, p.floor_bytes + ws);
  BudgetResolution tight = with_usable(p.floor_bytes);
  EXPECT_EQ(tight.budget_bytes, p.floor_bytes);
  EXPECT_TRUE(tight.over_cap);
  BudgetResolution unknown = with_usable(0);
  EXPECT_EQ(unknown.budget_bytes, p.recommended_bytes);
  EXPECT_FALSE(unknown.over_cap);
  // The cache then holds budget - floor + min_cache in whole records.
  BudgetResolution big = with_usable(uint64_t{64} << 30);
  EXPECT_EQ(big.expert_cache_bytes, (3 * ws + p.min_expert_cache) / 12288 * 12288);
}

TEST(PlanMemory, KimiLinearFigures) {
  testing::TempDir dir;
  gen::GenOptions o;
  o.out_dir = dir.path();
  o.preset = "kimi-linear";
  o.manifest_only = true;
  o.trace = "none";
  ASSERT_TRUE(gen::Generate(o).has_value());
  Result<MemPlan> p = PlanMemory(dir.path(), 4096);
  ASSERT_TRUE(p.has_value()) << p.error().ToString();
  constexpr double kMiB = 1 << 20;
  // ENGINE.md §1.6 (reference, default conversion): trunk 988 MB, state
  // 106 MB, scratch 178 MB, min cache 41 MB.
  EXPECT_NEAR(p->trunk_bytes / kMiB, 988, 40);
  EXPECT_NEAR(p->state_bytes / kMiB, 106, 1);
  EXPECT_NEAR(p->min_expert_cache / kMiB, 40.7, 0.5);
  EXPECT_GT(p->scratch_bytes / kMiB, 100);
  EXPECT_LT(p->scratch_bytes / kMiB, 400);
  EXPECT_EQ(p->record_bytes, 2666496u);
  EXPECT_EQ(p->working_set_bytes, 2666496ull * 8 * 27);
}

TEST(EstimateScratchBytes, CountsLookupTablesForVq4p) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  Result<Manifest> m = ParseManifest(testing::ReadFile(FixtureDir("warp-tiny") + "/manifest.json"));
  ASSERT_TRUE(m.has_value());
  ModelConfig c = m->config;
  uint64_t vq3 = EstimateScratchBytes(c, 4096);
  c.quant = ExpertQuant{4, 8, 64, 6, "VQ4P"};
  uint64_t vq4 = EstimateScratchBytes(c, 4096);
  EXPECT_LT(vq4, vq3);  // 4 x 64 entries per position instead of 3 x 256
  c.moe.n_experts = 0;
  c.moe.top_k = 0;
  EXPECT_LT(EstimateScratchBytes(c, 4096), vq4);
}

}  // namespace
}  // namespace waste
