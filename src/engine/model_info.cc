#include "engine/model_info.h"

namespace waste {

ModelInfo DescribeModel(const Container& container) {
  const ModelConfig& c = container.config();
  ModelInfo info;
  info.arch = c.arch;
  info.layers = c.n_layers;
  info.experts = c.moe.n_experts;
  info.top_k = c.moe.top_k;
  info.hidden = c.hidden;
  info.vocab = c.vocab;
  ParamCounts p = CountParameters(c, container.trunk_index());
  info.params_total = p.total;
  info.params_active = p.active;
  info.quantization = QuantizationSummary(c, container.trunk_index());
  info.finite_checked_values = container.checked_finite_values();
  return info;
}

}  // namespace waste
