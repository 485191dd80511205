#include "checkpoint_gen.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "container/container.h"
#include "container/tensor_list.h"
#include "format/format.h"
#include "platform/platform.h"
#include "presets.h"
#include "rng.h"
#include "tokenizer_gen.h"

namespace waste::gen {
namespace {

using OJson = nlohmann::ordered_json;

struct Tensor {
  std::string name;
  std::string dtype;                 // safetensors dtype
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

uint16_t ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFF) > 0x7F800000) return 0x7FC0;
  u += 0x7FFF + ((u >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

// e4m3fn, round to nearest even, saturating at +-448.
uint8_t ToE4M3(float f) {
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  float a = std::fabs(f);
  if (a >= 448.0f) return sign | 0x7E;
  uint8_t best = 0;
  float best_d = a;
  for (int code = 1; code < 0x7F; ++code) {  // every finite positive code
    const int e = (code >> 3) & 15, m = code & 7;
    const float v = e == 0 ? std::ldexp(m / 8.0f, -6) : std::ldexp(1.0f + m / 8.0f, e - 7);
    const float d = std::fabs(v - a);
    if (d < best_d || (d == best_d && (code & 1) == 0 && (best & 1) == 1)) {
      best_d = d;
      best = static_cast<uint8_t>(code);
    }
  }
  return sign | best;
}

// Heavy-tailed values of standard deviation ~std: a Student-t with 4
// degrees of freedom (real checkpoints' weights have outliers that max
// scaling pays for), plus a per-row gain.
void HeavyTailed(Rng& rng, float* out, int64_t n, float std) {
  for (int64_t i = 0; i < n; ++i) {
    double z = rng.Normal();
    double chi = 0;
    for (int k = 0; k < 4; ++k) {
      double g = rng.Normal();
      chi += g * g;
    }
    out[i] = static_cast<float>(std * z / std::sqrt(chi / 4.0) * 0.7071);
  }
}

std::vector<float> Values(const std::string& name, const std::vector<int64_t>& shape, uint64_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  Rng rng(seed, name);
  const int64_t cols = shape.empty() ? 1 : shape.back();
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("norm.weight") || has("layernorm.weight")) {
    for (float& x : v) x = rng.Uniform(0.8f, 1.2f);
  } else if (name.ends_with("A_log")) {
    for (float& x : v) x = std::log(rng.Uniform(1.0f, 16.0f));
  } else if (name.ends_with("dt_bias") || has("conv1d")) {
    for (float& x : v) x = rng.Uniform(-0.5f, 0.5f);
  } else if (name.ends_with("e_score_correction_bias")) {
    for (float& x : v) x = rng.Uniform(-0.05f, 0.05f);
  } else if (has("_res_proj")) {
    for (float& x : v) x = rng.Uniform(-0.1f, 0.1f);
  } else if (name.ends_with("embed_tokens.weight")) {
    HeavyTailed(rng, v.data(), n, 1.0f);
  } else {
    const int64_t rows = n / cols;
    const float std = 1.0f / std::sqrt(static_cast<float>(cols));
    HeavyTailed(rng, v.data(), n, std);
    for (int64_t r = 0; r < rows; ++r) {
      const float gain = rng.Uniform(0.5f, 1.5f);
      for (int64_t i = 0; i < cols; ++i) v[static_cast<size_t>(r * cols + i)] *= gain;
    }
  }
  return v;
}

Tensor Bf16(const std::string& name, const std::vector<int64_t>& shape, const std::vector<float>& v) {
  Tensor t{name, "BF16", shape, std::vector<uint8_t>(v.size() * 2)};
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t b = ToBf16(v[i]);
    std::memcpy(t.bytes.data() + 2 * i, &b, 2);
  }
  return t;
}

Tensor F32(const std::string& name, const std::vector<int64_t>& shape, const std::vector<float>& v) {
  Tensor t{name, "F32", shape, std::vector<uint8_t>(v.size() * 4)};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

// FP8 e4m3 with a [ceil(R/b), ceil(C/b)] F32 scale tile grid (scale = max/448).
void Fp8(const std::string& name, int64_t rows, int64_t cols, const std::vector<float>& v, int b,
         std::vector<Tensor>& out) {
  const int64_t sr = (rows + b - 1) / b, sc = (cols + b - 1) / b;
  std::vector<float> scale(static_cast<size_t>(sr * sc), 1.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      float& s = scale[static_cast<size_t>((r / b) * sc + c / b)];
      const float a = std::fabs(v[static_cast<size_t>(r * cols + c)]) / 448.0f;
      if (s == 1.0f) s = 0.0f;
      s = std::max(s, a);
    }
  }
  for (float& s : scale) {
    if (s == 0.0f) s = 1.0f;
  }
  Tensor q{name, "F8_E4M3", {rows, cols}, std::vector<uint8_t>(static_cast<size_t>(rows * cols))};
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      q.bytes[static_cast<size_t>(r * cols + c)] =
          ToE4M3(v[static_cast<size_t>(r * cols + c)] / scale[static_cast<size_t>((r / b) * sc + c / b)]);
    }
  }
  out.push_back(std::move(q));
  out.push_back(F32(name + "_scale_inv", {sr, sc}, scale));
}

