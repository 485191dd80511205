#include "convert/source_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>

#include "platform/platform.h"
#include "base/exception_status.h"

namespace waste::convert {
namespace {

using OJson = nlohmann::ordered_json;

bool Contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

// Layer number of "...model.layers.N...." or -1.
int LayerOf(const std::string& name) {
  const std::string key = "model.layers.";
  size_t p = name.find(key);
  if (p == std::string::npos) return -1;
  p += key.size();
  int v = 0;
  bool any = false;
  while (p < name.size() && name[p] >= '0' && name[p] <= '9') {
    v = v * 10 + (name[p] - '0');
    any = true;
    ++p;
    if (v > 1000000) return -1;
  }
  return any ? v : -1;
}

void ReplaceFirst(std::string& s, const std::string& from, const std::string& to) {
  size_t p = s.find(from);
  if (p != std::string::npos) s.replace(p, from.size(), to);
}

int IntKey(const OJson& c, const char* a, const char* b, int def) {
  for (const char* k : {a, b}) {
    if (k != nullptr && c.contains(k) && c[k].is_number_integer()) return c[k].get<int>();
  }
  return def;
}

}  // namespace

Result<const Family*> ConvertibleFamily(std::string_view architecture, std::string_view origin) {
  const Family& f = FamilyForArchitecture(architecture);
  if (!f.architectures.empty()) return &f;
  std::string accepted;
  ForEachFamily([&](const Family& each) {
    for (std::string_view name : each.architectures) {
      accepted += fmt::format("{}{}*", accepted.empty() ? "" : ", ", name);
    }
  });
  return UnsupportedError(fmt::format("{}: architectures[0] \"{}\" is not a family waste converts "
                                      "(it converts {})",
                                      origin, architecture, accepted));
}

std::string SourceModel::ExpertTensor(int layer, int e, int kind) const {
  if (deepseek_naming) {
    static const char* kProj[3] = {"gate_proj", "up_proj", "down_proj"};
    return fmt::format("{}model.layers.{}.mlp.experts.{}.{}.weight", prefix, layer, e, kProj[kind]);
  }
  static const char* kW[3] = {"w1", "w3", "w2"};  // gate = w1, up = w3, down = w2
  return fmt::format("{}model.layers.{}.block_sparse_moe.experts.{}.{}.weight", prefix, layer, e,
                     kW[kind]);
}

Result<SourceModel> DescribeSource(const Checkpoint& ckpt) {
  const std::string path = ckpt.dir() + "/config.json";
  WASTE_ASSIGN_OR_RETURN(std::string text, platform::ReadWholeFile(path));
  SourceModel m;
  try {
    OJson file = OJson::parse(text);
    if (!file.is_object()) return FormatError(fmt::format("{}: not a JSON object", path));
    OJson cfg;
    if (file.contains("text_config") && file["text_config"].is_object()) {
      cfg = file["text_config"];
      OJson outer = file;
      outer.erase("text_config");
      cfg["_outer"] = outer;
      m.outer = outer;
      m.prefix = "language_model.";
    } else {
      cfg = file;
    }
    // Engine spellings, added only when absent (HF DeepSeek names otherwise).
    if (!cfg.contains("num_experts") && cfg.contains("n_routed_experts")) {
      cfg["num_experts"] = cfg["n_routed_experts"];
    }
    if (!cfg.contains("num_experts_per_token") && cfg.contains("num_experts_per_tok")) {
      cfg["num_experts_per_token"] = cfg["num_experts_per_tok"];
    }
    if (!cfg.contains("num_shared_experts") && cfg.contains("n_shared_experts")) {
      cfg["num_shared_experts"] = cfg["n_shared_experts"];
    }
    if (cfg.contains("norm_topk_prob") && cfg["norm_topk_prob"].is_boolean() &&
        cfg["norm_topk_prob"].get<bool>() && !cfg.contains("moe_renormalize")) {
      cfg["moe_renormalize"] = true;
    }
    std::string arch;
    if (m.outer.is_object() && m.outer.contains("architectures") && m.outer["architectures"].is_array() &&
        !m.outer["architectures"].empty()) {
      arch = m.outer["architectures"][0].get<std::string>();
    } else if (cfg.contains("architectures") && cfg["architectures"].is_array() &&
               !cfg["architectures"].empty()) {
      arch = cfg["architectures"][0].get<std::string>();
    }
    WASTE_ASSIGN_OR_RETURN(m.family, ConvertibleFamily(arch, path));
    m.arch = m.family->converted_arch.empty() ? arch : std::string(m.family->converted_arch);
    m.n_layers = IntKey(cfg, "num_hidden_layers", nullptr, -1);
    m.n_experts = IntKey(cfg, "num_experts", nullptr, -1);
    m.first_dense = IntKey(cfg, "first_k_dense_replace", nullptr, 0);
    if (m.n_layers < 1 || m.n_layers > 4096) {
      return FormatError(fmt::format("{}: num_hidden_layers missing or outside 1..4096", path));
    }
    if (m.n_experts < 1 || m.n_experts > 65535) {
      return FormatError(fmt::format("{}: num_experts / n_routed_experts missing or outside 1..65535",
                                     path));
    }
    const OJson& qc = file.contains("quantization_config") ? file["quantization_config"]
                      : cfg.contains("quantization_config") ? cfg["quantization_config"]
                                                            : OJson();
    if (qc.is_object() && qc.contains("weight_block_size")) {
      const OJson& b = qc["weight_block_size"];
      if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() ||
          b[0].get<int>() < 1 || b[1].get<int>() < 1) {
        return FormatError(fmt::format("{}: quantization_config.weight_block_size is not [rows, cols]",
                                       path));
      }
      m.quant.fp8_block_rows = b[0].get<int>();
      m.quant.fp8_block_cols = b[1].get<int>();
      m.quant.fp8_block_known = true;
    }
    m.config = std::move(cfg);
  } catch (const std::exception& e) {
    return StatusFromException(e, Errc::kFormat, fmt::format("{}: {}", path, e.what()));
  }

