// The MoE block's one Forward and the router lookahead's Prefetcher, on the
// reference's tiny container: the guess for the next MoE layer is that
// layer's own routing when given the same input (one TopExperts serves
// both), the last MoE layer guesses nothing, and a guess starts reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "container/container.h"
#include "e2e/fixture_model.h"
#include "kernels/baseline.h"
#include "kernels/kernel_table.h"
#include "model/layer_weights.h"
#include "model/moe.h"
#include "model/prefetcher.h"
#include "model/vq_experts.h"
#include "runtime/ops.h"
#include "runtime/thread_pool.h"
#include "streaming/expert_cache.h"

namespace waste {
namespace {

using testing::FixtureModel;

// threaded: reads on reader threads (speculative reads need a reader; a
// synchronous cache skips them).
FixtureModel Open(uint64_t slots, bool threaded = false) {
  FixtureModel m = testing::OpenFixtureModel("warp-tiny", slots);
  if (m.c && threaded) {
    ExpertCacheOptions o;
    o.io.backend = IoBackend::kThreads;
    const uint64_t bytes = slots * (m.c->max_record_bytes() + 16384);
    m.cache = std::move(
        ExpertCache::Create(*m.c, PlanSlots(m.c->max_record_bytes(), bytes, slots), o).value());
  }
  return m;
}

std::vector<int> MoeLayers(const ModelConfig& cfg) {
  std::vector<int> out;
  for (int l = 0; l < cfg.n_layers; ++l) {
    if (cfg.ffn_kind[static_cast<size_t>(l)] == FfnKind::kMoe) out.push_back(l);
  }
  return out;
}

std::vector<float> RandomInput(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

// The MoeLayer tests' subject: the fixture's first MoE layer (m.c is null
// when the container does not open).
struct FirstMoe {
  FixtureModel m;
  int layer = -1;
  size_t h = 0;  // hidden width
  const MoeWeights& w() const { return m.w.layers[static_cast<size_t>(layer)].moe; }
};

FirstMoe OpenFirstMoe() {
  FirstMoe f;
  f.m = Open(64);
  if (f.m.c) {
    f.layer = MoeLayers(f.m.c->config()).front();
    f.h = static_cast<size_t>(f.m.c->config().hidden);
  }
  return f;
}

// Row 0 of x ([rows][h]) copied over row `to`: a token with the same input.
void RepeatFirstRow(std::vector<float>& x, size_t h, size_t to) {
  std::copy(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(h), x.begin() + static_cast<std::ptrdiff_t>(to * h));
}

// The baseline kernels with the decoded path forced on (no baseline table
// enables it), then this CPU's best table as shipped.
std::vector<kernels::KernelTable> DecodedPathTables() {
  kernels::KernelTable forced = kernels::BuildKernelTable(kernels::Isa::kBaseline);
  forced.vq_decoded_min_tokens = 8;
  return {forced, kernels::BuildKernelTable(kernels::SupportedIsas().back())};
}

// The reference's tiny container with a 64-slot synchronous cache, its MoE
// layers (the tests need two) and a one-thread baseline Ops.
class PrefetcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::FixturesPresent("warp-tiny")) GTEST_SKIP() << "fixture set warp-tiny missing";
    m = Open(64);
    ASSERT_TRUE(m.c);
    moe = MoeLayers(m.c->config());
    ASSERT_GE(moe.size(), 2u) << "the fixture needs two MoE layers";
  }
  const ModelConfig& config() const { return m.c->config(); }

  FixtureModel m;
  std::vector<int> moe;
  Ops ops{kernels::BuildKernelTable(kernels::Isa::kBaseline), nullptr};
};

