// What a checkpoint directory is, in the container's terms: the family
// (looked up in the engine's family table, model/families.h), the manifest
// config with
// the engine's key spellings, the MoE layers and their expert tensor names,
// and the trunk tensors with the name each gets in the container.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert/dequant.h"
#include "convert/safetensors.h"
#include "model/families.h"
#include "waste/status.h"

namespace waste::convert {

// The family a checkpoint's architectures[0] names. The converter accepts
// exactly the families of model/families.cc that list architecture names;
// anything else is refused with kUnsupported naming `origin` and the names
// it would accept.
Result<const Family*> ConvertibleFamily(std::string_view architecture, std::string_view origin);

struct TrunkSource {
  std::string source;           // name in the checkpoint (without _packed)
  std::string target;           // name in the container
  bool vision = false;          // K3 vision tower: 2-D Q8G
};

struct SourceModel {
  const Family* family = nullptr;  // an entry of the family table
  std::string arch;             // manifest "arch"
  std::string prefix;           // tensor prefix ("" or "language_model.")
  nlohmann::ordered_json config;       // manifest "config" (flattened, normalised)
  nlohmann::ordered_json outer;        // nested configs: the outer object (vision)
  int n_layers = 0;
  int n_experts = 0;
  int first_dense = 0;
  bool deepseek_naming = false;
  SourceQuant quant;
  std::vector<int> moe_layers;  // layers with routed experts, ascending
  std::vector<TrunkSource> trunk;  // sorted by source name

  // Source name of matrix `kind` (0 gate, 1 up, 2 down) of expert `e`.
  std::string ExpertTensor(int layer, int e, int kind) const;
};

// config.json's quantization_config (null or absent: nothing quantised) ->
// how quantised matrices are stored: the fp8 tile (weight_block_size) and
// compressed-tensors "pack-quantized" int4 with its group size. A
// pack-quantized scheme other than symmetric 4-bit int groups is refused
// (kUnsupported) naming the key; a malformed one is a format error. `path`
// names config.json in messages.
Result<SourceQuant> ParseQuantizationConfig(const nlohmann::ordered_json& qc,
                                            const std::string& path);

// Reads config.json and classifies the checkpoint's tensors. Fails with a
// message naming the file or tensor when the config lacks a required key
// or expert tensors are missing.
Result<SourceModel> DescribeSource(const Checkpoint& ckpt);

}  // namespace waste::convert
