// Per-layer weight handles resolved once at open by walking the one tensor
// list (container/tensor_list.cc): each spec names its tensor and the slot
// of ModelWeights it fills. The forward pass never looks a name up.
#pragma once

#include "container/container.h"
#include "container/model_weights.h"
#include "waste/status.h"

namespace waste {

Result<ModelWeights> ResolveWeights(const Container& container);

}  // namespace waste