// MXFP4: per 32 values e = 127 + ceil(log2(max/6)), codes = nearest E2M1 of w * 2^(127-e).
void Mxfp4(const std::string& name, int64_t rows, int64_t cols, const std::vector<float>& v,
           std::vector<Tensor>& out) {
  static constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  Tensor p{name + "_packed", "U8", {rows, cols / 2}, std::vector<uint8_t>(static_cast<size_t>(rows * cols / 2))};
  Tensor s{name + "_scale", "U8", {rows, cols / 32}, std::vector<uint8_t>(static_cast<size_t>(rows * cols / 32))};
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < cols / 32; ++g) {
      const float* x = v.data() + r * cols + g * 32;
      float amax = 0.0f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
      int e = amax > 0 ? 127 + static_cast<int>(std::ceil(std::log2(amax / 6.0f))) : 127;
      e = std::clamp(e, 1, 254);
      s.bytes[static_cast<size_t>(r * (cols / 32) + g)] = static_cast<uint8_t>(e);
      const float mul = std::ldexp(1.0f, 127 - e);
      for (int i = 0; i < 32; ++i) {
        const float a = std::fabs(x[i] * mul);
        int best = 0;
        for (int k = 1; k < 8; ++k) {
          if (std::fabs(kMag[k] - a) < std::fabs(kMag[best] - a)) best = k;
        }
        const uint8_t code = static_cast<uint8_t>(best | (x[i] < 0 && best != 0 ? 8 : 0));
        uint8_t& byte = p.bytes[static_cast<size_t>(r * (cols / 2) + g * 16 + i / 2)];
        byte |= static_cast<uint8_t>((i & 1) ? code << 4 : code);
      }
    }
  }
  out.push_back(std::move(p));
  out.push_back(std::move(s));
}