TEST_F(PrefetcherTest, GuessIsTheNextLayersRoutingOfTheSameInput) {
  const ModelConfig& cfg = config();
  MoeLayer layer(*m.c, 4);
  Prefetcher prefetch(cfg, m.w, cfg.moe.top_k);
  ASSERT_TRUE(prefetch.enabled());
  const size_t h = static_cast<size_t>(cfg.hidden);
  std::vector<float> out(h);
  for (size_t i = 0; i + 1 < moe.size(); ++i) {
    for (unsigned seed = 1; seed <= 3; ++seed) {
      const std::vector<float> x = RandomInput(h, seed * 100 + static_cast<unsigned>(i));
      prefetch.Guess(ops, moe[i], x.data(), *m.cache);
      const int next = moe[i + 1];
      ASSERT_TRUE(layer.Forward(ops, m.w.layers[static_cast<size_t>(next)].moe, next, *m.cache,
                                x.data(), 1, out.data())
                      .ok());
      EXPECT_EQ(prefetch.last_guess(), layer.routing(0).ids)
          << "layer " << moe[i] << " guessing layer " << next << ", seed " << seed;
    }
  }
}

TEST_F(PrefetcherTest, LastMoeLayerAndDepthZeroGuessNothing) {
  const ModelConfig& cfg = config();
  const std::vector<float> x = RandomInput(static_cast<size_t>(cfg.hidden), 7);
  Prefetcher on(cfg, m.w, 3);
  on.Guess(ops, moe.back(), x.data(), *m.cache);
  EXPECT_TRUE(on.last_guess().empty());
  on.Guess(ops, cfg.n_layers - 1, x.data(), *m.cache);
  EXPECT_TRUE(on.last_guess().empty());
  Prefetcher off(cfg, m.w, 0);
  EXPECT_FALSE(off.enabled());
  off.Guess(ops, moe.front(), x.data(), *m.cache);
  EXPECT_TRUE(off.last_guess().empty());
  EXPECT_EQ(m.cache->counters().spec_reads, 0u);
}

TEST_F(PrefetcherTest, DepthIsClampedAndAGuessStartsReads) {
  const ModelConfig& cfg = config();
  const std::vector<float> x = RandomInput(static_cast<size_t>(cfg.hidden), 11);
  Prefetcher all(cfg, m.w, cfg.moe.n_experts + 50);
  all.Guess(ops, moe.front(), x.data(), *m.cache);
  std::vector<int> guess = all.last_guess();
  ASSERT_EQ(guess.size(), static_cast<size_t>(cfg.moe.n_experts));
  std::sort(guess.begin(), guess.end());
  for (int e = 0; e < cfg.moe.n_experts; ++e) EXPECT_EQ(guess[static_cast<size_t>(e)], e);

  FixtureModel fresh = Open(64, /*threaded=*/true);
  ASSERT_GE(fresh.cache->slots(), 8u);
  Prefetcher some(cfg, fresh.w, 2);
  some.Guess(ops, moe.front(), x.data(), *fresh.cache);
  ASSERT_EQ(some.last_guess().size(), 2u);
  EXPECT_EQ(fresh.cache->counters().spec_reads, 2u);
  for (int e : some.last_guess()) {
    auto pin = fresh.cache->Acquire(moe[1], e);
    ASSERT_TRUE(pin.has_value());
  }
  EXPECT_EQ(fresh.cache->counters().spec_used, 2u);
}

