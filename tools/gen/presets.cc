#include "presets.h"

#include <fmt/format.h>

namespace waste::gen {
namespace {

using OJson = nlohmann::ordered_json;

// 1-based KDA / full-attention layer lists with every `period`-th layer MLA
// and the last layer MLA (the Kimi-Linear pattern: 3 KDA, 1 MLA).
void KdaPattern(int layers, int period, OJson& kda, OJson& full) {
  kda = OJson::array();
  full = OJson::array();
  for (int l = 1; l <= layers; ++l) {
    if (l % period == 0 || l == layers) {
      full.push_back(l);
    } else {
      kda.push_back(l);
    }
  }
}

// Kimi-Linear-shaped config, key order as the reference generator writes it.
OJson KimiLinearConfig(int hidden, int layers, int inter, int moe_inter, int experts, int top_k,
                       double scaling, int heads, int kv_lora, int vocab, int bos, int eos,
                       int kda_heads, int kda_dim, const OJson& kda, const OJson& full) {
  return OJson{{"model_type", "kimi_linear"},
               {"architectures", OJson::array({"KimiLinearForCausalLM"})},
               {"hidden_size", hidden},
               {"num_hidden_layers", layers},
               {"first_k_dense_replace", 1},
               {"intermediate_size", inter},
               {"moe_intermediate_size", moe_inter},
               {"num_experts", experts},
               {"num_experts_per_token", top_k},
               {"num_shared_experts", 1},
               {"moe_renormalize", true},
               {"moe_router_activation_func", "sigmoid"},
               {"routed_scaling_factor", scaling},
               {"num_attention_heads", heads},
               {"qk_nope_head_dim", hidden >= 1024 ? 128 : 16},
               {"qk_rope_head_dim", hidden >= 1024 ? 64 : 8},
               {"v_head_dim", hidden >= 1024 ? 128 : 16},
               {"kv_lora_rank", kv_lora},
               {"q_lora_rank", nullptr},
               {"mla_use_nope", true},
               {"rms_norm_eps", 1e-05},
               {"vocab_size", vocab},
               {"tie_word_embeddings", false},
               {"bos_token_id", bos},
               {"eos_token_id", eos},
               {"linear_attn_config",
                {{"head_dim", kda_dim},
                 {"num_heads", kda_heads},
                 {"short_conv_kernel_size", 4},
                 {"kda_layers", kda},
                 {"full_attn_layers", full}}}};
}

Preset Tiny() {
  // FORMAT.md §12: the reference's default synthetic container.
  Preset p;
  p.name = "tiny";
  p.arch = "kimi_linear";
  OJson kda = OJson::array({1, 2, 4}), full = OJson::array({3});
  p.config = KimiLinearConfig(128, 4, 256, 64, 8, 2, 2.0, 4, 32, 256, 1, 2, 4, 32, kda, full);
  return p;
}

Preset KimiLinear() {
  // Kimi-Linear-48B-A3B (MODEL.md §1.3): 27 layers, KDA 3:1 with MLA at
  // 4, 8, ..., 24 and 27.
  Preset p;
  p.name = "kimi-linear";
  p.arch = "kimi_linear";
  OJson kda, full;
  KdaPattern(27, 4, kda, full);
  p.config = KimiLinearConfig(2304, 27, 9216, 1024, 256, 8, 2.446, 32, 512, 163840, 163584,
                              163586, 32, 128, kda, full);
  p.skewed_routing = true;
  return p;
}

Preset KimiLinearSmall() {
  // Same family and head shapes at ~1/4 width and 8 layers (~0.5 GB):
  // fast to generate, big enough for cache and streaming benchmarks.
  Preset p;
  p.name = "kimi-linear-small";
  p.arch = "kimi_linear";
  OJson kda, full;
  KdaPattern(8, 4, kda, full);
  p.config = KimiLinearConfig(1024, 8, 4096, 512, 64, 8, 2.446, 8, 256, 32768, 1, 2, 8, 128, kda,
                              full);
  p.skewed_routing = true;
  return p;
}

Preset DeepSeekV3Tiny() {
  // DeepSeek-V3 shape at toy scale: every layer MLA with q LoRA and YaRN
  // rotary; HF key spellings plus the engine's (as the converter writes).
  Preset p;
  p.name = "deepseek-v3-tiny";
  p.arch = "deepseek_v3";
  p.config = OJson{{"model_type", "deepseek_v3"},
                   {"architectures", OJson::array({"DeepseekV3ForCausalLM"})},
                   {"hidden_size", 128},
                   {"num_hidden_layers", 4},
                   {"first_k_dense_replace", 1},
                   {"intermediate_size", 256},
                   {"moe_intermediate_size", 64},
                   {"n_routed_experts", 8},
                   {"num_experts_per_tok", 2},
                   {"n_shared_experts", 1},
                   {"norm_topk_prob", true},
                   // Two groups, both kept: the group-limited choice is then the
                   // global top-k, which is all the engine routes by today
                   // (topk_group < n_group is refused at open).
                   {"n_group", 2},
                   {"topk_group", 2},
                   {"topk_method", "noaux_tc"},
                   {"scoring_func", "sigmoid"},
                   {"routed_scaling_factor", 2.5},
                   {"num_attention_heads", 4},
                   {"qk_nope_head_dim", 16},
                   {"qk_rope_head_dim", 8},
                   {"v_head_dim", 16},
                   {"kv_lora_rank", 32},
                   {"q_lora_rank", 48},
                   {"rope_theta", 10000.0},
                   {"rope_scaling",
                    {{"type", "yarn"},
                     {"factor", 40.0},
                     {"mscale", 1.0},
                     {"mscale_all_dim", 1.0},
                     {"beta_fast", 32},
                     {"beta_slow", 1},
                     {"original_max_position_embeddings", 4096}}},
                   {"rms_norm_eps", 1e-06},
                   {"vocab_size", 256},
                   {"tie_word_embeddings", false},
                   {"bos_token_id", 0},
                   {"eos_token_id", 1},
                   {"num_experts", 8},
                   {"num_experts_per_token", 2},
                   {"num_shared_experts", 1},
                   {"moe_renormalize", true}};
  return p;
}

Preset DeepSeekV2Tiny() {
  // DeepSeek-V2's routing on the DeepSeek-V3 toy shape: softmax scores,
  // group_limited_greedy (a group scored by its best expert, one of the two
  // groups kept), weights scaled but not renormalised, no router bias;
  // YaRN with V2's mscale 0.707.
  Preset p = DeepSeekV3Tiny();
  p.name = "deepseek-v2-tiny";
  p.arch = "deepseek_v2";
  p.router_bias = false;
  OJson& c = p.config;
  c["model_type"] = "deepseek_v2";
  c["architectures"] = OJson::array({"DeepseekV2ForCausalLM"});
  c["norm_topk_prob"] = false;
  c["moe_renormalize"] = false;
  c["n_group"] = 2;
  c["topk_group"] = 1;
  c["topk_method"] = "group_limited_greedy";
  c["scoring_func"] = "softmax";
  c["rope_scaling"]["mscale"] = 0.707;
  c["rope_scaling"]["mscale_all_dim"] = 0.707;
  return p;
}

Preset K3Tiny() {
  // Kimi K3 shape at toy scale: "language_model." prefix with the release's
  // other keys under config._outer, latent MoE with norm, AttnRes, SiTU,
  // q LoRA, MLA output gate, full-rank bounded KDA gate, padded A_log, and
  // one tensor outside the prefix.
  Preset p;
  p.name = "k3-tiny";
  p.arch = "kimi_k3";
  p.tensor_prefix = "language_model.";
  p.pad_a_log = true;
  p.extra_outside_prefix = {"vision_tower.encoder.layers.0.fc0.weight"};
  p.config = OJson{{"model_type", "kimi_k3_text"},
                   {"hidden_size", 128},
                   {"num_hidden_layers", 4},
                   {"first_k_dense_replace", 1},
                   {"intermediate_size", 256},
                   {"moe_intermediate_size", 64},
                   {"num_experts", 16},
                   {"num_experts_per_token", 4},
                   {"num_shared_experts", 2},
                   {"moe_renormalize", true},
                   {"routed_scaling_factor", 1.0},
                   {"routed_expert_hidden_size", 96},
                   {"latent_moe_use_norm", true},
                   {"attn_res_block_size", 2},
                   {"hidden_act", "situ"},
                   {"activation_situ_beta", 4.0},
                   {"activation_situ_linear_beta", 25.0},
                   {"num_attention_heads", 4},
                   {"qk_nope_head_dim", 16},
                   {"qk_rope_head_dim", 8},
                   {"v_head_dim", 16},
                   {"kv_lora_rank", 32},
                   {"q_lora_rank", 48},
                   {"mla_use_nope", true},
                   {"mla_use_output_gate", true},
                   {"rms_norm_eps", 1e-05},
                   {"vocab_size", 256},
                   {"bos_token_id", 1},
                   {"eos_token_id", 2},
                   {"linear_attn_config",
                    {{"head_dim", 32},
                     {"num_heads", 4},
                     {"short_conv_kernel_size", 4},
                     {"kda_layers", OJson::array({1, 2, 4})},
                     {"full_attn_layers", OJson::array({3})},
                     {"use_full_rank_gate", true},
                     {"gate_lower_bound", -5.0}}},
                   {"_outer",
                    {{"architectures", OJson::array({"KimiK3ForConditionalGeneration"})},
                     {"model_type", "kimi_k3"},
                     {"tie_word_embeddings", false}}}};
  return p;
}

}  // namespace

const std::vector<std::string>& PresetNames() {
  static const std::vector<std::string> names = {"tiny", "kimi-linear", "kimi-linear-small",
                                                 "deepseek-v3-tiny", "deepseek-v2-tiny", "k3-tiny"};
  return names;
}

Result<Preset> MakePreset(std::string_view name) {
  if (name == "tiny") return Tiny();
  if (name == "kimi-linear") return KimiLinear();
  if (name == "kimi-linear-small") return KimiLinearSmall();
  if (name == "deepseek-v3-tiny") return DeepSeekV3Tiny();
  if (name == "deepseek-v2-tiny") return DeepSeekV2Tiny();
  if (name == "k3-tiny") return K3Tiny();
  return ArgError(fmt::format("unknown preset \"{}\" (tiny, kimi-linear, kimi-linear-small, "
                              "deepseek-v3-tiny, deepseek-v2-tiny, k3-tiny)",
                              name));
}

}  // namespace waste::gen
