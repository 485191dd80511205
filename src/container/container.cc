// Container::Open and the per-record checks (FORMAT.md §8): the manifest is
// validated first (manifest.cc), then the trunk index against trunk.bin,
// the required tensors, the resident tensors loaded into one aligned
// buffer, the codebooks decoded, and every bank opened.
#include "container/container.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <unordered_map>
#include <unordered_set>

#include "format/format.h"
#include "waste/files.h"
#include "container/tensor_list.h"

namespace waste {
namespace {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

uint64_t AlignUp(uint64_t n) {
  return (n + kTrunkAlignment - 1) / kTrunkAlignment * kTrunkAlignment;
}

TensorView MakeView(const TensorInfo& t) {
  format::TrunkGeometry g =
      format::ComputeTrunkGeometry(t.fmt, t.shape, t.group);
  TensorView v;
  v.fmt = t.fmt;
  v.rows = g.rows;
  v.cols = g.cols;
  v.row_bytes = static_cast<size_t>(g.row_bytes);
  v.group = t.group;
  v.groups = static_cast<size_t>(g.groups);
  v.info = &t;
  return v;
}

}  // namespace

struct Container::Impl {
  platform::File trunk_file;
  platform::LargeBuffer trunk_buffer;  // huge-page advised: the matvecs walk all of it
  std::unordered_map<std::string, TensorView, StringHash, std::equal_to<>> views;
  // The quantized embedding stays on disk; its view has no data.
  bool embed_on_disk = false;
  TensorView embed;
  std::vector<float> codebooks;           // [n_books][entries][vec_dim]
  size_t codebook_floats = 0;             // per record
  std::vector<BankInfo> banks;            // [n_layers]
  std::vector<platform::File> bank_files; // [n_layers]; closed for dense layers
  format::RecordLayout layout;
};

Container::~Container() = default;

namespace {

// Index of the first non-finite f32 in p[0..n), or n.
size_t FirstNonFiniteF32(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + 4 * i, 4);
    if ((bits & 0x7f800000u) == 0x7f800000u) return i;
  }
  return n;
}

// Index of the first f16 Inf/NaN in p[0..n), or n.
size_t FirstNonFiniteF16(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if ((format::LoadU16(p + 2 * i) & 0x7c00u) == 0x7c00u) return i;
  }
  return n;
}

uint64_t ManifestFingerprint(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  return h == 0 ? 1 : h;
}

