#include "model/moe_router.h"

#include <cmath>
#include <limits>

#include "runtime/ops.h"

namespace waste {
namespace {

// Greedy argmax rounds: strict '>' from -1e30, so ties go to the lowest id
// and a NaN score is never chosen. keep(e) says whether e is a candidate.
template <typename Keep>
int GreedyTop(const float* choice, int n, int count, Keep keep, int* ids) {
  for (int j = 0; j < count; ++j) {
    int best = -1;
    float bv = -1e30f;
    for (int e = 0; e < n; ++e) {
      if (!keep(e)) continue;
      bool taken = false;
      for (int i = 0; i < j; ++i) taken = taken || ids[i] == e;
      if (taken) continue;
      if (choice[e] > bv) {
        bv = choice[e];
        best = e;
      }
    }
    if (best < 0) return j;
    ids[j] = best;
  }
  return count;
}

float ScoreOfGroup(const MoeConfig& c, const float* choice) {
  const int per = c.n_experts / c.n_group;
  const float lowest = -std::numeric_limits<float>::infinity();
  float top1 = lowest, top2 = lowest;
  for (int e = 0; e < per; ++e) {
    const float v = choice[e];
    if (v > top1) {
      top2 = top1;
      top1 = v;
    } else if (v > top2) {
      top2 = v;
    }
  }
  return c.group_score == GroupScore::kTopTwoSum ? top1 + top2 : top1;
}

}  // namespace

void RouterScores(const MoeConfig& c, const float* bias, float* scores, float* choice) {
  const int n = c.n_experts;
  if (c.score == RouterScore::kSigmoid) {
    for (int e = 0; e < n; ++e) {
      const float s = Sigmoid(scores[e]);
      scores[e] = s;
      choice[e] = s + (bias != nullptr ? bias[e] : 0.0f);
    }
    return;
  }
  // Softmax over every expert: max subtracted, the sum in double.
  float mx = scores[0];
  for (int e = 1; e < n; ++e) mx = scores[e] > mx ? scores[e] : mx;
  double sum = 0.0;
  for (int e = 0; e < n; ++e) {
    scores[e] = std::exp(scores[e] - mx);
    sum += scores[e];
  }
  for (int e = 0; e < n; ++e) {
    scores[e] = static_cast<float>(scores[e] / sum);
    choice[e] = scores[e] + (bias != nullptr ? bias[e] : 0.0f);
  }
}

size_t RouterScratchFloats(const MoeConfig& c) {
  return c.route_scope == RouteScope::kGroupLimited ? 2 * static_cast<size_t>(c.n_group) : 0;
}

int TopExperts(const MoeConfig& c, const float* choice, int count, float* scratch, int* ids) {
  const int n = c.n_experts;
  if (count > n) count = n;
  if (c.route_scope == RouteScope::kGlobal) {
    return GreedyTop(choice, n, count, [](int) { return true; }, ids);
  }
  const int groups = c.n_group, per = n / groups;
  float* score = scratch;        // [groups]
  float* kept = scratch + groups;  // [groups]: 1 = kept
  for (int g = 0; g < groups; ++g) {
    score[g] = ScoreOfGroup(c, choice + static_cast<size_t>(g) * per);
    kept[g] = 0.0f;
  }
  for (int i = 0; i < c.topk_group; ++i) {
    int best = -1;
    float bv = -std::numeric_limits<float>::infinity();
    for (int g = 0; g < groups; ++g) {
      if (kept[g] == 0.0f && score[g] > bv) {
        bv = score[g];
        best = g;
      }
    }
    // Only NaN or -inf group scores are left: the lowest group id.
    for (int g = 0; best < 0 && g < groups; ++g) {
      if (kept[g] == 0.0f) best = g;
    }
    kept[best] = 1.0f;
  }
  return GreedyTop(choice, n, count, [&](int e) { return kept[e / per] != 0.0f; }, ids);
}

void RoutingWeights(const MoeConfig& c, const float* scores, const int* ids, int k,
                    float* weights) {
  for (int j = 0; j < k; ++j) weights[j] = scores[ids[j]];
  if (c.renormalize && k > 1) {
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) sum += weights[j];
    for (int j = 0; j < k; ++j) weights[j] = weights[j] / (sum + 1e-20f);
  }
  for (int j = 0; j < k; ++j) weights[j] *= c.routed_scaling;
}

}  // namespace waste
