#include "model/prefetcher.h"

#include <algorithm>

#include "model/moe_router.h"

namespace waste {

Prefetcher::Prefetcher(const ModelConfig& cfg, const ModelWeights& weights, int depth)
    : cfg_(cfg), w_(weights), depth_(std::max(0, std::min(depth, cfg.moe.n_experts))) {
  next_moe_.assign(static_cast<size_t>(cfg.n_layers), -1);
  int next = -1;
  for (int l = cfg.n_layers - 1; l >= 0; --l) {
    next_moe_[static_cast<size_t>(l)] = next;
    if (cfg.ffn_kind[static_cast<size_t>(l)] == FfnKind::kMoe) next = l;
  }
  if (depth_ > 0) {
    logits_.resize(static_cast<size_t>(cfg.moe.n_experts));
    scores_.resize(static_cast<size_t>(cfg.moe.n_experts));
    group_scratch_.resize(RouterScratchFloats(cfg.moe));
  }
}

uint64_t Prefetcher::scratch_bytes() const {
  return (logits_.size() + scores_.size() + group_scratch_.size()) * sizeof(float) +
         static_cast<uint64_t>(depth_) * sizeof(int);
}

void Prefetcher::Guess(const Ops& ops, int layer, const float* x, ExpertCache& cache) {
  guess_.clear();
  if (depth_ == 0 || layer < 0 || layer >= cfg_.n_layers) return;
  const int next = next_moe_[static_cast<size_t>(layer)];
  if (next < 0) return;
  // With the whole next layer held (a budget that fits the bank, once warm)
  // a guess could start no read: skip its router matvec, 2.4 MB of f32 per
  // layer at Kimi-Linear widths, ~2 % of a cached decode step.
  if (cache.HoldsLayer(next)) return;
  // The next router on THIS layer's router input (the reference's rule).
  ScopedPhase phase(ops.profiler(), Phase::kRouter);
  const MoeWeights& nw = w_.layers[static_cast<size_t>(next)].moe;
  ops.MatVec(*nw.router, x, logits_.data());
  RouterScores(cfg_.moe, nw.router_bias, logits_.data(), scores_.data());
  guess_.resize(static_cast<size_t>(depth_));
  const int chosen =
      TopExperts(cfg_.moe, scores_.data(), depth_, group_scratch_.data(), guess_.data());
  guess_.resize(static_cast<size_t>(chosen));
  cache.Prefetch(next, guess_);
}

}  // namespace waste
