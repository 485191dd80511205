// The residual stream of one chunk, plain or with Attention Residuals
// (MODEL.md §2.4), so the layer loop reads as named steps whatever the
// family:
//
//   stream.AttentionInput(t, layer, xn)   // AttnRes: mix closed blocks in; RMS-norm
//   ... attention ...
//   stream.AddAttention(t, a, closes)     // plain: x += a; AttnRes: partial sum / close block
//   stream.EndAttention(closes)
//   stream.MlpInput(t, layer, xn)
//   ... channel mixer ...
//   stream.AddMlp(t, f)
//   stream.Finish(t, weights)             // AttnRes: the output mixture
//
// Plain: x ← x + sublayer(norm(x)). AttnRes: a live partial sum p is carried
// beside x; every `block` layers it is closed into the token's block
// history, and each sub-layer's input is a softmax mixture of the closed
// blocks and p. The arithmetic (order of every sum) is the reference's, so
// results are bit-identical to the loop this replaced.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "container/model_weights.h"
#include "model/model_config.h"

namespace waste {

class ResidualStream {
 public:
  ResidualStream(const ModelConfig& cfg, size_t max_chunk);

  // Starts a chunk: no closed blocks yet. The embedding rows are written
  // into row(t) before layer 0.
  void Begin() { n_blocks_ = 0; }
  float* row(size_t t) { return x_.data() + t * hidden_; }

  // Whether layer l closes an AttnRes block before its attention output
  // is added (false for a plain stream).
  bool ClosesBlock(int layer) const { return attn_res_ && layer % block_ == 0; }

  // The attention sub-layer's input for token t, RMS-normed into `out`.
  void AttentionInput(size_t t, const LayerWeights& lw, float* out);
  // Adds token t's attention output `a`.
  void AddAttention(size_t t, const float* a, bool closes_block);
  // After every token's AddAttention: counts the block just closed.
  void EndAttention(bool closes_block) {
    if (closes_block) ++n_blocks_;
  }
  // The channel mixer's input for token t, RMS-normed into `out`.
  void MlpInput(size_t t, const LayerWeights& lw, float* out);
  // Adds token t's channel-mixer output `f`; row(t) is the layer's output.
  void AddMlp(size_t t, const float* f);
  // After the last layer: AttnRes mixes token t's blocks into row(t).
  void Finish(size_t t, const ModelWeights& w);

  uint64_t scratch_bytes() const;

 private:
  void Mix(size_t t, const float* p, const float* norm_w, const float* proj_w, float* out);

  size_t hidden_;
  float eps_;
  bool attn_res_;
  int block_;
  size_t max_blocks_ = 0;
  size_t n_blocks_ = 0;
  std::vector<float> x_;       // [chunk][hidden] residual (AttnRes: the mixture)
  std::vector<float> p_;       // [chunk][hidden] AttnRes live partial sum
  std::vector<float> blocks_;  // AttnRes: [chunk][max_blocks][hidden]
  std::vector<float> mix_s_;   // AttnRes scores
};

}  // namespace waste
