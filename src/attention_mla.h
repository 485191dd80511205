// Multi-head latent attention in the absorbed form (MODEL.md §4.2): the
// cache holds only [normalised latent | rotated rope key] per position;
// kv_b_proj is folded into the query (key half) and the output (value
// half). Optional rotary (YaRN) and sigmoid output gate.
#pragma once

#include <vector>

#include "layer_weights.h"
#include "model_config.h"
#include "ops.h"
#include "session_state.h"

namespace waste {

class MlaLayer {
 public:
  MlaLayer(const ModelConfig& cfg, uint32_t ctx_tokens);
  // out[hidden] = MLA(x[hidden]) at position `pos`; appends to `state`.
  void Forward(const Ops& ops, const MlaWeights& w, MlaLayerState& state, int pos,
               const float* x, float* out);
  uint64_t scratch_bytes() const;

 private:
  void Rotate(float* v, int pos) const;

  const ModelConfig& cfg_;
  uint32_t ctx_;
  std::vector<float> q_, qa_, kv_, o_, gate_;
  std::vector<float> head_scratch_;  // per head: q̃ [r], c̄ [r], row [r], scores [ctx]
};

}  // namespace waste
