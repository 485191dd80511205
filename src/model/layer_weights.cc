#include "model/layer_weights.h"

#include <string>

#include <fmt/format.h>

namespace waste {
namespace {

// Looks tensors up and remembers the first one that is missing, so one
// error names it (the container already checked shapes; this is the
// engine's own guard against a reader/engine disagreement).
class Resolver {
 public:
  explicit Resolver(const Container& c) : c_(c) {}

  const TensorView* Matrix(int layer, const char* suffix) {
    const TensorView* t = layer < 0 ? c_.Find(suffix) : c_.FindLayer(layer, suffix);
    if (t == nullptr) Missing(layer, suffix);
    return t;
  }
  const TensorView* Optional(int layer, const char* suffix) {
    return layer < 0 ? c_.Find(suffix) : c_.FindLayer(layer, suffix);
  }
  const float* Vector(int layer, const char* suffix) {
    const TensorView* t = Matrix(layer, suffix);
    if (t == nullptr) return nullptr;
    if (t->fmt != TensorFmt::kF32) {
      if (status_.ok()) status_ = FormatError(fmt::format("{} must be F32", Name(layer, suffix)));
      return nullptr;
    }
    return t->f32();
  }
  const float* OptionalVector(int layer, const char* suffix) {
    const TensorView* t = Optional(layer, suffix);
    return (t != nullptr && t->fmt == TensorFmt::kF32) ? t->f32() : nullptr;
  }
  const Status& status() const { return status_; }

 private:
  static std::string Name(int layer, const char* suffix) {
    return layer < 0 ? std::string(suffix) : fmt::format("model.layers.{}.{}", layer, suffix);
  }
  void Missing(int layer, const char* suffix) {
    if (status_.ok()) {
      status_ = FormatError(
          fmt::format("required tensor is missing or has the wrong shape: {}", Name(layer, suffix)));
    }
  }
  const Container& c_;
  Status status_;
};

}  // namespace

Result<ModelWeights> ResolveWeights(const Container& container) {
  const ModelConfig& cfg = container.config();
  Resolver r(container);
  ModelWeights w;
  w.embed = r.Matrix(-1, "model.embed_tokens.weight");
  w.final_norm = r.Vector(-1, "model.norm.weight");
  w.lm_head = r.Matrix(-1, "lm_head.weight");
  if (cfg.attn_res.enabled()) {
    w.out_res_norm = r.Vector(-1, "model.output_attn_res_norm.weight");
    w.out_res_proj = r.Vector(-1, "model.output_attn_res_proj.weight");
  }
  w.layers.resize(static_cast<size_t>(cfg.n_layers));
  for (int l = 0; l < cfg.n_layers; ++l) {
    LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    lw.input_norm = r.Vector(l, "input_layernorm.weight");
    lw.post_attn_norm = r.Vector(l, "post_attention_layernorm.weight");
    if (cfg.attn_kind[static_cast<size_t>(l)] == AttnKind::kKda) {
      KdaWeights& k = lw.kda;
      k.q_proj = r.Matrix(l, "self_attn.q_proj.weight");
      k.k_proj = r.Matrix(l, "self_attn.k_proj.weight");
      k.v_proj = r.Matrix(l, "self_attn.v_proj.weight");
      k.q_conv = r.Vector(l, "self_attn.q_conv1d.weight");
      k.k_conv = r.Vector(l, "self_attn.k_conv1d.weight");
      k.v_conv = r.Vector(l, "self_attn.v_conv1d.weight");
      k.f_a = r.Matrix(l, "self_attn.f_a_proj.weight");
      k.f_b = r.Matrix(l, "self_attn.f_b_proj.weight");
      k.b_proj = r.Matrix(l, "self_attn.b_proj.weight");
      k.a_log = r.Vector(l, "self_attn.A_log");
      k.dt_bias = r.Vector(l, "self_attn.dt_bias");
      if (cfg.kda.gate_rank == KdaGateRank::kFull) {
        k.g_proj = r.Matrix(l, "self_attn.g_proj.weight");
      } else {
        k.g_a = r.Matrix(l, "self_attn.g_a_proj.weight");
        k.g_b = r.Matrix(l, "self_attn.g_b_proj.weight");
      }
      k.o_norm = r.Vector(l, "self_attn.o_norm.weight");
      k.o_proj = r.Matrix(l, "self_attn.o_proj.weight");
    } else {
      MlaWeights& m = lw.mla;
      if (cfg.mla.query == QueryProjection::kLowRank) {
        m.q_a = r.Matrix(l, "self_attn.q_a_proj.weight");
        m.q_a_norm = r.Vector(l, "self_attn.q_a_layernorm.weight");
        m.q_b = r.Matrix(l, "self_attn.q_b_proj.weight");
      } else {
        m.q_proj = r.Matrix(l, "self_attn.q_proj.weight");
      }
      m.kv_a = r.Matrix(l, "self_attn.kv_a_proj_with_mqa.weight");
      m.kv_a_norm = r.Vector(l, "self_attn.kv_a_layernorm.weight");
      m.kv_b = r.Matrix(l, "self_attn.kv_b_proj.weight");
      if (cfg.mla.output_gate) m.g_proj = r.Matrix(l, "self_attn.g_proj.weight");
      m.o_proj = r.Matrix(l, "self_attn.o_proj.weight");
    }
    if (cfg.ffn_kind[static_cast<size_t>(l)] == FfnKind::kMoe) {
      MoeWeights& m = lw.moe;
      m.router = r.Matrix(l, "block_sparse_moe.gate.weight");
      m.router_bias = r.OptionalVector(l, "block_sparse_moe.gate.e_score_correction_bias");
      m.shared.gate = r.Matrix(l, "block_sparse_moe.shared_experts.gate_proj.weight");
      m.shared.up = r.Matrix(l, "block_sparse_moe.shared_experts.up_proj.weight");
      m.shared.down = r.Matrix(l, "block_sparse_moe.shared_experts.down_proj.weight");
      if (cfg.moe.input == ExpertInput::kLatent) {
        m.latent_down = r.Matrix(l, "block_sparse_moe.routed_expert_down_proj.weight");
        m.latent_up = r.Matrix(l, "block_sparse_moe.routed_expert_up_proj.weight");
        if (cfg.moe.latent_norm) m.latent_norm = r.Vector(l, "block_sparse_moe.routed_expert_norm.weight");
      }
    } else {
      lw.dense.gate = r.Matrix(l, "mlp.gate_proj.weight");
      lw.dense.up = r.Matrix(l, "mlp.up_proj.weight");
      lw.dense.down = r.Matrix(l, "mlp.down_proj.weight");
    }
    if (cfg.attn_res.enabled()) {
      lw.attn_res.attn_norm = r.Vector(l, "self_attention_res_norm.weight");
      lw.attn_res.attn_proj = r.Vector(l, "self_attention_res_proj.weight");
      lw.attn_res.mlp_norm = r.Vector(l, "mlp_res_norm.weight");
      lw.attn_res.mlp_proj = r.Vector(l, "mlp_res_proj.weight");
    }
  }
  if (!r.status().ok()) return r.status();
  return w;
}

}  // namespace waste
