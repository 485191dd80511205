// ModelConfig: everything the engine takes from manifest.json, already
// validated (model/config_parse.cc checks every bound before one of these
// exists). Plain data grouped by the part of the model it describes; each
// optional feature is an enum knob, never a special value of a number. The
// forward pass switches on per-layer kinds and these knobs, never on a
// family name (families live in model/families.cc only).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace waste {

enum class AttnKind : uint8_t { kKda, kMla };
enum class FfnKind : uint8_t { kDense, kMoe };
enum class Activation : uint8_t { kSilu, kSitu };

// Rotary embedding for MLA. Disabled for NoPE models.
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

  bool operator==(const RopeConfig&) const = default;
};

// Geometry of the VQ experts (manifest "expert_quant").
struct ExpertQuant {
  int stages = 3;
  int vec_dim = 8;
  int entries = 256;
  int index_bits = 8;                // 8, or 6 (VQ4P: 4 stages x 64 entries)
  std::string fmt_name;              // "VQ3R", "VQ2R", "VQ4P" (derived, for info)

  bool operator==(const ExpertQuant&) const = default;
};

// How MLA builds its query: one q_proj, or the low-rank q_a -> norm -> q_b.
enum class QueryProjection : uint8_t { kFull, kLowRank };

// Multi-head latent attention (every layer whose AttnKind is kMla).
struct MlaConfig {
  int n_heads = 0;
  QueryProjection query = QueryProjection::kFull;
  int q_lora_rank = 0;               // > 0 exactly when query == kLowRank
  int kv_lora_rank = 0;
  int qk_nope = 0, qk_rope = 0, v_head = 0;
  bool output_gate = false;          // sigmoid(g_proj x) gates the heads' output
  bool nope = false;                 // mla_use_nope: no rotation at all

  int qk_head_dim() const { return qk_nope + qk_rope; }

  bool operator==(const MlaConfig&) const = default;
};

// Decay gate of KDA: -exp(A) * softplus(z) (kSoftplus), or the bounded
// lower_bound * sigmoid(exp(A) * z) (kBounded, lower_bound < 0).
enum class KdaDecay : uint8_t { kSoftplus, kBounded };
// The gate's projection: low-rank f_a -> f_b, or one full-rank f_proj.
enum class KdaGateRank : uint8_t { kLowRank, kFull };

// Delta attention with a per-channel decay gate (every layer whose AttnKind
// is kKda).
struct KdaConfig {
  int heads = 0, head_dim = 0, conv_k = 4;
  KdaDecay decay = KdaDecay::kSoftplus;
  float gate_lower_bound = 0.0f;     // < 0 exactly when decay == kBounded
  KdaGateRank gate_rank = KdaGateRank::kLowRank;

  int channels() const { return heads * head_dim; }

  bool operator==(const KdaConfig&) const = default;
};

// What the routed experts read: the hidden state, or a latent projection of
// it (routed_expert_hidden_size) with an optional norm before the way up.
enum class ExpertInput : uint8_t { kHidden, kLatent };
// How the router picks top_k experts from the biased scores: globally, or
// a group-limited choice (n_group groups of consecutive ids, the best
// topk_group of them kept, then top_k among their experts), as the
// topk_method of the config says (model/moe_router.h).
enum class RouteScope : uint8_t { kGlobal, kGroupLimited };
// A group's score in a group-limited choice: the sum of its two best biased
// scores (topk_method noaux_tc) or its best one (group_limited_greedy).
enum class GroupScore : uint8_t { kTopTwoSum, kMax };
// The router's score function (moe_router_activation_func / scoring_func):
// a sigmoid per expert, or a softmax over all experts.
enum class RouterScore : uint8_t { kSigmoid, kSoftmax };

// Mixture of experts (every layer whose FfnKind is kMoe).
struct MoeConfig {
  int n_experts = 0;                 // 0 = dense model
  int top_k = 0;
  int inter = 0;                     // routed expert width (and shared unit)
  int n_shared = 0;                  // shared width = inter * max(n_shared, 1)
  int first_dense = 0;               // layers < first_dense are dense
  float routed_scaling = 1.0f;
  bool renormalize = false;
  ExpertInput input = ExpertInput::kHidden;
  int latent_dim = 0;                // > 0 exactly when input == kLatent
  bool latent_norm = false;
  RouterScore score = RouterScore::kSigmoid;
  RouteScope route_scope = RouteScope::kGlobal;
  GroupScore group_score = GroupScore::kTopTwoSum;  // used when kGroupLimited
  int n_group = 1;                   // as written; 1 when absent
  int topk_group = 1;

  int shared_inter() const { return inter * (n_shared > 1 ? n_shared : 1); }

  bool operator==(const MoeConfig&) const = default;
};

// The residual stream between layers: a plain running sum, or Attention
// Residuals (blocks of `block` layers mixed by learned projections).
enum class ResidualKind : uint8_t { kPlain, kAttnRes };
struct AttnResConfig {
  ResidualKind kind = ResidualKind::kPlain;
  int block = 0;                     // > 0 exactly when kind == kAttnRes
  bool enabled() const { return kind == ResidualKind::kAttnRes; }

  bool operator==(const AttnResConfig&) const = default;
};

struct ModelConfig {
  // Identity (descriptive).
  std::string arch;                  // family key (model/families.cc), else the HF name, else "unknown"
  std::string architecture;          // raw architectures[0] (or _outer's)
  std::string tensor_prefix;         // "" or "language_model."

  // Shapes shared by every layer.
  int n_layers = 0;
  int hidden = 0;
  int vocab = 0;
  int dense_inter = 0;               // dense FFN width

  // Numerics and switches of the trunk.
  float rms_eps = 1e-5f;
  int eos_token_id = 0;              // > 0 overrides the tokenizer's default
  Activation act = Activation::kSilu;
  float situ_beta = 1.0f;
  float situ_linear_beta = 0.0f;

  MlaConfig mla;
  KdaConfig kda;
  MoeConfig moe;
  AttnResConfig attn_res;
  RopeConfig rope;
  ExpertQuant quant;

  // Per layer.
  std::vector<AttnKind> attn_kind;   // [n_layers]
  std::vector<FfnKind> ffn_kind;     // [n_layers]

  int expert_in() const { return moe.input == ExpertInput::kLatent ? moe.latent_dim : hidden; }
  int shared_inter() const { return moe.shared_inter(); }
  int kda_channels() const { return kda.channels(); }
  int qk_head_dim() const { return mla.qk_head_dim(); }
  int n_kda_layers() const;
  int n_mla_layers() const;
  int n_moe_layers() const;

  bool operator==(const ModelConfig&) const = default;
};

}  // namespace waste
