// Rotary configuration of MLA layers from config (FORMAT.md §3.6 "Rotary",
// MODEL.md §4.3): which shapes the engine implements, and the f32 frequency
// table plus the softmax multiplier it computes for them.
#pragma once

#include "format/json_reader.h"
#include "model/model_config.h"
#include "waste/status.h"

namespace waste {

// Fills cfg.rope from `config` (the effective config object). Expects
// cfg.mla.nope and cfg.mla.qk_rope already set. Refusals carry the phrases the
// conformance suite looks for: "needs rotation", "carries no type",
// "not implemented, only yarn", "not implemented" (mscale).
Status ResolveRope(const json::Json& config, std::string_view origin, ModelConfig& cfg);

// The plain table: omega_j = f32(base^(-2j/d_r)), j < d_r/2, in float64.
void PlainRopeFrequencies(double base, int qk_rope, std::vector<float>& omega);

}  // namespace waste
