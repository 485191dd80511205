// The residual stream's basis in a converted container (docs/CONVERT.md,
// "Residual rotation"). The converter may store the stream x as Qᵀx for an
// orthonormal Q = D·H (D a seeded diagonal of ±1, H block-diagonal
// Walsh–Hadamard blocks of the largest power of two dividing the width):
// each RMSNorm gain is folded into the matrices that read through it and
// becomes ones (RMSNorm commutes with Q only without a gain), readers are
// multiplied by Q on their input side, writers by Qᵀ on their output side,
// and the embedding's rows, which are stream vectors, by Q. In exact arithmetic the model computes
// the same logits; what changes is the weights' values: rows and columns become mixtures of 2^k
// original weights, whose outliers are spread over a whole block, so 4-bit groups and vector
// codebooks fit them better at the same size. Which tensor plays which part comes from the one
// tensor list (container/tensor_list.h, ResidualUse).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "container/tensor_list.h"
#include "convert/dequant.h"
#include "convert/safetensors.h"
#include "convert/source_model.h"
#include "model/model_config.h"
#include "waste/status.h"

namespace waste::convert {

class ResidualBasis {
 public:
  // The identity: every Apply leaves its tensor unchanged.
  ResidualBasis() = default;

  // The rotation for `model` (config `cfg`) with signs drawn from `seed`, or
  // the identity with why_not() saying why it cannot apply: a vision tower
  // (its projector ends in an RMSNorm gain over the stream that no stored
  // weight can absorb) or a width with no power-of-two factor of at least
  // 32. Reads every norm gain a reader folds in; fails naming a gain that is
  // missing, has the wrong size or is not finite.
  static Result<ResidualBasis> Plan(const Checkpoint& ckpt, const SourceModel& model,
                                    const ModelConfig& cfg, uint64_t seed);

  bool enabled() const { return block_ > 0; }
  int block() const { return block_; }
  const std::string& why_not() const { return why_not_; }
  // The manifest's "residual_basis" object (what waste verify re-plans from).
  nlohmann::json Describe() const;

  // Rewrites a trunk tensor, named as in the container, into the stored
  // basis; tensors that do not meet the stream are left alone.
  Status ApplyToTrunk(const std::string& target, F32Tensor* t) const;
  // The same for routed expert matrix `kind` (0 gate, 1 up, 2 down) of
  // `layer`: gate and up read the stream through post_attention_layernorm,
  // down writes it (latent experts never see the stream: left alone).
  Status ApplyToExpert(int layer, int kind, F32Tensor* t) const;

 private:
  struct Use {
    ResidualUse use = ResidualUse::kNone;
    std::string gain;  // kReadsNormed: a key of gains_
  };
  // False, leaving `t` alone, when its shape does not fit the use.
  bool Apply(const Use& u, F32Tensor* t) const;
  Status ShapeError(const std::string& what, const F32Tensor& t) const;

  int hidden_ = 0, block_ = 0;
  uint64_t seed_ = 0;
  std::string why_not_;
  std::vector<float> signs_;
  std::unordered_map<std::string, std::vector<float>> gains_;  // by norm name
  std::unordered_map<std::string, Use> uses_;                  // by container name
  std::vector<std::string> expert_gain_;                       // per layer; "": not on the stream
};

// The two products, exposed for tests. `signs` and `scale` have d entries
// (scale may be null); d is a multiple of `block`, a power of two.
// rows × d, row-major: every row r ← r · diag(scale) · D · H.
void RotateInputSide(float* m, int64_t rows, int64_t d, const float* scale, const float* signs,
                     int block);
// d × cols, row-major: m ← H · D · m (the output side: Qᵀ·m).
void RotateOutputSide(float* m, int64_t d, int64_t cols, const float* signs, int block);

}  // namespace waste::convert
