#include "convert/residual_basis.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "container/tensor_list.h"
#include "convert/rng.h"

namespace waste::convert {
namespace {

// Purpose tag of the sign stream (convert/rng.h keys streams by purpose).
constexpr uint64_t kSignPurpose = 0x726f74;  // "rot"
constexpr int kMinBlock = 32;

// In-place orthonormal Walsh–Hadamard transform over n elements (n a power
// of two): element j is the `width` floats at x + j * stride. One row's
// block is (stride 1, width 1); a block of a matrix's rows is (cols, cols).
void Fwht(float* x, int n, int64_t stride, int64_t width) {
  for (int len = 1; len < n; len <<= 1) {
    for (int i = 0; i < n; i += 2 * len) {
      for (int j = i; j < i + len; ++j) {
        float* p = x + j * stride;
        float* q = x + (j + len) * stride;
        for (int64_t c = 0; c < width; ++c) {
          const float a = p[c], b = q[c];
          p[c] = a + b;
          q[c] = a - b;
        }
      }
    }
  }
  const float s = 1.0f / std::sqrt(static_cast<float>(n));
  for (int j = 0; j < n; ++j) {
    for (int64_t c = 0; c < width; ++c) x[j * stride + c] *= s;
  }
}

}  // namespace

void RotateInputSide(float* m, int64_t rows, int64_t d, const float* scale, const float* signs,
                     int block) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = m + r * d;
    for (int64_t i = 0; i < d; ++i) row[i] *= (scale != nullptr ? scale[i] : 1.0f) * signs[i];
    for (int64_t b = 0; b < d; b += block) Fwht(row + b, block, 1, 1);
  }
}

void RotateOutputSide(float* m, int64_t d, int64_t cols, const float* signs, int block) {
  for (int64_t r = 0; r < d; ++r) {
    float* row = m + r * cols;
    for (int64_t i = 0; i < cols; ++i) row[i] *= signs[r];
  }
  for (int64_t b = 0; b < d; b += block) Fwht(m + b * cols, block, cols, cols);
}

Result<ResidualBasis> ResidualBasis::Plan(const Checkpoint& ckpt, const SourceModel& model,
                                          const ModelConfig& cfg, uint64_t seed) {
  ResidualBasis out;
  for (const TrunkSource& t : model.trunk) {
    if (t.vision) {
      out.why_not_ = "the vision projector ends in an RMSNorm gain over the stream";
      return out;
    }
  }
  int block = 1;  // the config's bounds keep hidden in [1, 2^20]; the cap guards the loop anyway
  while (block < (1 << 20) && cfg.hidden % (2 * block) == 0) block *= 2;
  if (block < kMinBlock) {
    out.why_not_ = fmt::format("hidden size {} has no power-of-two factor of at least {}",
                               cfg.hidden, kMinBlock);
    return out;
  }
  std::unordered_map<std::string, std::string> source_of;
  for (const TrunkSource& t : model.trunk) source_of[t.target] = t.source;
  const std::vector<TensorSpec> specs = ModelTensors(cfg);
  for (const TensorSpec& s : specs) {
    if (s.residual != ResidualUse::kReadsNormed) continue;
    const std::string norm = PrefixedName(cfg, s.norm);
    if (out.gains_.count(norm) != 0) continue;
    auto src = source_of.find(norm);
    if (src == source_of.end()) {
      return FormatError(fmt::format("{}: norm {} (read by {}) is missing", ckpt.dir(), norm,
                                     PrefixedName(cfg, s.name)));
    }
    WASTE_ASSIGN_OR_RETURN(F32Tensor g, LoadF32(ckpt, src->second, model.quant));
    if (static_cast<int64_t>(g.values.size()) != cfg.hidden) {
      return FormatError(fmt::format("{}: norm {} has {} values, the hidden size is {}", ckpt.dir(),
                                     src->second, g.values.size(), cfg.hidden));
    }
    for (float v : g.values) {
      if (!std::isfinite(v)) {
        return FormatError(
            fmt::format("{}: tensor {} holds a value that is not finite", ckpt.dir(), src->second));
      }
    }
    out.gains_[norm] = std::move(g.values);
  }
  for (const TensorSpec& s : specs) {
    if (s.residual == ResidualUse::kNone) continue;
    Use u{s.residual, s.residual == ResidualUse::kReadsNormed ? PrefixedName(cfg, s.norm) : ""};
    out.uses_[PrefixedName(cfg, s.name)] = u;
  }
  out.expert_gain_.assign(static_cast<size_t>(cfg.n_layers), "");
  if (cfg.moe.input != ExpertInput::kLatent) {
    for (int l : model.moe_layers) {
      const std::string norm =
          PrefixedName(cfg, fmt::format("model.layers.{}.post_attention_layernorm.weight", l));
      if (out.gains_.count(norm) == 0) {
        return FormatError(
            fmt::format("{}: layer {} has experts but no post_attention_layernorm", ckpt.dir(), l));
      }
      out.expert_gain_[static_cast<size_t>(l)] = norm;
    }
  }
  out.hidden_ = static_cast<int>(cfg.hidden);
  out.block_ = block;
  out.seed_ = seed;
  Rng rng(seed, kSignPurpose);
  out.signs_.resize(static_cast<size_t>(cfg.hidden));
  for (float& s : out.signs_) s = (rng.Next() >> 63) != 0 ? -1.0f : 1.0f;
  return out;
}

nlohmann::json ResidualBasis::Describe() const {
  return {{"rotation", "signed-hadamard"}, {"block", block_}, {"seed", seed_}};
}

bool ResidualBasis::Apply(const Use& u, F32Tensor* t) const {
  const int64_t d = hidden_;
  const int64_t n = static_cast<int64_t>(t->values.size());
  float* m = t->values.data();
  switch (u.use) {
    case ResidualUse::kNone:
      return true;
    case ResidualUse::kNormGain:
      if (n != d) return false;
      for (float& v : t->values) v = 1.0f;
      return true;
    case ResidualUse::kReadsNormed:
    case ResidualUse::kEmbedding:
      if (t->cols() != d) return false;
      RotateInputSide(m, n / d, d, u.gain.empty() ? nullptr : gains_.at(u.gain).data(),
                      signs_.data(), block_);
      return true;
    case ResidualUse::kWritesResidual:
      if (t->shape.size() != 2 || t->shape[0] != d) return false;
      RotateOutputSide(m, d, t->shape[1], signs_.data(), block_);
      return true;
  }
  return false;
}

Status ResidualBasis::ShapeError(const std::string& what, const F32Tensor& t) const {
  return FormatError(
      fmt::format("{}: shape [{}] does not meet the residual stream of width {} as the "
                  "model needs",
                  what, fmt::join(t.shape, ", "), hidden_));
}

Status ResidualBasis::ApplyToTrunk(const std::string& target, F32Tensor* t) const {
  if (!enabled()) return Status::Ok();
  auto it = uses_.find(target);
  if (it == uses_.end() || Apply(it->second, t)) return Status::Ok();
  return ShapeError(target, *t);
}

Status ResidualBasis::ApplyToExpert(int layer, int kind, F32Tensor* t) const {
  if (!enabled()) return Status::Ok();
  const std::string& gain = expert_gain_[static_cast<size_t>(layer)];
  if (gain.empty()) return Status::Ok();
  const Use u =
      kind == 2 ? Use{ResidualUse::kWritesResidual, ""} : Use{ResidualUse::kReadsNormed, gain};
  if (Apply(u, t)) return Status::Ok();
  return ShapeError(fmt::format("layer {} expert matrix {}", layer, kind), *t);
}

}  // namespace waste::convert
