// ModelConfig -> manifest "config" in the engine's own spellings: the
// inverse of ParseModelConfig, so config -> manifest -> config is the
// identity (tests/unit/family_test.cc walks every family through it).
#include <string>

#include "model/config_parse.h"

namespace waste {
namespace {

using OJson = nlohmann::ordered_json;

void WriteMoe(const MoeConfig& m, OJson& j) {
  j["num_experts"] = m.n_experts;
  j["num_experts_per_token"] = m.top_k;
  j["moe_intermediate_size"] = m.inter;
  j["num_shared_experts"] = m.n_shared;
  j["first_k_dense_replace"] = m.first_dense;
  j["routed_scaling_factor"] = static_cast<double>(m.routed_scaling);
  j["moe_renormalize"] = m.renormalize;
  if (m.input == ExpertInput::kLatent) j["routed_expert_hidden_size"] = m.latent_dim;
  j["latent_moe_use_norm"] = m.latent_norm;
  j["n_group"] = m.n_group;
  j["topk_group"] = m.topk_group;
  // "greedy" is how fewer kept groups than groups routes globally.
  j["topk_method"] = m.route_scope == RouteScope::kGlobal && m.topk_group < m.n_group ? "greedy"
                     : m.group_score == GroupScore::kMax ? "group_limited_greedy"
                                                          : "noaux_tc";
  j["moe_router_activation_func"] = m.score == RouterScore::kSoftmax ? "softmax" : "sigmoid";
}

void WriteMla(const MlaConfig& m, OJson& j) {
  j["num_attention_heads"] = m.n_heads;
  if (m.query == QueryProjection::kLowRank) {
    j["q_lora_rank"] = m.q_lora_rank;
  } else {
    j["q_lora_rank"] = nullptr;
  }
  j["kv_lora_rank"] = m.kv_lora_rank;
  j["qk_nope_head_dim"] = m.qk_nope;
  j["qk_rope_head_dim"] = m.qk_rope;
  j["v_head_dim"] = m.v_head;
  j["mla_use_output_gate"] = m.output_gate;
  j["mla_use_nope"] = m.nope;
}

void WriteKda(const ModelConfig& c, OJson& j) {
  const KdaConfig& k = c.kda;
  OJson layers = OJson::array();
  for (int l = 0; l < c.n_layers; ++l) {
    if (c.attn_kind[l] == AttnKind::kKda) layers.push_back(l + 1);
  }
  OJson lin = {{"num_heads", k.heads},
               {"head_dim", k.head_dim},
               {"short_conv_kernel_size", k.conv_k},
               {"kda_layers", layers},
               {"use_full_rank_gate", k.gate_rank == KdaGateRank::kFull}};
  if (k.decay == KdaDecay::kBounded) lin["gate_lower_bound"] = static_cast<double>(k.gate_lower_bound);
  j["linear_attn_config"] = std::move(lin);
}

void WriteRope(const RopeConfig& r, OJson& j) {
  if (!r.enabled) return;
  j["rope_theta"] = r.theta;
  if (!r.yarn) {
    // A factor <= 1 is kept as written though it scales nothing.
    if (r.factor != 1.0) j["rope_scaling"] = {{"type", "yarn"}, {"factor", r.factor}};
    return;
  }
  j["rope_scaling"] = {{"type", "yarn"},
                       {"factor", r.factor},
                       {"mscale", r.mscale},
                       {"mscale_all_dim", r.mscale_all_dim},
                       {"beta_fast", r.beta_fast},
                       {"beta_slow", r.beta_slow},
                       {"original_max_position_embeddings", r.original_max_position}};
}

}  // namespace

nlohmann::ordered_json ModelConfigToJson(const ModelConfig& c) {
  OJson j = OJson::object();
  if (!c.architecture.empty()) j["architectures"] = OJson::array({c.architecture});
  j["num_hidden_layers"] = c.n_layers;
  j["hidden_size"] = c.hidden;
  j["vocab_size"] = c.vocab;
  j["intermediate_size"] = c.dense_inter;
  j["rms_norm_eps"] = static_cast<double>(c.rms_eps);
  if (c.eos_token_id > 0) j["eos_token_id"] = c.eos_token_id;
  j["hidden_act"] = c.act == Activation::kSitu ? "situ" : "silu";
  j["activation_situ_beta"] = static_cast<double>(c.situ_beta);
  j["activation_situ_linear_beta"] = static_cast<double>(c.situ_linear_beta);
  j["attn_res_block_size"] = c.attn_res.enabled() ? c.attn_res.block : 0;
  WriteMoe(c.moe, j);
  WriteMla(c.mla, j);
  WriteKda(c, j);
  WriteRope(c.rope, j);
  return j;
}

}  // namespace waste
