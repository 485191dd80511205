#include "kda.h"

#include <cmath>
#include <cstring>

namespace waste {
namespace {

// y[c] = Σ_j ring[c][j]·w[c][j] + u[c]·w[c][K-1], then the ring shifts left
// and keeps the raw u (MODEL.md §3 step 1). Output is SiLU(y), in place in u.
void ShortConv(float* u, float* ring, const float* w, int channels, int taps) {
  int hist = taps - 1;
  for (int c = 0; c < channels; ++c) {
    float* r = ring + static_cast<size_t>(c) * static_cast<size_t>(hist);
    const float* wc = w + static_cast<size_t>(c) * static_cast<size_t>(taps);
    float y = 0.0f;
    for (int j = 0; j < hist; ++j) y += r[j] * wc[j];
    y += u[c] * wc[hist];
    if (hist > 0) {
      std::memmove(r, r + 1, static_cast<size_t>(hist - 1) * sizeof(float));
      r[hist - 1] = u[c];
    }
    u[c] = Silu(y);
  }
}

// Scales each head of x to unit L2 norm (times `extra`) with 1e-12 inside the root.
void L2NormHeads(float* x, int heads, int dim, float extra) {
  for (int h = 0; h < heads; ++h) {
    float* p = x + static_cast<size_t>(h) * static_cast<size_t>(dim);
    float ss = 0.0f;
    for (int i = 0; i < dim; ++i) ss += p[i] * p[i];
    float f = (1.0f / std::sqrt(ss + 1e-12f)) * extra;
    for (int i = 0; i < dim; ++i) p[i] *= f;
  }
}

}  // namespace

KdaLayer::KdaLayer(const ModelConfig& cfg) : cfg_(cfg) {
  size_t c = static_cast<size_t>(cfg.kda_channels());
  q_.resize(c);
  k_.resize(c);
  v_.resize(c);
  low_.resize(static_cast<size_t>(cfg.kda_dim));
  g_.resize(c);
  beta_.resize(static_cast<size_t>(cfg.kda_heads));
  gate_.resize(c);
  o_.resize(c);
}

uint64_t KdaLayer::scratch_bytes() const {
  return (q_.size() * 6 + low_.size() + beta_.size()) * sizeof(float);
}

void KdaLayer::Forward(const Ops& ops, const KdaWeights& w, KdaLayerState& state, const float* x,
                       float* out) {
  const int heads = cfg_.kda_heads, dim = cfg_.kda_dim, taps = cfg_.conv_k;
  const int channels = heads * dim;
  const size_t ring_size = static_cast<size_t>(channels) * static_cast<size_t>(taps - 1);

  // 1. projections + short conv (rings hold raw pre-conv values).
  ops.MatVec(*w.q_proj, x, q_.data());
  ops.MatVec(*w.k_proj, x, k_.data());
  ops.MatVec(*w.v_proj, x, v_.data());
  ShortConv(q_.data(), state.rings.data(), w.q_conv, channels, taps);
  ShortConv(k_.data(), state.rings.data() + ring_size, w.k_conv, channels, taps);
  ShortConv(v_.data(), state.rings.data() + 2 * ring_size, w.v_conv, channels, taps);

  // 2. decay gate in log space.
  ops.MatVec(*w.f_a, x, low_.data());
  ops.MatVec(*w.f_b, low_.data(), g_.data());
  const bool bounded = cfg_.gate_lower_bound < 0.0f;
  for (int h = 0; h < heads; ++h) {
    float a = std::exp(w.a_log[h]);
    for (int j = 0; j < dim; ++j) {
      size_t c = static_cast<size_t>(h * dim + j);
      float z = g_[c] + w.dt_bias[c];
      g_[c] = bounded ? cfg_.gate_lower_bound * Sigmoid(a * z) : -a * Softplus(z);
    }
  }

  // 3. beta, one per head.
  ops.MatVec(*w.b_proj, x, beta_.data());
  for (float& b : beta_) b = Sigmoid(b);

  // 4. recurrence on normalised q (times D^-1/2) and k.
  L2NormHeads(q_.data(), heads, dim, 1.0f / std::sqrt(static_cast<float>(dim)));
  L2NormHeads(k_.data(), heads, dim, 1.0f);
  kernels::KdaStepArgs a;
  a.state = state.s.data();
  a.q = q_.data();
  a.k = k_.data();
  a.v = v_.data();
  a.g = g_.data();
  a.beta = beta_.data();
  a.out = o_.data();
  a.dim = static_cast<size_t>(dim);
  auto step = ops.k().kda_step;
  ops.For(static_cast<size_t>(heads), 1, [&](size_t b, size_t e) { step(a, b, e); });

  // 5–6. output gate and gated RMSNorm per head.
  if (w.g_proj != nullptr) {
    ops.MatVec(*w.g_proj, x, gate_.data());
  } else {
    ops.MatVec(*w.g_a, x, low_.data());
    ops.MatVec(*w.g_b, low_.data(), gate_.data());
  }
  for (int h = 0; h < heads; ++h) {
    float* oh = o_.data() + static_cast<size_t>(h * dim);
    RmsNorm(oh, w.o_norm, cfg_.rms_eps, static_cast<size_t>(dim), oh);
    for (int j = 0; j < dim; ++j) oh[j] *= Sigmoid(gate_[static_cast<size_t>(h * dim + j)]);
  }

  // 7. output projection.
  ops.MatVec(*w.o_proj, o_.data(), out);
}

}  // namespace waste
