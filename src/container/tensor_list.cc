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

// A slot of ModelWeights holds a TensorView (matrices) or its F32 values.
bool Store(const TensorView*& slot, const TensorView& t) {
  slot = &t;
  return true;
}
bool Store(const float*& slot, const TensorView& t) {
  if (t.fmt != TensorFmt::kF32) return false;
  slot = t.f32();
  return true;
}

// Follows a chain of member pointers: Member<&A::b, &B::c>(a) is a.b.c.
template <auto First, auto... Rest, typename Object>
auto& Member(Object& o) {
  if constexpr (sizeof...(Rest) == 0) {
    return o.*First;
  } else {
    return Member<Rest...>(o.*First);
  }
}
template <auto... Path>
bool LayerSlot(ModelWeights& w, int layer, const TensorView& t) {
  return Store(Member<Path...>(w.layers[static_cast<size_t>(layer)]), t);
}
template <auto... Path>
bool ModelSlot(ModelWeights& w, int, const TensorView& t) {
  return Store(Member<Path...>(w), t);
}

using K = TensorKind;
using L = LayerWeights;
constexpr auto kKda = &L::kda;
constexpr auto kMla = &L::mla;
constexpr auto kMoe = &L::moe;
constexpr auto kDense = &L::dense;
constexpr auto kRes = &L::attn_res;
using Kw = KdaWeights;
using Mw = MlaWeights;
using Ew = MoeWeights;
using Fw = MlpWeights;
constexpr ResidualUse kReads = ResidualUse::kReadsNormed;
constexpr ResidualUse kWrites = ResidualUse::kWritesResidual;
constexpr ResidualUse kGain = ResidualUse::kNormGain;
// The gains a layer's sublayers read the stream through.
constexpr std::string_view kInputNorm = "input_layernorm.weight";
constexpr std::string_view kPostNorm = "post_attention_layernorm.weight";

// Appends the tensors of one layer (or of the whole model, layer -1).
class Specs {
 public:
  Specs(std::vector<TensorSpec>& out, int layer)
      : out_(out), layer_(layer),
        prefix_(layer < 0 ? std::string() : fmt::format("model.layers.{}.", layer)) {}
  void Add(std::string_view name, TensorKind kind, std::vector<int64_t> shape,
           WeightBinding bind, ResidualUse use = ResidualUse::kNone, std::string_view norm = {}) {
    out_.push_back(TensorSpec{prefix_ + std::string(name), kind, std::move(shape), layer_, bind, use,
                              norm.empty() ? std::string() : prefix_ + std::string(norm)});
  }

 private:
  std::vector<TensorSpec>& out_;
  int layer_;
  std::string prefix_;
};

void AddKda(const ModelConfig& c, Specs& s) {
  const int64_t h = c.hidden, ck = c.kda_channels(), dk = c.kda.head_dim, hk = c.kda.heads;
  const int64_t kc = c.kda.conv_k;
  s.Add("self_attn.q_proj.weight", K::kMatrix, {ck, h}, LayerSlot<kKda, &Kw::q_proj>, kReads, kInputNorm);
  s.Add("self_attn.k_proj.weight", K::kMatrix, {ck, h}, LayerSlot<kKda, &Kw::k_proj>, kReads, kInputNorm);
  s.Add("self_attn.v_proj.weight", K::kMatrix, {ck, h}, LayerSlot<kKda, &Kw::v_proj>, kReads, kInputNorm);
  s.Add("self_attn.b_proj.weight", K::kMatrix, {hk, h}, LayerSlot<kKda, &Kw::b_proj>, kReads, kInputNorm);
  s.Add("self_attn.f_a_proj.weight", K::kMatrix, {dk, h}, LayerSlot<kKda, &Kw::f_a>, kReads, kInputNorm);
  s.Add("self_attn.f_b_proj.weight", K::kMatrix, {ck, dk}, LayerSlot<kKda, &Kw::f_b>);
  if (c.kda.gate_rank == KdaGateRank::kFull) {
    s.Add("self_attn.g_proj.weight", K::kMatrix, {ck, h}, LayerSlot<kKda, &Kw::g_proj>, kReads, kInputNorm);
  } else {
    s.Add("self_attn.g_a_proj.weight", K::kMatrix, {dk, h}, LayerSlot<kKda, &Kw::g_a>, kReads, kInputNorm);
    s.Add("self_attn.g_b_proj.weight", K::kMatrix, {ck, dk}, LayerSlot<kKda, &Kw::g_b>);
  }
  s.Add("self_attn.o_proj.weight", K::kMatrix, {h, ck}, LayerSlot<kKda, &Kw::o_proj>, kWrites);
  // The stored kernel must be the configured one: a smaller
  // short_conv_kernel_size would silently use part of it.
  s.Add("self_attn.q_conv1d.weight", K::kExactData, {ck, 1, kc}, LayerSlot<kKda, &Kw::q_conv>);
  s.Add("self_attn.k_conv1d.weight", K::kExactData, {ck, 1, kc}, LayerSlot<kKda, &Kw::k_conv>);
  s.Add("self_attn.v_conv1d.weight", K::kExactData, {ck, 1, kc}, LayerSlot<kKda, &Kw::v_conv>);
  s.Add("self_attn.A_log", K::kData, {1, 1, hk, 1}, LayerSlot<kKda, &Kw::a_log>);
  s.Add("self_attn.dt_bias", K::kData, {ck}, LayerSlot<kKda, &Kw::dt_bias>);
  s.Add("self_attn.o_norm.weight", K::kVector, {dk}, LayerSlot<kKda, &Kw::o_norm>);
}

