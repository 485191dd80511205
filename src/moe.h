// Mixture-of-experts block (MODEL.md §5.2–5.3, §6.4, §9): sigmoid router
// with a selection-only correction bias, greedy top-k, renormalisation and
// routed_scaling_factor; routed experts applied through lookup tables built
// from the input (never dequantised); optional latent projection and norm
// (K3); shared experts on the full input.
#pragma once

#include <cstdint>
#include <vector>

#include "expert_cache.h"
#include "ffn.h"
#include "layer_weights.h"
#include "model_config.h"
#include "ops.h"

namespace waste {

struct Routing {
  std::vector<int> ids;        // selection order
  std::vector<float> weights;  // final weights (renormalised, scaled)
};

class MoeLayer {
 public:
  MoeLayer(const Container& container, size_t max_tokens);

  // Decode: out[hidden] for one token; experts summed in selection order.
  // `next` (may be null) is the next MoE layer: its router predicts that
  // layer's experts from this layer's input (router lookahead, ENGINE.md
  // §5.5) and `lookahead` of them are prefetched. Timing only.
  struct Lookahead {
    int layer = -1;
    const MoeWeights* weights = nullptr;
    int count = 0;
  };
  Status Forward(const Ops& ops, const MoeWeights& w, int layer, ExpertCache& cache,
                 const float* x, float* out, Routing* routing, const Lookahead& next = {});
  // Chunk: each distinct expert acquired once, in ascending id, applied to
  // every token that chose it; sums in ascending expert id. x, out: [tokens][hidden].
  Status ForwardChunk(const Ops& ops, const MoeWeights& w, int layer, ExpertCache& cache,
                      const float* x, size_t tokens, float* out);

  void Route(const Ops& ops, const MoeWeights& w, const float* x, Routing* r);
  // Top `count` experts of `w`'s router by biased score (selection order).
  void Predict(const Ops& ops, const MoeWeights& w, const float* x, int count,
               std::vector<int>* ids);
  uint64_t scratch_bytes() const;

 private:
  // One expert on one token's tables; accumulates weight·(down·h) into y.
  void ApplyExpert(const Ops& ops, const ExpertRecordView& rec, const float* table_gate,
                   const int8_t* q_gate, const float* tau_gate, const float* table_up,
                   const int8_t* q_up, const float* tau_up, float weight, float* y);
  void BuildTable(const Ops& ops, const float* x, size_t n, int book_base, float* table,
                  int8_t* qtable, float* tau);
  void Apply(const Ops& ops, const uint8_t* indices, size_t rows, size_t nv, const float* table,
             const int8_t* qtable, const float* tau, const uint16_t* scales, float* y);

  const Container& container_;
  const ModelConfig& cfg_;
  size_t max_tokens_;
  bool six_bit_;
  size_t nv_in_, nv_mid_, table_in_, table_mid_, tau_in_, tau_mid_;
  Mlp shared_;
  std::vector<float> logits_, scores_, xe_, y_, g_, u_, d_, shared_out_;
  std::vector<float> tables_;        // [2*max_tokens] input tables (gate, up per token)
  std::vector<int8_t> qtables_;      // int8 shadows (VQ4P)
  std::vector<float> taus_;
  std::vector<float> table_mid_buf_;
  std::vector<int8_t> qtable_mid_;
  std::vector<float> tau_mid_buf_;
  std::vector<Routing> chunk_routes_;
  std::vector<int> predicted_;
};

}  // namespace waste
