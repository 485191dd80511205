#include "attention_mla.h"

#include <cmath>
#include <cstring>

namespace waste {
namespace {

kernels::MatVecFn MatVecSlot(const kernels::KernelTable& k, TensorFmt fmt) {
  switch (fmt) {
    case TensorFmt::kF32: return k.matvec_f32;
    case TensorFmt::kQ8G: return k.matvec_q8g;
    case TensorFmt::kQ4G: return k.matvec_q4g;
    case TensorFmt::kQ3G: return k.matvec_q3g;
    default: return nullptr;
  }
}

}  // namespace

MlaLayer::MlaLayer(const ModelConfig& cfg, uint32_t ctx_tokens) : cfg_(cfg), ctx_(ctx_tokens) {
  size_t heads = static_cast<size_t>(cfg.n_heads);
  size_t r = static_cast<size_t>(cfg.kv_lora_rank);
  q_.resize(heads * static_cast<size_t>(cfg.qk_head_dim()));
  qa_.resize(static_cast<size_t>(cfg.q_lora_rank));
  kv_.resize(r + static_cast<size_t>(cfg.qk_rope));
  o_.resize(heads * static_cast<size_t>(cfg.v_head));
  gate_.resize(cfg.mla_output_gate ? o_.size() : 0);
  head_scratch_.resize(heads * (3 * r + ctx_tokens));
}

uint64_t MlaLayer::scratch_bytes() const {
  return (q_.size() + qa_.size() + kv_.size() + o_.size() + gate_.size() + head_scratch_.size()) *
         sizeof(float);
}

// GPT-J interleaved pairs; θ = f32(f32(pos)·ω_j), f32 cos/sin (MODEL.md §4.3).
void MlaLayer::Rotate(float* v, int pos) const {
  const std::vector<float>& omega = cfg_.rope.omega;
  for (size_t j = 0; j < omega.size(); ++j) {
    float theta = static_cast<float>(pos) * omega[j];
    float c = std::cos(theta), s = std::sin(theta);
    float a = v[2 * j], b = v[2 * j + 1];
    v[2 * j] = a * c - b * s;
    v[2 * j + 1] = a * s + b * c;
  }
}

void MlaLayer::Forward(const Ops& ops, const MlaWeights& w, MlaLayerState& state, int pos,
                       const float* x, float* out) {
  const int heads = cfg_.n_heads, dn = cfg_.qk_nope, dr = cfg_.qk_rope, dv = cfg_.v_head;
  const int dq = dn + dr, r = cfg_.kv_lora_rank;
  const size_t row = static_cast<size_t>(r + dr);

  // Query.
  if (w.q_proj != nullptr) {
    ops.MatVec(*w.q_proj, x, q_.data());
  } else {
    ops.MatVec(*w.q_a, x, qa_.data());
    RmsNorm(qa_.data(), w.q_a_norm, cfg_.rms_eps, qa_.size(), qa_.data());
    ops.MatVec(*w.q_b, qa_.data(), q_.data());
  }
  // Latent and rope key; the cache row is [RMSNorm(c) | rotated kr].
  ops.MatVec(*w.kv_a, x, kv_.data());
  float* cache_row = state.kv.data() + static_cast<size_t>(pos) * row;
  RmsNorm(kv_.data(), w.kv_a_norm, cfg_.rms_eps, static_cast<size_t>(r), cache_row);
  std::memcpy(cache_row + r, kv_.data() + r, static_cast<size_t>(dr) * sizeof(float));
  if (cfg_.rope.enabled) {
    Rotate(cache_row + r, pos);
    for (int h = 0; h < heads; ++h) Rotate(q_.data() + static_cast<size_t>(h * dq + dn), pos);
  }
  state.n_kv = pos + 1;
  const int n = pos + 1;

  const float scale = cfg_.rope.att_mul / std::sqrt(static_cast<float>(dq));
  const TensorView& kvb = *w.kv_b;
  const kernels::KernelTable& k = ops.k();
  kernels::MatVecArgs vargs;
  vargs.weights = kvb.data;
  vargs.row_bytes = kvb.row_bytes;
  vargs.scales = kvb.scales;
  vargs.groups = kvb.groups;
  vargs.group = static_cast<size_t>(kvb.group);
  vargs.cols = static_cast<size_t>(kvb.cols);
  kernels::MatVecFn matvec = MatVecSlot(k, kvb.fmt);
  const size_t per_head = 3 * static_cast<size_t>(r) + ctx_;

  // Heads are independent: each runs wholly inside one task.
  ops.For(static_cast<size_t>(heads), 1, [&](size_t hb, size_t he) {
    for (size_t h = hb; h < he; ++h) {
      float* qt = head_scratch_.data() + h * per_head;  // q̃ = W_kbᵀ q_nope
      float* cbar = qt + r;
      float* wrow = cbar + r;
      float* scores = wrow + r;
      const float* qh = q_.data() + h * static_cast<size_t>(dq);
      std::memset(qt, 0, static_cast<size_t>(r) * sizeof(float));
      const int64_t base = static_cast<int64_t>(h) * (dn + dv);
      for (int i = 0; i < dn; ++i) {
        if (qh[i] == 0.0f) continue;
        DequantizeRow(kvb, base + i, wrow);
        k.axpy_f32(qh[i], wrow, qt, static_cast<size_t>(r));
      }
      float m = -INFINITY;
      for (int s = 0; s < n; ++s) {
        const float* cs = state.kv.data() + static_cast<size_t>(s) * row;
        float sc = k.dot_f32(qt, cs, static_cast<size_t>(r));
        if (dr > 0) sc += k.dot_f32(qh + dn, cs + r, static_cast<size_t>(dr));
        sc *= scale;
        scores[s] = sc;
        if (sc > m) m = sc;
      }
      float sum = 0.0f;
      for (int s = 0; s < n; ++s) {
        scores[s] = std::exp(scores[s] - m);
        sum += scores[s];
      }
      float inv = 1.0f / sum;
      std::memset(cbar, 0, static_cast<size_t>(r) * sizeof(float));
      for (int s = 0; s < n; ++s) {
        k.axpy_f32(scores[s] * inv, state.kv.data() + static_cast<size_t>(s) * row, cbar,
                   static_cast<size_t>(r));
      }
      // o_h = W_vb,h · c̄: rows [base+dn, base+dn+dv) of kv_b.
      // Offsetting the weights (not y) keeps every pointer inside its array.
      kernels::MatVecArgs a = vargs;
      size_t first = static_cast<size_t>(base + dn);
      a.weights += first * a.row_bytes;
      if (a.scales != nullptr) a.scales += first * a.groups;
      a.x = cbar;
      a.y = o_.data() + h * static_cast<size_t>(dv);
      matvec(a, 0, static_cast<size_t>(dv));
    }
  });

  if (w.g_proj != nullptr) {
    ops.MatVec(*w.g_proj, x, gate_.data());
    for (size_t i = 0; i < o_.size(); ++i) o_[i] *= Sigmoid(gate_[i]);
  }
  ops.MatVec(*w.o_proj, o_.data(), out);
}

}  // namespace waste