  // MoE naming: probe expert 0 of every layer from first_dense.
  for (int l = 0; l < m.n_layers; ++l) {
    m.deepseek_naming = false;
    bool mixtral = CheckpointHasTensor(ckpt, m.ExpertTensor(l, 0, 0));
    m.deepseek_naming = true;
    bool deepseek = CheckpointHasTensor(ckpt, m.ExpertTensor(l, 0, 0));
    if (mixtral || deepseek) {
      m.deepseek_naming = deepseek && !mixtral;
      break;
    }
  }
  for (int l = m.first_dense; l < m.n_layers; ++l) {
    if (CheckpointHasTensor(ckpt, m.ExpertTensor(l, 0, 0))) m.moe_layers.push_back(l);
  }
  if (m.moe_layers.empty()) {
    return FormatError(fmt::format("{}: no routed expert tensors (looked for {})", ckpt.dir(),
                                   m.ExpertTensor(m.first_dense, 0, 0)));
  }
  for (int l : m.moe_layers) {
    for (int e = 0; e < m.n_experts; ++e) {
      for (int k = 0; k < 3; ++k) {
        if (!CheckpointHasTensor(ckpt, m.ExpertTensor(l, e, k))) {
          return FormatError(fmt::format("{}: expert tensor {} is missing", ckpt.dir(),
                                         m.ExpertTensor(l, e, k)));
        }
      }
    }
  }

  // Trunk: everything that is not a routed expert, a dequantisation
  // companion, or a layer past num_hidden_layers (DeepSeek's MTP layer,
  // which the engine never runs).
  for (const std::string& name : ckpt.Names()) {
    if (Contains(name, ".experts.") && !Contains(name, "shared_experts")) continue;
    if (name.ends_with("_scale_inv") || name.ends_with("_packed") || name.ends_with("weight_scale")) {
      continue;
    }
    if (LayerOf(name) >= m.n_layers) continue;
    TrunkSource t;
    t.source = name;
    t.target = name;
    t.vision = name.starts_with("vision_tower.") || name.starts_with("mm_projector.");
    if (m.deepseek_naming) {
      if (name.ends_with(".mlp.gate.weight") || name.ends_with(".mlp.gate.e_score_correction_bias")) {
        ReplaceFirst(t.target, ".mlp.", ".block_sparse_moe.");
      } else if (Contains(name, ".mlp.shared_experts.")) {
        ReplaceFirst(t.target, ".mlp.shared_experts.", ".block_sparse_moe.shared_experts.");
      }
    }
    m.trunk.push_back(std::move(t));
  }
  return m;
}

}  // namespace waste::convert
