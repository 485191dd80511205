#include "model/residual_stream.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/ops.h"

namespace waste {

ResidualStream::ResidualStream(const ModelConfig& cfg, size_t max_chunk)
    : hidden_(static_cast<size_t>(cfg.hidden)),
      eps_(cfg.rms_eps),
      attn_res_(cfg.attn_res.enabled()),
      block_(cfg.attn_res.block) {
  x_.resize(max_chunk * hidden_);
  if (attn_res_) {
    p_.resize(max_chunk * hidden_);
    max_blocks_ = static_cast<size_t>(cfg.n_layers / block_ + 2);
    blocks_.resize(max_chunk * max_blocks_ * hidden_);
    mix_s_.resize(max_blocks_ + 1);
  }
}

uint64_t ResidualStream::scratch_bytes() const {
  return (x_.size() + p_.size() + blocks_.size() + mix_s_.size()) * sizeof(float);
}

void ResidualStream::AttentionInput(size_t t, const LayerWeights& lw, float* out) {
  float* x = row(t);
  if (attn_res_) {
    float* p = p_.data() + t * hidden_;
    std::memcpy(p, x, hidden_ * sizeof(float));  // live partial sum
    if (n_blocks_ > 0) Mix(t, p, lw.attn_res.attn_norm, lw.attn_res.attn_proj, x);
  }
  RmsNorm(x, lw.input_norm, eps_, hidden_, out);
}

void ResidualStream::AddAttention(size_t t, const float* a, bool closes_block) {
  if (!attn_res_) {
    float* x = row(t);
    for (size_t j = 0; j < hidden_; ++j) x[j] += a[j];
    return;
  }
  float* p = p_.data() + t * hidden_;
  if (closes_block) {
    std::memcpy(blocks_.data() + (t * max_blocks_ + n_blocks_) * hidden_, p, hidden_ * sizeof(float));
    std::memcpy(p, a, hidden_ * sizeof(float));
  } else {
    for (size_t j = 0; j < hidden_; ++j) p[j] += a[j];
  }
}

void ResidualStream::MlpInput(size_t t, const LayerWeights& lw, float* out) {
  float* x = row(t);
  if (attn_res_) Mix(t, p_.data() + t * hidden_, lw.attn_res.mlp_norm, lw.attn_res.mlp_proj, x);
  RmsNorm(x, lw.post_attn_norm, eps_, hidden_, out);
}

void ResidualStream::AddMlp(size_t t, const float* f) {
  float* x = row(t);
  if (attn_res_) {
    float* p = p_.data() + t * hidden_;
    for (size_t j = 0; j < hidden_; ++j) p[j] += f[j];
    std::memcpy(x, p, hidden_ * sizeof(float));
  } else {
    for (size_t j = 0; j < hidden_; ++j) x[j] += f[j];
  }
}

void ResidualStream::Finish(size_t t, const ModelWeights& w) {
  if (attn_res_) Mix(t, row(t), w.out_res_norm, w.out_res_proj, row(t));
}

// AttnRes mixture of token t's closed blocks and `p` (MODEL.md §2.4):
// softmax over per-vector scores Σ_j ((V·r)·a)·b, output α_n·p + Σ α_i·V_i.
void ResidualStream::Mix(size_t t, const float* p, const float* norm_w, const float* proj_w,
                         float* out) {
  const size_t h = hidden_;
  const size_t n = n_blocks_;
  const float* blocks = blocks_.data() + t * max_blocks_ * h;
  auto score = [&](const float* v) {
    float ss = 0.0f;
    for (size_t j = 0; j < h; ++j) ss += v[j] * v[j];
    float r = 1.0f / std::sqrt(ss / static_cast<float>(h) + eps_);
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

}  // namespace waste