// Once every record of the next MoE layer is held, a guess could start no
// read: the prefetcher makes none (and skips its router matvec); it guesses
// again as soon as one record of that layer leaves the cache.
TEST_F(PrefetcherTest, AWhollyHeldLayerIsNotGuessed) {
  const ModelConfig& cfg = config();
  ASSERT_GE(m.cache->slots(), static_cast<uint64_t>(2 * cfg.moe.n_experts));
  const std::vector<float> x = RandomInput(static_cast<size_t>(cfg.hidden), 13);
  Prefetcher prefetch(cfg, m.w, 2);
  EXPECT_FALSE(m.cache->HoldsLayer(moe[1]));
  for (int e = 0; e + 1 < cfg.moe.n_experts; ++e) ASSERT_TRUE(m.cache->Acquire(moe[1], e).has_value());
  EXPECT_FALSE(m.cache->HoldsLayer(moe[1]));
  prefetch.Guess(ops, moe[0], x.data(), *m.cache);
  EXPECT_EQ(prefetch.last_guess().size(), 2u) << "one record of the layer is still missing";
  ASSERT_TRUE(m.cache->Acquire(moe[1], cfg.moe.n_experts - 1).has_value());
  EXPECT_TRUE(m.cache->HoldsLayer(moe[1]));
  EXPECT_FALSE(m.cache->HoldsLayer(moe[0]));
  EXPECT_FALSE(m.cache->HoldsLayer(-1));
  EXPECT_FALSE(m.cache->HoldsLayer(cfg.n_layers));
  prefetch.Guess(ops, moe[0], x.data(), *m.cache);
  EXPECT_TRUE(prefetch.last_guess().empty());
}

// A small cache never holds a whole layer, however often its records are
// evicted and read again; a big one holds it after every record was read.
TEST(PrefetcherCount, EvictionsKeepTheHeldCountRight) {
  if (!testing::FixturesPresent("warp-tiny")) GTEST_SKIP() << "fixture set warp-tiny missing";
  FixtureModel m = Open(3);
  ASSERT_TRUE(m.c);
  const ModelConfig& cfg = m.c->config();
  const std::vector<int> moe = MoeLayers(cfg);
  ASSERT_FALSE(moe.empty());
  for (int round = 0; round < 3; ++round) {
    for (int l : moe) {
      for (int e = 0; e < cfg.moe.n_experts; ++e) {
        ASSERT_TRUE(m.cache->Acquire(l, e).has_value());
        EXPECT_FALSE(m.cache->HoldsLayer(l));
      }
    }
  }
  FixtureModel big = Open(64);
  for (int round = 0; round < 2; ++round) {
    for (int e = 0; e < cfg.moe.n_experts; ++e) ASSERT_TRUE(big.cache->Acquire(moe[0], e).has_value());
    EXPECT_TRUE(big.cache->HoldsLayer(moe[0]));
  }
}

TEST(MoeLayer, AChunkRoutesEachTokenAsASingleStepWould) {
  if (!testing::FixturesPresent("warp-tiny")) GTEST_SKIP() << "fixture set warp-tiny missing";
  FirstMoe f = OpenFirstMoe();
  ASSERT_TRUE(f.m.c);
  FixtureModel& m = f.m;
  const int l = f.layer;
  const MoeWeights& w = f.w();
  const size_t h = f.h;
  const size_t tokens = 7;
  auto pool = ThreadPool::Create(2);
  ASSERT_TRUE(pool.has_value());
  Ops ops(kernels::BuildKernelTable(kernels::Isa::kBaseline), pool->get());
  const std::vector<float> x = RandomInput(tokens * h, 21);
  MoeLayer chunk(*m.c, tokens), single(*m.c, 1);
  std::vector<float> out_chunk(tokens * h), out_single(h);
  ASSERT_TRUE(chunk.Forward(ops, w, l, *m.cache, x.data(), tokens, out_chunk.data()).ok());
  for (size_t t = 0; t < tokens; ++t) {
    ASSERT_TRUE(single.Forward(ops, w, l, *m.cache, x.data() + t * h, 1, out_single.data()).ok());
    EXPECT_EQ(chunk.routing(t).ids, single.routing(0).ids) << "token " << t;
    EXPECT_EQ(chunk.routing(t).weights, single.routing(0).weights) << "token " << t;
    // Sums differ only in order (ascending id vs selection): float noise.
    for (size_t i = 0; i < h; ++i) {
      ASSERT_NEAR(out_chunk[t * h + i], out_single[i], 1e-4f * (1.0f + std::fabs(out_single[i])))
          << "token " << t << " row " << i;
    }
  }
}

