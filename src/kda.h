// KDA (Kimi Delta Attention) layer, one token at a time (MODEL.md §3):
// projections, short causal conv over the ring state, low-rank decay gate,
// per-head beta, L2-normalised q/k, decay-then-delta recurrence, gated
// output norm, o_proj.
#pragma once

#include <vector>

#include "layer_weights.h"
#include "model_config.h"
#include "ops.h"
#include "session_state.h"

namespace waste {

class KdaLayer {
 public:
  explicit KdaLayer(const ModelConfig& cfg);
  // out[hidden] = KDA(x[hidden]); advances `state` by one token.
  void Forward(const Ops& ops, const KdaWeights& w, KdaLayerState& state, const float* x,
               float* out);
  uint64_t scratch_bytes() const;

 private:
  const ModelConfig& cfg_;
  std::vector<float> q_, k_, v_, low_, g_, beta_, gate_, o_;
};

}  // namespace waste
