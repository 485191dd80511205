// manifest "config" -> ModelConfig, one function per sub-config. Every
// bound here is the container format's (the same for every family); what a
// family spells or defaults differently comes from its Family entry.
#include "model/config_parse.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "format/rope_config.h"
#include "model/families.h"

namespace waste {
namespace {

using json::Json;

constexpr int64_t k2p16 = int64_t{1} << 16;
constexpr int64_t k2p20 = int64_t{1} << 20;
constexpr int64_t k2p24 = int64_t{1} << 24;
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
// Record headers store layer and expert ids as u16.
constexpr int64_t kMaxExperts = 65536;
constexpr int kMaxLayers = 128;

// Reads config keys with the family's spellings and defaults; wrong types
// read as absent (then the bounds checks speak).
class ConfigReader {
 public:
  ConfigReader(const Json* cfg, const Family& family, std::string_view origin)
      : cfg_(cfg), family_(family), origin_(origin) {}

  std::string_view origin() const { return origin_; }
  const Family& family() const { return family_; }

  // The engine's spelling, else the family's alias for it.
  const Json* Get(std::string_view key) const {
    if (const Json* v = json::Member(cfg_, key)) return v;
    for (const ConfigAlias& a : family_.aliases) {
      if (a.key == key) return json::Member(cfg_, a.alias);
    }
    return nullptr;
  }
  // Like Get, but falls through to the alias when the engine's spelling is
  // present with the wrong type (numbers: the first one that is a number).
  int64_t Int(std::string_view key, int64_t def) const {
    if (auto v = json::Integer(json::Member(cfg_, key))) return *v;
    for (const ConfigAlias& a : family_.aliases) {
      if (a.key != key) continue;
      if (auto v = json::Integer(json::Member(cfg_, a.alias))) return *v;
    }
    return def;
  }
  double Num(std::string_view key, double def) const {
    return json::Number(Get(key)).value_or(def);
  }
  // Switches read BY VALUE: absent/null = off, true/false as written,
  // anything else is refused.
  Result<bool> Flag(const Json* v, std::string_view path) const {
    if (v == nullptr || v->is_null()) return false;
    if (v->is_boolean()) return v->get<bool>();
    return FormatError(fmt::format("{}: config.{} is {}, not true or false", origin_, path,
                                   json::Brief(v)));
  }
  Result<bool> Flag(std::string_view key) const { return Flag(Get(key), key); }
  // Present means a JSON boolean: null is refused too (mla_use_nope:
  // present but not boolean => load refused).
  Result<bool> StrictFlag(std::string_view key) const {
    const Json* v = Get(key);
    if (v != nullptr && v->is_null()) {
      return FormatError(fmt::format("{}: config.{} is null, not true or false", origin_, key));
    }
    return Flag(v, key);
  }

  Status Range(std::string_view key, int64_t v, int64_t lo, int64_t hi) const {
    if (v >= lo && v <= hi) return Status::Ok();
    // json::Integer saturates huge and non-finite values at +-2^62: print
    // what the file says in words rather than the clamped number.
    constexpr int64_t kSaturated = int64_t{1} << 62;
    std::string shown = v >= kSaturated    ? std::string("a number of 2^62 or more")
                        : v <= -kSaturated ? std::string("a number of -2^62 or less")
                                           : std::to_string(v);
    return FormatError(fmt::format("{}: manifest config is out of range: {} = {}, expected {}..{}",
                                   origin_, key, shown, lo, hi));
  }
  Status Finite(std::string_view key, double v) const {
    if (std::isfinite(v) && std::fabs(v) <= 1e6) return Status::Ok();
    return FormatError(fmt::format("{}: manifest config is out of range: {} = {}, expected a "
                                   "finite number",
                                   origin_, key, v));
  }