void AddMla(const ModelConfig& c, Specs& s) {
  const MlaConfig& m = c.mla;
  const int64_t h = c.hidden, a = m.n_heads, dq = m.qk_head_dim(), rq = m.q_lora_rank;
  if (m.query == QueryProjection::kFull) {
    s.Add("self_attn.q_proj.weight", K::kMatrix, {a * dq, h}, LayerSlot<kMla, &Mw::q_proj>, kReads,
          kInputNorm);
  } else {
    s.Add("self_attn.q_a_proj.weight", K::kMatrix, {rq, h}, LayerSlot<kMla, &Mw::q_a>, kReads, kInputNorm);
    s.Add("self_attn.q_a_layernorm.weight", K::kVector, {rq}, LayerSlot<kMla, &Mw::q_a_norm>);
    s.Add("self_attn.q_b_proj.weight", K::kMatrix, {a * dq, rq}, LayerSlot<kMla, &Mw::q_b>);
  }
  s.Add("self_attn.kv_a_proj_with_mqa.weight", K::kMatrix, {m.kv_lora_rank + m.qk_rope, h},
        LayerSlot<kMla, &Mw::kv_a>, kReads, kInputNorm);
  s.Add("self_attn.kv_a_layernorm.weight", K::kVector, {m.kv_lora_rank},
        LayerSlot<kMla, &Mw::kv_a_norm>);
  s.Add("self_attn.kv_b_proj.weight", K::kMatrix, {a * (m.qk_nope + m.v_head), m.kv_lora_rank},
        LayerSlot<kMla, &Mw::kv_b>);
  if (m.output_gate) {
    s.Add("self_attn.g_proj.weight", K::kMatrix, {a * m.v_head, h}, LayerSlot<kMla, &Mw::g_proj>, kReads,
          kInputNorm);
  }
  s.Add("self_attn.o_proj.weight", K::kMatrix, {h, a * m.v_head}, LayerSlot<kMla, &Mw::o_proj>, kWrites);
}

void AddFfn(const ModelConfig& c, int layer, Specs& s) {
  const int64_t h = c.hidden, di = c.dense_inter;
  if (c.ffn_kind[layer] == FfnKind::kDense) {
    s.Add("mlp.gate_proj.weight", K::kMatrix, {di, h}, LayerSlot<kDense, &Fw::gate>, kReads, kPostNorm);
    s.Add("mlp.up_proj.weight", K::kMatrix, {di, h}, LayerSlot<kDense, &Fw::up>, kReads, kPostNorm);
    s.Add("mlp.down_proj.weight", K::kMatrix, {h, di}, LayerSlot<kDense, &Fw::down>, kWrites);
    return;
  }
  const int64_t ssh = c.shared_inter(), e = c.moe.n_experts, lat = c.moe.latent_dim;
  constexpr auto kShared = &Ew::shared;
  s.Add("block_sparse_moe.gate.weight", K::kMatrix, {e, h}, LayerSlot<kMoe, &Ew::router>, kReads,
        kPostNorm);
  s.Add("block_sparse_moe.gate.e_score_correction_bias", K::kOptionalData, {e},
        LayerSlot<kMoe, &Ew::router_bias>);
  s.Add("block_sparse_moe.shared_experts.gate_proj.weight", K::kMatrix, {ssh, h},
        LayerSlot<kMoe, kShared, &Fw::gate>, kReads, kPostNorm);
  s.Add("block_sparse_moe.shared_experts.up_proj.weight", K::kMatrix, {ssh, h},
        LayerSlot<kMoe, kShared, &Fw::up>, kReads, kPostNorm);
  s.Add("block_sparse_moe.shared_experts.down_proj.weight", K::kMatrix, {h, ssh},
        LayerSlot<kMoe, kShared, &Fw::down>, kWrites);
  if (c.moe.input == ExpertInput::kLatent) {
    s.Add("block_sparse_moe.routed_expert_down_proj.weight", K::kMatrix, {lat, h},
          LayerSlot<kMoe, &Ew::latent_down>, kReads, kPostNorm);
    s.Add("block_sparse_moe.routed_expert_up_proj.weight", K::kMatrix, {h, lat},
          LayerSlot<kMoe, &Ew::latent_up>, kWrites);
    if (c.moe.latent_norm) {
      s.Add("block_sparse_moe.routed_expert_norm.weight", K::kVector, {lat},
            LayerSlot<kMoe, &Ew::latent_norm>);
    }
  }
}

