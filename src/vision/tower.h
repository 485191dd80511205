// The vision tower and projector: patch tensor -> rows of the language
// model's input embedding (one row per 2x2 patch tile). Matrix products go
// through Ops (the kernel table, batched over all patches of the image,
// rows split over the thread pool); attention is split over (head, query)
// with one query row computed by one thread, so results do not depend on
// the thread count.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/ops.h"
#include "vision/preprocess.h"
#include "vision/vision_config.h"
#include "vision/vision_weights.h"

namespace waste::vision {

// Intermediates for tests and debugging (null = not kept).
struct TowerTrace {
  std::vector<float> embed;                 // [L][D] patch embedding + position grid
  std::vector<std::vector<float>> blocks;   // per block: [L][D] residual after it
  std::vector<float> encoder;               // [L][D] after the final norm
};

class VisionTower {
 public:
  VisionTower(const VisionConfig& cfg, std::unique_ptr<TowerWeights> weights)
      : cfg_(cfg), w_(std::move(weights)) {}

  const VisionConfig& config() const { return cfg_; }
  uint64_t weight_bytes() const { return w_->buffer_bytes + w_->pos_grid.size() * sizeof(float); }

  // x0 [grid.patches()][588] -> E [grid.tokens()][text_hidden]. kArg when
  // the grid is not even in both axes or exceeds max_patches.
  Result<std::vector<float>> Encode(const Ops& ops, const std::vector<float>& x0,
                                    const PatchGrid& grid, TowerTrace* trace = nullptr) const;

 private:
  void AddPositions(const PatchGrid& grid, float* x) const;
  void Rope2d(const Ops& ops, const PatchGrid& grid, float* qkv) const;
  void Attention(const Ops& ops, size_t n, const float* qkv, float* out) const;

  VisionConfig cfg_;
  std::unique_ptr<TowerWeights> w_;
};

}  // namespace waste::vision
