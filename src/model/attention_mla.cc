#include "model/attention_mla.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace waste {
namespace {

kernels::DequantFn DequantSlot(const kernels::KernelTable& k, TensorFmt fmt) {
  switch (fmt) {
    case TensorFmt::kQ8G: return k.dequant_q8g;
    case TensorFmt::kQ4G: return k.dequant_q4g;
    case TensorFmt::kQ3G: return k.dequant_q3g;
    default: return nullptr;
  }
}

}  // namespace

MlaLayer::MlaLayer(const ModelConfig& cfg, uint32_t ctx_tokens, size_t max_tokens)
    : cfg_(cfg), ctx_(ctx_tokens), max_tokens_(max_tokens < 1 ? 1 : max_tokens) {
  const size_t heads = static_cast<size_t>(cfg.mla.n_heads);
  const size_t r = static_cast<size_t>(cfg.mla.kv_lora_rank);
  const size_t n = max_tokens_;
  q_.resize(n * heads * static_cast<size_t>(cfg.qk_head_dim()));
  qa_.resize(n * static_cast<size_t>(cfg.mla.q_lora_rank));
  kv_.resize(n * (r + static_cast<size_t>(cfg.mla.qk_rope)));
  o_.resize(n * heads * static_cast<size_t>(cfg.mla.v_head));
  gate_.resize(cfg.mla.output_gate ? o_.size() : 0);
}

// Per pool thread: one head's W_kb block [d_n][r], then for a head group
// q̃ per token [G][max_tokens][r], c̄ [G][r] and scores [G][ctx].
size_t MlaLayer::ScratchFloats() const {
  const size_t r = static_cast<size_t>(cfg_.mla.kv_lora_rank);
  return static_cast<size_t>(cfg_.mla.qk_nope) * r +
         kHeadGroup * (max_tokens_ * r + r + static_cast<size_t>(ctx_));
}

