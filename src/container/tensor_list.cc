#include "container/tensor_list.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unordered_map>

#include "format/format.h"

namespace waste {

int64_t TensorSpec::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

void Add(std::vector<TensorSpec>& out, std::string name, TensorKind kind,
         std::vector<int64_t> shape) {
  out.push_back(TensorSpec{std::move(name), kind, std::move(shape)});
}

void AddKda(const ModelConfig& c, const std::string& p, std::vector<TensorSpec>& out) {
  const int64_t h = c.hidden, ck = c.kda_channels(), dk = c.kda.head_dim, hk = c.kda.heads;
  using K = TensorKind;
  Add(out, p + "self_attn.q_proj.weight", K::kMatrix, {ck, h});
  Add(out, p + "self_attn.k_proj.weight", K::kMatrix, {ck, h});
  Add(out, p + "self_attn.v_proj.weight", K::kMatrix, {ck, h});
  Add(out, p + "self_attn.b_proj.weight", K::kMatrix, {hk, h});
  Add(out, p + "self_attn.f_a_proj.weight", K::kMatrix, {dk, h});
  Add(out, p + "self_attn.f_b_proj.weight", K::kMatrix, {ck, dk});
  if (c.kda.gate_rank == KdaGateRank::kFull) {
    Add(out, p + "self_attn.g_proj.weight", K::kMatrix, {ck, h});
  } else {
    Add(out, p + "self_attn.g_a_proj.weight", K::kMatrix, {dk, h});
    Add(out, p + "self_attn.g_b_proj.weight", K::kMatrix, {ck, dk});
  }
  Add(out, p + "self_attn.o_proj.weight", K::kMatrix, {h, ck});
  Add(out, p + "self_attn.q_conv1d.weight", K::kData, {ck, 1, c.kda.conv_k});
  Add(out, p + "self_attn.k_conv1d.weight", K::kData, {ck, 1, c.kda.conv_k});
  Add(out, p + "self_attn.v_conv1d.weight", K::kData, {ck, 1, c.kda.conv_k});
  Add(out, p + "self_attn.A_log", K::kData, {1, 1, hk, 1});
  Add(out, p + "self_attn.dt_bias", K::kData, {ck});
  Add(out, p + "self_attn.o_norm.weight", K::kVector, {dk});
}

void AddMla(const ModelConfig& c, const std::string& p, std::vector<TensorSpec>& out) {
  const int64_t h = c.hidden, a = c.mla.n_heads, dq = c.qk_head_dim();
  using K = TensorKind;
  if (c.mla.query == QueryProjection::kFull) {
    Add(out, p + "self_attn.q_proj.weight", K::kMatrix, {a * dq, h});
  } else {
    Add(out, p + "self_attn.q_a_proj.weight", K::kMatrix, {c.mla.q_lora_rank, h});
    Add(out, p + "self_attn.q_a_layernorm.weight", K::kVector, {c.mla.q_lora_rank});
    Add(out, p + "self_attn.q_b_proj.weight", K::kMatrix, {a * dq, c.mla.q_lora_rank});
  }
  Add(out, p + "self_attn.kv_a_proj_with_mqa.weight", K::kMatrix,
      {c.mla.kv_lora_rank + c.mla.qk_rope, h});
  Add(out, p + "self_attn.kv_a_layernorm.weight", K::kVector, {c.mla.kv_lora_rank});
  Add(out, p + "self_attn.kv_b_proj.weight", K::kMatrix,
      {a * (c.mla.qk_nope + c.mla.v_head), c.mla.kv_lora_rank});
  if (c.mla.output_gate) {
    Add(out, p + "self_attn.g_proj.weight", K::kMatrix, {a * c.mla.v_head, h});
  }
  Add(out, p + "self_attn.o_proj.weight", K::kMatrix, {h, a * c.mla.v_head});
}

void AddFfn(const ModelConfig& c, int layer, const std::string& p, std::vector<TensorSpec>& out) {
  const int64_t h = c.hidden;
  using K = TensorKind;
  if (c.ffn_kind[layer] == FfnKind::kDense) {
    Add(out, p + "mlp.gate_proj.weight", K::kMatrix, {c.dense_inter, h});
    Add(out, p + "mlp.up_proj.weight", K::kMatrix, {c.dense_inter, h});
    Add(out, p + "mlp.down_proj.weight", K::kMatrix, {h, c.dense_inter});
    return;
  }
  const int64_t ssh = c.shared_inter();
  Add(out, p + "block_sparse_moe.gate.weight", K::kMatrix, {c.moe.n_experts, h});
  Add(out, p + "block_sparse_moe.gate.e_score_correction_bias", K::kOptionalData, {c.moe.n_experts});
  Add(out, p + "block_sparse_moe.shared_experts.gate_proj.weight", K::kMatrix, {ssh, h});
  Add(out, p + "block_sparse_moe.shared_experts.up_proj.weight", K::kMatrix, {ssh, h});
  Add(out, p + "block_sparse_moe.shared_experts.down_proj.weight", K::kMatrix, {h, ssh});
  if (c.moe.input == ExpertInput::kLatent) {
    Add(out, p + "block_sparse_moe.routed_expert_down_proj.weight", K::kMatrix,
        {c.moe.latent_dim, h});
    Add(out, p + "block_sparse_moe.routed_expert_up_proj.weight", K::kMatrix, {h, c.moe.latent_dim});
    if (c.moe.latent_norm) {
      Add(out, p + "block_sparse_moe.routed_expert_norm.weight", K::kVector, {c.moe.latent_dim});
    }
  }
}

const char* KindText(TensorKind k) {
  switch (k) {
    case TensorKind::kMatrix: return "matrix";
    case TensorKind::kVector: return "F32 vector of exactly";
    case TensorKind::kData: return "F32 data of at least";
    case TensorKind::kOptionalData: return "optional F32 data of at least";
  }
  return "?";
}

std::string Describe(const TensorInfo& t) {
  return fmt::format("{} {}", TensorFmtName(t.fmt), fmt::join(t.shape, "x"));
}

}  // namespace