// Ten tokens of a chunk with the same input choose the same experts, so each
// of those experts has ten tokens: past the kernel table's
// vq_decoded_min_tokens they go through the decoded rows (vq_matmul8)
// instead of the tables. Every token must still come out as a single step
// (tables) gives it, within float noise: with the baseline kernels (the
// decoded path forced on, as no baseline table enables it) and with this
// CPU's best table as shipped.
TEST(MoeLayer, AnExpertManyTokensChoseDecodesItsRowsAndAgreesWithTheTables) {
  if (!testing::FixturesPresent("warp-tiny")) GTEST_SKIP() << "fixture set warp-tiny missing";
  FirstMoe f = OpenFirstMoe();
  ASSERT_TRUE(f.m.c);
  FixtureModel& m = f.m;
  constexpr size_t kSame = 10, kTokens = 12;
  const int l = f.layer;
  const MoeWeights& w = f.w();
  const size_t h = f.h;
  std::vector<float> x = RandomInput(kTokens * h, 33);
  for (size_t t = 1; t < kSame; ++t) RepeatFirstRow(x, h, t);
  auto pool = ThreadPool::Create(2);
  ASSERT_TRUE(pool.has_value());
  const std::vector<kernels::KernelTable> tables = DecodedPathTables();
  for (const kernels::KernelTable& table : tables) {
    Ops ops(table, pool->get());
    VqExperts probe(*m.c, kTokens);
    probe.Prepare(ops);
    const size_t threshold = probe.decoded_min_tokens();
    if (&table == &tables.front()) ASSERT_EQ(threshold, 8u) << "the fixture's experts have no decoded path";
    if (threshold == 0 || threshold > kSame) {
      std::printf("note: %s decodes no expert rows; comparing its tables only\n", table.name.c_str());
    }
    MoeLayer chunk(*m.c, kTokens), single(*m.c, 1);
    std::vector<float> out_chunk(kTokens * h), out_single(h);
    ASSERT_TRUE(chunk.Forward(ops, w, l, *m.cache, x.data(), kTokens, out_chunk.data()).ok());
    for (size_t t = 0; t < kTokens; ++t) {
      ASSERT_TRUE(single.Forward(ops, w, l, *m.cache, x.data() + t * h, 1, out_single.data()).ok());
      ASSERT_EQ(chunk.routing(t).ids, single.routing(0).ids) << "token " << t;
      for (size_t i = 0; i < h; ++i) {
        ASSERT_NEAR(out_chunk[t * h + i], out_single[i], 1e-4f * (1.0f + std::fabs(out_single[i])))
            << table.name << " token " << t << " row " << i;
      }
    }
    // The ten alike are one expert set applied once: bit-identical to each other.
    for (size_t t = 1; t < kSame; ++t) {
      ASSERT_TRUE(std::equal(out_chunk.begin(), out_chunk.begin() + static_cast<std::ptrdiff_t>(h),
                             out_chunk.begin() + static_cast<std::ptrdiff_t>(t * h)))
          << table.name << " token " << t;
    }
  }
}

// The baseline's vq_matmul8, counting its calls (which path a chunk took).
std::atomic<int> decoded_calls{0};
void CountedVqMatMul8(const kernels::VqMatMul8Args& a, size_t row_begin, size_t row_end) {
  ++decoded_calls;
  kernels::baseline::VqMatMul8(a, row_begin, row_end);
}

