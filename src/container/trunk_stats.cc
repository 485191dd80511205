// Facts derived from the trunk index alone: what stays resident and how many
// bytes that is, parameter counts (MODEL.md §12) and the quantization line
// of `waste info` (ENGINE.md §1.6).
#include <fmt/format.h>

#include <string>
#include <unordered_set>

#include "container/container.h"
#include "format/format.h"

namespace waste {

const char* TensorFmtName(TensorFmt fmt) {
  switch (fmt) {
    case TensorFmt::kF32: return "F32";
    case TensorFmt::kF16: return "F16";
    case TensorFmt::kQ8G: return "Q8G";
    case TensorFmt::kQ4G: return "Q4G";
    case TensorFmt::kQ3G: return "Q3G";
    case TensorFmt::kVq3r: return "VQ3R";
    case TensorFmt::kVq2r: return "VQ2R";
    case TensorFmt::kVq4p: return "VQ4P";
  }
  return "?";
}

namespace {

bool UnderPrefix(const ModelConfig& config, const TensorInfo& t) {
  return t.name.compare(0, config.tensor_prefix.size(), config.tensor_prefix) == 0;
}

uint64_t Elements(const TensorInfo& t) {
  uint64_t n = 1;
  for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
  return n;
}

uint64_t AlignUp(uint64_t n) { return (n + kTrunkAlignment - 1) / kTrunkAlignment * kTrunkAlignment; }

}  // namespace

bool IsOnDiskEmbedding(const ModelConfig& config, const TensorInfo& t) {
  return t.fmt != TensorFmt::kF32 && UnderPrefix(config, t) &&
         t.name.find("embed_tokens.weight") != std::string::npos;
}

bool IsResidentTensor(const ModelConfig& config, const TensorInfo& t) {
  return UnderPrefix(config, t) && !IsOnDiskEmbedding(config, t);
}

uint64_t ResidentTrunkBytes(const Manifest& m) {
  uint64_t total = 0;
  std::unordered_set<std::string_view> seen;
  for (const TensorInfo& t : m.trunk) {
    if (!seen.insert(t.name).second || !IsResidentTensor(m.config, t)) continue;
    format::TrunkGeometry g =
        format::ComputeTrunkGeometry(t.fmt, t.shape, t.group);
    total += AlignUp(g.payload_bytes) + AlignUp(g.scale_bytes);
  }
  return total;
}

ParamCounts CountParameters(const ModelConfig& c, const std::vector<TensorInfo>& index) {
  uint64_t trunk = 0;
  uint64_t embed = 0;
  for (const TensorInfo& t : index) {
    if (!UnderPrefix(c, t)) continue;
    uint64_t n = Elements(t);
    trunk += n;
    if (t.name.ends_with("embed_tokens.weight")) embed += n;
  }
  uint64_t per_expert = 3ull * static_cast<uint64_t>(c.expert_in()) * c.moe.inter;
  uint64_t moe_layers = c.moe.n_experts > 0 ? static_cast<uint64_t>(c.n_layers - c.moe.first_dense) : 0;
  ParamCounts p;
  p.total = per_expert * c.moe.n_experts * moe_layers + trunk;
  p.active = per_expert * c.moe.top_k * moe_layers + (trunk - embed);
  return p;
}

std::string QuantizationSummary(const ModelConfig& config, const std::vector<TensorInfo>& index) {
  bool present[16] = {};
  for (const TensorInfo& t : index) {
    if (UnderPrefix(config, t)) present[format::FmtByte(t.fmt) & 15] = true;
  }
  std::string trunk;
  for (TensorFmt f : {TensorFmt::kQ3G, TensorFmt::kQ4G, TensorFmt::kQ8G, TensorFmt::kF16,
                      TensorFmt::kF32}) {
    if (!present[format::FmtByte(f)]) continue;
    if (!trunk.empty()) trunk += '/';
    trunk += TensorFmtName(f);
  }
  // The reference prints VQ<stages>R even for VQ4P (4 stages): kept.
  return fmt::format("experts VQ{}R, trunk {}", config.quant.stages, trunk);
}

}  // namespace waste