// compressed-tensors "pack-quantized" int4, as Kimi-K2-Thinking ships its
// routed experts: per row and group of `group` columns scale = bf16(max|w| /
// 7.5) (the minmax observer's symmetric range, so both -8 and 7 occur) and
// q = clamp(round-half-even(w / scale), -8, 7); the nibble q + 8 of column c
// goes to I32 word c / 8 at bits 4 (c % 8), zero past the last column (as
// pack_to_int32 pads). W_scale BF16 [rows, ceil(cols/group)], W_shape I64.
void Int4(const std::string& name, int64_t rows, int64_t cols, const std::vector<float>& v, int group,
          std::vector<Tensor>& out) {
  const int64_t words = (cols + 7) / 8, groups = (cols + group - 1) / group;
  Tensor p{name + "_packed", "I32", {rows, words}, std::vector<uint8_t>(static_cast<size_t>(rows * words * 4))};
  std::vector<float> scale(static_cast<size_t>(rows * groups));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t c0 = g * group, c1 = std::min(cols, c0 + group);
      float amax = 0.0f;
      for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(v[static_cast<size_t>(r * cols + c)]));
      uint16_t s16 = ToBf16(amax / 7.5f);
      if (s16 == 0) s16 = ToBf16(1.0f);  // an all-zero group: any scale codes it as zeros
      float s;
      const uint32_t bits = static_cast<uint32_t>(s16) << 16;
      std::memcpy(&s, &bits, 4);
      scale[static_cast<size_t>(r * groups + g)] = s;
      for (int64_t c = c0; c < c1; ++c) {
        const float q = std::clamp(std::nearbyint(v[static_cast<size_t>(r * cols + c)] / s), -8.0f, 7.0f);
        const uint32_t nibble = static_cast<uint32_t>(static_cast<int>(q) + 8);
        uint8_t* word = p.bytes.data() + (r * words + c / 8) * 4;
        uint32_t w;
        std::memcpy(&w, word, 4);
        w |= nibble << (4 * (c % 8));
        std::memcpy(word, &w, 4);
      }
    }
  }
  const std::vector<int64_t> shape = {rows, cols};
  Tensor sh{name + "_shape", "I64", {2}, std::vector<uint8_t>(16)};
  std::memcpy(sh.bytes.data(), shape.data(), 16);
  out.push_back(std::move(p));
  out.push_back(Bf16(name + "_scale", {rows, groups}, scale));
  out.push_back(std::move(sh));
}

// quantization_config as compressed-tensors writes it for a pack-quantized
// checkpoint (Kimi-K2-Thinking's keys): one config group of symmetric int4
// weights in groups of `group` columns, activations not quantised, and the
// modules left in bf16 under `ignore`.
OJson Int4QuantizationConfig(int group, const std::vector<std::string>& ignore) {
  const OJson weights = {{"num_bits", 4}, {"type", "int"}, {"symmetric", true}, {"strategy", "group"},
                         {"group_size", group}, {"dynamic", false}, {"actorder", nullptr},
                         {"block_structure", nullptr}, {"observer", "minmax"}, {"observer_kwargs", OJson::object()}};
  return {{"quant_method", "compressed-tensors"},
          {"format", "pack-quantized"},
          {"quantization_status", "compressed"},
          {"config_groups",
           {{"group_0", {{"targets", {"Linear"}}, {"weights", weights}, {"input_activations", nullptr},
                         {"output_activations", nullptr}}}}},
          {"ignore", ignore},
          {"kv_cache_scheme", nullptr},
          {"sparsity_config", OJson::object()}};
}

// Container name -> the family's published name.
std::string SourceName(const std::string& name, bool deepseek) {
  if (!deepseek) return name;
  std::string s = name;
  for (const auto& [from, to] : {std::pair<std::string, std::string>{".block_sparse_moe.shared_experts.", ".mlp.shared_experts."},
                                 {".block_sparse_moe.gate.", ".mlp.gate."}}) {
    const size_t p = s.find(from);
    if (p != std::string::npos) s.replace(p, from.size(), to);
  }
  return s;
}

Status WriteShard(const std::string& path, const std::vector<const Tensor*>& tensors) {
  OJson header = OJson::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t off = 0;
  for (const Tensor* t : tensors) {
    header[t->name] = {{"dtype", t->dtype}, {"shape", t->shape}, {"data_offsets", {off, off + t->bytes.size()}}};
    off += t->bytes.size();
  }
  std::string h = header.dump();
  while ((8 + h.size()) % 8 != 0) h += ' ';
  std::string file(8, '\0');
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  file += h;
  for (const Tensor* t : tensors) file.append(reinterpret_cast<const char*>(t->bytes.data()), t->bytes.size());
  return platform::WriteFileAtomic(path, file.data(), file.size());
}

}  // namespace