// The kernel table alone says from how many tokens an expert is decoded
// (AVX2 ships 2; the MoE used to add a floor of more than a table group):
// an expert the two tokens of a chunk chose is decoded under a threshold of
// 2, not under 3, and the tokens agree with single steps either way.
TEST(MoeLayer, TheKernelTableAloneSaysFromHowManyTokensAnExpertIsDecoded) {
  if (!testing::FixturesPresent("warp-tiny")) GTEST_SKIP() << "fixture set warp-tiny missing";
  FirstMoe f = OpenFirstMoe();
  ASSERT_TRUE(f.m.c);
  constexpr size_t kTokens = 2;
  const size_t h = f.h;
  std::vector<float> x = RandomInput(kTokens * h, 35);
  RepeatFirstRow(x, h, 1);  // both choose the same experts: each has two tokens
  for (const size_t threshold : {size_t{2}, size_t{3}}) {
    kernels::KernelTable table = kernels::BuildKernelTable(kernels::Isa::kBaseline);
    table.vq_decoded_min_tokens = threshold;
    table.vq_matmul8 = CountedVqMatMul8;
    Ops ops(table, nullptr);
    MoeLayer chunk(*f.m.c, kTokens), single(*f.m.c, 1);
    std::vector<float> out_chunk(kTokens * h), out_single(h);
    decoded_calls = 0;
    ASSERT_TRUE(chunk.Forward(ops, f.w(), f.layer, *f.m.cache, x.data(), kTokens, out_chunk.data()).ok());
    if (threshold == 2) {
      EXPECT_GT(decoded_calls.load(), 0) << "two tokens chose the same experts: decoded";
    } else {
      EXPECT_EQ(decoded_calls.load(), 0) << "two tokens are below a threshold of 3";
    }
    for (size_t t = 0; t < kTokens; ++t) {
      ASSERT_TRUE(single.Forward(ops, f.w(), f.layer, *f.m.cache, x.data() + t * h, 1, out_single.data()).ok());
      for (size_t i = 0; i < h; ++i) {
        ASSERT_NEAR(out_chunk[t * h + i], out_single[i], 1e-4f * (1.0f + std::fabs(out_single[i])))
            << "threshold " << threshold << " token " << t << " row " << i;
      }
    }
  }
}

// A chunk longer than VqExperts::kTableTokens builds its gate/up tables
// window by window. Through the tables a token's result does not depend on
// the window (or the group) that computed it, so with the baseline kernels
// (no decoded path: every expert through the tables) a long chunk is
// bit-identical, token by token, to the same tokens fed as chunks of at
// most one window; with this CPU's best table (decoded experts too) each
// token stays within float noise of a single step.
TEST(MoeLayer, TablesBuiltInWindowsChangeNoBit) {
  if (!testing::FixturesPresent("warp-tiny")) GTEST_SKIP() << "fixture set warp-tiny missing";
  FirstMoe f = OpenFirstMoe();
  ASSERT_TRUE(f.m.c);
  FixtureModel& m = f.m;
  constexpr size_t kWindow = VqExperts::kTableTokens, kTokens = 2 * VqExperts::kTableTokens + 23;
  const int l = f.layer;
  const MoeWeights& w = f.w();
  const size_t h = f.h;
  const std::vector<float> x = RandomInput(kTokens * h, 57);
  auto pool = ThreadPool::Create(2);
  ASSERT_TRUE(pool.has_value());

  Ops base(kernels::BuildKernelTable(kernels::Isa::kBaseline), pool->get());
  MoeLayer whole(*m.c, kTokens), windowed(*m.c, kWindow);
  ASSERT_EQ(VqExperts(*m.c, kTokens).table_tokens(), kWindow);
  std::vector<float> out_whole(kTokens * h), out_windowed(kTokens * h);
  ASSERT_TRUE(whole.Forward(base, w, l, *m.cache, x.data(), kTokens, out_whole.data()).ok());
  for (size_t t0 = 0; t0 < kTokens; t0 += kWindow) {
    const size_t n = std::min(kWindow, kTokens - t0);
    ASSERT_TRUE(windowed.Forward(base, w, l, *m.cache, x.data() + t0 * h, n,
                                 out_windowed.data() + t0 * h).ok());
  }
  EXPECT_EQ(0, std::memcmp(out_whole.data(), out_windowed.data(), out_whole.size() * sizeof(float)));

  Ops best(kernels::BuildKernelTable(kernels::SupportedIsas().back()), pool->get());
  MoeLayer single(*m.c, 1);
  std::vector<float> out_single(h);
  ASSERT_TRUE(whole.Forward(best, w, l, *m.cache, x.data(), kTokens, out_whole.data()).ok());
  for (size_t t = 0; t < kTokens; ++t) {
    ASSERT_TRUE(single.Forward(best, w, l, *m.cache, x.data() + t * h, 1, out_single.data()).ok());
    for (size_t i = 0; i < h; ++i) {
      ASSERT_NEAR(out_whole[t * h + i], out_single[i], 1e-4f * (1.0f + std::fabs(out_single[i])))
          << "token " << t << " row " << i;
    }
  }
}

