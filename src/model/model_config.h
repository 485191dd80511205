// ModelConfig: everything the engine takes from manifest.json, already
// validated (manifest.cc checks every bound of FORMAT.md §3.7 before one of
// these exists). Plain data; the forward pass switches on per-layer kinds,
// never on a family name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace waste {

enum class AttnKind : uint8_t { kKda, kMla };
enum class FfnKind : uint8_t { kDense, kMoe };
enum class Activation : uint8_t { kSilu, kSitu };

// Rotary embedding for MLA (MODEL.md §4.3). Disabled for NoPE models.
struct RopeConfig {
  bool enabled = false;
  double theta = 10000.0;
  bool yarn = false;                 // rope_scaling type yarn with factor > 1
  double factor = 1.0;
  double mscale = 1.0;
  double mscale_all_dim = 0.0;
  int original_max_position = 4096;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  float att_mul = 1.0f;              // multiplies the softmax scale (already squared)
  std::vector<float> omega;          // [qk_rope/2] f32 frequencies
};

// Geometry of the VQ experts (manifest "expert_quant").
struct ExpertQuant {
  int stages = 3;
  int vec_dim = 8;
  int entries = 256;
  int index_bits = 8;                // 8, or 6 (VQ4P: 4 stages x 64 entries)
  std::string fmt_name;              // "VQ3R", "VQ2R", "VQ4P" (derived, for info)
};

struct ModelConfig {
  // Identity (descriptive).
  std::string arch;                  // "kimi-linear", "kimi-k3", else HF name, else "unknown"
  std::string architecture;          // raw architectures[0] (or _outer's)
  std::string tensor_prefix;         // "" or "language_model."

  // Shapes.
  int n_layers = 0;
  int hidden = 0;
  int vocab = 0;
  int n_heads = 0;                   // MLA heads
  int n_experts = 0;                 // 0 = dense model
  int top_k = 0;
  int moe_inter = 0;                 // routed expert width (and shared unit)
  int dense_inter = 0;
  int n_shared = 0;                  // shared width = moe_inter * max(n_shared, 1)
  int first_dense = 0;               // layers < first_dense are dense
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope = 0, qk_rope = 0, v_head = 0;
  int kda_heads = 0, kda_dim = 0, conv_k = 4;
  int latent_dim = 0;                // routed_expert_hidden_size (K3), 0 = none

  // Numerics and switches.
  float rms_eps = 1e-5f;
  float routed_scaling = 1.0f;
  bool moe_renormalize = false;
  int eos_token_id = 0;              // > 0 overrides the tokenizer's default
  Activation act = Activation::kSilu;
  float situ_beta = 1.0f;
  float situ_linear_beta = 0.0f;
  bool latent_norm = false;
  int attn_res_block = 0;            // AttnRes block size, 0 = off
  bool mla_output_gate = false;
  bool mla_nope = false;
  bool kda_full_rank_gate = false;
  float gate_lower_bound = 0.0f;     // < 0 selects the bounded decay gate
  RopeConfig rope;
  ExpertQuant quant;

  // Per layer.
  std::vector<AttnKind> attn_kind;   // [n_layers]
  std::vector<FfnKind> ffn_kind;     // [n_layers]

  int expert_in() const { return latent_dim > 0 ? latent_dim : hidden; }
  int shared_inter() const { return moe_inter * (n_shared > 1 ? n_shared : 1); }
  int kda_channels() const { return kda_heads * kda_dim; }
  int qk_head_dim() const { return qk_nope + qk_rope; }
  int n_kda_layers() const;
  int n_mla_layers() const;
  int n_moe_layers() const;
};

}  // namespace waste
