// Router lookahead (docs/DESIGN.md, "The MoE path"): while a
// decode step's MoE layer runs, the next MoE layer's router is applied to
// this layer's router input and its top `depth` experts go to the cache as
// speculative reads, so they may already be in memory when that layer
// routes. Timing only: a wrong guess costs bytes read, never a different
// result. This class owns the whole policy — which layer is next, how many
// experts to guess, when to guess; the cache (ExpertCache::Prefetch) owns
// the reads and decides whether a guess may take a slot.
#pragma once

#include <cstdint>
#include <vector>

#include "model/layer_weights.h"
#include "model/model_config.h"
#include "runtime/ops.h"
#include "streaming/expert_cache.h"

namespace waste {

class Prefetcher {
 public:
  // depth = experts guessed per layer (0 = off, ENGINE.md's default 6).
  Prefetcher(const ModelConfig& cfg, const ModelWeights& weights, int depth);

  bool enabled() const { return depth_ > 0; }
  // The MoE layer `layer` of a decode step has routed input `x`: guesses
  // the next MoE layer's experts from it and starts their reads. Nothing
  // when off, when `layer` is the last MoE layer, or when the cache already
  // holds every record of the next one.
  void Guess(const Ops& ops, int layer, const float* x, ExpertCache& cache);
  // The guess Guess() last made (tests, traces).
  const std::vector<int>& last_guess() const { return guess_; }

  uint64_t scratch_bytes() const;

 private:
  const ModelConfig& cfg_;
  const ModelWeights& w_;
  int depth_;
  std::vector<int> next_moe_;  // [layer] the next MoE layer after it, or -1
  std::vector<float> logits_, scores_, group_scratch_;
  std::vector<int> guess_;
};

}  // namespace waste
