// The forward pass: embedding row → layers (dispatched on each layer's
// AttnKind / FfnKind, never on a model name) → final norm → lm_head.
// Prompts run in spans of up to kMaxSpan tokens, layer-major: at each layer
// attention runs chunk by chunk (kMaxChunk tokens, in order: the recurrence
// and the causal cache need it), then the channel mixer over the whole span
// (each distinct expert acquired once for the span, so a small cache reads
// it once per span, not once per chunk). Every choice that decides a bit is
// made per chunk (the dense and shared matmuls, which experts are decoded:
// model/moe.h), so a span gives exactly what its chunks one call at a time
// would. One token is the decode step. The residual bookkeeping (plain, or
// Attention Residuals' per-token block history) is model/residual_stream.h's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "model/attention_mla.h"
#include "container/container.h"
#include "streaming/expert_cache.h"
#include "model/ffn.h"
#include "model/kda.h"
#include "model/layer_weights.h"
#include "model/moe.h"
#include "model/prefetcher.h"
#include "model/residual_stream.h"
#include "runtime/ops.h"
#include "model/session_state.h"
#include "waste/types.h"

namespace waste {

// Optional source of input-embedding rows that replace the table's (image
// rows at media pad positions, docs/VISION.md). Asked once per position,
// in order, before layer 0; returns false to keep the table row.
class EmbeddingOverride {
 public:
  virtual ~EmbeddingOverride() = default;
  virtual bool Take(int token, float* row) = 0;
};

class Forward {
 public:
  static constexpr size_t kMaxChunk = kPrefillChunkTokens;  // waste/types.h
  static constexpr size_t kMaxSpan = kPrefillSpanTokens;    // whole chunks
  static_assert(kMaxSpan % kMaxChunk == 0);

  Forward(const Container& container, const ModelWeights& weights, SessionState& state,
          ExpertCache& cache, uint32_t ctx_tokens, int lookahead = 0);

  // Feeds `tokens` (ids already validated) at state.pos(); advances the
  // position. With want_logits, logits() holds the last token's logits.
  Status Run(const Ops& ops, std::span<const int> tokens, bool want_logits);
  // Run, and for every token but the last, the log-probability (nats) the
  // model gives the token after it, appended to *scores: entry i scores
  // tokens[i+1], with the `top` most likely tokens there (LogSoftmax).
  // Each position's logits are the ones Run computes for the last token
  // when the call ends there (same hidden row, same lm_head kernel), one
  // lm_head matvec per position. kFormat when a position's logits are not
  // finite.
  // `next_after` >= 0: the id after the last token, scored too.
  Status RunScored(const Ops& ops, std::span<const int> tokens, bool want_logits,
                   std::vector<TokenScore>* scores, int top = 0, int next_after = -1);
  // Run for at most kMaxChunk tokens (one chunk), keeping every position's
  // logits: pass_logits(t) are the logits Run would leave had the call
  // ended at token t (drafted tokens verified in one pass). The lm_head
  // runs as one matmul over the rows, so its weights are read once; each
  // row equals its matvec where the kernel table's few-token matmul does
  // (AVX-512), within float noise elsewhere. kFormat when a row is not
  // finite. The pass also records what ReplayPass needs.
  Status RunAllLogits(const Ops& ops, std::span<const int> tokens);
  std::span<const float> pass_logits(size_t t) const {
    const size_t v = static_cast<size_t>(cfg_.vocab);
    return std::span<const float>(pass_logits_.data() + t * v, v);
  }
  // After the state was put back where the last RunAllLogits started (a
  // rewind mark), advances it by that pass's first `keep` tokens without
  // running them again: the KDA layers from the pass's record (bit for bit
  // the state the pass left after those tokens), the attention caches and
  // the position by count (their rows are already written).
  void ReplayPass(const Ops& ops, size_t keep);

  const std::vector<float>& logits() const { return logits_; }
  const std::vector<float>& last_hidden() const { return last_hidden_; }
  uint64_t scratch_bytes() const;

  // Debug/test hooks (null = off): the residual after every layer, per
  // token ([layer][hidden] appended per token), and each MoE routing on
  // the decode path.
  std::vector<float>* hidden_trace = nullptr;
  std::function<void(int pos, int layer, const Routing&)> on_route;
  // Image rows spliced at pad positions (null = off); used by the chunked
  // and the one-token paths alike (both go through RunSpan).
  EmbeddingOverride* embedding_override = nullptr;

 private:
  // n <= kMaxSpan tokens at state.pos(), in chunks of kMaxChunk from the first.
  // With `next` (the ids after each of the n tokens, n of them, -1 = none
  // to score), appends the scores of the positions that have one.
  Status RunSpan(const Ops& ops, const int* tokens, size_t n, bool want_logits,
                 const int* next = nullptr, std::vector<TokenScore>* scores = nullptr, int top = 0,
                 float* all_logits = nullptr, bool record = false);
  // Norm, lm_head and log-softmax of row t at `target` and its `top` most
  // likely tokens (uses logits_).
  Result<TokenScore> ScoreRow(const Ops& ops, size_t t, int target, int top, int position);

  const Container& container_;
  const ModelConfig& cfg_;
  const ModelWeights& w_;
  SessionState& state_;
  ExpertCache& cache_;
  KdaLayer kda_;
  MlaLayer mla_;
  std::unique_ptr<Mlp> dense_;
  std::unique_ptr<MoeLayer> moe_;

  ResidualStream stream_;     // the residual rows of the span (plain or AttnRes)
  std::vector<float> xn_;     // [span][hidden] normed input of a sub-layer
  std::vector<float> f_;      // [span][hidden] sub-layer output
  Prefetcher prefetch_;        // router lookahead for decode steps
  std::vector<float> logits_;
  std::vector<float> last_hidden_;
  // The last drafting pass: its logits rows and KDA records (per layer).
  std::vector<float> pass_logits_;
  std::vector<KdaPassRecord> pass_record_;
};

}  // namespace waste
