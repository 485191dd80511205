// Multi-head latent attention in the absorbed form (MODEL.md §4.2): the
// cache holds only [normalised latent | rotated rope key] per position;
// kv_b_proj is folded into the query (key half) and the output (value
// half). Optional rotary (YaRN) and sigmoid output gate.
//
// A chunk of n tokens: the projections and o_proj run as matmuls over the
// chunk; every token's cache row is written first (token t attends only to
// rows <= pos0 + t, so causality is unchanged); then the heads run in
// parallel, each dequantising its W_kb block once and attending for every
// token of the chunk with exactly the per-token arithmetic of decode.
#pragma once

#include <vector>

#include "model/layer_weights.h"
#include "model/model_config.h"
#include "runtime/ops.h"
#include "model/session_state.h"

namespace waste {

class MlaLayer {
 public:
  MlaLayer(const ModelConfig& cfg, uint32_t ctx_tokens, size_t max_tokens = 1);
  // out[t][hidden] = MLA(x[t][hidden]) at positions pos0 + t, t < n
  // (n <= max_tokens); appends n rows to `state`.
  void Forward(const Ops& ops, const MlaWeights& w, MlaLayerState& state, int pos0,
               const float* x, size_t n, float* out);
  // One token at `pos`.
  void Forward(const Ops& ops, const MlaWeights& w, MlaLayerState& state, int pos,
               const float* x, float* out) {
    Forward(ops, w, state, pos, x, 1, out);
  }
  uint64_t scratch_bytes() const;

 private:
  void Rotate(float* v, int pos) const;

  const ModelConfig& cfg_;
  uint32_t ctx_;
  size_t max_tokens_;
  std::vector<float> q_, qa_, kv_, o_, gate_;  // [max_tokens][...]
  // Per pool thread: W_kb of one head [d_n][r], then q̃ [r], c̄ [r], scores [ctx].
  std::vector<std::vector<float>> thread_scratch_;
};

}  // namespace waste
