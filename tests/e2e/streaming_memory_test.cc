// Everything the engine allocates counts against --budget (ENGINE.md §4,
// issue #5): after open, trunk and state equal the plan, scratch stays
// within it, the cache is whole padded slots within what the budget leaves,
// and a budget under the floor is refused before anything model-sized.
#include <gtest/gtest.h>

#include "e2e/streaming_util.h"
#include "generator.h"
#include "waste/engine.h"
#include "waste/memplan.h"

namespace waste {
namespace {

using testing::StreamingContainer;
using testing::TempDir;

void CheckAgainstPlan(const std::string& dir, uint64_t budget) {
  SCOPED_TRACE(dir + " budget " + std::to_string(budget));
  Result<MemPlan> plan = PlanMemory(dir, 4096);
  ASSERT_TRUE(plan.has_value()) << plan.error().ToString();
  Config cfg;
  cfg.ram_budget_bytes = budget;
  auto e = Engine::Open(dir, cfg);
  ASSERT_TRUE(e.has_value()) << e.error().ToString();
  MemoryUsage m = (*e)->memory_used();
  EXPECT_EQ(m.trunk_bytes, plan->trunk_bytes);
  EXPECT_EQ(m.state_bytes, plan->state_bytes);
  EXPECT_LE(m.scratch_bytes, plan->scratch_bytes);
  const uint64_t resolved = budget == 0 ? m.budget_bytes : budget;
  EXPECT_EQ(m.budget_bytes, resolved);
  // The cache: whole slots, each the record padded to a 4 KiB (or 16 KiB)
  // multiple, within what the budget leaves after the plan's other parts.
  ASSERT_GT(m.slots, 0u);
  ASSERT_EQ(m.expert_cache_bytes % m.slots, 0u);
  const uint64_t slot = m.expert_cache_bytes / m.slots;
  EXPECT_EQ(slot % 4096, 0u);
  EXPECT_GE(slot, plan->record_bytes);
  EXPECT_LT(slot, plan->record_bytes + 16384);
  EXPECT_LE(plan->trunk_bytes + plan->state_bytes + plan->scratch_bytes + m.expert_cache_bytes,
            resolved);
  // And nothing is wasted: one more slot would not have fitted, or the
  // cache already holds a slot for every record of the container.
  const uint64_t records = plan->all_experts_bytes / plan->record_bytes;
  EXPECT_LE(m.slots, records);
  if (m.slots < records) {
    EXPECT_GT(plan->trunk_bytes + plan->state_bytes + plan->scratch_bytes +
                  m.expert_cache_bytes + slot,
              resolved);
  }
  // Every layer's experts fit at once (top_k + 1 slots at the floor).
  EXPECT_GT(m.slots, static_cast<uint64_t>((*e)->info().top_k));
}

TEST(StreamingMemory, PlanEqualsWhatOpenHolds) {
  Result<MemPlan> plan = PlanMemory(StreamingContainer(), 4096);
  ASSERT_TRUE(plan.has_value());
  CheckAgainstPlan(StreamingContainer(), plan->floor_bytes);
  CheckAgainstPlan(StreamingContainer(), plan->floor_bytes + (uint64_t{50} << 20));
  CheckAgainstPlan(StreamingContainer(), 0);  // the default budget
  // A budget larger than every expert: one slot per record, no more.
  CheckAgainstPlan(StreamingContainer(), plan->floor_bytes + 2 * plan->all_experts_bytes);
}

TEST(StreamingMemory, TinyRecordsStillFitTheFloor) {
  // 12 KiB records padded to 16 KiB: the floor (sized by R in unpadded
  // records) must still hold a layer's experts plus one.
  TempDir dir;
  gen::GenOptions o;
  o.out_dir = dir.path();
  o.preset = "tiny";
  ASSERT_TRUE(gen::Generate(o).has_value());
  Result<MemPlan> plan = PlanMemory(dir.path(), 4096);
  ASSERT_TRUE(plan.has_value());
  CheckAgainstPlan(dir.path(), plan->floor_bytes);
  CheckAgainstPlan(dir.path(), plan->floor_bytes + (uint64_t{1} << 20));
}

TEST(StreamingMemory, BudgetBelowTheFloorIsRefused) {
  Result<MemPlan> plan = PlanMemory(StreamingContainer(), 4096);
  ASSERT_TRUE(plan.has_value());
  Config cfg;
  cfg.ram_budget_bytes = plan->floor_bytes - 1;
  auto e = Engine::Open(StreamingContainer(), cfg);
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error().code(), Errc::kRamBudget);
}

}  // namespace
}  // namespace waste
