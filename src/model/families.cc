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

constexpr std::array kFamilies = {
    // Every family runs everything its configs can ask for today (routing:
    // sigmoid or softmax scores, global or group-limited), so none refuses
    // anything at open.
    Family{"kimi-k3", "KimiK3", kHfAliases, FamilyDefaults{}, nullptr, "k3-tiny"},
    Family{"kimi-linear", "KimiLinear", kHfAliases, FamilyDefaults{}, nullptr, "tiny"},
    Family{"deepseek-v3", "DeepseekV3", kHfAliases, FamilyDefaults{}, nullptr,
           "deepseek-v3-tiny"},
    // Fallback: any other architecture is read with the same vocabulary.
    Family{"", "", kHfAliases, FamilyDefaults{}, nullptr, ""},
};

}  // namespace

const Family& FamilyForArchitecture(std::string_view architecture) {
  for (const Family& f : kFamilies) {
    if (f.architecture_match.empty()) return f;
    if (architecture.find(f.architecture_match) != std::string_view::npos) return f;
  }
  return kFamilies.back();
}

void ForEachFamily(const std::function<void(const Family&)>& visit) {
  for (const Family& f : kFamilies) visit(f);
}

}  // namespace waste