 private:
  const Json* cfg_;
  const Family& family_;
  std::string_view origin_;
};

std::string ArchitectureName(const Json* config, const Json* effective) {
  auto first = [](const Json* obj) -> std::optional<std::string> {
    const Json* a = json::Member(obj, "architectures");
    if (a == nullptr || !a->is_array() || a->empty()) return std::nullopt;
    return json::String(&(*a)[0]);
  };
  if (auto s = first(json::Member(config, "_outer"))) return *s;
  if (auto s = first(effective)) return *s;
  if (auto s = first(config)) return *s;
  return "";
}

// Layer count, widths shared by every layer, eps, eos.
Status ParseTrunk(const ConfigReader& r, ModelConfig& c) {
  int64_t nl = r.Int("num_hidden_layers", 0);
  int64_t h = r.Int("hidden_size", 0);
  int64_t v = r.Int("vocab_size", 0);
  double eps = r.Num("rms_norm_eps", r.family().defaults.rms_norm_eps);
  WASTE_TRY(r.Range("num_hidden_layers", nl, 1, kMaxLayers));
  WASTE_TRY(r.Range("hidden_size", h, 1, k2p20));
  WASTE_TRY(r.Range("vocab_size", v, 1, k2p24));
  if (!(eps > 0.0 && eps < 1.0)) {  // also refuses NaN
    return FormatError(fmt::format("{}: manifest config is out of range: rms_norm_eps = {}, "
                                   "expected 0 < eps < 1",
                                   r.origin(), eps));
  }
  int64_t id = r.Int("intermediate_size", 0);
  WASTE_TRY(r.Range("intermediate_size", id, 0, k2p20));
  int64_t eos = r.Int("eos_token_id", 0);
  c.n_layers = static_cast<int>(nl);
  c.hidden = static_cast<int>(h);
  c.vocab = static_cast<int>(v);
  c.dense_inter = static_cast<int>(id);
  c.rms_eps = static_cast<float>(eps);
  c.eos_token_id = eos > 0 && eos <= kI32Max ? static_cast<int>(eos) : 0;
  return Status::Ok();
}

// Attention kinds from 1-based linear_attn_config.kda_layers (values
// outside 1..128 are ignored); FFN kinds from num_experts and
// first_k_dense_replace.
void ParseLayerKinds(const ConfigReader& r, ModelConfig& c) {
  c.attn_kind.assign(c.n_layers, AttnKind::kMla);
  const Json* kda = json::Member(r.Get("linear_attn_config"), "kda_layers");
  if (kda != nullptr && kda->is_array()) {
    for (const Json& item : *kda) {
      std::optional<int64_t> one_based = json::Integer(&item);
      if (!one_based || *one_based < 1 || *one_based > kMaxLayers) continue;
      if (*one_based <= c.n_layers) c.attn_kind[*one_based - 1] = AttnKind::kKda;
    }
  }
  c.ffn_kind.assign(c.n_layers, FfnKind::kDense);
  for (int l = 0; l < c.n_layers; ++l) {
    if (c.moe.n_experts > 0 && l >= c.moe.first_dense) c.ffn_kind[l] = FfnKind::kMoe;
  }
}

// topk_group < n_group: how the groups are scored, and whether the kept
// groups can hold top_k experts.
Status ReadGroupRouting(const ConfigReader& r, const std::optional<std::string>& method,
                        int64_t e, int64_t k, int64_t groups, int64_t topk_groups,
                        RouteScope& scope, GroupScore& group_score) {
  if (method && *method == "greedy") return Status::Ok();  // a plain top-k
  if (method && *method == "group_limited_greedy") {
    group_score = GroupScore::kMax;
  } else if (method && *method != "noaux_tc") {
    return UnsupportedError(fmt::format(
        "{}: config.topk_method is \"{}\" with topk_group {} < n_group {}: waste routes by "
        "noaux_tc, group_limited_greedy or greedy",
        r.origin(), *method, topk_groups, groups));
  }
  const int64_t per_group = e / groups;
  if (group_score == GroupScore::kTopTwoSum && per_group < 2) {
    return FormatError(fmt::format("{}: manifest config: noaux_tc scores a group by its two best "
                                   "experts, but num_experts {} / n_group {} leaves one expert "
                                   "per group",
                                   r.origin(), e, groups));
  }
  if (k > topk_groups * per_group) {
    return FormatError(fmt::format("{}: manifest config: num_experts_per_token {} is more than the "
                                   "{} experts of the topk_group {} groups kept",
                                   r.origin(), k, topk_groups * per_group, topk_groups));
  }
  scope = RouteScope::kGroupLimited;
  return Status::Ok();
}

Status ParseMoe(const ConfigReader& r, ModelConfig& c) {
  MoeConfig& m = c.moe;
  int64_t e = r.Int("num_experts", 0);
  int64_t k = r.Int("num_experts_per_token", 0);
  int64_t im = r.Int("moe_intermediate_size", 0);
  int64_t ns = r.Int("num_shared_experts", 0);
  int64_t f = r.Int("first_k_dense_replace", 0);
  int64_t lat = r.Int("routed_expert_hidden_size", 0);
  WASTE_TRY(r.Range("num_experts", e, 0, kMaxExperts));
  if (e > 0) {
    WASTE_TRY(r.Range("num_experts_per_token", k, 1, std::min<int64_t>(e, 64)));
    WASTE_TRY(r.Range("moe_intermediate_size", im, 1, k2p20));
  }
  WASTE_TRY(r.Range("moe_intermediate_size", im, 0, k2p20));
  WASTE_TRY(r.Range("first_k_dense_replace", f, 0, c.n_layers));
  WASTE_TRY(r.Range("num_shared_experts", ns, 0, 64));
  WASTE_TRY(r.Range("routed_expert_hidden_size", lat, 0, k2p20));
  WASTE_TRY(r.Range("moe_intermediate_size * max(num_shared_experts, 1)",
                    im * std::max<int64_t>(ns, 1), 0, kI32Max));
  if (e == 0 || f > 0) WASTE_TRY(r.Range("intermediate_size", c.dense_inter, 1, k2p20));

  double scaling = r.Num("routed_scaling_factor", 1.0);
  WASTE_TRY(r.Finite("routed_scaling_factor", scaling));

  // Group-limited routing: n_group groups, the best topk_group
  // kept, top_k chosen among their experts; topk_method says how a group is
  // scored ("greedy" ignores the groups).
  int64_t groups = r.Int("n_group", 1);
  int64_t topk_groups = r.Int("topk_group", groups);
  std::optional<std::string> method = json::String(r.Get("topk_method"));
  RouteScope scope = RouteScope::kGlobal;
  GroupScore group_score = GroupScore::kTopTwoSum;
  if (e > 0) {
    WASTE_TRY(r.Range("n_group", groups, 1, e));
    WASTE_TRY(r.Range("topk_group", topk_groups, 1, groups));
    if (e % groups != 0) {
      return FormatError(fmt::format("{}: manifest config: num_experts {} is not a multiple of "
                                     "n_group {}",
                                     r.origin(), e, groups));
    }
    if (topk_groups < groups) WASTE_TRY(ReadGroupRouting(r, method, e, k, groups, topk_groups,
                                                        scope, group_score));
  } else {
    groups = topk_groups = 1;
  }
  std::optional<std::string> score = json::String(r.Get("moe_router_activation_func"));
  if (score && *score != "sigmoid" && *score != "softmax") {
    return FormatError(fmt::format("{}: config.moe_router_activation_func is \"{}\", expected "
                                   "sigmoid or softmax",
                                   r.origin(), *score));
  }

  m.n_experts = static_cast<int>(e);
  m.top_k = static_cast<int>(e > 0 ? k : 0);
  m.inter = static_cast<int>(im);
  m.n_shared = static_cast<int>(ns);
  m.first_dense = static_cast<int>(f);
  m.routed_scaling = static_cast<float>(scaling);
  m.input = lat > 0 ? ExpertInput::kLatent : ExpertInput::kHidden;
  m.latent_dim = static_cast<int>(lat);
  m.n_group = static_cast<int>(groups);
  m.topk_group = static_cast<int>(topk_groups);
  m.route_scope = scope;
  m.group_score = group_score;
  m.score = score && *score == "softmax" ? RouterScore::kSoftmax : RouterScore::kSigmoid;
  WASTE_ASSIGN_OR_RETURN(m.renormalize, r.Flag("moe_renormalize"));
  WASTE_ASSIGN_OR_RETURN(m.latent_norm, r.Flag("latent_moe_use_norm"));
  return Status::Ok();
}

// linear_attn_config: bounds always, sizes required when a layer is KDA.
Status ParseKda(const ConfigReader& r, ModelConfig& c) {
  const Json* lin = r.Get("linear_attn_config");
  int64_t hk = json::Integer(json::Member(lin, "num_heads")).value_or(0);
  int64_t dk = json::Integer(json::Member(lin, "head_dim")).value_or(0);
  int64_t kc = json::Integer(json::Member(lin, "short_conv_kernel_size"))
                   .value_or(r.family().defaults.short_conv_kernel);
  WASTE_TRY(r.Range("linear_attn_config.num_heads", hk, 0, k2p16));
  WASTE_TRY(r.Range("linear_attn_config.head_dim", dk, 0, k2p16));
  WASTE_TRY(r.Range("linear_attn_config.short_conv_kernel_size", kc, 0, 64));
  if (c.n_kda_layers() > 0) {
    WASTE_TRY(r.Range("linear_attn_config.num_heads", hk, 1, k2p16));
    WASTE_TRY(r.Range("linear_attn_config.head_dim", dk, 1, k2p16));
    WASTE_TRY(r.Range("linear_attn_config.short_conv_kernel_size", kc, 1, 64));
    WASTE_TRY(r.Range("linear_attn_config.num_heads * head_dim", hk * dk, 1, kI32Max));
  }
  double lower = json::Number(json::Member(lin, "gate_lower_bound")).value_or(0.0);
  WASTE_TRY(r.Finite("linear_attn_config.gate_lower_bound", lower));
  KdaConfig& k = c.kda;
  k.heads = static_cast<int>(hk);
  k.head_dim = static_cast<int>(dk);
  k.conv_k = static_cast<int>(kc);
  k.gate_lower_bound = static_cast<float>(lower);
  k.decay = k.gate_lower_bound < 0.0f ? KdaDecay::kBounded : KdaDecay::kSoftplus;
  if (k.decay == KdaDecay::kSoftplus) k.gate_lower_bound = 0.0f;
  WASTE_ASSIGN_OR_RETURN(bool full, r.Flag(json::Member(lin, "use_full_rank_gate"),
                                           "linear_attn_config.use_full_rank_gate"));
  k.gate_rank = full ? KdaGateRank::kFull : KdaGateRank::kLowRank;
  return Status::Ok();
}

// MLA shapes: bounds always, sizes required when a layer is MLA.
Status ParseMla(const ConfigReader& r, ModelConfig& c) {
  int64_t a = r.Int("num_attention_heads", 0);
  int64_t rkv = r.Int("kv_lora_rank", 0);
  int64_t rq = r.Int("q_lora_rank", 0);  // null reads as absent: plain q_proj
  int64_t dn = r.Int("qk_nope_head_dim", 0);
  int64_t dr = r.Int("qk_rope_head_dim", 0);
  int64_t dv = r.Int("v_head_dim", 0);
  WASTE_TRY(r.Range("num_attention_heads", a, 1, k2p16));
  WASTE_TRY(r.Range("kv_lora_rank", rkv, 0, k2p20));
  WASTE_TRY(r.Range("q_lora_rank", rq, 0, k2p20));
  WASTE_TRY(r.Range("qk_nope_head_dim", dn, 0, k2p20));
  WASTE_TRY(r.Range("qk_rope_head_dim", dr, 0, k2p20));
  WASTE_TRY(r.Range("v_head_dim", dv, 0, k2p20));
  if (c.n_mla_layers() > 0) {
    WASTE_TRY(r.Range("kv_lora_rank", rkv, 1, k2p20));
    WASTE_TRY(r.Range("qk_nope_head_dim + qk_rope_head_dim", dn + dr, 1, 2 * k2p20));
    WASTE_TRY(r.Range("v_head_dim", dv, 1, k2p20));
    WASTE_TRY(r.Range("num_attention_heads * (qk_nope + qk_rope)", a * (dn + dr), 1, kI32Max));
    WASTE_TRY(r.Range("num_attention_heads * v_head_dim", a * dv, 1, kI32Max));
    WASTE_TRY(r.Range("num_attention_heads * (qk_nope + v_head_dim)", a * (dn + dv), 1,
                      kI32Max));
  }
  MlaConfig& m = c.mla;
  m.n_heads = static_cast<int>(a);
  m.query = rq > 0 ? QueryProjection::kLowRank : QueryProjection::kFull;
  m.q_lora_rank = static_cast<int>(rq);
  m.kv_lora_rank = static_cast<int>(rkv);
  m.qk_nope = static_cast<int>(dn);
  m.qk_rope = static_cast<int>(dr);
  m.v_head = static_cast<int>(dv);
  WASTE_ASSIGN_OR_RETURN(m.output_gate, r.Flag("mla_use_output_gate"));
  WASTE_ASSIGN_OR_RETURN(m.nope, r.StrictFlag("mla_use_nope"));
  return Status::Ok();
}

Status ParseAttnRes(const ConfigReader& r, ModelConfig& c) {
  int64_t arb = r.Int("attn_res_block_size", 0);
  WASTE_TRY(r.Range("attn_res_block_size", arb, 0, c.n_layers));
  c.attn_res.block = static_cast<int>(arb);
  c.attn_res.kind = arb > 0 ? ResidualKind::kAttnRes : ResidualKind::kPlain;
  return Status::Ok();
}

Status ParseActivation(const ConfigReader& r, ModelConfig& c) {
  double beta = r.Num("activation_situ_beta", 1.0);
  double lin_beta = r.Num("activation_situ_linear_beta", 0.0);
  WASTE_TRY(r.Finite("activation_situ_beta", beta));
  WASTE_TRY(r.Finite("activation_situ_linear_beta", lin_beta));
  c.situ_beta = static_cast<float>(beta);
  c.situ_linear_beta = static_cast<float>(lin_beta);
  std::optional<std::string> act = json::String(r.Get("hidden_act"));
  c.act = act && *act == "situ" ? Activation::kSitu : Activation::kSilu;
  return Status::Ok();
}

}  // namespace

Status ParseModelConfig(const Json& root, std::string_view origin, ModelConfig& c) {
  const Json* config = json::Member(&root, "config");
  if (config == nullptr || !config->is_object()) {
    return FormatError(fmt::format("{}: \"config\" is {}, expected the model config object",
                                   origin, json::Brief(config)));
  }
  const Json* eff = config;
  const Json* text = json::Member(config, "text_config");
  if (text != nullptr && text->is_object()) {
    // Raw HF multimodal config: the text model's keys live one level down
    // and its tensors under "language_model.".
    eff = text;
    if (c.tensor_prefix.empty()) c.tensor_prefix = "language_model.";
  }
  c.architecture = ArchitectureName(config, eff);
  const Family& family = FamilyForArchitecture(c.architecture);
  c.arch = !family.key.empty()        ? std::string(family.key)
           : !c.architecture.empty() ? c.architecture
                                      : "unknown";

  ConfigReader r(eff, family, origin);
  WASTE_TRY(ParseTrunk(r, c));
  WASTE_TRY(ParseMoe(r, c));
  ParseLayerKinds(r, c);
  WASTE_TRY(ParseKda(r, c));
  WASTE_TRY(ParseMla(r, c));
  WASTE_TRY(ParseAttnRes(r, c));
  WASTE_TRY(ParseActivation(r, c));
  WASTE_TRY(ResolveRope(*eff, origin, c));
  return family.check_supported != nullptr ? family.check_supported(c, origin) : Status::Ok();
}

int ModelConfig::n_kda_layers() const {
  return static_cast<int>(std::count(attn_kind.begin(), attn_kind.end(), AttnKind::kKda));
}
int ModelConfig::n_mla_layers() const {
  return static_cast<int>(std::count(attn_kind.begin(), attn_kind.end(), AttnKind::kMla));
}
int ModelConfig::n_moe_layers() const {
  return static_cast<int>(std::count(ffn_kind.begin(), ffn_kind.end(), FfnKind::kMoe));
}

}  // namespace waste
