// Model shapes the generator knows: the reference's tiny test shape, the
// real Kimi-Linear-48B dimensions, a small Kimi-Linear for benchmarks, and
// toy DeepSeek-V3 (rotary, q LoRA), DeepSeek-V2 (its routing) and K3 (prefix, latent MoE, AttnRes,
// SiTU) shapes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "waste/status.h"

namespace waste::gen {

struct Preset {
  std::string name;
  std::string arch;                  // manifest "arch"
  std::string tensor_prefix;
  nlohmann::ordered_json config;     // manifest "config"
  bool skewed_routing = false;       // fit router biases to a routing trace
  bool pad_a_log = false;            // K3 pads A_log past the head count
  bool router_bias = true;           // e_score_correction_bias (V2 has none)
  std::vector<std::string> extra_outside_prefix;  // [128, H] Q4G tensors (K3)
};

const std::vector<std::string>& PresetNames();
Result<Preset> MakePreset(std::string_view name);

}  // namespace waste::gen
