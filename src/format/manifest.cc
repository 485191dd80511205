// manifest.json -> Manifest (FORMAT.md §3): format version, config with every
// bound of §3.7, expert_quant, the bank index and the trunk index. Pure: no
// other file is touched, so plan, open and the fuzzer share it.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <string>

#include "container/container.h"
#include "format/format.h"
#include "format/json_reader.h"
#include "format/rope_config.h"

namespace waste {
namespace {

using json::Json;

constexpr int64_t k2p16 = int64_t{1} << 16;
constexpr int64_t k2p20 = int64_t{1} << 20;
constexpr int64_t k2p24 = int64_t{1} << 24;
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
// Record headers store layer and expert ids as u16 (§6.2).
constexpr int64_t kMaxExperts = 65536;
constexpr int kMaxLayers = 128;
// Documented in docs/HARDENING.md with the manifest size limit: together
// they bound the memory parsing takes. Real models use a few thousand.
constexpr size_t kMaxTrunkEntries = size_t{1} << 16;
constexpr size_t kMaxBankFileName = 63;  // the reference keeps 63 bytes of a bank name

Status OutOfRange(std::string_view origin, std::string_view key, int64_t v, int64_t lo,
                  int64_t hi) {
  // json::Integer saturates huge and non-finite values at +-2^62: print
  // what the file says in words rather than the clamped number.
  constexpr int64_t kSaturated = int64_t{1} << 62;
  std::string shown = v >= kSaturated    ? std::string("a number of 2^62 or more")
                      : v <= -kSaturated ? std::string("a number of -2^62 or less")
                                         : std::to_string(v);
  return FormatError(fmt::format("{}: manifest config is out of range: {} = {}, expected {}..{}",
                                 origin, key, shown, lo, hi));
}

Status CheckRange(std::string_view origin, std::string_view key, int64_t v, int64_t lo,
                  int64_t hi) {
  if (v < lo || v > hi) return OutOfRange(origin, key, v, lo, hi);
  return Status::Ok();
}

// Reads config keys with the reference's defaults; wrong types read as absent.
class ConfigReader {
 public:
  ConfigReader(const Json* cfg, std::string_view origin) : cfg_(cfg), origin_(origin) {}

  const Json* Get(std::string_view key) const { return json::Member(cfg_, key); }
  int64_t Int(std::string_view key, int64_t def) const {
    return json::Integer(Get(key)).value_or(def);
  }
  // First of `keys` that holds a number (engine spelling first, then aliases).
  int64_t IntAlias(std::initializer_list<std::string_view> keys, int64_t def) const {
    for (std::string_view k : keys) {
      if (auto v = json::Integer(Get(k))) return *v;
    }
    return def;
  }
  double Num(std::string_view key, double def) const {
    return json::Number(Get(key)).value_or(def);
  }
  // Switches read BY VALUE (docs/FORMAT_NOTES.md): absent/null = off,
  // true/false as written, anything else is refused.
  Result<bool> Flag(const Json* obj, std::string_view key, std::string_view path) const {
    const Json* v = json::Member(obj, key);
    if (v == nullptr || v->is_null()) return false;
    if (v->is_boolean()) return v->get<bool>();
    return FormatError(fmt::format("{}: config.{} is {}, not true or false", origin_, path,
                                   json::Brief(v)));
  }
  Result<bool> Flag(std::string_view key) const { return Flag(cfg_, key, key); }
  // Present means a JSON boolean: null is refused too (mla_use_nope,
  // FORMAT.md §3.6: present but not boolean => load refused).
  Result<bool> StrictFlag(std::string_view key) const {
    const Json* v = json::Member(cfg_, key);
    if (v != nullptr && v->is_null()) {
      return FormatError(fmt::format("{}: config.{} is null, not true or false", origin_, key));
    }
    return Flag(cfg_, key, key);
  }

