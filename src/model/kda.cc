#include "model/kda.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace waste {
namespace {

// Channels [c0, c1) of one projection over n tokens: y[c] = Σ_j ring[c][j]·w[c][j]
// + u[c]·w[c][K-1], then the ring shifts left and keeps the raw u (MODEL.md §3
// step 1), token after token. Output SiLU(y), in place in u (stride `stride`).
void ShortConv(float* u, size_t n, size_t stride, float* ring, const float* w, int c0, int c1,
               int taps) {
  const int hist = taps - 1;
  for (int c = c0; c < c1; ++c) {
    float* r = ring + static_cast<size_t>(c) * static_cast<size_t>(hist);
    const float* wc = w + static_cast<size_t>(c) * static_cast<size_t>(taps);
    for (size_t t = 0; t < n; ++t) {
      float* uc = u + t * stride + static_cast<size_t>(c);
      float y = 0.0f;
      for (int j = 0; j < hist; ++j) y += r[j] * wc[j];
      y += *uc * wc[hist];
      if (hist > 0) {
        std::memmove(r, r + 1, static_cast<size_t>(hist - 1) * sizeof(float));
        r[hist - 1] = *uc;
      }
      *uc = Silu(y);
    }
  }
}

// Scales one head of x to unit L2 norm (times `extra`) with 1e-12 inside the root.
void L2NormHead(float* p, int dim, float extra) {
  float ss = 0.0f;
  for (int i = 0; i < dim; ++i) ss += p[i] * p[i];
  float f = (1.0f / std::sqrt(ss + 1e-12f)) * extra;
  for (int i = 0; i < dim; ++i) p[i] *= f;
}

}  // namespace

KdaLayer::KdaLayer(const ModelConfig& cfg, size_t max_tokens)
    : cfg_(cfg), max_tokens_(max_tokens < 1 ? 1 : max_tokens) {
  const size_t c = static_cast<size_t>(cfg.kda_channels());
  const size_t n = max_tokens_;
  q_.resize(n * c);
  k_.resize(n * c);
  v_.resize(n * c);
  g_.resize(n * c);
  gate_.resize(n * c);
  o_.resize(n * c);
  low_.resize(n * static_cast<size_t>(cfg.kda.head_dim));
  glow_.resize(n * static_cast<size_t>(cfg.kda.head_dim));
  beta_.resize(n * static_cast<size_t>(cfg.kda.heads));
}

uint64_t KdaLayer::scratch_bytes() const {
  return (q_.size() * 6 + low_.size() + glow_.size() + beta_.size()) * sizeof(float);
}

