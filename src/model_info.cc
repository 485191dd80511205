#include "model_info.h"

#include <string>

namespace waste {

ModelInfo DescribeModel(const Container& container) {
  const ModelConfig& c = container.config();
  ModelInfo info;
  info.arch = c.arch;
  info.layers = c.n_layers;
  info.experts = c.n_experts;
  info.top_k = c.top_k;
  info.hidden = c.hidden;
  info.vocab = c.vocab;

  const uint64_t per_expert = 3ull * static_cast<uint64_t>(c.expert_in()) *
                              static_cast<uint64_t>(c.moe_inter);
  const uint64_t moe_layers = c.n_experts > 0 ? static_cast<uint64_t>(c.n_layers - c.first_dense) : 0;
  uint64_t trunk = 0, embed = 0;
  bool has[8] = {};
  for (const TensorInfo& t : container.trunk_index()) {
    if (!c.tensor_prefix.empty() && t.name.rfind(c.tensor_prefix, 0) != 0) continue;
    uint64_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    trunk += n;
    if (t.name.find("embed_tokens.weight") != std::string::npos) embed += n;
    has[static_cast<int>(t.fmt) & 7] = true;
  }
  info.params_total = per_expert * static_cast<uint64_t>(c.n_experts) * moe_layers + trunk;
  info.params_active = per_expert * static_cast<uint64_t>(c.top_k) * moe_layers + trunk - embed;

  std::string q = "experts " + (c.quant.fmt_name.empty()
                                    ? "VQ" + std::to_string(c.quant.stages) + "R"
                                    : c.quant.fmt_name) +
                  ", trunk ";
  const std::pair<TensorFmt, const char*> order[] = {{TensorFmt::kQ3G, "Q3G"},
                                                     {TensorFmt::kQ4G, "Q4G"},
                                                     {TensorFmt::kQ8G, "Q8G"},
                                                     {TensorFmt::kF16, "F16"},
                                                     {TensorFmt::kF32, "F32"}};
  bool first = true;
  for (const auto& [fmt, name] : order) {
    if (!has[static_cast<int>(fmt)]) continue;
    if (!first) q += "/";
    q += name;
    first = false;
  }
  info.quantization = q;
  return info;
}

}  // namespace waste
