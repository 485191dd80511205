// Streaming changes timing only (ENGINE.md §5.2, issue #5): logits are bit
// for bit the same with the cache tiny or holding every expert, reads
// synchronous or ahead (thread readers, io_uring), the router lookahead off
// or on, and every replacement policy — on a generated container whose
// experts (268 MB) far exceed the small cache.
#include <gtest/gtest.h>

#include "e2e/streaming_util.h"
#include "waste/engine.h"
#include "waste/memplan.h"

namespace waste {
namespace {

using testing::GreedyRun;
using testing::RunOutput;
using testing::SameBits;
using testing::ScopedEnv;
using testing::StreamingContainer;

constexpr int kSteps = 10;

class StreamingIdentity : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<MemPlan> plan = PlanMemory(StreamingContainer(), 4096);
    ASSERT_TRUE(plan.has_value()) << plan.error().ToString();
    plan_ = *plan;
    ASSERT_GT(plan_.all_experts_bytes, 4 * plan_.min_expert_cache);
  }
  // The smallest cache the budget allows: the floor.
  Config Tiny(int io_threads, int lookahead) const {
    Config c;
    c.ram_budget_bytes = plan_.floor_bytes;
    c.io_threads = io_threads;
    c.lookahead = lookahead;
    return c;
  }
  // Room for every expert (plus padding).
  Config Big(int io_threads, int lookahead) const {
    Config c = Tiny(io_threads, lookahead);
    c.ram_budget_bytes = plan_.floor_bytes + plan_.all_experts_bytes * 11 / 10;
    return c;
  }
  RunOutput Run(const Config& c) {
    RunOutput r = GreedyRun(StreamingContainer(), c, kSteps);
    EXPECT_TRUE(r.error.empty()) << r.error;
    return r;
  }
  // The reference: every expert cached, synchronous reads, no lookahead.
  const RunOutput& Reference() {
    if (!ref_) {
      ref_ = std::make_unique<RunOutput>(Run(Big(0, 0)));
      EXPECT_EQ(ref_->stats.evictions, 0u);
      EXPECT_EQ(ref_->stats.io_backend, "sync");
    }
    return *ref_;
  }
  MemPlan plan_;
  std::unique_ptr<RunOutput> ref_;
};

TEST_F(StreamingIdentity, CacheOffAndOn) {
  const RunOutput& ref = Reference();
  RunOutput tiny = Run(Tiny(0, 0));
  EXPECT_TRUE(SameBits(ref, tiny));
  // The tiny cache really streamed: far more misses than it has slots.
  EXPECT_GT(tiny.stats.evictions, 0u);
  EXPECT_GT(tiny.stats.experts_missed, 2 * tiny.memory.slots);
  EXPECT_GT(tiny.stats.experts_missed, ref.stats.experts_missed);
}

TEST_F(StreamingIdentity, ReadAheadOffAndOn) {
  const RunOutput& ref = Reference();
  RunOutput sync = Run(Tiny(0, 0));
  EXPECT_EQ(sync.stats.io_backend, "sync");
  EXPECT_EQ(sync.stats.prefetched, 0u);
  EXPECT_TRUE(SameBits(ref, sync));
  {
    ScopedEnv io("WASTE_IO", "threads");
    RunOutput threads = Run(Tiny(2, 0));
    EXPECT_EQ(threads.stats.io_backend, "threads");
    EXPECT_EQ(threads.stats.io_threads, 2);
    EXPECT_GT(threads.stats.prefetched, 0u);  // hinted misses issued before use
    EXPECT_TRUE(SameBits(ref, threads));
  }
  {
    ScopedEnv io("WASTE_IO", nullptr);  // the default: io_uring where it works
    RunOutput dflt = Run(Tiny(-1, 0));
    EXPECT_NE(dflt.stats.io_backend, "sync");
    EXPECT_GT(dflt.stats.prefetched, 0u);
    EXPECT_TRUE(SameBits(ref, dflt));
  }
  {
    ScopedEnv io("WASTE_IO", "uring");
    ScopedEnv depth("WASTE_IO_DEPTH", "2");
    RunOutput uring = Run(Tiny(2, 0));
    EXPECT_TRUE(SameBits(ref, uring));
  }
}

