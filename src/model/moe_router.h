// The MoE router's arithmetic after the router matvec: scores (sigmoid, or
// softmax over all experts), the selection score (score + correction
// bias), the choice of experts (a global top-k, or group-limited by
// n_group/topk_group; docs/ENGINE_NOTES.md, "Routing") and the routing
// weights. One TopExperts serves routing and the lookahead prediction.
// Pure functions over the MoeConfig; no allocation, so tokens can be
// routed in parallel.
#pragma once

#include <cstddef>

#include "model/model_config.h"

namespace waste {

// scores[E]: the router logits in, the unbiased scores out (the weights).
// choice[E] = scores + bias (bias may be null: zero).
void RouterScores(const MoeConfig& c, const float* bias, float* scores, float* choice);

// Floats of scratch TopExperts needs for `c` (0 for a global top-k).
size_t RouterScratchFloats(const MoeConfig& c);

// Up to `count` experts by decreasing choice score, ties to the lower id.
// Group-limited configs first keep the topk_group best groups (group score:
// sum of the group's two best choice scores, or its best one; ties to the
// lower group id) and choose only among their experts. Returns how many
// were written to ids[]: fewer than `count` only when the candidates run
// out or the scores are NaN.
int TopExperts(const MoeConfig& c, const float* choice, int count, float* scratch, int* ids);

// weights[j] for ids[0, k): the unbiased score, renormalised when
// c.renormalize and k > 1, times routed_scaling.
void RoutingWeights(const MoeConfig& c, const float* scores, const int* ids, int k,
                    float* weights);

}  // namespace waste
