// Gated MLPs (MODEL.md §5.1): the dense FFN and the shared experts,
// y = down · act(gate·x, up·x), for one token (matvec) or a chunk (matmul).
#pragma once

#include <cstddef>
#include <vector>

#include "model/layer_weights.h"
#include "model/model_config.h"
#include "runtime/ops.h"

namespace waste {

// act(g, u) elementwise into g: SiLU(g)·u, or SiTU when configured.
void GatedActivation(const ModelConfig& cfg, float* g, const float* u, size_t n);

class Mlp {
 public:
  // `width` = intermediate size, `max_tokens` = largest chunk.
  Mlp(const ModelConfig& cfg, size_t width, size_t max_tokens);
  // x, out: [tokens][hidden]. One token runs the matvecs, a chunk the
  // matmuls (weights read once for all its tokens).
  void Forward(const Ops& ops, const MlpWeights& w, const float* x, size_t tokens, float* out);
  uint64_t scratch_bytes() const { return (g_.size() + u_.size()) * sizeof(float); }

 private:
  const ModelConfig& cfg_;
  size_t width_;
  std::vector<float> g_, u_;
};

}  // namespace waste
