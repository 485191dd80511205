#include "writer/container_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <system_error>

#include "platform/platform.h"
#include "container/tensor_list.h"

namespace waste {

using OJson = nlohmann::ordered_json;

struct ContainerWriter::Output {
  std::string name;
  std::string path;
  std::FILE* file = nullptr;  // nullptr in a dry run
  uint64_t pos = 0;
};

namespace {

constexpr int kGroup = 128;  // both reference writers use 128 (§3.5)

std::string Join(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

Result<std::string> Dump(const OJson& j, int indent) {
  try {
    return j.dump(indent, ' ', false, OJson::error_handler_t::strict);
  } catch (const std::exception& e) {
    return ArgError(fmt::format("cannot serialise the manifest: {}", e.what()));
  }
}

// The reference reads strings without unescaping (§3.1): names must need no
// escapes at all.
Status CheckPlainName(std::string_view what, const std::string& s, size_t max_len) {
  if (s.empty() || s.size() > max_len) {
    return ArgError(fmt::format("{} \"{}\" must be 1..{} bytes", what, s, max_len));
  }
  for (unsigned char ch : s) {
    if (ch < 0x20 || ch >= 0x7F || ch == '"' || ch == '\\') {
      return ArgError(fmt::format("{} \"{}\" must be printable ASCII without quotes or "
                                  "backslashes",
                                  what, s));
    }
  }
  return Status::Ok();
}

void Quantize(format::TensorFmt fmt, const float* x, int64_t cols, int64_t groups, std::vector<int>& codes,
              uint16_t* scales, bool* bad) {
  const int qmax = fmt == format::TensorFmt::kQ8G ? 127 : fmt == format::TensorFmt::kQ4G ? 7 : 3;
  const int qmin = fmt == format::TensorFmt::kQ8G ? -127 : fmt == format::TensorFmt::kQ4G ? -8 : -4;
  std::fill(codes.begin(), codes.end(), 0);  // padding elements: quantised zero
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t begin = g * kGroup, end = std::min(cols, begin + kGroup);
    float amax = 0.0f;
    for (int64_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(x[i]));
    if (!std::isfinite(amax)) *bad = true;
    amax = std::max(amax, 1e-8f);
    const float s = amax / static_cast<float>(qmax);  // the f32 scale quantises (§4.5)
    scales[g] = format::F32ToF16(s);
    if (!format::F16IsFinite(scales[g])) *bad = true;
    for (int64_t i = begin; i < end; ++i) {
      float q = std::nearbyint(x[i] / s);  // round half to even (default mode)
      codes[i] = static_cast<int>(std::clamp(q, static_cast<float>(qmin), static_cast<float>(qmax)));
    }
  }
}

void Pack(format::TensorFmt fmt, const std::vector<int>& codes, uint8_t* row, size_t row_bytes) {
  std::memset(row, 0, row_bytes);
  const size_t n = codes.size();
  switch (fmt) {
    case format::TensorFmt::kQ8G:
      for (size_t i = 0; i < n; ++i) row[i] = static_cast<uint8_t>(static_cast<int8_t>(codes[i]));
      break;
    case format::TensorFmt::kQ4G:
      for (size_t i = 0; i < n; ++i) {
        row[i >> 1] |= static_cast<uint8_t>((codes[i] + 8) << (4 * (i & 1)));
      }
      break;
    case format::TensorFmt::kQ3G:
      for (size_t i = 0; i < n; ++i) {
        unsigned u = static_cast<unsigned>(codes[i] + 4);
        size_t t = 3 * i, b = t >> 3;
        unsigned k = t & 7;
        row[b] |= static_cast<uint8_t>((u << k) & 0xFF);
        if (k > 5) row[b + 1] |= static_cast<uint8_t>(u >> (8 - k));
      }
      break;
    default:
      break;
  }
}

// Atomic write, then readable by everyone like the data files (the atomic
// helper creates 0600 temporaries).
Status WriteShared(const std::string& path, std::string_view bytes) {
  WASTE_TRY(platform::WriteFileAtomic(path, bytes.data(), bytes.size()));
  std::error_code ec;
  std::filesystem::permissions(path,
                               std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                   std::filesystem::perms::group_read |
                                   std::filesystem::perms::others_read,
                               ec);
  if (ec) return IoError(fmt::format("chmod {}: {}", path, ec.message()));
  return Status::Ok();
}

}  // namespace

ContainerWriter::~ContainerWriter() {
  for (std::unique_ptr<Output>* o : {&trunk_, &codebooks_, &bank_}) {
    if (*o && (*o)->file != nullptr) std::fclose((*o)->file);
  }
}

Result<std::unique_ptr<ContainerWriter>> ContainerWriter::Create(const std::string& dir,
                                                                 const OJson& config,
                                                                 const WriterOptions& options) {
  try {
    std::unique_ptr<ContainerWriter> w(new ContainerWriter());
    w->dir_ = dir;
    w->options_ = options;
    w->config_json_ = config;
    OJson head = OJson::object();
    head["format_version"] = format::kFormatVersion;
    head["tensor_prefix"] = options.tensor_prefix;
    head["config"] = config;
    head["expert_quant"] = {{"stages", options.quant.stages},
                            {"vec_dim", options.quant.vec_dim},
                            {"entries", options.quant.entries},
                            {"index_bits", options.quant.index_bits},
                            {"index_block", format::kIndexBlockRows}};
    WASTE_ASSIGN_OR_RETURN(std::string text, Dump(head, -1));
    WASTE_ASSIGN_OR_RETURN(Manifest m, ParseManifestConfig(text, "config given to the writer"));
    w->config_ = std::move(m.config);
    if (w->config_.moe.n_experts > 0) {
      WASTE_ASSIGN_OR_RETURN(w->layout_,
                             format::ComputeRecordLayout(w->config_.moe.inter,
                                                         w->config_.expert_in(),
                                                         w->config_.quant));
      w->builder_ = ExpertRecordBuilder(w->layout_);
    }
    w->codebook_base_.assign(static_cast<size_t>(w->config_.n_layers), -1);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return IoError(fmt::format("create directory {}: {}", dir, ec.message()));
    return w;
  } catch (const std::exception& e) {
    return ArgError(fmt::format("{}: cannot start the container: {}", dir, e.what()));
  }
}

Status ContainerWriter::Append(Output& out, const void* data, size_t n) {
  if (options_.dry_run) {
    out.pos += n;
    return Status::Ok();
  }
  if (out.file == nullptr) {
    out.file = std::fopen(out.path.c_str(), "wb");
    if (out.file == nullptr) {
      return IoError(fmt::format("create {}: {}", out.path, std::strerror(errno)));
    }
  }
  if (n > 0 && std::fwrite(data, 1, n, out.file) != n) {
    return IoError(fmt::format("write {} at offset {}: {}", out.path, out.pos,
                               std::strerror(errno)));
  }
  out.pos += n;
  return Status::Ok();
}

Status ContainerWriter::WriteQuantizedTensor(TensorFmt fmt, const format::TrunkGeometry& g,
                                             int group, const RowSource& rows,
                                             uint64_t* scale_off) {
  std::vector<float> x(static_cast<size_t>(g.cols));
  std::vector<int> codes(static_cast<size_t>(g.groups * group));
  std::vector<uint8_t> packed(static_cast<size_t>(g.row_bytes));
  std::vector<uint16_t> scales(static_cast<size_t>(g.rows * g.groups));
  bool bad = false;
  for (int64_t r = 0; r < g.rows; ++r) {
    rows(r, x.data());
    Quantize(fmt, x.data(), g.cols, g.groups, codes, scales.data() + r * g.groups, &bad);
    Pack(fmt, codes, packed.data(), packed.size());
    WASTE_TRY(Append(*trunk_, packed.data(), packed.size()));
  }
  if (bad) return ArgError("values are not finite or too large for an f16 scale");
  *scale_off = trunk_->pos;
  return Append(*trunk_, scales.data(), scales.size() * sizeof(uint16_t));
}

Status ContainerWriter::AddTensor(const std::string& name, TensorFmt fmt,
                                  const std::vector<int64_t>& shape, const RowSource& rows) {
  WASTE_TRY(CheckPlainName("tensor name", name, 127));
  if (fmt != TensorFmt::kF32 && fmt != TensorFmt::kQ8G && fmt != TensorFmt::kQ4G &&
      fmt != TensorFmt::kQ3G) {
    return ArgError(fmt::format("{}: {} is not a trunk format", name, TensorFmtName(fmt)));
  }
  int64_t elements = 1;
  if (shape.empty() || shape.size() > static_cast<size_t>(format::kMaxTensorDims)) {
    return ArgError(fmt::format("{}: a tensor has 1 to 4 dimensions", name));
  }
  for (int64_t d : shape) {
    if (d < 1 || d > format::kMaxTensorDim) {
      return ArgError(fmt::format("{}: dimension {} is outside 1..2^26", name, d));
    }
    if (elements > format::kMaxTensorElements / d) {
      return ArgError(fmt::format("{}: more than 2^40 elements", name));
    }
    elements *= d;
  }
  if (!trunk_) trunk_ = std::make_unique<Output>(Output{"trunk.bin", Join(dir_, "trunk.bin")});
  format::TrunkGeometry g = format::ComputeTrunkGeometry(fmt, shape, kGroup);
  OJson entry = OJson::object();
  entry["name"] = name;
  entry["fmt"] = static_cast<int>(fmt);
  entry["off"] = trunk_->pos;
  entry["shape"] = shape;
  Status st;
  if (fmt == TensorFmt::kF32) {
    if (!options_.dry_run) {
      std::vector<float> x(static_cast<size_t>(g.cols));
      for (int64_t r = 0; r < g.rows && st.ok(); ++r) {
        rows(r, x.data());
        st = Append(*trunk_, x.data(), x.size() * sizeof(float));
      }
    } else {
      trunk_->pos += g.payload_bytes;
    }
    entry["bytes"] = g.payload_bytes;
  } else {
    uint64_t scale_off = trunk_->pos + g.payload_bytes;
    if (!options_.dry_run) {
      st = WriteQuantizedTensor(fmt, g, kGroup, rows, &scale_off);
    } else {
      trunk_->pos += g.payload_bytes + g.scale_bytes;
    }
    entry["group"] = kGroup;
    entry["scale_off"] = scale_off;
    entry["bytes"] = g.payload_bytes + g.scale_bytes;
  }
  if (!st.ok()) return Status(st.code(), fmt::format("{}: {}", name, st.message()));
  trunk_index_.push_back(std::move(entry));
  return Status::Ok();
}

Status ContainerWriter::AddTensor(const std::string& name, TensorFmt fmt,
                                  const std::vector<int64_t>& shape,
                                  std::span<const float> values) {
  int64_t n = 1;
  for (int64_t d : shape) n *= std::max<int64_t>(d, 0);
  if (static_cast<int64_t>(values.size()) != n || shape.empty()) {
    return ArgError(fmt::format("{}: {} values given for {} elements", name, values.size(), n));
  }
  const int64_t cols = shape.back();
  return AddTensor(name, fmt, shape, [&](int64_t r, float* out) {
    std::copy_n(values.data() + r * cols, cols, out);
  });
}

Result<int> ContainerWriter::AddCodebooks(int layer, std::span<const float> books) {
  const ModelConfig& c = config_;
  if (layer < 0 || layer >= c.n_layers || c.ffn_kind[layer] != FfnKind::kMoe) {
    return ArgError(fmt::format("codebooks for layer {}, which is not a MoE layer", layer));
  }
  if (codebook_base_[layer] >= 0) {
    return ArgError(fmt::format("codebooks of layer {} were already written", layer));
  }
  const ExpertQuant& q = c.quant;
  const size_t per_book = static_cast<size_t>(q.entries) * q.vec_dim;
  const size_t count = 3 * static_cast<size_t>(q.stages);
  if (books.size() != count * per_book) {
    return ArgError(fmt::format("layer {}: {} codebook values, expected 3 x {} x {} x {}", layer,
                                books.size(), q.stages, q.entries, q.vec_dim));
  }
  if (n_books_ + static_cast<int>(count) > 65536) {
    return ArgError("more than 65536 codebook records: record headers hold a u16 base");
  }
  if (!codebooks_) {
    codebooks_ = std::make_unique<Output>(Output{"codebooks.bin", Join(dir_, "codebooks.bin")});
  }
  const int base = n_books_;
  std::vector<uint8_t> rec(static_cast<size_t>(format::CodebookRecordBytes(q)));
  for (size_t b = 0; b < count; ++b) {
    format::CodebookHeader h{};
    h.magic = format::kCodebookMagic;
    h.codebook_id = static_cast<uint16_t>(base + static_cast<int>(b));
    h.fmt = format::FmtByte(format::TensorFmt::kVq3r);  // both reference writers always write 4 (§5)
    h.vec_dim = static_cast<uint8_t>(q.vec_dim);
    h.n_entries = static_cast<uint32_t>(q.entries);
    std::memcpy(rec.data(), &h, sizeof(h));
    for (size_t i = 0; i < per_book; ++i) {
      uint16_t v = format::F32ToF16(books[b * per_book + i]);
      if (!format::F16IsFinite(v)) {
        return ArgError(fmt::format("layer {}: codebook value {} does not fit f16", layer,
                                    books[b * per_book + i]));
      }
      // The reader flushes f16 subnormals (§5): store what it will decode.
      if (format::F16IsSubnormal(v)) v &= 0x8000;
      std::memcpy(rec.data() + format::kCodebookHeaderBytes + 2 * i, &v, 2);
    }
    WASTE_TRY(Append(*codebooks_, rec.data(), rec.size()));
  }
  n_books_ += static_cast<int>(count);
  codebook_base_[layer] = base;
  return base;
}

Status ContainerWriter::BeginBank(int layer) {
  if (bank_) return ArgError(fmt::format("bank of layer {} is still open", bank_layer_));
  if (layer < 0 || layer >= config_.n_layers || config_.ffn_kind[layer] != FfnKind::kMoe) {
    return ArgError(fmt::format("bank for layer {}, which is not a MoE layer", layer));
  }
  if (codebook_base_[layer] < 0) {
    return ArgError(fmt::format("bank of layer {} before its codebooks", layer));
  }
  std::string name = fmt::format("experts-L{}.bin", layer);
  if (layers_.contains(std::to_string(layer))) {
    return ArgError(fmt::format("bank of layer {} was already written", layer));
  }
  bank_ = std::make_unique<Output>(Output{name, Join(dir_, name)});
  bank_layer_ = layer;
  bank_records_ = 0;
  builder_.Clear();
  return Status::Ok();
}

Status ContainerWriter::AddRecord() {
  if (!bank_) return ArgError("AddRecord outside BeginBank/EndBank");
  if (bank_records_ >= config_.moe.n_experts) {
    return ArgError(fmt::format("layer {}: more than {} records", bank_layer_, config_.moe.n_experts));
  }
  ++bank_records_;
  if (options_.dry_run) {
    bank_->pos += builder_.size();
    return Status::Ok();
  }
  builder_.Finish(bank_layer_, bank_records_ - 1, codebook_base_[bank_layer_]);
  WASTE_TRY(Append(*bank_, builder_.data(), builder_.size()));
  builder_.Clear();
  return Status::Ok();
}

Status ContainerWriter::EndBank() {
  if (!bank_) return ArgError("EndBank without BeginBank");
  if (bank_records_ != config_.moe.n_experts) {
    return ArgError(fmt::format("layer {}: {} records written, expected {}", bank_layer_,
                                bank_records_, config_.moe.n_experts));
  }
  if (bank_->file != nullptr && std::fclose(bank_->file) != 0) {
    bank_->file = nullptr;
    return IoError(fmt::format("close {}: {}", bank_->path, std::strerror(errno)));
  }
  bank_->file = nullptr;
  layers_[std::to_string(bank_layer_)] = {{"file", bank_->name},
                                          {"experts", config_.moe.n_experts},
                                          {"bytes", bank_->pos},
                                          {"codebook_base", codebook_base_[bank_layer_]}};
  bank_.reset();
  bank_layer_ = -1;
  return Status::Ok();
}

Status ContainerWriter::AddFile(const std::string& name, std::string_view bytes) {
  WASTE_TRY(CheckPlainName("file name", name, 255));
  if (name.find('/') != std::string::npos || name.find("..") != std::string::npos) {
    return ArgError(fmt::format("file name \"{}\" must stay inside the container", name));
  }
  if (options_.dry_run) return Status::Ok();
  return WriteShared(Join(dir_, name), bytes);
}

Status ContainerWriter::Finish() {
  if (finished_) return ArgError("Finish called twice");
  if (bank_) return ArgError(fmt::format("bank of layer {} is still open", bank_layer_));
  for (int l = 0; l < config_.n_layers; ++l) {
    if (config_.ffn_kind[l] == FfnKind::kMoe && !layers_.contains(std::to_string(l))) {
      return ArgError(fmt::format("MoE layer {} has no expert bank", l));
    }
  }
  // Both data files must exist even when empty (FORMAT.md §2).
  if (!trunk_) trunk_ = std::make_unique<Output>(Output{"trunk.bin", Join(dir_, "trunk.bin")});
  if (!codebooks_) {
    codebooks_ = std::make_unique<Output>(Output{"codebooks.bin", Join(dir_, "codebooks.bin")});
  }
  for (Output* o : {trunk_.get(), codebooks_.get()}) {
    if (options_.dry_run) continue;
    if (o->file == nullptr) WASTE_TRY(Append(*o, nullptr, 0));  // creates the file
    if (std::fclose(o->file) != 0) {
      o->file = nullptr;
      return IoError(fmt::format("close {}: {}", o->path, std::strerror(errno)));
    }
    o->file = nullptr;
  }

  const ExpertQuant& q = config_.quant;
  OJson quant = OJson::object();
  quant["fmt"] = q.index_bits == 6 ? std::string("VQ4P") : fmt::format("VQ{}R", q.stages);
  quant["stages"] = q.stages;
  quant["vec_dim"] = q.vec_dim;
  quant["entries"] = q.entries;
  quant["index_bits"] = q.index_bits;
  quant["index_block"] = format::kIndexBlockRows;
  if ((q.stages * q.index_bits) % 8 == 0) {
    quant["bits_per_weight"] = q.stages * q.index_bits / 8;
  } else {
    quant["bits_per_weight"] = q.stages * q.index_bits / 8.0;
  }
  OJson root = OJson::object();
  root["format_version"] = format::kFormatVersion;
  root["arch"] = options_.arch;
  root["tensor_prefix"] = options_.tensor_prefix;
  root["config"] = config_json_;
  root["expert_quant"] = quant;
  root["layers"] = layers_;
  root["trunk"] = trunk_index_;
  WASTE_ASSIGN_OR_RETURN(std::string text, Dump(root, 1));
  text += '\n';

  // What the reader will check, checked now: never leave a manifest behind
  // that our own reader refuses.
  WASTE_ASSIGN_OR_RETURN(Manifest m, ParseManifest(text, Join(dir_, "manifest.json")));
  WASTE_TRY(ValidateTrunkIndex(m, trunk_->pos));
  WASTE_TRY(ValidateRequiredTensors(m));
  for (const BankInfo& b : m.banks) {
    if (b.layer >= 0 && b.codebook_base + 3 * q.stages > n_books_) {
      return FormatError(fmt::format("layer {}: codebook base {} past the {} records written",
                                     b.layer, b.codebook_base, n_books_));
    }
  }
  WASTE_TRY(WriteShared(Join(dir_, "manifest.json"), text));
  finished_ = true;
  return Status::Ok();
}

}  // namespace waste
