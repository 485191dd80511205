// manifest.json -> Manifest: format version, expert_quant, the model config
// (model/config_parse.cc), the bank index and the trunk index. Pure: no
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
#include "model/config_parse.h"

namespace waste {
namespace {

using json::Json;

// Documented in docs/HARDENING.md with the manifest size limit: together
// they bound the memory parsing takes. Real models use a few thousand.
constexpr size_t kMaxTrunkEntries = size_t{1} << 16;
constexpr size_t kMaxBankFileName = 63;  // the reference keeps 63 bytes of a bank name

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
  if (c.moe.n_experts > 0) {
    layout = format::ComputeRecordLayout(c.moe.inter, c.expert_in(), c.quant);
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
            origin, key, l, c.moe.n_experts, c.moe.first_dense));
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
    if (experts != c.moe.n_experts) {
      return FormatError(fmt::format("{}.experts = {}, expected num_experts {}", where, experts,
                                     c.moe.n_experts));
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
                                     where, record, layout->record_bytes, c.moe.inter,
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
    using format::FmtByte;
    if (fmt_code != FmtByte(TensorFmt::kF32) && fmt_code != FmtByte(TensorFmt::kQ8G) &&
        fmt_code != FmtByte(TensorFmt::kQ4G) && fmt_code != FmtByte(TensorFmt::kQ3G)) {
      return FormatError(fmt::format("{}: fmt {} is not a trunk format (expected 0 F32, 2 Q8G, 3 "
                                     "Q4G or 7 Q3G)",
                                     where, fmt_code));
    }
    info.fmt = static_cast<TensorFmt>(fmt_code);  // checked just above: the one cast from disk
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
  WASTE_TRY(ParseModelConfig(root, origin, m.config));
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