 private:
  const Json* cfg_;
  std::string_view origin_;
};

std::string ArchitectureName(const Json* config, const Json* effective) {
  auto first = [](const Json* obj) -> std::optional<std::string> {
    const Json* a = json::Member(obj, "architectures");
    if (a == nullptr || !a->is_array() || a->empty()) return std::nullopt;
    return json::String(&(*a)[0]);
  };
  if (auto s = first(json::Member(config, "_outer"))) return *s;
  if (auto s = first(effective)) return *s;
  if (auto s = first(config)) return *s;
  return "";
}

std::string ArchFromArchitecture(const std::string& a) {
  if (a.find("KimiK3") != std::string::npos) return "kimi-k3";
  if (a.find("KimiLinear") != std::string::npos) return "kimi-linear";
  if (!a.empty()) return a;
  return "unknown";
}

Status ParseExpertQuant(const Json& root, std::string_view origin, Manifest& m) {
  const Json* q = json::Member(&root, "expert_quant");
  ExpertQuant& eq = m.config.quant;
  int64_t stages = json::Integer(json::Member(q, "stages")).value_or(3);
  int64_t vec_dim = json::Integer(json::Member(q, "vec_dim")).value_or(8);
  int64_t entries = json::Integer(json::Member(q, "entries")).value_or(256);
  int64_t bits = json::Integer(json::Member(q, "index_bits")).value_or(8);
  auto range = [&](std::string_view k, int64_t v, int64_t lo, int64_t hi) -> Status {
    if (v < lo || v > hi) {
      return FormatError(fmt::format("{}: expert_quant.{} = {} is out of range, expected {}..{}",
                                     origin, k, v, lo, hi));
    }
    return Status::Ok();
  };
  WASTE_TRY(range("stages", stages, 1, 8));
  WASTE_TRY(range("vec_dim", vec_dim, 1, 64));
  WASTE_TRY(range("entries", entries, 1, 256));
  if (bits != 8 && !(bits == 6 && stages == 4 && entries == 64)) {
    return FormatError(fmt::format("{}: expert_quant.index_bits = {} with {} stages x {} entries: "
                                   "expected 8, or 6 only with 4 stages x 64 entries (VQ4P)",
                                   origin, bits, stages, entries));
  }
  // The engine always decodes 64-row blocks; a container claiming otherwise
  // would be silently misdecoded (§3.3).
  const Json* ib = json::Member(q, "index_block");
  if (ib != nullptr) {
    std::optional<int64_t> v = json::Integer(ib);
    if (!v || *v != format::kIndexBlockRows) {
      return FormatError(fmt::format("{}: expert_quant.index_block is {}, expected 64 (the only "
                                     "row blocking this engine decodes)",
                                     origin, json::Brief(ib)));
    }
    m.index_block = format::kIndexBlockRows;
  }
  eq.stages = static_cast<int>(stages);
  eq.vec_dim = static_cast<int>(vec_dim);
  eq.entries = static_cast<int>(entries);
  eq.index_bits = static_cast<int>(bits);
  eq.fmt_name = bits == 6 ? "VQ4P" : fmt::format("VQ{}R", stages);
  return Status::Ok();
}

// §3.6 keys and §3.7 bounds into m.config.
Status ParseConfig(const Json& root, std::string_view origin, Manifest& m) {
  const Json* config = json::Member(&root, "config");
  if (config == nullptr || !config->is_object()) {
    return FormatError(fmt::format("{}: \"config\" is {}, expected the model config object",
                                   origin, json::Brief(config)));
  }
  ModelConfig& c = m.config;
  const Json* eff = config;
  const Json* text = json::Member(config, "text_config");
  if (text != nullptr && text->is_object()) {
    // Raw HF multimodal config: the text model's keys live one level down
    // and its tensors under "language_model." (§3.6, last row).
    eff = text;
    if (c.tensor_prefix.empty()) c.tensor_prefix = "language_model.";
  }
  c.architecture = ArchitectureName(config, eff);
  c.arch = ArchFromArchitecture(c.architecture);

  ConfigReader r(eff, origin);
  int64_t nl = r.Int("num_hidden_layers", 0);
  int64_t h = r.Int("hidden_size", 0);
  int64_t v = r.Int("vocab_size", 0);
  int64_t a = r.Int("num_attention_heads", 0);
  // DeepSeek-V3 / Kimi-K2 spellings are accepted where the engine's own
  // spelling is absent (the converter normally adds the engine's).
  int64_t e = r.IntAlias({"num_experts", "n_routed_experts"}, 0);
  int64_t k = r.IntAlias({"num_experts_per_token", "num_experts_per_tok"}, 0);
  int64_t im = r.Int("moe_intermediate_size", 0);
  int64_t id = r.Int("intermediate_size", 0);
  int64_t ns = r.IntAlias({"num_shared_experts", "n_shared_experts"}, 0);
  int64_t f = r.Int("first_k_dense_replace", 0);
  int64_t rkv = r.Int("kv_lora_rank", 0);
  int64_t rq = r.Int("q_lora_rank", 0);  // null reads as absent: 0 = plain q_proj
  int64_t dn = r.Int("qk_nope_head_dim", 0);
  int64_t dr = r.Int("qk_rope_head_dim", 0);
  int64_t dv = r.Int("v_head_dim", 0);
  int64_t lat = r.Int("routed_expert_hidden_size", 0);
  int64_t arb = r.Int("attn_res_block_size", 0);
  int64_t eos = r.Int("eos_token_id", 0);
  double eps = r.Num("rms_norm_eps", 1e-5);

  const Json* lin = r.Get("linear_attn_config");
  int64_t hk = json::Integer(json::Member(lin, "num_heads")).value_or(0);
  int64_t dk = json::Integer(json::Member(lin, "head_dim")).value_or(0);
  int64_t kc = json::Integer(json::Member(lin, "short_conv_kernel_size")).value_or(4);

  WASTE_TRY(CheckRange(origin, "num_hidden_layers", nl, 1, kMaxLayers));
  WASTE_TRY(CheckRange(origin, "hidden_size", h, 1, k2p20));
  WASTE_TRY(CheckRange(origin, "vocab_size", v, 1, k2p24));
  WASTE_TRY(CheckRange(origin, "num_attention_heads", a, 1, k2p16));
  if (!(eps > 0.0 && eps < 1.0)) {  // also refuses NaN
    return FormatError(fmt::format("{}: manifest config is out of range: rms_norm_eps = {}, "
                                   "expected 0 < eps < 1",
                                   origin, eps));
  }
  WASTE_TRY(CheckRange(origin, "num_experts", e, 0, kMaxExperts));
  if (e > 0) {
    WASTE_TRY(CheckRange(origin, "num_experts_per_token", k, 1, std::min<int64_t>(e, 64)));
    WASTE_TRY(CheckRange(origin, "moe_intermediate_size", im, 1, k2p20));
  }
  WASTE_TRY(CheckRange(origin, "moe_intermediate_size", im, 0, k2p20));
  WASTE_TRY(CheckRange(origin, "intermediate_size", id, 0, k2p20));
  WASTE_TRY(CheckRange(origin, "linear_attn_config.num_heads", hk, 0, k2p16));
  WASTE_TRY(CheckRange(origin, "linear_attn_config.head_dim", dk, 0, k2p16));
  WASTE_TRY(CheckRange(origin, "linear_attn_config.short_conv_kernel_size", kc, 0, 64));
  WASTE_TRY(CheckRange(origin, "kv_lora_rank", rkv, 0, k2p20));
  WASTE_TRY(CheckRange(origin, "q_lora_rank", rq, 0, k2p20));
  WASTE_TRY(CheckRange(origin, "qk_nope_head_dim", dn, 0, k2p20));
  WASTE_TRY(CheckRange(origin, "qk_rope_head_dim", dr, 0, k2p20));
  WASTE_TRY(CheckRange(origin, "v_head_dim", dv, 0, k2p20));
  WASTE_TRY(CheckRange(origin, "first_k_dense_replace", f, 0, nl));
  WASTE_TRY(CheckRange(origin, "num_shared_experts", ns, 0, 64));
  WASTE_TRY(CheckRange(origin, "routed_expert_hidden_size", lat, 0, k2p20));
  WASTE_TRY(CheckRange(origin, "attn_res_block_size", arb, 0, nl));

  // Layer kinds: 1-based kda_layers; values outside 1..128 are ignored.
  c.n_layers = static_cast<int>(nl);
  c.attn_kind.assign(c.n_layers, AttnKind::kMla);
  const Json* kda = json::Member(lin, "kda_layers");
  if (kda != nullptr && kda->is_array()) {
    for (const Json& item : *kda) {
      std::optional<int64_t> one_based = json::Integer(&item);
      if (!one_based || *one_based < 1 || *one_based > kMaxLayers) continue;
      if (*one_based <= nl) c.attn_kind[*one_based - 1] = AttnKind::kKda;
    }
  }
  c.ffn_kind.assign(c.n_layers, FfnKind::kDense);
  for (int l = 0; l < c.n_layers; ++l) {
    if (e > 0 && l >= f) c.ffn_kind[l] = FfnKind::kMoe;
  }
  bool any_kda = std::count(c.attn_kind.begin(), c.attn_kind.end(), AttnKind::kKda) > 0;
  bool any_mla = std::count(c.attn_kind.begin(), c.attn_kind.end(), AttnKind::kMla) > 0;
  if (any_kda) {
    WASTE_TRY(CheckRange(origin, "linear_attn_config.num_heads", hk, 1, k2p16));
    WASTE_TRY(CheckRange(origin, "linear_attn_config.head_dim", dk, 1, k2p16));
    WASTE_TRY(CheckRange(origin, "linear_attn_config.short_conv_kernel_size", kc, 1, 64));
    WASTE_TRY(CheckRange(origin, "linear_attn_config.num_heads * head_dim", hk * dk, 1, kI32Max));
  }
  if (any_mla) {
    WASTE_TRY(CheckRange(origin, "kv_lora_rank", rkv, 1, k2p20));
    WASTE_TRY(CheckRange(origin, "qk_nope_head_dim + qk_rope_head_dim", dn + dr, 1, 2 * k2p20));
    WASTE_TRY(CheckRange(origin, "v_head_dim", dv, 1, k2p20));
    WASTE_TRY(CheckRange(origin, "num_attention_heads * (qk_nope + qk_rope)", a * (dn + dr), 1,
                         kI32Max));
    WASTE_TRY(CheckRange(origin, "num_attention_heads * v_head_dim", a * dv, 1, kI32Max));
    WASTE_TRY(CheckRange(origin, "num_attention_heads * (qk_nope + v_head_dim)", a * (dn + dv), 1,
                         kI32Max));
  }
  if (e == 0 || f > 0) WASTE_TRY(CheckRange(origin, "intermediate_size", id, 1, k2p20));
  WASTE_TRY(CheckRange(origin, "moe_intermediate_size * max(num_shared_experts, 1)",
                       im * std::max<int64_t>(ns, 1), 0, kI32Max));

  c.hidden = static_cast<int>(h);
  c.vocab = static_cast<int>(v);
  c.n_heads = static_cast<int>(a);
  c.n_experts = static_cast<int>(e);
  c.top_k = static_cast<int>(e > 0 ? k : 0);
  c.moe_inter = static_cast<int>(im);
  c.dense_inter = static_cast<int>(id);
  c.n_shared = static_cast<int>(ns);
  c.first_dense = static_cast<int>(f);
  c.q_lora_rank = static_cast<int>(rq);
  c.kv_lora_rank = static_cast<int>(rkv);
  c.qk_nope = static_cast<int>(dn);
  c.qk_rope = static_cast<int>(dr);
  c.v_head = static_cast<int>(dv);
  c.kda_heads = static_cast<int>(hk);
  c.kda_dim = static_cast<int>(dk);
  c.conv_k = static_cast<int>(kc);
  c.latent_dim = static_cast<int>(lat);
  c.attn_res_block = static_cast<int>(arb);
  c.rms_eps = static_cast<float>(eps);
  c.eos_token_id = eos > 0 && eos <= kI32Max ? static_cast<int>(eos) : 0;

  double scaling = r.Num("routed_scaling_factor", 1.0);
  double beta = r.Num("activation_situ_beta", 1.0);
  double lin_beta = r.Num("activation_situ_linear_beta", 0.0);
  double lower = json::Number(json::Member(lin, "gate_lower_bound")).value_or(0.0);
  for (auto [key, val] : {std::pair{"routed_scaling_factor", scaling},
                          std::pair{"activation_situ_beta", beta},
                          std::pair{"activation_situ_linear_beta", lin_beta},
                          std::pair{"linear_attn_config.gate_lower_bound", lower}}) {
    if (!std::isfinite(val) || std::fabs(val) > 1e6) {
      return FormatError(fmt::format("{}: manifest config is out of range: {} = {}, expected a "
                                     "finite number",
                                     origin, key, val));
    }
  }
  c.routed_scaling = static_cast<float>(scaling);
  c.situ_beta = static_cast<float>(beta);
  c.situ_linear_beta = static_cast<float>(lin_beta);
  c.gate_lower_bound = static_cast<float>(lower);
  std::optional<std::string> act = json::String(r.Get("hidden_act"));
  c.act = act && *act == "situ" ? Activation::kSitu : Activation::kSilu;

  // Switches (by value, see ConfigReader::Flag). norm_topk_prob is the HF
  // spelling the converter maps onto moe_renormalize.
  if (r.Get("moe_renormalize") != nullptr) {
    WASTE_ASSIGN_OR_RETURN(c.moe_renormalize, r.Flag("moe_renormalize"));
  } else {
    WASTE_ASSIGN_OR_RETURN(c.moe_renormalize, r.Flag("norm_topk_prob"));
  }
  WASTE_ASSIGN_OR_RETURN(c.latent_norm, r.Flag("latent_moe_use_norm"));
  WASTE_ASSIGN_OR_RETURN(c.mla_output_gate, r.Flag("mla_use_output_gate"));
  WASTE_ASSIGN_OR_RETURN(c.mla_nope, r.StrictFlag("mla_use_nope"));
  WASTE_ASSIGN_OR_RETURN(c.kda_full_rank_gate,
                         r.Flag(lin, "use_full_rank_gate", "linear_attn_config.use_full_rank_gate"));

  WASTE_TRY(ResolveRope(*eff, origin, c));
  return Status::Ok();
}

Status ParseBanks(const Json& root, std::string_view origin, Manifest& m) {
  const ModelConfig& c = m.config;
  m.banks.assign(c.n_layers, BankInfo{});
  const Json* layers = json::Member(&root, "layers");
  if (layers != nullptr && !layers->is_object()) {
    return FormatError(fmt::format("{}: \"layers\" is {}, expected an object keyed by layer "
                                   "index",
                                   origin, json::Brief(layers)));
  }
  Result<format::RecordLayout> layout = FormatError("");
  if (c.n_experts > 0) {
    layout = format::ComputeRecordLayout(c.moe_inter, c.expert_in(), c.quant);
    if (!layout) return FormatError(fmt::format("{}: {}", origin, layout.error().message()));
  }
  for (int l = 0; l < c.n_layers; ++l) {
    std::string key = std::to_string(l);
    const Json* entry = json::Member(layers, key);
    bool moe = c.ffn_kind[l] == FfnKind::kMoe;
    if (!moe) {
      if (entry != nullptr) {
        return FormatError(fmt::format(
            "{}: layers.\"{}\": layer {} is dense (num_experts {}, first_k_dense_replace {}) but "
            "has an expert bank entry",
            origin, key, l, c.n_experts, c.first_dense));
      }
      continue;
    }
    if (entry == nullptr || !entry->is_object()) {
      return FormatError(fmt::format("{}: layers.\"{}\" is {}: MoE layer {} needs an expert bank "
                                     "entry {{file, experts, bytes, codebook_base}}",
                                     origin, key, json::Brief(entry), l));
    }
    std::string where = fmt::format("{}: layers.\"{}\"", origin, key);
    BankInfo& b = m.banks[l];
    b.layer = l;
    std::optional<std::string> file = json::String(json::Member(entry, "file"));
    if (!file || file->empty()) {
      return FormatError(fmt::format("{}.file is {}, expected a bank file name", where,
                                     json::Brief(json::Member(entry, "file"))));
    }
    if (file->find('/') != std::string::npos || file->find('\\') != std::string::npos ||
        file->find("..") != std::string::npos || file->find('\0') != std::string::npos) {
      return FormatError(fmt::format("{}.file \"{}\" must name a file inside the container "
                                     "directory (no '/', '\\\\' or '..')",
                                     where, *file));
    }
    if (file->size() > kMaxBankFileName) {
      return FormatError(fmt::format("{}.file is {} bytes long, at most {} are allowed", where,
                                     file->size(), kMaxBankFileName));
    }
    b.file = *file;
    int64_t experts = json::Integer(json::Member(entry, "experts")).value_or(0);
    int64_t bytes = json::Integer(json::Member(entry, "bytes")).value_or(0);
    int64_t base = json::Integer(json::Member(entry, "codebook_base")).value_or(0);
    if (experts != c.n_experts) {
      return FormatError(fmt::format("{}.experts = {}, expected num_experts {}", where, experts,
                                     c.n_experts));
    }
    if (bytes <= 0 || bytes % experts != 0 || bytes > (int64_t{1} << 50)) {
      return FormatError(fmt::format("{}.bytes = {}, expected a positive multiple of {} experts",
                                     where, bytes, experts));
    }
    uint64_t record = static_cast<uint64_t>(bytes / experts);
    if (record % format::kPageBytes != 0) {
      return FormatError(fmt::format("{}: record size bytes / experts = {} is not a multiple of "
                                     "4096",
                                     where, record));
    }
    if (record < layout->record_bytes) {
      return FormatError(fmt::format("{}: record size {} is smaller than the {} bytes one expert "
                                     "needs ([{}, {}] matrices, {} stages)",
                                     where, record, layout->record_bytes, c.moe_inter,
                                     c.expert_in(), c.quant.stages));
    }
    if (base < 0 || base > std::numeric_limits<uint16_t>::max()) {
      return FormatError(fmt::format("{}.codebook_base = {}, expected 0..65535", where, base));
    }
    b.experts = static_cast<int>(experts);
    b.bytes = static_cast<uint64_t>(bytes);
    b.record_bytes = record;
    b.codebook_base = static_cast<int>(base);
  }
  return Status::Ok();
}

Status ParseTrunk(const Json& root, std::string_view origin, Manifest& m) {
  const Json* trunk = json::Member(&root, "trunk");
  if (trunk == nullptr || !trunk->is_array()) {
    return FormatError(fmt::format("{}: \"trunk\" is {}, expected the tensor index array", origin,
                                   json::Brief(trunk)));
  }
  if (trunk->size() > kMaxTrunkEntries) {
    return FormatError(fmt::format("{}: trunk lists {} tensors, more than {}", origin,
                                   trunk->size(), kMaxTrunkEntries));
  }
  m.trunk.reserve(trunk->size());
  for (size_t i = 0; i < trunk->size(); ++i) {
    const Json* t = &(*trunk)[i];
    TensorInfo info;
    info.name = json::String(json::Member(t, "name")).value_or("");
    std::string where = fmt::format("{}: trunk[{}] \"{}\"", origin, i, info.name);
    if (!t->is_object()) {
      return FormatError(fmt::format("{}: trunk[{}] is {}, expected a tensor object", origin, i,
                                     json::Brief(t)));
    }
    int64_t fmt_code = json::Integer(json::Member(t, "fmt")).value_or(0);
    if (fmt_code != format::kFmtF32 && fmt_code != format::kFmtQ8G &&
        fmt_code != format::kFmtQ4G && fmt_code != format::kFmtQ3G) {
      return FormatError(fmt::format("{}: fmt {} is not a trunk format (expected 0 F32, 2 Q8G, 3 "
                                     "Q4G or 7 Q3G)",
                                     where, fmt_code));
    }
    info.fmt = static_cast<TensorFmt>(fmt_code);
    const Json* shape = json::Member(t, "shape");
    if (shape == nullptr || !shape->is_array() || shape->empty() ||
        shape->size() > static_cast<size_t>(format::kMaxTensorDims)) {
      return FormatError(fmt::format("{}: shape is {}, expected 1 to 4 dimensions", where,
                                     json::Brief(shape)));
    }
    int64_t elements = 1;
    for (size_t d = 0; d < shape->size(); ++d) {
      std::optional<int64_t> dim = json::Integer(&(*shape)[d]);
      if (!dim || *dim < 1 || *dim > format::kMaxTensorDim) {
        return FormatError(fmt::format("{}: shape[{}] is {}, expected 1..{}", where, d,
                                       json::Brief(&(*shape)[d]), format::kMaxTensorDim));
      }
      info.shape.push_back(*dim);
      if (elements > format::kMaxTensorElements / *dim) {  // checked before multiplying
        return FormatError(fmt::format("{}: shape {} has more than 2^40 elements", where,
                                       json::Brief(shape)));
      }
      elements *= *dim;
    }
    int64_t off = json::Integer(json::Member(t, "off")).value_or(0);
    if (off < 0) return FormatError(fmt::format("{}: off = {}, expected >= 0", where, off));
    info.off = static_cast<uint64_t>(off);
    info.bytes = static_cast<uint64_t>(
        std::max<int64_t>(0, json::Integer(json::Member(t, "bytes")).value_or(0)));
    if (info.fmt != TensorFmt::kF32) {
      int64_t group = json::Integer(json::Member(t, "group")).value_or(128);
      if (group < 8 || group > format::kMaxTensorDim || group % 8 != 0) {
        return FormatError(fmt::format("{}: group = {}, expected a multiple of 8 (writers use "
                                       "128)",
                                       where, group));
      }
      int64_t scale_off = json::Integer(json::Member(t, "scale_off")).value_or(0);
      if (scale_off < 0) {
        return FormatError(fmt::format("{}: scale_off = {}, expected >= 0", where, scale_off));
      }
      info.group = static_cast<int>(group);
      info.scale_off = static_cast<uint64_t>(scale_off);
    }
    m.trunk.push_back(std::move(info));
  }
  return Status::Ok();
}

}  // namespace

int ModelConfig::n_kda_layers() const {
  return static_cast<int>(std::count(attn_kind.begin(), attn_kind.end(), AttnKind::kKda));
}
int ModelConfig::n_mla_layers() const {
  return static_cast<int>(std::count(attn_kind.begin(), attn_kind.end(), AttnKind::kMla));
}
int ModelConfig::n_moe_layers() const {
  return static_cast<int>(std::count(ffn_kind.begin(), ffn_kind.end(), FfnKind::kMoe));
}

namespace {

// format_version, tensor_prefix, expert_quant and config.
Result<Manifest> ParseHead(const json::Json& root, std::string_view origin) {
  if (!root.is_object()) {
    return FormatError(fmt::format("{}: top level is {}, expected a JSON object", origin,
                                   json::Brief(&root)));
  }
  const json::Json* fv = json::Member(&root, "format_version");
  if (fv == nullptr || !fv->is_number()) {
    return FormatError(fmt::format("{}: container format version missing: format_version is {}, "
                                   "expected the number 0",
                                   origin, json::Brief(fv)));
  }
  int64_t version = json::Integer(fv).value_or(-1);
  if (version != format::kFormatVersion) {
    return FormatError(fmt::format("{}: container format version mismatch: format_version is {}, "
                                   "this engine reads version 0",
                                   origin, json::Brief(fv)));
  }
  Manifest m;
  std::optional<std::string> prefix = json::String(json::Member(&root, "tensor_prefix"));
  m.config.tensor_prefix = prefix.value_or("");
  WASTE_TRY(ParseExpertQuant(root, origin, m));
  WASTE_TRY(ParseConfig(root, origin, m));
  return m;
}

}  // namespace

Result<Manifest> ParseManifestConfig(std::string_view json_text, std::string_view origin) {
  try {
    WASTE_ASSIGN_OR_RETURN(json::Json root, json::ParseFirstWins(json_text, origin));
    return ParseHead(root, origin);
  } catch (const std::exception& e) {
    return FormatError(fmt::format("{}: cannot read the manifest: {}", origin, e.what()));
  }
}

Result<Manifest> ParseManifest(std::string_view json_text, std::string_view origin) {
  try {
    WASTE_ASSIGN_OR_RETURN(json::Json root, json::ParseFirstWins(json_text, origin));
    WASTE_ASSIGN_OR_RETURN(Manifest m, ParseHead(root, origin));
    WASTE_TRY(ParseBanks(root, origin, m));
    WASTE_TRY(ParseTrunk(root, origin, m));
    return m;
  } catch (const std::exception& e) {
    // nlohmann accessors are guarded by type checks above; this is the edge
    // that turns anything unforeseen (bad_alloc included) into a Status.
    return FormatError(fmt::format("{}: cannot read the manifest: {}", origin, e.what()));
  }
}

}  // namespace waste