std::string Join(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

// Loads every resident tensor (first entry of each name) into one buffer.
Status LoadTrunk(const Manifest& m, const std::vector<TensorInfo>& index, bool huge_pages,
                 Container::Impl& impl, uint64_t* resident_bytes, uint64_t* finite_checked) {
  const ModelConfig& cfg = m.config;
  struct Placement {
    const TensorInfo* t;
    format::TrunkGeometry g;
    uint64_t at;
  };
  std::vector<Placement> plan;
  std::unordered_set<std::string_view> seen;
  uint64_t total = 0;
  for (const TensorInfo& t : index) {
    if (!seen.insert(t.name).second) continue;  // the first entry of a name wins
    if (IsOnDiskEmbedding(cfg, t)) {
      impl.embed_on_disk = true;
      impl.embed = MakeView(t);
      continue;
    }
    if (!IsResidentTensor(cfg, t)) continue;    // outside the prefix: never read
    format::TrunkGeometry g =
        format::ComputeTrunkGeometry(t.fmt, t.shape, t.group);
    plan.push_back({&t, g, total});
    total += AlignUp(g.payload_bytes) + AlignUp(g.scale_bytes);
  }
  *resident_bytes = total;
  if (total > 0) {
    WASTE_ASSIGN_OR_RETURN(
        impl.trunk_buffer,
        platform::LargeBuffer::Allocate(
            static_cast<size_t>(total), huge_pages,
            fmt::format("trunk.bin: the buffer for the {} bytes of resident tensors", total)));
  }
  uint8_t* base = impl.trunk_buffer.data();
  for (const Placement& p : plan) {
    const TensorInfo& t = *p.t;
    uint8_t* data = base + p.at;
    Status st = impl.trunk_file.ReadAt(t.off, data, static_cast<size_t>(p.g.payload_bytes));
    if (!st.ok()) {
      return IoError(fmt::format("trunk.bin: tensor \"{}\" payload at offset {}: {}", t.name,
                                 t.off, st.message()));
    }
    TensorView v = MakeView(t);
    v.data = data;
    // Finite check once at open: a NaN or Inf weight would otherwise turn
    // every logit into NaN and the output into token 0 (docs/HARDENING.md).
    if (t.fmt == TensorFmt::kF32) {
      size_t n = static_cast<size_t>(p.g.payload_bytes / 4);
      if (size_t bad = FirstNonFiniteF32(data, n); bad < n) {
        return FormatError(fmt::format("trunk.bin: tensor \"{}\" value {} of {} is not finite",
                                       t.name, bad, n));
      }
      *finite_checked += n;
    }
    if (t.fmt != TensorFmt::kF32) {
      uint8_t* scales = data + AlignUp(p.g.payload_bytes);
      st = impl.trunk_file.ReadAt(t.scale_off, scales, static_cast<size_t>(p.g.scale_bytes));
      if (!st.ok()) {
        return IoError(fmt::format("trunk.bin: tensor \"{}\" scales at offset {}: {}", t.name,
                                   t.scale_off, st.message()));
      }
      size_t n = static_cast<size_t>(p.g.scale_bytes / 2);
      if (size_t bad = FirstNonFiniteF16(scales, n); bad < n) {
        return FormatError(fmt::format("trunk.bin: tensor \"{}\" scale {} of {} is not finite",
                                       t.name, bad, n));
      }
      *finite_checked += n;
      v.scales = reinterpret_cast<const uint16_t*>(scales);
    }
    std::string key = t.name.substr(cfg.tensor_prefix.size());
    // A quantized router bias is ignored, as the reference does (§4.7).
    if (key.ends_with("block_sparse_moe.gate.e_score_correction_bias") &&
        t.fmt != TensorFmt::kF32) {
      continue;
    }
    impl.views.emplace(std::move(key), v);
  }
  return Status::Ok();
}

Status LoadCodebooks(const std::string& dir, const Manifest& m, Container::Impl& impl,
                     int* n_books) {
  std::string path = Join(dir, "codebooks.bin");
  const ExpertQuant& q = m.config.quant;
  uint64_t record = format::CodebookRecordBytes(q);
  // codebook_base is 16-bit, so no layer can use a record past 2^16 + 3 *
  // stages: anything beyond is never read and need not be loaded.
  uint64_t max_books = 65536 + 3 * static_cast<uint64_t>(std::max(0, q.stages));
  Result<std::string> bytes = platform::ReadRegularFile(path, max_books * record, "codebooks");
  if (!bytes) return bytes.error();
  uint64_t count = bytes->size() / record;  // trailing partial bytes are ignored (§5)
  if (count > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
    return FormatError(fmt::format("codebooks.bin: {} records is too many", count));
  }
  *n_books = static_cast<int>(count);
  impl.codebook_floats = static_cast<size_t>(q.entries) * q.vec_dim;
  impl.codebooks.resize(static_cast<size_t>(count) * impl.codebook_floats);
  const uint8_t* src = reinterpret_cast<const uint8_t*>(bytes->data());
  for (uint64_t b = 0; b < count; ++b) {
    const uint8_t* entries = src + b * record + format::kCodebookHeaderBytes;
    float* dst = impl.codebooks.data() + b * impl.codebook_floats;
    for (size_t i = 0; i < impl.codebook_floats; ++i) {
      dst[i] = format::F16ToF32Flush(format::LoadU16(entries + 2 * i));
    }
    // Every entry of every record, used or not: the check is cheap and a
    // NaN centroid would silently poison whichever expert uses it.
    if (size_t bad = FirstNonFiniteF16(entries, impl.codebook_floats); bad < impl.codebook_floats) {
      return FormatError(fmt::format("codebooks.bin: record {} entry value {} is not finite", b,
                                     bad));
    }
  }
  return Status::Ok();
}

Status OpenBanks(const std::string& dir, const Manifest& m, const ContainerOptions& options,
                 int n_books, Container::Impl& impl, bool* all_bypass) {
  const ModelConfig& cfg = m.config;
  impl.banks = m.banks;
  impl.bank_files.resize(static_cast<size_t>(cfg.n_layers));
  bool any = false;
  *all_bypass = options.direct_io;
  for (int l = 0; l < cfg.n_layers; ++l) {
    const BankInfo& b = impl.banks[l];
    if (cfg.ffn_kind[l] != FfnKind::kMoe) continue;
    if (b.codebook_base + 3 * cfg.quant.stages > n_books) {
      return FormatError(fmt::format(
          "manifest.json: layers.\"{}\".codebook_base {} needs codebook records {}..{}, "
          "codebooks.bin holds {}",
          l, b.codebook_base, b.codebook_base, b.codebook_base + 3 * cfg.quant.stages - 1,
          n_books));
    }
    std::string path = Join(dir, b.file);
    Result<platform::File> f = options.direct_io ? platform::File::OpenBypass(path)
                                                 : platform::File::Open(path);
    if (!f) return IoError(fmt::format("{}: {}", b.file, f.error().message()));
    if (f->size() < b.bytes) {
      return IoError(fmt::format("{}: short read: the bank holds {} bytes, the manifest promises "
                                 "{} ({} records of {})",
                                 b.file, f->size(), b.bytes, b.experts, b.record_bytes));
    }
    any = true;
    *all_bypass = *all_bypass && f->bypass();
    impl.bank_files[l] = std::move(*f);
  }
  if (!any) *all_bypass = false;
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Container>> Container::Open(const std::string& dir,
                                                   const ContainerOptions& options) {
  try {
    Result<std::string> text =
        platform::ReadRegularFile(Join(dir, "manifest.json"), kMaxManifestBytes, "manifest");
    if (!text) return text.error();
    WASTE_ASSIGN_OR_RETURN(Manifest m, ParseManifest(*text, Join(dir, "manifest.json")));

    std::unique_ptr<Container> c(new Container());
    c->fingerprint_ = ManifestFingerprint(*text);
    c->dir_ = dir;
    c->options_ = options;
    c->impl_ = std::make_unique<Impl>();
    Impl& impl = *c->impl_;

    Result<platform::File> trunk = platform::File::Open(Join(dir, "trunk.bin"));
    if (!trunk) return IoError(fmt::format("trunk.bin: {}", trunk.error().message()));
    impl.trunk_file = std::move(*trunk);
    WASTE_TRY(ValidateTrunkIndex(m, impl.trunk_file.size()));
    WASTE_TRY(ValidateRequiredTensors(m));

    if (m.config.moe.n_experts > 0) {
      WASTE_ASSIGN_OR_RETURN(impl.layout, format::ComputeRecordLayout(
                                              m.config.moe.inter, m.config.expert_in(),
                                              m.config.quant));
    }
    c->config_ = m.config;
    c->trunk_index_ = std::move(m.trunk);
    WASTE_TRY(LoadTrunk(m, c->trunk_index_, options.huge_pages, impl, &c->resident_trunk_bytes_,
                        &c->checked_finite_values_));

    WASTE_TRY(LoadCodebooks(dir, m, impl, &c->codebook_count_));
    c->checked_finite_values_ += impl.codebooks.size();
    WASTE_TRY(OpenBanks(dir, m, options, c->codebook_count_, impl, &c->direct_io_));
    for (const BankInfo& b : impl.banks) {
      c->max_record_bytes_ = std::max(c->max_record_bytes_, b.record_bytes);
    }
    return c;
  } catch (const std::bad_alloc&) {
    return OomError(fmt::format("{}: out of memory while opening the container", dir));
  } catch (const std::exception& e) {
    return FormatError(fmt::format("{}: cannot open the container: {}", dir, e.what()));
  }
}

const TensorView* Container::Find(std::string_view name) const {
  auto it = impl_->views.find(name);
  if (it != impl_->views.end()) return &it->second;
  if (impl_->embed_on_disk && name == "model.embed_tokens.weight") return &impl_->embed;
  return nullptr;
}

const TensorView* Container::FindLayer(int layer, std::string_view suffix) const {
  return Find(fmt::format("model.layers.{}.{}", layer, suffix));
}

Status Container::ReadEmbeddingRow(int token, float* out) const {
  if (token < 0 || token >= config_.vocab) {
    return ArgError(fmt::format("token id {} is outside the vocabulary 0..{}", token,
                                config_.vocab - 1));
  }
  if (!impl_->embed_on_disk) {
    const TensorView* e = Find("model.embed_tokens.weight");
    if (e == nullptr || e->data == nullptr) {
      return FormatError("model.embed_tokens.weight is not loaded");
    }
    DequantizeRow(*e, token, out);
    return Status::Ok();
  }
  // One row and its scales, read on demand (§4.7).
  const TensorView& e = impl_->embed;
  const TensorInfo& t = *e.info;
  std::vector<uint8_t> row_bytes(e.row_bytes);
  std::vector<uint16_t> scales(e.groups);
  uint64_t row = static_cast<uint64_t>(token);
  Status st = impl_->trunk_file.ReadAt(t.off + row * e.row_bytes, row_bytes.data(), e.row_bytes);
  if (st.ok()) {
    st = impl_->trunk_file.ReadAt(t.scale_off + 2 * row * e.groups, scales.data(), 2 * e.groups);
  }
  if (!st.ok()) {
    return IoError(fmt::format("trunk.bin: embedding row {}: {}", token, st.message()));
  }
  TensorView one = e;
  one.rows = 1;
  one.data = row_bytes.data();
  one.scales = scales.data();
  // The on-disk table was not checked at open (it is never read whole):
  // its scales are checked row by row as they are read.
  if (size_t bad = FirstNonFiniteF16(reinterpret_cast<const uint8_t*>(scales.data()), e.groups);
      bad < e.groups) {
    return FormatError(fmt::format("trunk.bin: embedding row {} scale {} is not finite", token,
                                   bad));
  }
  DequantizeRow(one, 0, out);
  return Status::Ok();
}

const float* Container::Codebook(int index) const {
  if (index < 0 || index >= codebook_count_) return nullptr;
  return impl_->codebooks.data() + static_cast<size_t>(index) * impl_->codebook_floats;
}

bool Container::is_moe_layer(int layer) const {
  return layer >= 0 && layer < config_.n_layers && config_.ffn_kind[layer] == FfnKind::kMoe;
}

const BankInfo& Container::bank(int layer) const { return impl_->banks[layer]; }

const platform::File& Container::bank_file(int layer) const { return impl_->bank_files[layer]; }

const format::RecordLayout& Container::record_layout() const { return impl_->layout; }

Result<ExpertRecordView> Container::ParseRecord(int layer, int expert, const uint8_t* record,
                                                bool verify_crc) const {
  auto v = CheckRecord(layer, expert, record, verify_crc);
  if (v) return v;
  return RecordError(layer, expert, v.error());
}

Status RecordError(int layer, int expert, const Status& reason) {
  if (reason.ok()) return reason;
  return Status(reason.code(), fmt::format("expert {} of layer {}: {}", expert, layer, reason.message()),
                ExpertFailureInfo{layer, expert});
}

Result<ExpertRecordView> Container::CheckRecord(int layer, int expert, const uint8_t* record,
                                                bool verify_crc) const {
  if (!is_moe_layer(layer)) {
    return IoError("record header is not what the bank index describes: the layer has no "
                   "expert bank");
  }
  const BankInfo& b = impl_->banks[layer];
  if (expert < 0 || expert >= b.experts || b.record_bytes == 0) {
    return IoError(fmt::format("record header is not what the bank index describes: "
                               "expert id outside 0..{}",
                               b.experts - 1));
  }
  format::RecordExpectation want;
  want.layer = layer;
  want.expert = expert;
  want.record_bytes = b.record_bytes;
  want.codebook_base = b.codebook_base;
  want.n_books = codebook_count_;
  want.layout = &impl_->layout;
  Status st = format::ValidateRecordHeader(record, want);
  if (!st.ok()) return st;
  if (verify_crc) {
    st = format::VerifyRecordCrc(record, impl_->layout);
    if (!st.ok()) return st;
  }
  const format::RecordLayout& l = impl_->layout;
  ExpertRecordView v;
  v.gate = record + l.m[format::kGate].offset;
  v.up = record + l.m[format::kUp].offset;
  v.down = record + l.m[format::kDown].offset;
  const uint16_t* scales = reinterpret_cast<const uint16_t*>(record + l.scales_off);
  v.scale_gate = scales;
  v.scale_up = scales + config_.moe.inter;
  v.scale_down = scales + 2 * static_cast<size_t>(config_.moe.inter);
  v.codebook_id = b.codebook_base;
  return v;
}

void Container::DequantizeExpertRow(const ExpertRecordView& rec, int kind, int row,
                                    float* out) const {
  const format::RecordLayout& l = impl_->layout;
  const format::MatrixLayout& m = l.m[kind];
  const uint8_t* base = kind == format::kGate ? rec.gate : kind == format::kUp ? rec.up : rec.down;
  const uint16_t* scales =
      kind == format::kGate ? rec.scale_gate : kind == format::kUp ? rec.scale_up : rec.scale_down;
  const float scale = format::F16ToF32(scales[row]);
  const int book0 = rec.codebook_id + kind * l.stages;
  uint8_t idx[8];
  for (int v = 0; v < m.nv; ++v) {
    // Offsets in the layout are from the record start; `base` is the matrix.
    const uint8_t* run = base + (format::IndexRunOffset(l, kind, row, v) - m.offset);
    format::DecodeRun(l, run, idx);
    for (int j = 0; j < l.vec_dim; ++j) {
      float sum = 0.0f;
      for (int s = 0; s < l.stages; ++s) {
        sum += Codebook(book0 + s)[static_cast<size_t>(idx[s]) * l.vec_dim + j];
      }
      out[static_cast<size_t>(v) * l.vec_dim + j] = scale * sum;
    }
  }
}

}  // namespace waste
