// What the memory plan counts, for the engine to check itself against:
// the engine asserts that the buffers it really allocates stay within
// EstimateScratchBytes() and StateBytes() (ENGINE.md §4.1, "plan == memory
// used after open").
#pragma once

#include <cstdint>

#include "model/model_config.h"
#include "waste/types.h"  // kPrefillChunkTokens: every per-token buffer is sized for it

namespace waste {

// Every engine buffer besides the trunk, the session state and the expert
// cache, at context `ctx`: chunk activations, attention and router scratch,
// FFN and expert activations, logits and sampler arrays, the VQ lookup
// tables (decode and chunked prefill, int8 shadows for VQ4P), expert
// staging and the AttnRes history. The terms are listed in memplan.cc.
uint64_t EstimateScratchBytes(const ModelConfig& cfg, uint32_t ctx);

// KDA recurrent state and conv rings plus MLA latent KV at `ctx` positions.
uint64_t StateBytes(const ModelConfig& cfg, uint32_t ctx);

}  // namespace waste