TEST_F(StreamingIdentity, LookaheadOffAndOn) {
  const RunOutput& ref = Reference();
  RunOutput off = Run(Tiny(-1, 0));
  EXPECT_EQ(off.stats.spec_reads, 0u);
  EXPECT_TRUE(SameBits(ref, off));
  RunOutput on = Run(Tiny(-1, 6));
  EXPECT_GT(on.stats.spec_reads, 0u);
  EXPECT_TRUE(SameBits(ref, on));
  {
    ScopedEnv io("WASTE_IO", "threads");
    RunOutput threads = Run(Tiny(2, 6));
    EXPECT_GT(threads.stats.spec_reads, 0u);
    EXPECT_TRUE(SameBits(ref, threads));
  }
  RunOutput big = Run(Big(-1, 6));
  EXPECT_TRUE(SameBits(ref, big));
}

TEST_F(StreamingIdentity, EveryReplacementPolicy) {
  const RunOutput& ref = Reference();
  for (const char* policy : {"reuse-odds", "lfru", "lru", "lfu-history"}) {
    ScopedEnv env("WASTE_CACHE_POLICY", policy);
    RunOutput r = Run(Tiny(-1, 6));
    EXPECT_EQ(r.stats.cache_policy, policy);
    EXPECT_TRUE(SameBits(ref, r)) << policy;
  }
  ScopedEnv unset("WASTE_CACHE_POLICY", "");
  EXPECT_EQ(Run(Tiny(-1, 6)).stats.cache_policy, "reuse-odds");  // the default
}

TEST_F(StreamingIdentity, AConfiguredPolicyIsTheOneThatRuns) {
  // The config's choice wins over the environment; only kDefault defers to it.
  ScopedEnv env("WASTE_CACHE_POLICY", "lru");
  const std::pair<CachePolicy, const char*> cases[] = {{CachePolicy::kLfru, "lfru"},
                                                       {CachePolicy::kLru, "lru"},
                                                       {CachePolicy::kReuseOdds, "reuse-odds"},
                                                       {CachePolicy::kDefault, "lru"}};
  for (const auto& [policy, name] : cases) {
    Config c = Tiny(-1, 6);
    c.cache_policy = policy;
    EXPECT_EQ(Run(c).stats.cache_policy, name);
  }
}

TEST_F(StreamingIdentity, VerifiedReadsGiveTheSameLogits) {
  const RunOutput& ref = Reference();
  Config c = Tiny(-1, 6);
  c.verify_records = true;  // crc32 of every record, on the reader threads
  RunOutput r = Run(c);
  EXPECT_TRUE(SameBits(ref, r));
}

// TokenEvent::ms_io (and the C API's waste_token_info.ms_io) is the time
// each generated token spent on expert reads: at the floor with
// synchronous reads and no lookahead every miss is read in its token's
// step, and the tokens' figures add up to the engine's own read time after
// the prompt.
TEST_F(StreamingIdentity, TokenReadTimesAddUpToTheEnginesFigure) {
  auto e = Engine::Open(StreamingContainer(), Tiny(0, 0));
  ASSERT_TRUE(e.has_value()) << e.error().ToString();
  Engine& engine = **e;
  GenParams p;
  p.max_tokens = 8;
  p.ignore_eos = true;
  double io_after_prompt = -1;
  p.on_prefill = [&](int done, int total) {
    if (done == total) io_after_prompt = engine.stats().sec_io;
    return true;
  };
  double ms_io = 0, ms_total = 0;
  uint64_t missed = 0;
  auto r = engine.Generate(testing::TestPrompt(engine.info().vocab), p, [&](const TokenEvent& ev) {
    ms_io += ev.ms_io;
    ms_total += ev.ms_total;
    missed += ev.experts_missed;
    return true;
  });
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  ASSERT_GE(io_after_prompt, 0.0);
  EXPECT_GT(missed, 0u);
  EXPECT_GT(ms_io, 0.0);
  EXPECT_LE(ms_io, ms_total);
  EXPECT_NEAR(ms_io / 1000.0, engine.stats().sec_io - io_after_prompt, 1e-9);
}

}  // namespace
}  // namespace waste
