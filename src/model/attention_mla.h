// Multi-head latent attention in the absorbed form (MODEL.md §4.2): the
// cache holds only [normalised latent | rotated rope key] per position;
// kv_b_proj is folded into the query (key half) and the output (value
// half). Optional rotary (YaRN) and sigmoid output gate.
//
// A chunk of n tokens: the projections and o_proj run as matmuls over the
// chunk; every token's cache row is written first (token t attends only to
// rows <= pos0 + t, so causality is unchanged).
//
// One token (decode) attends head by head with dot products and axpys
// (AttendOne). A chunk of two or more tokens attends as matrix products
// (AttendChunk, attention_mla_chunk.cc): the absorbed queries of every (token, head) are
// the rows of one product against a block of cache rows, a streaming
// ("online") softmax carries each row's maximum and sum from block to block,
// and the weighted latent sum is a second product against the block
// transposed. Same mathematics, other rounding (MODEL.md §9 allows it).
#pragma once

#include <algorithm>
#include <vector>

#include "model/layer_weights.h"
#include "model/model_config.h"
#include "runtime/ops.h"
#include "model/session_state.h"

namespace waste {

class MlaLayer {
 public:
  MlaLayer(const ModelConfig& cfg, uint32_t ctx_tokens, size_t max_tokens = 1);
  // out[t][hidden] = MLA(x[t][hidden]) at positions pos0 + t, t < n
  // (n <= max_tokens); appends n rows to `state`.
  void Forward(const Ops& ops, const MlaWeights& w, MlaLayerState& state, int pos0,
               const float* x, size_t n, float* out);
  // One token at `pos`.
  void Forward(const Ops& ops, const MlaWeights& w, MlaLayerState& state, int pos,
               const float* x, float* out) {
    Forward(ops, w, state, pos, x, 1, out);
  }
  uint64_t scratch_bytes() const;
  // Floats of the chunk products' buffers for chunks of up to max_tokens
  // (0 when max_tokens is 1): the memory plan counts them. Inline (below)
  // so that the plan needs no attention code (the container fuzzer links
  // the plan alone).
  static uint64_t ChunkScratchFloats(const ModelConfig& cfg, size_t max_tokens);

 private:
  void Rotate(float* v, int pos) const;
  // Floats of one pool thread's scratch (thread_scratch_), and sizing it
  // for the pool of `ops`.
  size_t ThreadScratchFloats() const;
  void PrepareThreadScratch(const Ops& ops);
  // One token's attention (decode), head by head; writes o_.
  void AttendOne(const Ops& ops, const MlaWeights& w, const MlaLayerState& state, int pos);
  // Attention of the chunk's n >= 2 tokens as matrix products; writes o_.
  void AttendChunk(const Ops& ops, const MlaWeights& w, const MlaLayerState& state, int pos0,
                   size_t n);
  // Rows of one head group's products: (token, head) pairs, at most this many.
  static constexpr size_t kChunkRowsMax = 2048;
  // Cache positions per block of the chunk's products.
  static constexpr size_t kChunkBlock = 512;
  static size_t ChunkRows(const ModelConfig& cfg, size_t max_tokens);
  // Rows [first, first + count) of kv_b, dequantised into dst (stride r).
  static void DequantKvbRows(const kernels::KernelTable& k, const TensorView& kvb, int64_t first,
                             int count, float* dst);

  const ModelConfig& cfg_;
  uint32_t ctx_;
  size_t max_tokens_;
  std::vector<float> q_, qa_, kv_, o_, gate_;  // [max_tokens][...]
  // AttendChunk's buffers (empty when max_tokens is 1): absorbed queries
  // [rows][r + d_r], scores then weights [rows][block], latent sums and one
  // block's products [rows][r], the block transposed [r][block], and each
  // row's running maximum, sum and rescale factor.
  std::vector<float> chunk_q_, chunk_p_, chunk_acc_, chunk_tmp_, chunk_ct_;
  std::vector<float> chunk_max_, chunk_sum_, chunk_alpha_;
  // Per pool thread: W_kb of one head [d_n][r], then q̃ [r], c̄ [r], scores [ctx].
  std::vector<std::vector<float>> thread_scratch_;
};

inline size_t MlaLayer::ChunkRows(const ModelConfig& cfg, size_t max_tokens) {
  const size_t heads = static_cast<size_t>(std::max(cfg.mla.n_heads, 1));
  const size_t group = std::clamp<size_t>(kChunkRowsMax / max_tokens, 1, heads);
  return group * max_tokens;
}

inline uint64_t MlaLayer::ChunkScratchFloats(const ModelConfig& cfg, size_t max_tokens) {
  if (max_tokens < 2 || cfg.n_mla_layers() == 0 || cfg.mla.n_heads <= 0) return 0;
  const uint64_t rows = ChunkRows(cfg, max_tokens);
  const uint64_t r = static_cast<uint64_t>(cfg.mla.kv_lora_rank);
  const uint64_t width = r + static_cast<uint64_t>(cfg.mla.qk_rope);
  return rows * (width + kChunkBlock + 2 * r + 3) + r * kChunkBlock;
}

}  // namespace waste
