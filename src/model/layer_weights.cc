#include "model/layer_weights.h"

#include <fmt/format.h>

#include "container/tensor_list.h"

namespace waste {

// Walks the one tensor list; the container has already checked every
// required tensor's kind, format and shape against the same list, so a
// failure here is the engine's own guard against a reader/engine
// disagreement and names the tensor.
Result<ModelWeights> ResolveWeights(const Container& container) {
  const ModelConfig& cfg = container.config();
  ModelWeights w;
  w.layers.resize(static_cast<size_t>(cfg.n_layers));
  for (const TensorSpec& spec : ModelTensors(cfg)) {
    const TensorView* t = container.Find(spec.name);
    const bool optional = spec.kind == TensorKind::kOptionalData;
    if (t == nullptr) {
      if (optional) continue;
      return FormatError(
          fmt::format("required tensor is missing or has the wrong shape: {}", spec.name));
    }
    // An optional tensor that is quantized is ignored (the slot stays null).
    if (!spec.bind(w, spec.layer, *t) && !optional) {
      return FormatError(fmt::format("{} must be F32", spec.name));
    }
  }
  return w;
}

}  // namespace waste