std::vector<TensorSpec> ModelTensors(const ModelConfig& c) {
  std::vector<TensorSpec> out;
  const int64_t h = c.hidden;
  using K = TensorKind;
  Add(out, "model.embed_tokens.weight", K::kMatrix, {c.vocab, h});
  for (int l = 0; l < c.n_layers; ++l) {
    std::string p = fmt::format("model.layers.{}.", l);
    Add(out, p + "input_layernorm.weight", K::kVector, {h});
    Add(out, p + "post_attention_layernorm.weight", K::kVector, {h});
    if (c.attn_res.enabled()) {
      Add(out, p + "self_attention_res_norm.weight", K::kVector, {h});
      Add(out, p + "self_attention_res_proj.weight", K::kVector, {h});
      Add(out, p + "mlp_res_norm.weight", K::kVector, {h});
      Add(out, p + "mlp_res_proj.weight", K::kVector, {h});
    }
    if (c.attn_kind[l] == AttnKind::kKda) {
      AddKda(c, p, out);
    } else {
      AddMla(c, p, out);
    }
    AddFfn(c, l, p, out);
  }
  Add(out, "model.norm.weight", K::kVector, {h});
  if (c.attn_res.enabled()) {
    Add(out, "model.output_attn_res_norm.weight", K::kVector, {h});
    Add(out, "model.output_attn_res_proj.weight", K::kVector, {h});
  }
  Add(out, "lm_head.weight", K::kMatrix, {c.vocab, h});
  return out;
}

Status ValidateTrunkIndex(const Manifest& m, uint64_t trunk_file_size) {
  for (size_t i = 0; i < m.trunk.size(); ++i) {
    const TensorInfo& t = m.trunk[i];
    format::TrunkGeometry g =
        format::ComputeTrunkGeometry(static_cast<uint8_t>(t.fmt), t.shape, t.group);
    // Sizes are < 2^52 (elements <= 2^40), offsets are checked first, so
    // none of these sums can wrap.
    if (t.off > trunk_file_size || g.payload_bytes > trunk_file_size - t.off) {
      return IoError(fmt::format("trunk.bin: tensor \"{}\" ({}) payload of {} bytes at offset {} "
                                 "runs past the end of the {}-byte file",
                                 t.name, Describe(t), g.payload_bytes, t.off, trunk_file_size));
    }
    if (t.fmt != TensorFmt::kF32 &&
        (t.scale_off > trunk_file_size || g.scale_bytes > trunk_file_size - t.scale_off)) {
      return IoError(fmt::format("trunk.bin: tensor \"{}\" ({}) scales of {} bytes at offset {} "
                                 "run past the end of the {}-byte file",
                                 t.name, Describe(t), g.scale_bytes, t.scale_off,
                                 trunk_file_size));
    }
  }
  return Status::Ok();
}

Status ValidateRequiredTensors(const Manifest& m) {
  const ModelConfig& c = m.config;
  std::unordered_map<std::string_view, const TensorInfo*> by_name;
  for (const TensorInfo& t : m.trunk) by_name.emplace(t.name, &t);  // first entry wins

  for (const TensorSpec& spec : ModelTensors(c)) {
    std::string full = PrefixedName(c, spec.name);
    auto it = by_name.find(full);
    const TensorInfo* t = it == by_name.end() ? nullptr : it->second;
    auto refuse = [&](std::string found) {
      return FormatError(fmt::format("required tensor is missing or has the wrong shape: {} "
                                     "(expected {} {}, found {})",
                                     full, KindText(spec.kind), fmt::join(spec.shape, "x"),
                                     found));
    };
    if (t == nullptr) {
      if (spec.kind == TensorKind::kOptionalData) continue;
      return refuse("no such tensor");
    }
    int64_t n = 1;
    for (int64_t d : t->shape) n *= d;
    switch (spec.kind) {
      case TensorKind::kMatrix:
        if (t->shape.size() != 2 || t->shape[0] != spec.shape[0] || t->shape[1] != spec.shape[1]) {
          return refuse(Describe(*t));
        }
        break;
      case TensorKind::kVector:
        if (t->fmt != TensorFmt::kF32 || n != spec.elements()) return refuse(Describe(*t));
        break;
      case TensorKind::kData:
        if (t->fmt != TensorFmt::kF32 || n < spec.elements()) return refuse(Describe(*t));
        break;
      case TensorKind::kOptionalData:
        if (t->fmt == TensorFmt::kF32 && n < spec.elements()) return refuse(Describe(*t));
        break;
    }
  }
  // The forward pass treats a layer as MoE when it has a router; load-time
  // rules use E > 0 && L >= F. Writers must make them agree (§4.8).
  for (int l = 0; l < c.n_layers; ++l) {
    if (c.ffn_kind[l] == FfnKind::kMoe) continue;
    std::string router = PrefixedName(c, fmt::format("model.layers.{}.block_sparse_moe.gate.weight", l));
    if (by_name.count(router) != 0) {
      return FormatError(fmt::format("{}: layer {} is dense (num_experts {}, first_k_dense_replace "
                                     "{}) but has a MoE router tensor",
                                     router, l, c.moe.n_experts, c.moe.first_dense));
    }
  }
  return Status::Ok();
}

}  // namespace waste
