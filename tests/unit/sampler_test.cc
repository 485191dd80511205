// The sampler's optional adjustments (src/model/sampler.h): off by default
// they leave greedy and seeded draws exactly as before; on, each does what
// its option promises.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/sampler.h"

namespace waste {
namespace {

std::vector<float> Logits() { return {1.0f, 3.0f, 2.5f, -1.0f, 0.5f, 2.9f}; }

// Argmax is the first index of the largest value, at every length (the
// vectorised lanes and the tail), with ties, -inf and a vocabulary's size.
TEST(Sampler, ArgmaxIsTheFirstIndexOfTheLargest) {
  auto reference = [](const std::vector<float>& v) {
    int best = 0;
    for (size_t i = 1; i < v.size(); ++i) {
      if (v[i] > v[static_cast<size_t>(best)]) best = static_cast<int>(i);
    }
    return best;
  };
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-30.0f, 30.0f);
  for (size_t n : {1u, 2u, 15u, 16u, 17u, 33u, 100u, 163840u}) {
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    EXPECT_EQ(Argmax(v), reference(v)) << n;
    v[n / 3] = 100.0f;  // a tie: the first one wins
    v[n - 1] = 100.0f;
    EXPECT_EQ(Argmax(v), static_cast<int>(n / 3)) << n;
  }
  std::vector<float> banned(40, -INFINITY);
  EXPECT_EQ(Argmax(banned), 0);
  banned[37] = -5.0f;
  EXPECT_EQ(Argmax(banned), 37);
}

TEST(Sampler, DefaultsLeaveGreedyAndSeededDrawsUnchanged) {
  SamplerParams plain;
  plain.temperature = 0.8f;
  plain.seed = 1234;
  SamplerParams neutral = plain;
  neutral.repeat_penalty = 1.0f;  // explicit neutral values
  neutral.min_p = 0.0f;
  Sampler a(plain), b(neutral);
  for (int i = 0; i < 200; ++i) {
    b.Accept(i % 6);
    EXPECT_EQ(a.Sample(Logits()), b.Sample(Logits()));
  }
  Sampler greedy(SamplerParams{});
  EXPECT_EQ(greedy.Sample(Logits()), 1);
}

TEST(Sampler, LogitBiasBansAndPromotes) {
  SamplerParams p;
  p.logit_bias = {{1, -INFINITY}};
  EXPECT_EQ(Sampler(p).Sample(Logits()), 5);  // 2.9 is next
  p.logit_bias = {{3, 10.0f}};
  EXPECT_EQ(Sampler(p).Sample(Logits()), 3);
  p.logit_bias = {{1, -INFINITY}, {5, -INFINITY}, {2, -INFINITY}, {0, -INFINITY}, {4, -INFINITY}};
  p.temperature = 1.0f;
  Sampler s(p);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.Sample(Logits()), 3);  // the only one left
}

TEST(Sampler, RepeatPresenceAndFrequencyPenalties) {
  SamplerParams p;
  p.repeat_penalty = 2.0f;  // 3.0 -> 1.5: token 5 (2.9) wins
  Sampler r(p);
  r.Accept(1);
  EXPECT_EQ(r.Sample(Logits()), 5);
  SamplerParams q;
  q.presence_penalty = 0.2f;  // 3.0 -> 2.8 < 2.9
  Sampler pr(q);
  pr.Accept(1);
  pr.Accept(1);
  EXPECT_EQ(pr.Sample(Logits()), 5);
  SamplerParams f;
  f.frequency_penalty = 0.06f;  // one occurrence: 2.94 > 2.9; two: 2.88 < 2.9
  Sampler once(f), twice(f);
  once.Accept(1);
  twice.Accept(1);
  twice.Accept(1);
  EXPECT_EQ(once.Sample(Logits()), 1);
  EXPECT_EQ(twice.Sample(Logits()), 5);
  // The window: only the last repeat_last_n tokens count.
  SamplerParams w;
  w.presence_penalty = 1.0f;
  w.repeat_last_n = 2;
  Sampler win(w);
  win.Accept(1);
  win.Accept(0);
  win.Accept(4);  // token 1 has left the window
  EXPECT_EQ(win.Sample(Logits()), 1);
}

TEST(Sampler, MinPKeepsOnlyTokensNearTheTop) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.min_p = 0.7f;  // keeps logits >= 3 + ln 0.7 = 2.64: tokens 1 and 5
  for (uint64_t seed = 1; seed < 60; ++seed) {
    p.seed = seed;
    const int t = Sampler(p).Sample(Logits());
    EXPECT_TRUE(t == 1 || t == 5) << t;
  }
}

}  // namespace
}  // namespace waste