Result<CheckpointReport> GenerateCheckpoint(const CheckpointOptions& o) {
  WASTE_ASSIGN_OR_RETURN(Preset preset, MakePreset(o.preset));
  if (o.int4_group < 1) return ArgError(fmt::format("int4 group size {} is not positive", o.int4_group));
  OJson cfg = preset.config;
  std::optional<GeneratedTokenizer> tok;
  if (o.tokenizer) {
    tok = MakeTokenizer();
    cfg["vocab_size"] = std::max(cfg["vocab_size"].get<int>(), tok->vocab());
    cfg["bos_token_id"] = tok->n_ranks;
    cfg["eos_token_id"] = tok->n_ranks + 2;
  }
  if (o.vocab > 0) cfg["vocab_size"] = std::max(o.vocab, cfg["vocab_size"].get<int>());
  if (!o.override_json.empty()) {
    try {
      cfg.merge_patch(OJson::parse(o.override_json));
    } catch (const std::exception& e) {
      return ArgError(fmt::format("--override: {}", e.what()));
    }
  }
  // The model as the engine sees it: its tensor list and shapes.
  OJson head = {{"format_version", 0}, {"tensor_prefix", preset.tensor_prefix}, {"config", cfg},
                {"expert_quant", {{"stages", 3}, {"vec_dim", 8}, {"entries", 256}, {"index_bits", 8}, {"index_block", 64}}}};
  WASTE_ASSIGN_OR_RETURN(Manifest m, ParseManifestConfig(head.dump(), "preset"));
  const ModelConfig& c = m.config;
  const bool deepseek = preset.config.contains("n_routed_experts");
  const bool fp8 = o.dtype == CheckpointDType::kFp8;

  // config.json in the release's nesting and spellings.
  OJson file;
  if (cfg.contains("_outer")) {
    file = cfg["_outer"];
    OJson text = cfg;
    text.erase("_outer");
    text["architectures"] = OJson::array({"KimiLinearForCausalLM"});
    file["text_config"] = text;
  } else {
    file = cfg;
    if (deepseek) {
      for (const char* k : {"num_experts", "num_experts_per_token", "num_shared_experts", "moe_renormalize"}) {
        file.erase(k);
      }
    }
  }
  if (fp8) {
    file["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
                                   {"weight_block_size", {o.fp8_block, o.fp8_block}}};
  }

  std::vector<Tensor> tensors;
  std::vector<std::string> int4_ignore;  // the linear layers an int4 checkpoint keeps in bf16
  auto add_matrix = [&](const std::string& name, const std::vector<int64_t>& shape, bool expert) {
    std::vector<float> v = Values(name, shape, o.seed);
    const bool matrix = shape.size() == 2;
    // A linear layer's weight (what compressed-tensors' "Linear" target and
    // `ignore` list name): projections, kv_a_proj_with_mqa included, and the head.
    const bool linear = matrix && name.ends_with(".weight") &&
                        (name.find("_proj") != std::string::npos || name.ends_with("lm_head.weight"));
    const bool int4 = o.dtype == CheckpointDType::kInt4 && matrix &&
                      (expert || (o.int4_shared_experts && linear && name.find("shared_experts") != std::string::npos));
    if (o.dtype == CheckpointDType::kInt4 && linear && !int4) {
      int4_ignore.push_back(name.substr(0, name.size() - std::string(".weight").size()));
    }
    if (fp8 && matrix && name.ends_with("_proj.weight")) {
      Fp8(name, shape[0], shape[1], v, o.fp8_block, tensors);
    } else if (o.dtype == CheckpointDType::kMxfp4 && expert) {
      Mxfp4(name, shape[0], shape[1], v, tensors);
    } else if (int4) {
      Int4(name, shape[0], shape[1], v, o.int4_group, tensors);
    } else if (name.ends_with("e_score_correction_bias") || name.ends_with("A_log")) {
      tensors.push_back(F32(name, shape, v));
    } else {
      tensors.push_back(Bf16(name, shape, v));
    }
  };
  for (TensorSpec spec : ModelTensors(c)) {
    if (!preset.router_bias && spec.name.ends_with("e_score_correction_bias")) continue;
    if (preset.pad_a_log && spec.name.ends_with("A_log")) {
      int64_t padded = 1;
      while (padded <= c.kda.heads) padded *= 2;
      spec.shape = {1, 1, padded, 1};
    }
    add_matrix(preset.tensor_prefix + SourceName(spec.name, deepseek), spec.shape, false);
  }
  for (int l = 0; l < c.n_layers; ++l) {
    if (c.ffn_kind[l] != FfnKind::kMoe) continue;
    for (int e = 0; e < c.moe.n_experts; ++e) {
      for (int k = 0; k < 3; ++k) {
        static const char* kW[3] = {"w1", "w3", "w2"};
        static const char* kP[3] = {"gate_proj", "up_proj", "down_proj"};
        const std::string name =
            deepseek ? fmt::format("{}model.layers.{}.mlp.experts.{}.{}.weight", preset.tensor_prefix, l, e, kP[k])
                     : fmt::format("{}model.layers.{}.block_sparse_moe.experts.{}.{}.weight", preset.tensor_prefix, l, e, kW[k]);
        const std::vector<int64_t> shape = k == 2 ? std::vector<int64_t>{c.expert_in(), c.moe.inter}
                                                  : std::vector<int64_t>{c.moe.inter, c.expert_in()};
        add_matrix(name, shape, true);
      }
    }
  }
  std::sort(tensors.begin(), tensors.end(), [](const Tensor& a, const Tensor& b) { return a.name < b.name; });
  if (o.dtype == CheckpointDType::kInt4) {
    file["quantization_config"] = Int4QuantizationConfig(o.int4_group, int4_ignore);
  }

  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  if (ec) return IoError(fmt::format("create {}: {}", o.out_dir, ec.message()));
  CheckpointReport rep;
  uint64_t total = 0;
  for (const Tensor& t : tensors) total += t.bytes.size();
  const int shards = std::max(1, o.shards);
  OJson weight_map = OJson::object();
  std::vector<std::vector<const Tensor*>> per(shards);
  uint64_t acc = 0;
  for (const Tensor& t : tensors) {
    // Split by bytes: shard boundaries fall inside layers.
    int s = static_cast<int>(std::min<uint64_t>(shards - 1, acc * shards / std::max<uint64_t>(total, 1)));
    per[s].push_back(&t);
    acc += t.bytes.size();
  }
  for (int s = 0; s < shards; ++s) {
    const std::string shard = fmt::format("model-{:05}-of-{:05}.safetensors", s + 1, shards);
    WASTE_TRY(WriteShard(o.out_dir + "/" + shard, per[s]));
    for (const Tensor* t : per[s]) weight_map[t->name] = shard;
  }
  OJson index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  const std::string idx = index.dump(2) + "\n", cj = file.dump(2) + "\n";
  WASTE_TRY(platform::WriteFileAtomic(o.out_dir + "/model.safetensors.index.json", idx.data(), idx.size()));
  WASTE_TRY(platform::WriteFileAtomic(o.out_dir + "/config.json", cj.data(), cj.size()));
  if (tok) {
    WASTE_TRY(platform::WriteFileAtomic(o.out_dir + "/tiktoken.model", tok->tokenizer_model.data(),
                                        tok->tokenizer_model.size()));
    // tokenizer_config.json: added_tokens_decoder from the generator's specials.
    OJson specials = OJson::parse(tok->specials_json);
    OJson added = OJson::object();
    for (const OJson& s : specials) {
      added[std::to_string(s["id"].get<int>())] = {{"content", s["text"]}, {"lstrip", false}, {"normalized", false},
                                                   {"rstrip", false}, {"single_word", false}, {"special", true}};
    }
    OJson tc = {{"added_tokens_decoder", added},
                {"chat_template", "{% for m in messages %}<|open|>{{ m.role }}<|sep|>{{ m.content }}<|end_of_msg|>{% endfor %}"},
                {"tokenizer_class", "TikTokenTokenizer"}};
    const std::string t = tc.dump(2) + "\n";
    WASTE_TRY(platform::WriteFileAtomic(o.out_dir + "/tokenizer_config.json", t.data(), t.size()));
  }
  rep.tensors = static_cast<int>(tensors.size());
  rep.bytes = total;
  return rep;
}

}  // namespace waste::gen
