// The router's selection on hand-made scores: group-limited choice where it
// differs from the global top-k, ties, softmax scores and weights.
#include "model/moe_router.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace waste {
namespace {

MoeConfig Grouped(int experts, int top_k, int groups, int keep,
                  GroupScore score = GroupScore::kTopTwoSum) {
  MoeConfig c;
  c.n_experts = experts;
  c.top_k = top_k;
  c.n_group = groups;
  c.topk_group = keep;
  c.route_scope = keep < groups ? RouteScope::kGroupLimited : RouteScope::kGlobal;
  c.group_score = score;
  return c;
}

std::vector<int> Top(const MoeConfig& c, const std::vector<float>& choice, int count) {
  std::vector<float> scratch(RouterScratchFloats(c) + 1);
  std::vector<int> ids(static_cast<size_t>(count), -1);
  int n = TopExperts(c, choice.data(), count, scratch.data(), ids.data());
  ids.resize(static_cast<size_t>(n));
  return ids;
}

// 8 experts in 4 groups of 2: {0,1} {2,3} {4,5} {6,7}.
const std::vector<float> kScores = {0.90f, 0.00f,   // group 0: best single expert, sum 0.90
                                    0.50f, 0.50f,   // group 1: sum 1.00
                                    0.60f, 0.45f,   // group 2: sum 1.05
                                    0.70f, 0.10f};  // group 3: sum 0.80

TEST(MoeRouter, GlobalTopKIsTheBestScores) {
  EXPECT_EQ(Top(Grouped(8, 3, 1, 1), kScores, 3), (std::vector<int>{0, 6, 4}));
  // Same config with every group kept: still the global choice.
  EXPECT_EQ(Top(Grouped(8, 3, 4, 4), kScores, 3), (std::vector<int>{0, 6, 4}));
}

TEST(MoeRouter, GroupLimitedKeepsTheGroupsWithTheBestTopTwoSum) {
  // Groups 2 (1.05) and 1 (1.00) are kept: expert 0, the best overall, and
  // expert 6 are not candidates.
  EXPECT_EQ(Top(Grouped(8, 3, 4, 2), kScores, 3), (std::vector<int>{4, 2, 3}));
  // Keeping three groups adds group 0 (0.90) before group 3 (0.80).
  EXPECT_EQ(Top(Grouped(8, 3, 4, 3), kScores, 3), (std::vector<int>{0, 4, 2}));
}

TEST(MoeRouter, GroupLimitedGreedyScoresAGroupByItsBestExpert) {
  // Group maxima: 0.90, 0.50, 0.60, 0.70: groups 0 and 3 are kept.
  EXPECT_EQ(Top(Grouped(8, 3, 4, 2, GroupScore::kMax), kScores, 3),
            (std::vector<int>{0, 6, 7}));
}

TEST(MoeRouter, TiesGoToTheLowerGroupAndTheLowerExpert) {
  // Every group sums to 1.0: groups 0 and 1 are kept; inside them experts 1
  // and 2 tie at 0.6 and the lower id comes first.
  const std::vector<float> tie = {0.4f, 0.6f, 0.6f, 0.4f, 0.5f, 0.5f, 0.5f, 0.5f};
  EXPECT_EQ(Top(Grouped(8, 4, 4, 2), tie, 4), (std::vector<int>{1, 2, 0, 3}));
  EXPECT_EQ(Top(Grouped(8, 2, 1, 1), tie, 2), (std::vector<int>{1, 2}));
}

TEST(MoeRouter, CountStopsAtTheKeptExperts) {
  // Lookahead may ask for more experts than the kept groups hold.
  EXPECT_EQ(Top(Grouped(8, 2, 4, 1), kScores, 5), (std::vector<int>{4, 5}));
}

TEST(MoeRouter, NaNScoresAreNeverChosen) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> s = kScores;
  s[4] = nan;
  // Group 2's NaN expert never counts: its two-best sum is 0.45 + -inf, so
  // groups 1 and 0 are kept.
  EXPECT_EQ(Top(Grouped(8, 2, 4, 2), s, 2), (std::vector<int>{0, 2}));
  std::vector<float> all_nan(8, nan);
  EXPECT_TRUE(Top(Grouped(8, 2, 4, 2), all_nan, 2).empty());
  EXPECT_TRUE(Top(Grouped(8, 2, 1, 1), all_nan, 2).empty());
}

TEST(MoeRouter, SoftmaxScoresSumToOneAndTheBiasOnlyChooses) {
  MoeConfig c = Grouped(4, 2, 1, 1);
  c.score = RouterScore::kSoftmax;
  std::vector<float> scores = {1.0f, 2.0f, 3.0f, 4.0f}, choice(4);
  const std::vector<float> bias = {10.0f, 0.0f, 0.0f, 0.0f};
  RouterScores(c, bias.data(), scores.data(), choice.data());
  double sum = 0.0;
  for (float v : scores) sum += v;
  EXPECT_NEAR(sum, 1.0, 1e-6);
  EXPECT_NEAR(scores[3], std::exp(4.0) / (std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(4.0)),
              1e-6);
  EXPECT_FLOAT_EQ(choice[0], scores[0] + 10.0f);
  std::vector<int> ids = Top(c, choice, 2);
  EXPECT_EQ(ids, (std::vector<int>{0, 3}));
  std::vector<float> w(2);
  c.routed_scaling = 2.0f;
  RoutingWeights(c, scores.data(), ids.data(), 2, w.data());
  EXPECT_FLOAT_EQ(w[0], scores[0] * 2.0f);  // unbiased, not renormalised
  c.renormalize = true;
  RoutingWeights(c, scores.data(), ids.data(), 2, w.data());
  EXPECT_NEAR(w[0] + w[1], 2.0f, 1e-6);
}

TEST(MoeRouter, SigmoidScoresMatchTheFormula) {
  MoeConfig c = Grouped(2, 1, 1, 1);
  std::vector<float> scores = {0.0f, 2.0f}, choice(2);
  RouterScores(c, nullptr, scores.data(), choice.data());
  EXPECT_FLOAT_EQ(scores[0], 0.5f);
  EXPECT_NEAR(scores[1], 1.0 / (1.0 + std::exp(-2.0)), 1e-7);
  EXPECT_EQ(choice[1], scores[1]);
}

}  // namespace
}  // namespace waste
