#include "convert/source_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <string_view>
#include <vector>

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

// One config group's "weights" of a pack-quantized checkpoint -> its group
// size. Only what DecodeInt4 implements is accepted: symmetric 4-bit ints,
// one scale per `group_size` contiguous columns. A key that changes the
// decoding must be present (a missing one is not read as compressed-tensors'
// default: the scheme is never guessed), and any other value is refused
// naming the key and the value.
Result<int> Int4GroupSize(const OJson& w, const std::string& where) {
  if (!w.is_object()) return FormatError(fmt::format("{} is not an object", where));
  for (const char* key : {"num_bits", "type", "symmetric", "strategy"}) {
    if (!w.contains(key) || w[key].is_null()) {
      return FormatError(
          fmt::format("{} has no {} (pack-quantized int4 needs num_bits, type, "
                      "symmetric, strategy and group_size)",
                      where, key));
    }
  }
  auto refuse = [&](const char* key, const std::string& why) {
    return UnsupportedError(fmt::format("{}.{} is {}: {}", where, key, w[key].dump(), why));
  };
  if (!w["num_bits"].is_number_integer() || w["num_bits"].get<int64_t>() != 4) {
    return refuse("num_bits", "only 4-bit pack-quantized weights are supported");
  }
  if (w["type"] != "int") return refuse("type", "only integer (\"int\") weights are supported");
  if (w["symmetric"] != true) {
    return refuse("symmetric", "only symmetric int4 is supported (no zero point)");
  }
  if (w["strategy"] != "group") {
    return refuse("strategy", "only \"group\" (one scale per group of columns) is supported");
  }
  if (!w.contains("group_size") || w["group_size"].is_null()) {
    return FormatError(fmt::format("{} has no group_size (the group is never guessed)", where));
  }
  const OJson& g = w["group_size"];
  if (!g.is_number_integer() || g.get<int64_t>() < 1 || g.get<int64_t>() > (int64_t{1} << 30)) {
    return refuse("group_size", "not a positive number of columns");
  }
  // A column permutation (GPTQ activation order with g_idx) or weights
  // quantised at run time would change which scale a column takes.
  if (w.contains("actorder") && !w["actorder"].is_null() && w["actorder"] != false) {
    return refuse("actorder", "only contiguous groups (actorder null) are supported");
  }
  if (w.contains("dynamic") && !w["dynamic"].is_null() && w["dynamic"] != false) {
    return refuse("dynamic", "stored weights must carry their scales");
  }
  return static_cast<int>(g.get<int64_t>());
}

// quantization_config of compressed-tensors with format "pack-quantized"
// (Kimi-K2-Thinking's routed experts) -> q->int4_packed and the group size.
// The format may be given at the top or per config group; every group that
// quantizes weights must be pack-quantized with the same group size, since
// which tensor belongs to which group (`targets`, `ignore`) is not read: the
// presence of NAME_packed says a matrix is quantized. Any other
// quantization_config (fp8 block scales, K3's MXFP4) is left to its reader.
Status ParsePackQuantized(const OJson& qc, const std::string& path, SourceQuant* q) {
  if (!qc.is_object()) return Status::Ok();
  auto format_of = [](const OJson& o) {
    return o.is_object() && o.contains("format") && o["format"].is_string()
               ? o["format"].get<std::string>()
               : std::string();
  };
  const std::string top = format_of(qc);
  const OJson groups = qc.contains("config_groups") ? qc["config_groups"] : OJson();
  bool packed = top == "pack-quantized";
  if (groups.is_object()) {
    for (const auto& [key, g] : groups.items()) packed = packed || format_of(g) == "pack-quantized";
  }
  if (!packed) return Status::Ok();
  const std::string where = path + ": quantization_config";
  if (!qc.contains("quant_method") || qc["quant_method"] != "compressed-tensors") {
    return FormatError(
        fmt::format("{}: format pack-quantized but quant_method is not "
                    "\"compressed-tensors\"",
                    where));
  }
  if (!groups.is_object() || groups.empty()) {
    return FormatError(fmt::format("{}: format pack-quantized without config_groups", where));
  }
  int group = 0;
  for (const auto& [key, g] : groups.items()) {
    const std::string at = fmt::format("{}.config_groups.{}", where, key);
    if (!g.is_object()) return FormatError(fmt::format("{} is not an object", at));
    if (!g.contains("weights") || g["weights"].is_null()) continue;  // activations only
    const std::string f = format_of(g).empty() ? top : format_of(g);
    if (f != "pack-quantized") {
      return UnsupportedError(
          fmt::format("{}: weights in format \"{}\" beside pack-quantized ones "
                      "(one weight format per checkpoint)",
                      at, f));
    }
    WASTE_ASSIGN_OR_RETURN(int size, Int4GroupSize(g["weights"], at + ".weights"));
    if (group != 0 && size != group) {
      return UnsupportedError(
          fmt::format("{}: group_size {} differs from another group's {} (which "
                      "tensor uses which is not read from targets)",
                      at, size, group));
    }
    group = size;
  }
  if (group == 0) {
    return FormatError(
        fmt::format("{}: format pack-quantized but no config group quantizes weights", where));
  }
  q->int4_packed = true;
  q->int4_group = group;
  return Status::Ok();
}

