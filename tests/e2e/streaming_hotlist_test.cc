// The learned hotlist (ENGINE.md §5.8, FORMAT.md §9.5, issue #5): a run
// saves usage.waste, the next open warms the hottest records through the
// reader threads, and the same prompt then misses less. Each test works on
// its own linked copy of the container so usage.waste never leaks.
#include <gtest/gtest.h>

#include <cstring>

#include "e2e/streaming_util.h"
#include "streaming/hotlist.h"
#include "platform/platform.h"
#include "waste/engine.h"
#include "waste/memplan.h"

namespace waste {
namespace {

using testing::LinkedCopy;
using testing::StreamingContainer;
using testing::TestPrompt;

struct Outcome {
  Stats stats;
  std::vector<int> tokens;
};

Config SmallCache(const std::string& dir) {
  Result<MemPlan> plan = PlanMemory(dir, 4096);
  EXPECT_TRUE(plan.has_value());
  Config c;
  // ~100 slots of the container's 448 records.
  c.ram_budget_bytes = plan->floor_bytes + 100 * plan->record_bytes;
  return c;
}

Outcome RunOnce(const std::string& dir, bool learn) {
  Outcome out;
  auto e = Engine::Open(dir, SmallCache(dir));
  EXPECT_TRUE(e.has_value()) << (e ? "" : e.error().ToString());
  if (!e) return out;
  GenParams p;
  p.max_tokens = 12;
  std::vector<int> prompt = TestPrompt((*e)->info().vocab, 10);
  auto st = (*e)->Generate(prompt, p, [&](const TokenEvent& ev) {
    out.tokens.push_back(ev.token);
    return true;
  });
  EXPECT_TRUE(st.has_value()) << st.error().ToString();
  out.stats = (*e)->stats();
  if (learn) {
    Status saved = (*e)->SaveUsage();
    EXPECT_TRUE(saved.ok()) << saved.ToString();
  }
  return out;
}

Hotlist ReadHotlist(const std::string& path) {
  auto bytes = platform::ReadWholeFile(path);
  EXPECT_TRUE(bytes.has_value());
  if (!bytes) return {};
  auto h = ParseHotlist(*bytes);
  EXPECT_TRUE(h.has_value());
  return h ? *h : Hotlist{};
}

TEST(StreamingHotlist, SecondRunOfTheSamePromptMissesLess) {
  LinkedCopy dir(StreamingContainer());
  Outcome first = RunOnce(dir.path(), /*learn=*/true);
  ASSERT_TRUE(platform::PathExists(dir / "usage.waste"));
  EXPECT_EQ(first.stats.warm_reads, 0u);

  // The file: FORMAT.md §9.5, hottest first, real token count.
  Hotlist h = ReadHotlist(dir / "usage.waste");
  ASSERT_FALSE(h.entries.empty());
  EXPECT_EQ(h.total_tokens, 10u + first.stats.tokens_generated);
  for (size_t i = 1; i < h.entries.size(); ++i) {
    EXPECT_GE(h.entries[i - 1].hits, h.entries[i].hits);
  }
  auto raw = platform::ReadWholeFile(dir / "usage.waste");
  ASSERT_TRUE(raw.has_value());
  EXPECT_EQ(raw->size(), 16 + 16 * h.entries.size());
  uint32_t magic, version;
  std::memcpy(&magic, raw->data(), 4);
  std::memcpy(&version, raw->data() + 4, 4);
  EXPECT_EQ(magic, 0x47535557u);
  EXPECT_EQ(version, 1u);

  Outcome second = RunOnce(dir.path(), /*learn=*/false);
  EXPECT_GT(second.stats.warm_reads, 0u);
  EXPECT_EQ(second.tokens, first.tokens);  // warm-up changes timing only
  EXPECT_LT(second.stats.experts_missed, first.stats.experts_missed);
  EXPECT_GT(second.stats.experts_hit, first.stats.experts_hit);
  // Warm-up reads are neither misses nor demand bytes.
  EXPECT_GE(second.stats.io_bytes, second.stats.bytes_read);
}

TEST(StreamingHotlist, LearningAgainAccumulates) {
  LinkedCopy dir(StreamingContainer());
  Outcome first = RunOnce(dir.path(), true);
  Hotlist h1 = ReadHotlist(dir / "usage.waste");
  Outcome second = RunOnce(dir.path(), true);
  Hotlist h2 = ReadHotlist(dir / "usage.waste");
  EXPECT_EQ(h2.total_tokens, h1.total_tokens + 10u + second.stats.tokens_generated);
  EXPECT_GE(h2.entries.size(), h1.entries.size());
  EXPECT_GE(h2.entries.front().hits, h1.entries.front().hits);
  (void)first;
}

TEST(StreamingHotlist, SynchronousWarmWorksToo) {
  LinkedCopy dir(StreamingContainer());
  // Both runs read synchronously, so the miss counts compare like for like.
  testing::ScopedEnv io("WASTE_IO", "sync");
  Outcome first = RunOnce(dir.path(), true);
  Outcome second = RunOnce(dir.path(), false);
  EXPECT_GT(second.stats.warm_reads, 0u);
  EXPECT_EQ(second.tokens, first.tokens);
  EXPECT_LT(second.stats.experts_missed, first.stats.experts_missed);
}

TEST(StreamingHotlist, BadMagicIsIgnored) {
  LinkedCopy dir(StreamingContainer());
  std::string junk(64, 'x');
  ASSERT_TRUE(platform::WriteFileAtomic(dir / "usage.waste", junk.data(), junk.size()).ok());
  auto e = Engine::Open(dir.path(), SmallCache(dir.path()));
  ASSERT_TRUE(e.has_value()) << e.error().ToString();
  EXPECT_EQ((*e)->stats().warm_reads, 0u);
}

TEST(StreamingHotlist, EntriesTheContainerLacksAreSkipped) {
  LinkedCopy dir(StreamingContainer());
  // Layer 0 is dense, layer 200 and expert 999 do not exist; layer 1
  // expert 3 does.
  std::string bytes(16 + 4 * 16, '\0');
  uint32_t magic = 0x47535557, version = 1;
  std::memcpy(bytes.data(), &magic, 4);
  std::memcpy(bytes.data() + 4, &version, 4);
  auto put = [&](int i, uint16_t layer, uint16_t expert, uint32_t hits) {
    std::memcpy(bytes.data() + 16 + 16 * i, &layer, 2);
    std::memcpy(bytes.data() + 16 + 16 * i + 2, &expert, 2);
    std::memcpy(bytes.data() + 16 + 16 * i + 4, &hits, 4);
  };
  put(0, 0, 1, 50);
  put(1, 200, 1, 40);
  put(2, 1, 999, 30);
  put(3, 1, 3, 20);
  ASSERT_TRUE(platform::WriteFileAtomic(dir / "usage.waste", bytes.data(), bytes.size()).ok());
  auto e = Engine::Open(dir.path(), SmallCache(dir.path()));
  ASSERT_TRUE(e.has_value()) << e.error().ToString();
  EXPECT_EQ((*e)->stats().warm_reads, 1u);
}

}  // namespace
}  // namespace waste
