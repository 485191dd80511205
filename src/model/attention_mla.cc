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
  if (ChunkScratchFloats(cfg, n) > 0) {
    const size_t rows = ChunkRows(cfg, n);
    chunk_q_.resize(rows * (r + static_cast<size_t>(cfg.mla.qk_rope)));
    chunk_p_.resize(rows * kChunkBlock);
    chunk_acc_.resize(rows * r);
    chunk_tmp_.resize(rows * r);
    chunk_ct_.resize(r * kChunkBlock);
    chunk_max_.resize(rows);
    chunk_sum_.resize(rows);
    chunk_alpha_.resize(rows);
  }
}

size_t MlaLayer::ThreadScratchFloats() const {
  const size_t r = static_cast<size_t>(cfg_.mla.kv_lora_rank);
  return static_cast<size_t>(cfg_.mla.qk_nope) * r + 2 * r + ctx_;
}

void MlaLayer::PrepareThreadScratch(const Ops& ops) {
  if (thread_scratch_.size() < static_cast<size_t>(ops.threads())) {
    thread_scratch_.resize(static_cast<size_t>(ops.threads()));
  }
  for (auto& s : thread_scratch_) s.resize(ThreadScratchFloats());
}

uint64_t MlaLayer::scratch_bytes() const {
  const size_t per_thread = ThreadScratchFloats();
  const size_t threads = thread_scratch_.empty() ? 1 : thread_scratch_.size();
  const size_t chunk = chunk_q_.size() + chunk_p_.size() + chunk_acc_.size() + chunk_tmp_.size() +
                       chunk_ct_.size() + chunk_max_.size() + chunk_sum_.size() + chunk_alpha_.size();
  return (q_.size() + qa_.size() + kv_.size() + o_.size() + gate_.size() + threads * per_thread +
          chunk) * sizeof(float);
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

  if (n > 1) {
    AttendChunk(ops, w, state, pos0, n);
  } else {
    AttendOne(ops, w, state, pos0);
  }
  if (gated) {
    for (size_t i = 0; i < n * ow; ++i) o_[i] *= Sigmoid(gate_[i]);
  }
  if (n == 1) {
    ops.MatVec(*w.o_proj, o_.data(), out);
  } else {
    ops.MatMul(*w.o_proj, o_.data(), ow, n, out, hidden);
  }
}

// One token (decode): each head absorbs its query, scores every cached row
// with a dot product, and sums the latent rows with its softmax weights.
void MlaLayer::AttendOne(const Ops& ops, const MlaWeights& w, const MlaLayerState& state, int pos) {
  const int heads = cfg_.mla.n_heads, dn = cfg_.mla.qk_nope, dr = cfg_.mla.qk_rope, dv = cfg_.mla.v_head;
  const int dq = dn + dr, r = cfg_.mla.kv_lora_rank;
  const size_t R = static_cast<size_t>(r);
  const size_t row = static_cast<size_t>(r + dr);
  const float scale = cfg_.rope.att_mul / std::sqrt(static_cast<float>(dq));
  const TensorView& kvb = *w.kv_b;
  const kernels::KernelTable& k = ops.k();
  const kernels::MatVecFn matvec = MatVecSlot(k, kvb.fmt);
  PrepareThreadScratch(ops);
  const int nk = pos + 1;

  // Heads are independent: each runs wholly inside one task.
  ops.ForDynamic(static_cast<size_t>(heads), 1, [&](size_t hb, size_t he) {
    float* wk = thread_scratch_[static_cast<size_t>(Ops::Worker())].data();  // one W_kb row
    float* qt = wk + static_cast<size_t>(dn) * R;  // q̃ = W_kbᵀ q_nope
    float* cbar = qt + R;
    float* scores = cbar + R;
    for (size_t h = hb; h < he; ++h) {
      const int64_t base = static_cast<int64_t>(h) * (dn + dv);
      const float* qh = q_.data() + h * static_cast<size_t>(dq);
      std::memset(qt, 0, R * sizeof(float));
      // Each W_kb row is used once: dequantised into a row buffer (L1)
      // right before its axpy, not the whole d_n x r block out to L2.
      for (int i = 0; i < dn; ++i) {
        if (qh[i] == 0.0f) continue;
        DequantKvbRows(k, kvb, base + i, 1, wk);
        k.axpy_f32(qh[i], wk, qt, R);
      }
      float m = -INFINITY;
      for (int s = 0; s < nk; ++s) {
        const float* cs = state.kv.data() + static_cast<size_t>(s) * row;
        float sc = k.dot_f32(qt, cs, R);
        if (dr > 0) sc += k.dot_f32(qh + dn, cs + r, static_cast<size_t>(dr));
        sc *= scale;
        scores[s] = sc;
        if (sc > m) m = sc;
      }
      float sum = 0.0f;
      for (int s = 0; s < nk; ++s) {
        scores[s] = std::exp(scores[s] - m);
        sum += scores[s];
      }
      float inv = 1.0f / sum;
      std::memset(cbar, 0, R * sizeof(float));
      for (int s = 0; s < nk; ++s) {
        k.axpy_f32(scores[s] * inv, state.kv.data() + static_cast<size_t>(s) * row, cbar, R);
      }
      // o_h = W_vb,h · c̄: rows [base+dn, base+dn+dv) of kv_b.
      kernels::MatVecArgs a = WeightArgs(RowSlice(kvb, base + dn, dv));
      a.x = cbar;
      a.y = o_.data() + h * static_cast<size_t>(dv);
      matvec(a, 0, static_cast<size_t>(dv));
    }
  });
}

// Rows [first, first + count) of kv_b into dst (row stride = kv_lora_rank).
void MlaLayer::DequantKvbRows(const kernels::KernelTable& k, const TensorView& kvb, int64_t first,
                              int count, float* dst) {
  const size_t R = static_cast<size_t>(kvb.cols);
  const kernels::DequantFn dequant = DequantSlot(k, kvb.fmt);
  if (dequant != nullptr) {
    kernels::DequantArgs d;
    d.w = WeightArgs(RowSlice(kvb, first, count));
    d.out = dst;
    d.out_stride = R;
    dequant(d, 0, static_cast<size_t>(count));
  } else {
    for (int i = 0; i < count; ++i) DequantizeRow(kvb, first + i, dst + static_cast<size_t>(i) * R);
  }
}

}  // namespace waste
