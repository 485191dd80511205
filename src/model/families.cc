// The family table (see families.h). Family names appear in src/model/ only
// here.
#include "model/families.h"

#include <fmt/format.h>

#include <array>

namespace waste {
namespace {

// HF / DeepSeek-V3 spellings the converter may leave in place; every family
// accepts them (the reference reads them for any architecture).
constexpr std::array kHfAliases = {
    ConfigAlias{"num_experts", "n_routed_experts"},
    ConfigAlias{"num_experts_per_token", "num_experts_per_tok"},
    ConfigAlias{"num_shared_experts", "n_shared_experts"},
    ConfigAlias{"moe_renormalize", "norm_topk_prob"},
    ConfigAlias{"moe_router_activation_func", "scoring_func"},
    ConfigAlias{"n_group", "num_expert_group"},  // Kimi's spelling
};

// DeepSeek-V2's router multiplies the routing weights by
// routed_scaling_factor only when it does not renormalise them; V3 (and the
// engine) renormalise first and then always scale. Everything else a V2
// config can ask for (softmax scores, group_limited_greedy or greedy
// selection, no e_score_correction_bias, MLA with or without q LoRA, YaRN)
// is what the engine runs for V3, so the two agree except when a V2 config
// renormalises with a factor other than 1 (no DeepSeek-V2 release does).
Status CheckDeepSeekV2(const ModelConfig& c, std::string_view origin) {
  if (c.moe.renormalize && c.moe.top_k > 1 && c.moe.routed_scaling != 1.0f) {
    return UnsupportedError(fmt::format(
        "{}: DeepSeek-V2 config with norm_topk_prob true and routed_scaling_factor {}: "
        "DeepSeek-V2 leaves renormalised routing weights unscaled, waste scales them after "
        "renormalising (as DeepSeek-V3 does), so this model would run differently; only "
        "routed_scaling_factor 1 or norm_topk_prob false is supported",
        origin, c.moe.routed_scaling));
  }
  return Status::Ok();
}

constexpr std::string_view kKimiK3Names[] = {"KimiK3"};
constexpr std::string_view kKimiLinearNames[] = {"KimiLinear"};
// Kimi-K2 ships as DeepseekV3ForCausalLM too.
constexpr std::string_view kDeepSeekV3Names[] = {"DeepseekV3"};
constexpr std::string_view kDeepSeekV2Names[] = {"DeepseekV2"};

constexpr std::array kFamilies = {
    // Routing: sigmoid or softmax scores, global or group-limited; every
    // family runs what its released configs ask for.
    Family{"kimi-k3", kKimiK3Names, kHfAliases, FamilyDefaults{}, nullptr, "k3-tiny", "kimi-k3",
           TurnMarkers::kOpenTags},
    Family{"kimi-linear", kKimiLinearNames, kHfAliases, FamilyDefaults{}, nullptr, "tiny",
           "kimi-linear", TurnMarkers::kImTags},
    Family{"deepseek-v3", kDeepSeekV3Names, kHfAliases, FamilyDefaults{}, nullptr,
           "deepseek-v3-tiny", "", TurnMarkers::kNone},
    Family{"deepseek-v2", kDeepSeekV2Names, kHfAliases, FamilyDefaults{}, CheckDeepSeekV2,
           "deepseek-v2-tiny", "", TurnMarkers::kNone},
    // Fallback: any other architecture is read with the same vocabulary
    // (the engine opens it; the converter refuses it).
    Family{"", {}, kHfAliases, FamilyDefaults{}, nullptr, "", "", TurnMarkers::kNone},
};

}  // namespace

const Family& FamilyForArchitecture(std::string_view architecture) {
  for (const Family& f : kFamilies) {
    for (std::string_view name : f.architectures) {
      if (architecture.find(name) != std::string_view::npos) return f;
    }
  }
  return kFamilies.back();
}

void ForEachFamily(const std::function<void(const Family&)>& visit) {
  for (const Family& f : kFamilies) visit(f);
}

}  // namespace waste
