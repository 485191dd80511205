// KDA (delta attention) layer (MODEL.md §3): projections, short
// causal conv over the ring state, low-rank decay gate, per-head beta,
// L2-normalised q/k, decay-then-delta recurrence, gated output norm, o_proj.
//
// A chunk of n tokens: the projections run as matmuls over the chunk
// (weights read once), the conv rings and the recurrence advance token by
// token exactly as in decode (the recurrence runs head-parallel, each head
// stepping through the chunk's tokens while its state stays in cache), and
// o_proj is one matmul. One token (decode) uses the decode matvecs, fused
// into as few parallel regions as the data dependencies allow.
#pragma once

#include <vector>

#include "model/layer_weights.h"
#include "model/model_config.h"
#include "runtime/ops.h"
#include "model/session_state.h"

namespace waste {

class KdaLayer {
 public:
  KdaLayer(const ModelConfig& cfg, size_t max_tokens = 1);
  // out[t][hidden] = KDA(x[t][hidden]) for t < n (n <= max_tokens);
  // advances `state` by n tokens.
  void Forward(const Ops& ops, const KdaWeights& w, KdaLayerState& state, const float* x,
               size_t n, float* out);
  // One token.
  void Forward(const Ops& ops, const KdaWeights& w, KdaLayerState& state, const float* x,
               float* out) {
    Forward(ops, w, state, x, 1, out);
  }
  uint64_t scratch_bytes() const;

 private:
  const ModelConfig& cfg_;
  size_t max_tokens_;
  // [max_tokens][channels] unless noted.
  std::vector<float> q_, k_, v_, g_, gate_, o_;
  std::vector<float> low_, glow_;  // [max_tokens][head_dim]
  std::vector<float> beta_;        // [max_tokens][heads]
};

}  // namespace waste
