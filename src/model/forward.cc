#include "model/forward.h"

#include <cmath>
#include <cstring>
#include <string>

#include "model/chunks.h"
#include "model/logprobs.h"

namespace waste {
namespace {

// A position's logits held NaN/Inf (ScoreRow, a drafting pass).
Status NonFiniteLogits(int position) {
  return FormatError("the logits at position " + std::to_string(position) +
                     " are not finite: a weight, scale or expert record holds NaN/Inf or the "
                     "activations overflowed; try --verify");
}

}  // namespace

Forward::Forward(const Container& container, const ModelWeights& weights, SessionState& state,
                 ExpertCache& cache, uint32_t ctx_tokens, int lookahead)
    : container_(container),
      cfg_(container.config()),
      w_(weights),
      state_(state),
      cache_(cache),
      kda_(container.config(), kMaxChunk),
      mla_(container.config(), ctx_tokens, kMaxChunk),
      stream_(container.config(), kMaxSpan),
      prefetch_(container.config(), weights, lookahead) {
  const size_t h = static_cast<size_t>(cfg_.hidden);
  bool any_dense = false, any_moe = false;
  for (FfnKind k : cfg_.ffn_kind) (k == FfnKind::kMoe ? any_moe : any_dense) = true;
  if (any_dense) dense_ = std::make_unique<Mlp>(cfg_, static_cast<size_t>(cfg_.dense_inter), kMaxChunk);
  if (any_moe) moe_ = std::make_unique<MoeLayer>(container, kMaxSpan, kMaxChunk);
  xn_.resize(kMaxSpan * h);
  f_.resize(kMaxSpan * h);
  logits_.resize(static_cast<size_t>(cfg_.vocab));
  last_hidden_.resize(h);
}

uint64_t Forward::scratch_bytes() const {
  uint64_t f = xn_.size() + f_.size() + logits_.size() + last_hidden_.size();
  f += pass_logits_.size();
  for (const KdaPassRecord& r : pass_record_) f += r.raw.size() + r.step.size();
  uint64_t b = f * sizeof(float) + stream_.scratch_bytes() + kda_.scratch_bytes() +
               mla_.scratch_bytes() + prefetch_.scratch_bytes();
  if (dense_) b += dense_->scratch_bytes();
  if (moe_) b += moe_->scratch_bytes();
  return b;
}

Status Forward::Run(const Ops& ops, std::span<const int> tokens, bool want_logits) {
  size_t done = 0;
  while (done < tokens.size()) {
    size_t n = std::min(kMaxSpan, tokens.size() - done);
    bool last = done + n == tokens.size();
    WASTE_TRY(RunSpan(ops, tokens.data() + done, n, want_logits && last));
    done += n;
  }
  return Status::Ok();
}

Status Forward::RunScored(const Ops& ops, std::span<const int> tokens, bool want_logits,
                          std::vector<TokenScore>* scores, int top, int next_after) {
  size_t done = 0;
  while (done < tokens.size()) {
    size_t n = std::min(kMaxSpan, tokens.size() - done);
    bool last = done + n == tokens.size();
    int next[kMaxSpan];
    for (size_t t = 0; t < n; ++t) {
      next[t] = done + t + 1 < tokens.size() ? tokens[done + t + 1] : next_after;
    }
    WASTE_TRY(RunSpan(ops, tokens.data() + done, n, want_logits && last, next, scores, top));
    done += n;
  }
  return Status::Ok();
}

Status Forward::RunAllLogits(const Ops& ops, std::span<const int> tokens) {
  if (tokens.empty() || tokens.size() > kMaxChunk) {
    return ArgError("RunAllLogits takes 1.." + std::to_string(kMaxChunk) + " tokens");
  }
  if (pass_logits_.size() < tokens.size() * static_cast<size_t>(cfg_.vocab)) {
    pass_logits_.resize(tokens.size() * static_cast<size_t>(cfg_.vocab));
  }
  if (pass_record_.empty()) pass_record_.resize(static_cast<size_t>(cfg_.n_layers));
  return RunSpan(ops, tokens.data(), tokens.size(), /*want_logits=*/false, nullptr, nullptr, 0,
                 pass_logits_.data(), /*record=*/true);
}

void Forward::ReplayPass(const Ops& ops, size_t keep) {
  for (int l = 0; l < cfg_.n_layers; ++l) {
    if (cfg_.attn_kind[static_cast<size_t>(l)] == AttnKind::kKda) {
      kda_.Replay(ops, state_.kda(l), pass_record_[static_cast<size_t>(l)], keep);
    } else {
      state_.mla(l).n_kv += static_cast<int>(keep);
    }
  }
  state_.set_pos(state_.pos() + static_cast<int>(keep));
}

Result<TokenScore> Forward::ScoreRow(const Ops& ops, size_t t, int target, int top,
                                     int position) {
  const size_t h = static_cast<size_t>(cfg_.hidden);
  RmsNorm(stream_.row(t), w_.final_norm, cfg_.rms_eps, h, xn_.data());
  ops.MatVec(*w_.lm_head, xn_.data(), logits_.data());
  for (float v : logits_) {
    if (!std::isfinite(v)) return NonFiniteLogits(position);
  }
  LogSoftmax log_softmax(logits_);
  TokenScore score;
  score.logprob = log_softmax(target);
  log_softmax.Top(top, &score.top);
  return score;
}

Status Forward::RunSpan(const Ops& ops, const int* tokens, size_t n, bool want_logits,
                        const int* next, std::vector<TokenScore>* scores, int top,
                        float* all_logits, bool record) {
  const size_t h = static_cast<size_t>(cfg_.hidden);
  const int pos0 = state_.pos();
  stream_.Begin();
  {
    ScopedPhase phase(ops.profiler(), Phase::kEmbed);
    for (size_t t = 0; t < n; ++t) {
      float* row = stream_.row(t);
      if (embedding_override != nullptr && embedding_override->Take(tokens[t], row)) continue;
      WASTE_TRY(container_.ReadEmbeddingRow(tokens[t], row));
    }
  }
  std::vector<float> trace;
  if (hidden_trace != nullptr) trace.resize(n * static_cast<size_t>(cfg_.n_layers) * h);

  for (int l = 0; l < cfg_.n_layers; ++l) {
    const LayerWeights& lw = w_.layers[static_cast<size_t>(l)];
    const bool closes_block = stream_.ClosesBlock(l);
    // Attention over the span: per-token input, then the layer chunk by
    // chunk (projections batched; the recurrence / causal attention still
    // advances token by token inside), then the per-token residual add.
    {
      ScopedPhase phase(ops.profiler(), Phase::kNorms);
      for (size_t t = 0; t < n; ++t) stream_.AttentionInput(t, lw, xn_.data() + t * h);
    }
    ForEachChunk(n, kMaxChunk, [&](size_t c0, size_t nc) {
      const float* xc = xn_.data() + c0 * h;
      float* fc = f_.data() + c0 * h;
      if (cfg_.attn_kind[static_cast<size_t>(l)] == AttnKind::kKda) {
        ScopedPhase phase(ops.profiler(), Phase::kKda);
        kda_.Forward(ops, lw.kda, state_.kda(l), xc, nc, fc,
                     record ? &pass_record_[static_cast<size_t>(l)] : nullptr);
      } else {
        ScopedPhase phase(ops.profiler(), Phase::kMla);
        mla_.Forward(ops, lw.mla, state_.mla(l), pos0 + static_cast<int>(c0), xc, nc, fc);
      }
    });
    {
      ScopedPhase phase(ops.profiler(), Phase::kNorms);
      for (size_t t = 0; t < n; ++t) stream_.AddAttention(t, f_.data() + t * h, closes_block);
      stream_.EndAttention(closes_block);
      // Channel mixer over the chunk.
      for (size_t t = 0; t < n; ++t) stream_.MlpInput(t, lw, xn_.data() + t * h);
    }
    if (cfg_.ffn_kind[static_cast<size_t>(l)] == FfnKind::kMoe) {
      WASTE_TRY(moe_->Forward(ops, lw.moe, l, cache_, xn_.data(), n, f_.data(), &prefetch_));
      if (on_route && n == 1) on_route(pos0, l, moe_->routing(0));
    } else {
      ScopedPhase phase(ops.profiler(), Phase::kDense);
      ForEachChunk(n, kMaxChunk, [&](size_t c0, size_t nc) {  // the matmul's kernel depends on nc
        dense_->Forward(ops, lw.dense, xn_.data() + c0 * h, nc, f_.data() + c0 * h);
      });
    }
    {
      ScopedPhase phase(ops.profiler(), Phase::kNorms);
      for (size_t t = 0; t < n; ++t) stream_.AddMlp(t, f_.data() + t * h);
    }
    if (hidden_trace != nullptr) {
      for (size_t t = 0; t < n; ++t) {
        std::memcpy(trace.data() + (t * static_cast<size_t>(cfg_.n_layers) + static_cast<size_t>(l)) * h,
                    stream_.row(t), h * sizeof(float));
      }
    }
  }
  if (hidden_trace != nullptr) hidden_trace->insert(hidden_trace->end(), trace.begin(), trace.end());
  state_.set_pos(pos0 + static_cast<int>(n));

  stream_.Finish(n - 1, w_);
  const float* last = stream_.row(n - 1);
  std::memcpy(last_hidden_.data(), last, h * sizeof(float));
  if (scores != nullptr) {
    ScopedPhase phase(ops.profiler(), Phase::kLmHead);
    for (size_t t = 0; t < n; ++t) {
      if (t + 1 < n) stream_.Finish(t, w_);  // row n-1 is finished above
      if (next[t] < 0) continue;
      WASTE_ASSIGN_OR_RETURN(TokenScore score,
                             ScoreRow(ops, t, next[t], top, pos0 + static_cast<int>(t)));
      scores->push_back(std::move(score));
    }
  }
  if (all_logits != nullptr) {
    ScopedPhase phase(ops.profiler(), Phase::kLmHead);
    const size_t vocab = static_cast<size_t>(cfg_.vocab);
    for (size_t t = 0; t < n; ++t) {
      if (t + 1 < n) stream_.Finish(t, w_);  // row n-1 is finished above
      RmsNorm(stream_.row(t), w_.final_norm, cfg_.rms_eps, h, xn_.data() + t * h);
    }
    ops.MatMul(*w_.lm_head, xn_.data(), h, n, all_logits, vocab);
    for (size_t i = 0; i < n * vocab; ++i) {
      if (!std::isfinite(all_logits[i])) return NonFiniteLogits(pos0 + static_cast<int>(i / vocab));
    }
  }
  if (want_logits) {
    ScopedPhase phase(ops.profiler(), Phase::kLmHead);
    RmsNorm(last, w_.final_norm, cfg_.rms_eps, h, xn_.data());
    ops.MatVec(*w_.lm_head, xn_.data(), logits_.data());
  }
  return Status::Ok();
}

}  // namespace waste
