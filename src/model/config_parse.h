// manifest.json "config" -> ModelConfig: the family's spellings and
// defaults (model/families.cc), the format's bounds, the layer kinds, one
// function per sub-config, then the family's "not supported" check. Uses
// only base/ and format/ (json reader, rope), so format/manifest.cc can
// call it without the rest of model/.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "format/json_reader.h"
#include "model/model_config.h"
#include "waste/status.h"

namespace waste {

// Fills `c` from root["config"]. Expects c.tensor_prefix (manifest
// "tensor_prefix") and c.quant already set. `origin` names the file.
Status ParseModelConfig(const json::Json& root, std::string_view origin, ModelConfig& c);

// The inverse for the engine's own spellings: a "config" object that
// ParseModelConfig reads back into an equal ModelConfig (the round-trip
// test; writers that start from a ModelConfig).
nlohmann::ordered_json ModelConfigToJson(const ModelConfig& c);

}  // namespace waste
