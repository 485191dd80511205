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
};

// The router scores with a sigmoid plus correction bias and takes a global
// top-k. DeepSeek-V3 as released restricts the choice to the best
// topk_group of n_group expert groups: not implemented yet, so a container
// that needs it is refused rather than run with different routing.
Status CheckRouting(const ModelConfig& c, std::string_view origin) {
  if (c.moe.score != RouterScore::kSigmoid) {
    return UnsupportedError(fmt::format("{}: config asks for softmax router scores: not "
                                        "implemented, this engine scores experts by sigmoid",
                                        origin));
  }
  if (c.moe.route_scope == RouteScope::kGroupLimited) {
    return UnsupportedError(fmt::format(
        "{}: config asks for group-limited expert routing (n_group {}, topk_group {}): not "
        "implemented, this engine routes by a global top-k only",
        origin, c.moe.n_group, c.moe.topk_group));
  }
  return Status::Ok();
}

constexpr std::array kFamilies = {
    Family{"kimi-k3", "KimiK3", kHfAliases, FamilyDefaults{}, CheckRouting, "k3-tiny"},
    Family{"kimi-linear", "KimiLinear", kHfAliases, FamilyDefaults{}, CheckRouting, "tiny"},
    Family{"deepseek-v3", "DeepseekV3", kHfAliases, FamilyDefaults{}, CheckRouting,
           "deepseek-v3-tiny"},
    // Fallback: any other architecture is read with the same vocabulary.
    Family{"", "", kHfAliases, FamilyDefaults{}, CheckRouting, ""},
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