// A companion of a packed matrix W (W_shape, W_zero_point, W_g_idx beside
// W_packed): read, or refused, together with W, never a tensor of its own.
bool IsPackedCompanion(const Checkpoint& ckpt, const std::string& name) {
  for (std::string_view suffix : {"_shape", "_zero_point", "_g_idx"}) {
    if (name.ends_with(suffix) &&
        ckpt.Has(name.substr(0, name.size() - suffix.size()) + "_packed")) {
      return true;
    }
  }
  return false;
}

// The companions a packed matrix cannot be decoded without, checked when the
// checkpoint is described (index lookups, no reads) so that a missing one
// stops a conversion before any work instead of at its layer. Shapes and
// dtypes are checked when the matrix is read (LoadF32).
Status CheckPackedCompanions(const Checkpoint& ckpt, const std::string& name) {
  const TensorEntry* p = ckpt.Find(name + "_packed");
  if (p == nullptr || ckpt.Has(name)) return Status::Ok();
  std::vector<std::string> need = {"_scale"};
  if (p->dtype == DType::kI32) need.push_back("_shape");  // int4: the unpadded column count
  for (const std::string& suffix : need) {
    if (!ckpt.Has(name + suffix)) {
      return FormatError(fmt::format("{}: tensor {}_packed has no {}{} beside it",
                                     ckpt.ShardPath(*p), name, name, suffix));
    }
  }
  return Status::Ok();
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

Result<SourceQuant> ParseQuantizationConfig(const nlohmann::ordered_json& qc,
                                            const std::string& path) {
  SourceQuant q;
  if (!qc.is_object()) return q;
  if (qc.contains("weight_block_size")) {
    const OJson& b = qc["weight_block_size"];
    if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() ||
        b[0].get<int>() < 1 || b[1].get<int>() < 1) {
      return FormatError(
          fmt::format("{}: quantization_config.weight_block_size is not [rows, cols]", path));
    }
    q.fp8_block_rows = b[0].get<int>();
    q.fp8_block_cols = b[1].get<int>();
    q.fp8_block_known = true;
  }
  WASTE_TRY(ParsePackQuantized(qc, path, &q));
  return q;
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
    WASTE_ASSIGN_OR_RETURN(m.quant, ParseQuantizationConfig(qc, path));
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
        WASTE_TRY(CheckPackedCompanions(ckpt, m.ExpertTensor(l, e, k)));
      }
    }
  }

  // Trunk: everything that is not a routed expert, a dequantisation
  // companion, or a layer past num_hidden_layers (DeepSeek's MTP layer,
  // which the engine never runs).
  for (const std::string& name : ckpt.Names()) {
    if (Contains(name, ".experts.") && !Contains(name, "shared_experts")) continue;
    if (name.ends_with("_scale_inv") || name.ends_with("weight_scale") ||
        IsPackedCompanion(ckpt, name)) {
      continue;
    }
    if (LayerOf(name) >= m.n_layers) continue;
    // A packed matrix outside the routed experts (a quantisation config that
    // does not leave the shared experts in bf16, say) is read through its
    // logical name, W_packed -> W, like an expert.
    const std::string logical =
        name.ends_with("_packed") ? name.substr(0, name.size() - std::string_view("_packed").size())
                                  : name;
    if (logical != name && ckpt.Has(logical)) continue;  // W itself is there: LoadF32 reads it
    TrunkSource t;
    t.source = logical;
    t.target = logical;
    t.vision = logical.starts_with("vision_tower.") || logical.starts_with("mm_projector.");
    if (m.deepseek_naming) {
      if (logical.ends_with(".mlp.gate.weight") ||
          logical.ends_with(".mlp.gate.e_score_correction_bias")) {
        ReplaceFirst(t.target, ".mlp.", ".block_sparse_moe.");
      } else if (Contains(logical, ".mlp.shared_experts.")) {
        ReplaceFirst(t.target, ".mlp.shared_experts.", ".block_sparse_moe.shared_experts.");
      }
    }
    m.trunk.push_back(std::move(t));
  }
  // Dropping _packed can move a name past its neighbours (W_a < W_packed).
  std::sort(m.trunk.begin(), m.trunk.end(),
            [](const TrunkSource& a, const TrunkSource& b) { return a.source < b.source; });
  return m;
}

}  // namespace waste::convert
