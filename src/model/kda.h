// KDA (delta attention) layer (MODEL.md §3): projections, short
// causal conv over the ring state, low-rank decay gate, per-head beta,
// L2-normalised q/k, decay-then-delta recurrence, gated output norm, o_proj.
//
// A chunk of n tokens: the projections run as matmuls over the chunk
// (weights read once), the conv rings and the recurrence advance token by
// token exactly as in decode (the recurrence runs head-parallel, each head
// stepping through the chunk's tokens while its state stays in cache), and
// o_proj is one matmul. One token (decode) uses the decode matvecs, fused
// into as few parallel regions as the data dependencies allow.
#pragma once

#include <cstdint>
#include <vector>

#include "model/layer_weights.h"
#include "model/model_config.h"
#include "runtime/ops.h"
#include "model/session_state.h"

namespace waste {

// What a drafting pass keeps of one KDA layer so that the state after any
// prefix of its tokens can be rebuilt without running the layer again
// (KdaLayer::Replay): each token's raw short-conv inputs (the rings' next
// entries) and its recurrence inputs. A few hundred KB a token at
// Kimi-Linear's width, where the state itself is 2 MiB a layer.
struct KdaPassRecord {
  size_t tokens = 0;
  std::vector<float> raw;   // [n][3][C]: q, k, v before the short convs
  std::vector<float> step;  // [n][3C + H]: k, v, g as the recurrence reads them, then beta
  // Inline: the memory plan counts it without linking the layer.
  static uint64_t BytesPerToken(const ModelConfig& cfg) {
    const uint64_t c = static_cast<uint64_t>(cfg.kda_channels());
    return (6 * c + static_cast<uint64_t>(cfg.kda.heads)) * sizeof(float);
  }
};

class KdaLayer {
 public:
  KdaLayer(const ModelConfig& cfg, size_t max_tokens = 1);
  // out[t][hidden] = KDA(x[t][hidden]) for t < n (n <= max_tokens);
  // advances `state` by n tokens.
  // With `record`, also keeps what Replay needs of the n tokens.
  void Forward(const Ops& ops, const KdaWeights& w, KdaLayerState& state, const float* x, size_t n,
               float* out, KdaPassRecord* record = nullptr);
  // One token.
  void Forward(const Ops& ops, const KdaWeights& w, KdaLayerState& state, const float* x,
               float* out) {
    Forward(ops, w, state, x, 1, out);
  }
  uint64_t scratch_bytes() const;
  // Advances `state` (as it was before the recorded Forward) by the first
  // `keep` recorded tokens: the rings and the recurrence exactly as Forward
  // moved them, bit for bit, without the projections.
  void Replay(const Ops& ops, KdaLayerState& state, const KdaPassRecord& record, size_t keep);

 private:
  const ModelConfig& cfg_;
  size_t max_tokens_;
  // [max_tokens][channels] unless noted.
  std::vector<float> q_, k_, v_, g_, gate_, o_;
  std::vector<float> low_, glow_;  // [max_tokens][head_dim]
  std::vector<float> beta_;        // [max_tokens][heads]
};

}  // namespace waste