void KdaLayer::Forward(const Ops& ops, const KdaWeights& w, KdaLayerState& state, const float* x,
                       size_t n, float* out, KdaPassRecord* record) {
  const int heads = cfg_.kda.heads, dim = cfg_.kda.head_dim, taps = cfg_.kda.conv_k;
  const int channels = heads * dim;
  const size_t C = static_cast<size_t>(channels), D = static_cast<size_t>(dim);
  const size_t H = static_cast<size_t>(heads);
  const size_t hidden = static_cast<size_t>(cfg_.hidden);
  const size_t ring_size = C * static_cast<size_t>(taps - 1);
  const bool full_gate = w.g_proj != nullptr;

  // 1-3. Projections (q, k, v, decay bottleneck, beta, output gate) from x,
  // then the low-rank second halves.
  if (n == 1) {
    if (full_gate) {
      ops.MatVecs({{w.q_proj, x, q_.data()}, {w.k_proj, x, k_.data()}, {w.v_proj, x, v_.data()},
                   {w.g_proj, x, gate_.data()}, {w.f_a, x, low_.data()}, {w.b_proj, x, beta_.data()}});
      ops.MatVec(*w.f_b, low_.data(), g_.data());
    } else {
      ops.MatVecs({{w.q_proj, x, q_.data()}, {w.k_proj, x, k_.data()}, {w.v_proj, x, v_.data()},
                   {w.f_a, x, low_.data()}, {w.g_a, x, glow_.data()}, {w.b_proj, x, beta_.data()}});
      ops.MatVecs({{w.f_b, low_.data(), g_.data()}, {w.g_b, glow_.data(), gate_.data()}});
    }
  } else {
    if (full_gate) {
      ops.MatMuls(n, {{w.q_proj, x, hidden, q_.data(), C}, {w.k_proj, x, hidden, k_.data(), C},
                      {w.v_proj, x, hidden, v_.data(), C}, {w.g_proj, x, hidden, gate_.data(), C},
                      {w.f_a, x, hidden, low_.data(), D}, {w.b_proj, x, hidden, beta_.data(), H}});
      ops.MatMul(*w.f_b, low_.data(), D, n, g_.data(), C);
    } else {
      ops.MatMuls(n, {{w.q_proj, x, hidden, q_.data(), C}, {w.k_proj, x, hidden, k_.data(), C},
                      {w.v_proj, x, hidden, v_.data(), C}, {w.f_a, x, hidden, low_.data(), D},
                      {w.g_a, x, hidden, glow_.data(), D}, {w.b_proj, x, hidden, beta_.data(), H}});
      ops.MatMuls(n, {{w.f_b, low_.data(), D, g_.data(), C}, {w.g_b, glow_.data(), D, gate_.data(), C}});
    }
  }

  if (record != nullptr) {
    record->tokens = n;
    record->raw.resize(n * 3 * C);
    for (size_t t = 0; t < n; ++t) {
      float* r = record->raw.data() + t * 3 * C;
      std::memcpy(r, q_.data() + t * C, C * sizeof(float));
      std::memcpy(r + C, k_.data() + t * C, C * sizeof(float));
      std::memcpy(r + 2 * C, v_.data() + t * C, C * sizeof(float));
    }
  }

  // Per head: short convs (rings advance token by token), decay gate in
  // log space, beta, L2 norms. Heads are independent.
  const bool bounded = cfg_.kda.decay == KdaDecay::kBounded;
  const float q_extra = 1.0f / std::sqrt(static_cast<float>(dim));
  auto prepare = [&](size_t hb, size_t he) {
    const int c0 = static_cast<int>(hb * D), c1 = static_cast<int>(he * D);
    ShortConv(q_.data(), n, C, state.rings.data(), w.q_conv, c0, c1, taps);
    ShortConv(k_.data(), n, C, state.rings.data() + ring_size, w.k_conv, c0, c1, taps);
    ShortConv(v_.data(), n, C, state.rings.data() + 2 * ring_size, w.v_conv, c0, c1, taps);
    for (size_t t = 0; t < n; ++t) {
      for (size_t h = hb; h < he; ++h) {
        const float a = std::exp(w.a_log[h]);
        float* gt = g_.data() + t * C;
        for (size_t j = 0; j < D; ++j) {
          const size_t c = h * D + j;
          const float z = gt[c] + w.dt_bias[c];
          gt[c] = bounded ? cfg_.kda.gate_lower_bound * Sigmoid(a * z) : -a * Softplus(z);
        }
        float& b = beta_[t * H + h];
        b = Sigmoid(b);
        L2NormHead(q_.data() + t * C + h * D, dim, q_extra);
        L2NormHead(k_.data() + t * C + h * D, dim, 1.0f);
      }
    }
  };

  // 4. Recurrence: each head steps through the chunk's tokens in order.
  // 5-6. Gated RMSNorm per head: RMSNorm(o_h) ⊙ σ(γ_h).
  auto step = ops.k().kda_step;
  auto recur = [&](size_t hb, size_t he) {
    for (size_t t = 0; t < n; ++t) {
      kernels::KdaStepArgs a;
      a.state = state.s.data();
      a.q = q_.data() + t * C;
      a.k = k_.data() + t * C;
      a.v = v_.data() + t * C;
      a.g = g_.data() + t * C;
      a.beta = beta_.data() + t * H;
      a.out = o_.data() + t * C;
      a.dim = D;
      step(a, hb, he);
      for (size_t h = hb; h < he; ++h) {
        float* oh = o_.data() + t * C + h * D;
        const float* gh = gate_.data() + t * C + h * D;
        RmsNorm(oh, w.o_norm, cfg_.rms_eps, D, oh);
        for (size_t j = 0; j < D; ++j) oh[j] *= Sigmoid(gh[j]);
      }
    }
  };
  // One parallel region: a task prepares its heads, then runs their
  // recurrence (a head's inputs depend on nothing outside the head).
  ops.ForDynamic(H, std::max<size_t>(1, H / (4 * static_cast<size_t>(ops.threads()))),
                 [&](size_t hb, size_t he) {
                   prepare(hb, he);
                   recur(hb, he);
                 });

  if (record != nullptr) {
    const size_t per = 3 * C + H;
    record->step.resize(n * per);
    for (size_t t = 0; t < n; ++t) {
      float* r = record->step.data() + t * per;
      std::memcpy(r, k_.data() + t * C, C * sizeof(float));
      std::memcpy(r + C, v_.data() + t * C, C * sizeof(float));
      std::memcpy(r + 2 * C, g_.data() + t * C, C * sizeof(float));
      std::memcpy(r + 3 * C, beta_.data() + t * H, H * sizeof(float));
    }
  }

  // 7. Output projection.
  if (n == 1) {
    ops.MatVec(*w.o_proj, o_.data(), out);
  } else {
    ops.MatMul(*w.o_proj, o_.data(), C, n, out, hidden);
  }
}

void KdaLayer::Replay(const Ops& ops, KdaLayerState& state, const KdaPassRecord& record,
                      size_t keep) {
  const size_t H = static_cast<size_t>(cfg_.kda.heads), D = static_cast<size_t>(cfg_.kda.head_dim);
  const size_t C = H * D, hist = static_cast<size_t>(cfg_.kda.conv_k - 1);
  keep = std::min(keep, record.tokens);
  // Rings: each keeps the last `hist` raw inputs, oldest first (ShortConv).
  if (hist > 0) {
    for (size_t part = 0; part < 3; ++part) {
      for (size_t c = 0; c < C; ++c) {
        float* r = state.rings.data() + (part * C + c) * hist;
        for (size_t t = 0; t < keep; ++t) {
          std::memmove(r, r + 1, (hist - 1) * sizeof(float));
          r[hist - 1] = record.raw[(t * 3 + part) * C + c];
        }
      }
    }
  }
  // The recurrence: as in Forward, one parallel region in which each head
  // steps through the kept tokens. q only shapes the output, which is not
  // needed here.
  auto step = ops.k().kda_step;
  const size_t per = 3 * C + H;
  ops.For(H, 1, [&](size_t hb, size_t he) {
    for (size_t t = 0; t < keep; ++t) {
      const float* r = record.step.data() + t * per;
      kernels::KdaStepArgs a;
      a.state = state.s.data();
      a.q = r;
      a.k = r;
      a.v = r + C;
      a.g = r + 2 * C;
      a.beta = r + 3 * C;
      a.out = o_.data();
      a.dim = D;
      step(a, hb, he);
    }
  });
}

}  // namespace waste
