#include "model/forward.h"

#include <cmath>
#include <cstring>

namespace waste {

Forward::Forward(const Container& container, const ModelWeights& weights, SessionState& state,
                 ExpertCache& cache, uint32_t ctx_tokens, int lookahead)
    : container_(container),
      cfg_(container.config()),
      w_(weights),
      state_(state),
      cache_(cache),
      kda_(container.config(), kMaxChunk),
      mla_(container.config(), ctx_tokens, kMaxChunk) {
  const size_t h = static_cast<size_t>(cfg_.hidden);
  bool any_dense = false, any_moe = false;
  for (FfnKind k : cfg_.ffn_kind) (k == FfnKind::kMoe ? any_moe : any_dense) = true;
  if (any_dense) dense_ = std::make_unique<Mlp>(cfg_, static_cast<size_t>(cfg_.dense_inter), kMaxChunk);
  if (any_moe) moe_ = std::make_unique<MoeLayer>(container, kMaxChunk);
  x_.resize(kMaxChunk * h);
  xn_.resize(kMaxChunk * h);
  f_.resize(kMaxChunk * h);
  if (cfg_.attn_res.enabled()) {
    p_.resize(kMaxChunk * h);
    max_blocks_ = static_cast<size_t>(cfg_.n_layers / cfg_.attn_res.block + 2);
    blocks_.resize(kMaxChunk * max_blocks_ * h);
    mix_s_.resize(max_blocks_ + 1);
  }
  logits_.resize(static_cast<size_t>(cfg_.vocab));
  last_hidden_.resize(h);
  lookahead_ = lookahead;
  next_moe_.assign(static_cast<size_t>(cfg_.n_layers), -1);
  int next = -1;
  for (int l = cfg_.n_layers - 1; l >= 0; --l) {
    next_moe_[static_cast<size_t>(l)] = next;
    if (cfg_.ffn_kind[static_cast<size_t>(l)] == FfnKind::kMoe) next = l;
  }
}

uint64_t Forward::scratch_bytes() const {
  uint64_t f = x_.size() + p_.size() + xn_.size() + f_.size() + blocks_.size() + mix_s_.size() +
               logits_.size() + last_hidden_.size();
  uint64_t b = f * sizeof(float) + kda_.scratch_bytes() + mla_.scratch_bytes();
  if (dense_) b += dense_->scratch_bytes();
  if (moe_) b += moe_->scratch_bytes();
  return b;
}

Status Forward::Run(const Ops& ops, std::span<const int> tokens, bool want_logits) {
  size_t done = 0;
  while (done < tokens.size()) {
    size_t n = std::min(kMaxChunk, tokens.size() - done);
    bool last = done + n == tokens.size();
    WASTE_TRY(RunChunk(ops, tokens.data() + done, n, want_logits && last));
    done += n;
  }
  return Status::Ok();
}

// AttnRes mixture of token t's closed blocks and `p` (MODEL.md §2.4):
// softmax over per-vector scores Σ_j ((V·r)·a)·b, output α_n·p + Σ α_i·V_i.
void Forward::Mix(size_t t, const float* p, const float* norm_w, const float* proj_w,
                  float* out) {
  const size_t h = static_cast<size_t>(cfg_.hidden);
  const size_t n = n_blocks_;
  const float* blocks = blocks_.data() + t * max_blocks_ * h;
  auto score = [&](const float* v) {
    float ss = 0.0f;
    for (size_t j = 0; j < h; ++j) ss += v[j] * v[j];
    float r = 1.0f / std::sqrt(ss / static_cast<float>(h) + cfg_.rms_eps);
    float s = 0.0f;
    for (size_t j = 0; j < h; ++j) s += ((v[j] * r) * norm_w[j]) * proj_w[j];
    return s;
  };
  float m = -INFINITY;
  for (size_t i = 0; i < n; ++i) {
    mix_s_[i] = score(blocks + i * h);
    m = std::max(m, mix_s_[i]);
  }
  mix_s_[n] = score(p);
  m = std::max(m, mix_s_[n]);
  float sum = 0.0f;
  for (size_t i = 0; i <= n; ++i) {
    mix_s_[i] = std::exp(mix_s_[i] - m);
    sum += mix_s_[i];
  }
  for (size_t i = 0; i <= n; ++i) mix_s_[i] /= sum;
  // `out` may alias `p`: read p first, as the reference's in-place call does.
  for (size_t j = 0; j < h; ++j) out[j] = mix_s_[n] * p[j];
  for (size_t i = 0; i < n; ++i) {
    const float* v = blocks + i * h;
    for (size_t j = 0; j < h; ++j) out[j] += mix_s_[i] * v[j];
  }
}

Status Forward::RunChunk(const Ops& ops, const int* tokens, size_t n, bool want_logits) {
  const size_t h = static_cast<size_t>(cfg_.hidden);
  const int pos0 = state_.pos();
  const bool attn_res = cfg_.attn_res.enabled();
  {
    ScopedPhase phase(ops.profiler(), Phase::kEmbed);
    for (size_t t = 0; t < n; ++t) {
      float* row = x_.data() + t * h;
      if (embedding_override != nullptr && embedding_override->Take(tokens[t], row)) continue;
      WASTE_TRY(container_.ReadEmbeddingRow(tokens[t], row));
    }
  }
  n_blocks_ = 0;
  std::vector<float> trace;
  if (hidden_trace != nullptr) trace.resize(n * static_cast<size_t>(cfg_.n_layers) * h);

  for (int l = 0; l < cfg_.n_layers; ++l) {
    const LayerWeights& lw = w_.layers[static_cast<size_t>(l)];
    const bool kda = cfg_.attn_kind[static_cast<size_t>(l)] == AttnKind::kKda;
    const bool close_block = attn_res && l % cfg_.attn_res.block == 0;
    // Attention over the chunk: per-token input (AttnRes mix, norm), then
    // the layer for all n tokens (projections batched; the recurrence /
    // causal attention still advances token by token inside), then the
    // per-token residual bookkeeping.
    for (size_t t = 0; t < n; ++t) {
      float* x = x_.data() + t * h;
      if (attn_res) {
        float* p = p_.data() + t * h;
        std::memcpy(p, x, h * sizeof(float));  // live partial sum
        if (n_blocks_ > 0) Mix(t, p, lw.attn_res.attn_norm, lw.attn_res.attn_proj, x);
      }
      RmsNorm(x, lw.input_norm, cfg_.rms_eps, h, xn_.data() + t * h);
    }
    if (kda) {
      ScopedPhase phase(ops.profiler(), Phase::kKda);
      kda_.Forward(ops, lw.kda, state_.kda(l), xn_.data(), n, f_.data());
    } else {
      ScopedPhase phase(ops.profiler(), Phase::kMla);
      mla_.Forward(ops, lw.mla, state_.mla(l), pos0, xn_.data(), n, f_.data());
    }
    for (size_t t = 0; t < n; ++t) {
      float* x = x_.data() + t * h;
      float* a = f_.data() + t * h;
      if (attn_res) {
        float* p = p_.data() + t * h;
        if (close_block) {
          std::memcpy(blocks_.data() + (t * max_blocks_ + n_blocks_) * h, p, h * sizeof(float));
          std::memcpy(p, a, h * sizeof(float));
        } else {
          for (size_t j = 0; j < h; ++j) p[j] += a[j];
        }
      } else {
        for (size_t j = 0; j < h; ++j) x[j] += a[j];
      }
    }
    if (close_block) ++n_blocks_;
    // Channel mixer over the chunk.
    for (size_t t = 0; t < n; ++t) {
      float* x = x_.data() + t * h;
      if (attn_res) Mix(t, p_.data() + t * h, lw.attn_res.mlp_norm, lw.attn_res.mlp_proj, x);
      RmsNorm(x, lw.post_attn_norm, cfg_.rms_eps, h, xn_.data() + t * h);
    }
    if (cfg_.ffn_kind[static_cast<size_t>(l)] == FfnKind::kMoe) {
      if (n == 1) {
        Routing r;
        MoeLayer::Lookahead next;
        int nl = next_moe_[static_cast<size_t>(l)];
        if (lookahead_ > 0 && nl >= 0) {
          next = {nl, &w_.layers[static_cast<size_t>(nl)].moe, lookahead_};
        }
        WASTE_TRY(moe_->Forward(ops, lw.moe, l, cache_, xn_.data(), f_.data(), &r, next));
        if (on_route) on_route(pos0, l, r);
      } else {
        WASTE_TRY(moe_->ForwardChunk(ops, lw.moe, l, cache_, xn_.data(), n, f_.data()));
      }
    } else if (n == 1) {
      ScopedPhase phase(ops.profiler(), Phase::kDense);
      dense_->Forward(ops, lw.dense, xn_.data(), f_.data());
    } else {
      ScopedPhase phase(ops.profiler(), Phase::kDense);
      dense_->ForwardChunk(ops, lw.dense, xn_.data(), n, f_.data());
    }
    for (size_t t = 0; t < n; ++t) {
      float* x = x_.data() + t * h;
      const float* f = f_.data() + t * h;
      if (attn_res) {
        float* p = p_.data() + t * h;
        for (size_t j = 0; j < h; ++j) p[j] += f[j];
        std::memcpy(x, p, h * sizeof(float));
      } else {
        for (size_t j = 0; j < h; ++j) x[j] += f[j];
      }
      if (hidden_trace != nullptr) {
        std::memcpy(trace.data() + (t * static_cast<size_t>(cfg_.n_layers) + static_cast<size_t>(l)) * h,
                    x, h * sizeof(float));
      }
    }
  }
  if (hidden_trace != nullptr) hidden_trace->insert(hidden_trace->end(), trace.begin(), trace.end());
  state_.set_pos(pos0 + static_cast<int>(n));

  float* last = x_.data() + (n - 1) * h;
  if (attn_res) Mix(n - 1, last, w_.out_res_norm, w_.out_res_proj, last);
  std::memcpy(last_hidden_.data(), last, h * sizeof(float));
  if (want_logits) {
    ScopedPhase phase(ops.profiler(), Phase::kLmHead);
    RmsNorm(last, w_.final_norm, cfg_.rms_eps, h, xn_.data());
    ops.MatVec(*w_.lm_head, xn_.data(), logits_.data());
  }
  return Status::Ok();
}

}  // namespace waste