// A prompt span (model/forward.h) runs its chunks' experts in one call:
// each expert acquired once, its decoded tokens of every chunk batched. The
// bits must be the chunks' own. Chunks of 8 tokens (the fixture has 8
// experts, top 2, so a longer chunk decodes nearly every expert): input A
// fills chunk 0 (its two experts decoded there), is three of chunk 1's
// tokens (tables there) and fills chunk 2 again, so one expert has decoded
// and table pairs in the same call; 77 tokens cross a table window and end
// in a ragged chunk. With the baseline kernels (decoded path forced on) and
// with this CPU's best table, the span call must equal one call per chunk,
// bit for bit.
TEST(MoeLayer, ASpanIsBitIdenticalToItsChunksOneCallAtATime) {
  if (!testing::FixturesPresent("warp-tiny")) GTEST_SKIP() << "fixture set warp-tiny missing";
  FirstMoe f = OpenFirstMoe();
  ASSERT_TRUE(f.m.c);
  FixtureModel& m = f.m;
  constexpr size_t kChunk = 8, kTokens = 9 * kChunk + 5;
  static_assert(kTokens > VqExperts::kTableTokens);
  const int l = f.layer;
  const MoeWeights& w = f.w();
  const size_t h = f.h;
  std::vector<float> x = RandomInput(kTokens * h, 91);
  for (size_t t = 1; t < kChunk; ++t) RepeatFirstRow(x, h, t);                  // chunk 0: all A
  for (size_t t = kChunk; t < kChunk + 3; ++t) RepeatFirstRow(x, h, t);          // chunk 1: three A
  for (size_t t = 2 * kChunk; t < 3 * kChunk; ++t) RepeatFirstRow(x, h, t);      // chunk 2: all A
  auto pool = ThreadPool::Create(2);
  ASSERT_TRUE(pool.has_value());
  const std::vector<kernels::KernelTable> tables = DecodedPathTables();
  for (const kernels::KernelTable& table : tables) {
    Ops ops(table, pool->get());
    MoeLayer span(*m.c, kTokens, kChunk), chunk(*m.c, kChunk);
    std::vector<float> out_span(kTokens * h), out_chunks(kTokens * h);
    ASSERT_TRUE(span.Forward(ops, w, l, *m.cache, x.data(), kTokens, out_span.data()).ok());
    for (size_t c0 = 0; c0 < kTokens; c0 += kChunk) {
      const size_t n = std::min(kChunk, kTokens - c0);
      ASSERT_TRUE(chunk.Forward(ops, w, l, *m.cache, x.data() + c0 * h, n, out_chunks.data() + c0 * h).ok());
    }
    for (size_t t = 0; t < kTokens; ++t) {
      ASSERT_EQ(0, std::memcmp(out_span.data() + t * h, out_chunks.data() + t * h, h * sizeof(float)))
          << table.name << " token " << t << " (chunk " << t / kChunk << ")";
    }
    if (&table == &tables.front()) {
      // The test's premise: A went through two different paths (decoded in
      // chunk 0, tables in chunk 1), which round differently.
      EXPECT_NE(0, std::memcmp(out_span.data(), out_span.data() + kChunk * h, h * sizeof(float)))
          << "input A came out bit-identical through decoded rows and tables";
    }
  }
}

}  // namespace
}  // namespace waste