const char* KindText(TensorKind k) {
  switch (k) {
    case TensorKind::kMatrix: return "matrix";
    case TensorKind::kVector: return "F32 vector (1-D or one row) of exactly";
    case TensorKind::kExactData: return "F32 data of exactly";
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
  using W = ModelWeights;
  Specs model(out, -1);
  model.Add("model.embed_tokens.weight", K::kMatrix, {c.vocab, h}, ModelSlot<&W::embed>,
            ResidualUse::kEmbedding);
  for (int l = 0; l < c.n_layers; ++l) {
    Specs s(out, l);
    s.Add("input_layernorm.weight", K::kVector, {h}, LayerSlot<&L::input_norm>, kGain);
    s.Add("post_attention_layernorm.weight", K::kVector, {h}, LayerSlot<&L::post_attn_norm>,
          kGain);
    if (c.attn_res.enabled()) {
      using R = AttnResWeights;
      s.Add("self_attention_res_norm.weight", K::kVector, {h}, LayerSlot<kRes, &R::attn_norm>,
            kGain);
      s.Add("self_attention_res_proj.weight", K::kVector, {h}, LayerSlot<kRes, &R::attn_proj>,
            kReads, "self_attention_res_norm.weight");
      s.Add("mlp_res_norm.weight", K::kVector, {h}, LayerSlot<kRes, &R::mlp_norm>, kGain);
      s.Add("mlp_res_proj.weight", K::kVector, {h}, LayerSlot<kRes, &R::mlp_proj>, kReads,
            "mlp_res_norm.weight");
    }
    if (c.attn_kind[l] == AttnKind::kKda) {
      AddKda(c, s);
    } else {
      AddMla(c, s);
    }
    AddFfn(c, l, s);
  }
  model.Add("model.norm.weight", K::kVector, {h}, ModelSlot<&W::final_norm>, kGain);
  if (c.attn_res.enabled()) {
    model.Add("model.output_attn_res_norm.weight", K::kVector, {h}, ModelSlot<&W::out_res_norm>,
              kGain);
    model.Add("model.output_attn_res_proj.weight", K::kVector, {h}, ModelSlot<&W::out_res_proj>,
              kReads, "model.output_attn_res_norm.weight");
  }
  model.Add("lm_head.weight", K::kMatrix, {c.vocab, h}, ModelSlot<&W::lm_head>, kReads,
            "model.norm.weight");
  return out;
}

Status ValidateTrunkIndex(const Manifest& m, uint64_t trunk_file_size) {
  for (size_t i = 0; i < m.trunk.size(); ++i) {
    const TensorInfo& t = m.trunk[i];
    format::TrunkGeometry g =
        format::ComputeTrunkGeometry(t.fmt, t.shape, t.group);
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
      case TensorKind::kVector: {
        // 1-D, or one row [1, n]: the reference stores the AttnRes
        // projections (a Linear from H to 1) as [1, H]. A column [n, 1] or
        // any other matrix is refused (docs/HARDENING.md).
        const bool one_row = t->shape.size() == 2 && t->shape[0] == 1;
        if (t->fmt != TensorFmt::kF32 || (t->shape.size() != 1 && !one_row) ||
            n != spec.elements()) {
          return refuse(Describe(*t));
        }
        break;
      }
      case TensorKind::kExactData:
        if (t->fmt != TensorFmt::kF32 || n != spec.elements() || t->shape.empty() ||
            t->shape.back() != spec.shape.back()) {
          return refuse(Describe(*t));
        }
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
