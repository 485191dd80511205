#include "model/ffn.h"

#include <cmath>

namespace waste {

void GatedActivation(const ModelConfig& cfg, float* g, const float* u, size_t n) {
  if (cfg.act == Activation::kSitu) {
    // [β·tanh(g/β)·σ(g)] · [β_lin·tanh(u/β_lin)] (plain u when β_lin <= 0).
    const float b = cfg.situ_beta, bl = cfg.situ_linear_beta;
    for (size_t i = 0; i < n; ++i) {
      float a = b * std::tanh(g[i] / b) * Sigmoid(g[i]);
      float v = bl > 0.0f ? bl * std::tanh(u[i] / bl) : u[i];
      g[i] = a * v;
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) g[i] = Silu(g[i]) * u[i];
}

Mlp::Mlp(const ModelConfig& cfg, size_t width, size_t max_tokens)
    : cfg_(cfg), width_(width), g_(width * max_tokens), u_(width * max_tokens) {}

void Mlp::Forward(const Ops& ops, const MlpWeights& w, const float* x, size_t tokens,
                  float* out) {
  if (tokens == 1) {
    ops.MatVecs({{w.gate, x, g_.data()}, {w.up, x, u_.data()}});
    GatedActivation(cfg_, g_.data(), u_.data(), width_);
    ops.MatVec(*w.down, g_.data(), out);
    return;
  }
  const size_t h = static_cast<size_t>(cfg_.hidden);
  ops.MatMuls(tokens, {{w.gate, x, h, g_.data(), width_}, {w.up, x, h, u_.data(), width_}});
  GatedActivation(cfg_, g_.data(), u_.data(), width_ * tokens);
  ops.MatMul(*w.down, g_.data(), width_, tokens, out, h);
}

}  // namespace waste