uint64_t MlaLayer::scratch_bytes() const {
  const size_t per_thread = ScratchFloats();
  const size_t threads = thread_scratch_.empty() ? 1 : thread_scratch_.size();
  return (q_.size() + qa_.size() + kv_.size() + o_.size() + gate_.size() + threads * per_thread) *
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

void MlaLayer::Forward(const Ops& ops, const MlaWeights& w, MlaLayerState& state, int pos0,
                       const float* x, size_t n, float* out) {
  const int heads = cfg_.mla.n_heads, dn = cfg_.mla.qk_nope, dr = cfg_.mla.qk_rope, dv = cfg_.mla.v_head;
  const int dq = dn + dr, r = cfg_.mla.kv_lora_rank;
  const size_t R = static_cast<size_t>(r);
  const size_t row = static_cast<size_t>(r + dr);
  const size_t hidden = static_cast<size_t>(cfg_.hidden);
  const size_t qw = static_cast<size_t>(heads * dq), ow = static_cast<size_t>(heads * dv);
  const size_t qa_w = static_cast<size_t>(cfg_.mla.q_lora_rank);
  const bool gated = w.g_proj != nullptr;

  // Query, latent + rope key, output gate: one region (the low-rank query's
  // second half after its norm).
  // g_proj is null without an output gate: Ops skips that job.
  if (n == 1) {
    if (w.q_proj != nullptr) {
      ops.MatVecs({{w.q_proj, x, q_.data()}, {w.kv_a, x, kv_.data()}, {w.g_proj, x, gate_.data()}});
    } else {
      ops.MatVecs({{w.q_a, x, qa_.data()}, {w.kv_a, x, kv_.data()}, {w.g_proj, x, gate_.data()}});
      RmsNorm(qa_.data(), w.q_a_norm, cfg_.rms_eps, qa_w, qa_.data());
      ops.MatVec(*w.q_b, qa_.data(), q_.data());
    }
  } else {
    if (w.q_proj != nullptr) {
      ops.MatMuls(n, {{w.q_proj, x, hidden, q_.data(), qw}, {w.kv_a, x, hidden, kv_.data(), row},
                      {w.g_proj, x, hidden, gate_.data(), ow}});
    } else {
      ops.MatMuls(n, {{w.q_a, x, hidden, qa_.data(), qa_w}, {w.kv_a, x, hidden, kv_.data(), row},
                      {w.g_proj, x, hidden, gate_.data(), ow}});
      for (size_t t = 0; t < n; ++t) {
        float* qa = qa_.data() + t * qa_w;
        RmsNorm(qa, w.q_a_norm, cfg_.rms_eps, qa_w, qa);
      }
      ops.MatMul(*w.q_b, qa_.data(), qa_w, n, q_.data(), qw);
    }
  }
  // Cache rows [RMSNorm(c) | rotated kr] for every token of the chunk.
  for (size_t t = 0; t < n; ++t) {
    const int pos = pos0 + static_cast<int>(t);
    const float* kv = kv_.data() + t * row;
    float* cache_row = state.kv.data() + static_cast<size_t>(pos) * row;
    RmsNorm(kv, w.kv_a_norm, cfg_.rms_eps, R, cache_row);
    std::memcpy(cache_row + r, kv + r, static_cast<size_t>(dr) * sizeof(float));
    if (cfg_.rope.enabled) {
      Rotate(cache_row + r, pos);
      float* q = q_.data() + t * qw;
      for (int h = 0; h < heads; ++h) Rotate(q + static_cast<size_t>(h * dq + dn), pos);
    }
  }
  state.n_kv = pos0 + static_cast<int>(n);

  const float scale = cfg_.rope.att_mul / std::sqrt(static_cast<float>(dq));
  const TensorView& kvb = *w.kv_b;
  const size_t per_thread = ScratchFloats();
  if (thread_scratch_.size() < static_cast<size_t>(ops.threads())) {
    thread_scratch_.resize(static_cast<size_t>(ops.threads()));
  }
  for (auto& s : thread_scratch_) s.resize(per_thread);
  Attention(ops, kvb, state, pos0, n, scale);

  if (gated) {
    for (size_t i = 0; i < n * ow; ++i) o_[i] *= Sigmoid(gate_[i]);
  }
  if (n == 1) {
    ops.MatVec(*w.o_proj, o_.data(), out);
  } else {
    ops.MatMul(*w.o_proj, o_.data(), ow, n, out, hidden);
  }
}

// Rows [first, first + count) of kv_b as f32 into dst (row stride R).
// Offsetting the weights (not dst) keeps every pointer inside its array.
void MlaLayer::DequantRows(const kernels::KernelTable& k, const TensorView& kvb, int64_t first,
                           int count, float* dst) const {
  const size_t R = static_cast<size_t>(cfg_.mla.kv_lora_rank);
  const kernels::DequantFn dequant = DequantSlot(k, kvb.fmt);
  if (dequant != nullptr) {
    kernels::DequantArgs d;
    d.w = WeightArgs(kvb);
    d.w.weights += static_cast<size_t>(first) * d.w.row_bytes;
    if (d.w.scales != nullptr) d.w.scales += static_cast<size_t>(first) * d.w.groups;
    d.out = dst;
    d.out_stride = R;
    dequant(d, 0, static_cast<size_t>(count));
  } else {
    for (int i = 0; i < count; ++i) DequantizeRow(kvb, first + i, dst + static_cast<size_t>(i) * R);
  }
}

// o_h = W_vb,h · c̄: rows [base + d_n, base + d_n + d_v) of kv_b.
// Offsetting the weights (not y) keeps every pointer inside its array.
void MlaLayer::ValueProjection(const kernels::KernelTable& k, const TensorView& kvb, size_t h,
                               const float* cbar, float* y) const {
  const int dn = cfg_.mla.qk_nope, dv = cfg_.mla.v_head;
  kernels::MatVecArgs a = WeightArgs(kvb);
  const size_t first = h * static_cast<size_t>(dn + dv) + static_cast<size_t>(dn);
  a.weights += first * a.row_bytes;
  if (a.scales != nullptr) a.scales += first * a.groups;
  a.x = cbar;
  a.y = y;
  MatVecSlot(k, kvb.fmt)(a, 0, static_cast<size_t>(dv));
}

// Attention for the n tokens at pos0.. (their cache rows are written).
// Every head reads every cached row twice per token (scores, then c̄); a
// head at a time, a 4k-token context (9.4 MB a layer at Kimi-Linear widths)
// went out to L3 or DRAM 2 × 32 times a token. Heads go in groups of
// kHeadGroup here, each row read once per group and token while it sits in
// L1, and each head's arithmetic is what it was alone — the same kernel
// calls on the same values, rows in position order per head — so the bits
// do not depend on the grouping (or on the threads, which set it).
void MlaLayer::Attention(const Ops& ops, const TensorView& kvb, const MlaLayerState& state,
                         int pos0, size_t n, float scale) {
  const int heads = cfg_.mla.n_heads, dn = cfg_.mla.qk_nope, dr = cfg_.mla.qk_rope;
  const int dv = cfg_.mla.v_head, r = cfg_.mla.kv_lora_rank;
  const size_t R = static_cast<size_t>(r), dq = static_cast<size_t>(dn + dr);
  const size_t row = static_cast<size_t>(r + dr);
  const size_t qw = static_cast<size_t>(heads) * dq, ow = static_cast<size_t>(heads * dv);
  const kernels::KernelTable& k = ops.k();
  // One contiguous run of heads per thread, so the groups are full.
  const size_t per_task = (static_cast<size_t>(heads) + static_cast<size_t>(ops.threads()) - 1) /
                          static_cast<size_t>(ops.threads());
  ops.ForDynamic(static_cast<size_t>(heads), per_task, [&](size_t hb, size_t he) {
    float* wk = thread_scratch_[static_cast<size_t>(Ops::Worker())].data();  // W_kb,h [dn][r]
    float* qts = wk + static_cast<size_t>(dn) * R;      // q̃ = W_kbᵀ q_nope [G][n][R]
    float* cbars = qts + kHeadGroup * max_tokens_ * R;  // c̄ [G][R]
    float* scores = cbars + kHeadGroup * R;             // [G][ctx]
    for (size_t g0 = hb; g0 < he; g0 += kHeadGroup) {
      const size_t gn = std::min(kHeadGroup, he - g0);
      for (size_t j = 0; j < gn; ++j) {
        const size_t h = g0 + j;
        const int64_t base = static_cast<int64_t>(h) * (dn + dv);
        // A chunk reuses the head's W_kb block for every token; one token
        // uses each row once, so a row is dequantised right before its axpy
        // (L1) instead. Same values, same order either way.
        if (n > 1) DequantRows(k, kvb, base, dn, wk);
        for (size_t t = 0; t < n; ++t) {
          const float* qh = q_.data() + t * qw + h * dq;
          float* qt = qts + (j * max_tokens_ + t) * R;
          std::memset(qt, 0, R * sizeof(float));
          for (int i = 0; i < dn; ++i) {
            if (qh[i] == 0.0f) continue;
            const float* w_row = wk + static_cast<size_t>(i) * R;
            if (n == 1) {
              DequantRows(k, kvb, base + i, 1, wk);
              w_row = wk;
            }
            k.axpy_f32(qh[i], w_row, qt, R);
          }
        }
      }
      for (size_t t = 0; t < n; ++t) {
        const size_t nk = static_cast<size_t>(pos0) + t + 1;
        float m[kHeadGroup];
        for (size_t j = 0; j < gn; ++j) m[j] = -INFINITY;
        for (size_t s = 0; s < nk; ++s) {
          const float* cs = state.kv.data() + s * row;
          for (size_t j = 0; j < gn; ++j) {
            const float* qh = q_.data() + t * qw + (g0 + j) * dq;
            float sc = k.dot_f32(qts + (j * max_tokens_ + t) * R, cs, R);
            if (dr > 0) sc += k.dot_f32(qh + dn, cs + r, static_cast<size_t>(dr));
            sc *= scale;
            scores[j * ctx_ + s] = sc;
            if (sc > m[j]) m[j] = sc;
          }
        }
        float inv[kHeadGroup];
        for (size_t j = 0; j < gn; ++j) {
          float* sj = scores + j * ctx_;
          float sum = 0.0f;
          for (size_t s = 0; s < nk; ++s) {
            sj[s] = std::exp(sj[s] - m[j]);
            sum += sj[s];
          }
          inv[j] = 1.0f / sum;
          std::memset(cbars + j * R, 0, R * sizeof(float));
        }
        for (size_t s = 0; s < nk; ++s) {
          const float* cs = state.kv.data() + s * row;
          for (size_t j = 0; j < gn; ++j) {
            k.axpy_f32(scores[j * ctx_ + s] * inv[j], cs, cbars + j * R, R);
          }
        }
        for (size_t j = 0; j < gn; ++j) {
          const size_t h = g0 + j;
          ValueProjection(k, kvb, h, cbars + j * R,
                          o_.data() + t * ow + h * static_cast<size_t>(dv));
        }
      }
    }
  });
}

}  // namespace waste
