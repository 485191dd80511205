#include "convert/dequant.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "format/format.h"

namespace waste::convert {

float Bf16ToF32(uint16_t v) { return std::bit_cast<float>(static_cast<uint32_t>(v) << 16); }

float E4M3ToF32(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return std::numeric_limits<float>::quiet_NaN();
  const float mag = e == 0 ? std::ldexp(static_cast<float>(m) / 8.0f, -6)
                           : std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
  return s ? -mag : mag;
}

float E5M2ToF32(uint8_t b) { return format::F16ToF32(static_cast<uint16_t>(b) << 8); }

float Mxfp4Value(uint8_t n) {
  static constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  return (n & 8) ? -kMag[n & 7] : kMag[n & 7];
}

Status DecodeFloats(DType t, const uint8_t* src, size_t n, float* out, const std::string& what) {
  switch (t) {
    case DType::kF32:
      std::memcpy(out, src, n * 4);
      return Status::Ok();
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) out[i] = format::F16ToF32(format::LoadU16(src + 2 * i));
      return Status::Ok();
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) out[i] = Bf16ToF32(format::LoadU16(src + 2 * i));
      return Status::Ok();
    case DType::kF64:
      for (size_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, src + 8 * i, 8);
        out[i] = static_cast<float>(d);
      }
      return Status::Ok();
    case DType::kF8E4M3: {
      float lut[256];
      for (int b = 0; b < 256; ++b) lut[b] = E4M3ToF32(static_cast<uint8_t>(b));
      for (size_t i = 0; i < n; ++i) out[i] = lut[src[i]];
      return Status::Ok();
    }
    case DType::kF8E5M2:
      for (size_t i = 0; i < n; ++i) out[i] = E5M2ToF32(src[i]);
      return Status::Ok();
    default:
      return FormatError(fmt::format("{}: dtype {} is not a floating-point type", what, DTypeName(t)));
  }
}

Status ApplyBlockScales(float* w, int64_t rows, int64_t cols, const float* scale, int64_t srows,
                        int64_t scols, int bm, int bn, const std::string& what) {
  const int64_t want_r = (rows + bm - 1) / bm, want_c = (cols + bn - 1) / bn;
  if (srows != want_r || scols != want_c) {
    return FormatError(fmt::format(
        "{}: scale tensor is [{}, {}], a [{}, {}] matrix in [{}, {}] blocks needs [{}, {}]", what,
        srows, scols, rows, cols, bm, bn, want_r, want_c));
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* srow = scale + (r / bm) * scols;
    float* row = w + r * cols;
    for (int64_t c = 0; c < cols; ++c) row[c] *= srow[c / bn];
  }
  return Status::Ok();
}

void DecodeMxfp4(const uint8_t* packed, const uint8_t* scale, int64_t rows, int64_t cols,
                 float* out) {
  float lut[16];
  for (int n = 0; n < 16; ++n) lut[n] = Mxfp4Value(static_cast<uint8_t>(n));
  const int64_t groups = cols / 32;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const uint8_t e = scale[r * groups + g];
      const float s = e == 0 ? 0.0f : std::ldexp(1.0f, static_cast<int>(e) - 127);
      const uint8_t* p = packed + r * (cols / 2) + g * 16;
      float* o = out + r * cols + g * 32;
      for (int k = 0; k < 16; ++k) {
        o[2 * k] = lut[p[k] & 15] * s;
        o[2 * k + 1] = lut[p[k] >> 4] * s;
      }
    }
  }
}

void DecodeInt4(const uint8_t* packed, const float* scale, int64_t rows, int64_t cols, int group,
                float* out) {
  const int64_t row_bytes = (cols + 7) / 8 * 4, groups = (cols + group - 1) / group;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* prow = packed + r * row_bytes;
    const float* srow = scale + r * groups;
    float* o = out + r * cols;
    // Column c sits in word c / 8 at bits 4 (c % 8); the words being little
    // endian, that is byte c / 2 of the row, low nibble for even c. Walking
    // bytes keeps the file's byte order whatever the host's, and one group
    // at a time hoists its scale. Padding nibbles past `cols` are never read.
    for (int64_t g = 0; g < groups; ++g) {
      const float s = srow[g];
      const int64_t end = std::min(cols, (g + 1) * group);
      for (int64_t c = g * group; c < end; ++c) {
        const uint8_t byte = prow[c / 2];
        const int code = ((c & 1) != 0 ? byte >> 4 : byte & 15) - 8;  // stored as q + 8
        o[c] = static_cast<float>(code) * s;
      }
    }
  }
}

int64_t F32Tensor::rows() const {
  int64_t n = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) n *= shape[i];
  return n;
}

bool CheckpointHasTensor(const Checkpoint& ckpt, const std::string& name) {
  return ckpt.Has(name) || ckpt.Has(name + "_packed");
}

uint64_t SourceBytes(const Checkpoint& ckpt, const std::string& name) {
  uint64_t n = 0;
  for (const std::string& s :
       {name, name + "_scale_inv", name + "_packed", name + "_scale", name + "_shape"}) {
    if (const TensorEntry* t = ckpt.Find(s)) n += t->bytes;
  }
  return n;
}

namespace {

// ceil(a / b) for a >= 0, b > 0, without the overflow of (a + b - 1) / b.
int64_t CeilDiv(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// "SHARD: tensor NAME", how errors name a tensor.
std::string TensorWhat(const Checkpoint& ckpt, const TensorEntry& t) {
  return fmt::format("{}: tensor {}", ckpt.ShardPath(t), t.name);
}

// MXFP4 (K3's routed experts): NAME_packed U8 [rows, cols/2] + NAME_scale U8
// [rows, cols/32].
Status LoadMxfp4(const Checkpoint& ckpt, const std::string& name, const TensorEntry& p,
                 F32Tensor* out, std::vector<uint8_t>* raw) {
  const std::string what = fmt::format("{}: tensor {}_packed", ckpt.ShardPath(p), name);
  const TensorEntry* s = ckpt.Find(name + "_scale");
  if (s == nullptr) {
    return FormatError(
        fmt::format("{}: MXFP4 codes without their scale tensor {}_scale", what, name));
  }
  if (p.dtype != DType::kU8 && p.dtype != DType::kI8) {
    return FormatError(fmt::format("{}: dtype {}, MXFP4 codes are U8", what, DTypeName(p.dtype)));
  }
  if (s->dtype != DType::kU8 && s->dtype != DType::kI8) {
    return FormatError(fmt::format("{}: dtype {}, MXFP4 scales are U8", TensorWhat(ckpt, *s),
                                   DTypeName(s->dtype)));
  }
  if (p.shape.size() != 2 || s->shape.size() != 2 || s->shape[0] != p.shape[0] ||
      s->shape[1] * 16 != p.shape[1]) {
    return FormatError(
        fmt::format("{}: packed shape [{}] and scale shape [{}] do not match "
                    "(scale columns x 16 = packed columns)",
                    what, fmt::join(p.shape, ", "), fmt::join(s->shape, ", ")));
  }
  const int64_t rows = p.shape[0], cols = p.shape[1] * 2;
  out->shape = {rows, cols};
  out->values.resize(static_cast<size_t>(rows * cols));
  std::vector<uint8_t> sraw;
  WASTE_TRY(ckpt.ReadRaw(p, raw));
  WASTE_TRY(ckpt.ReadRaw(*s, &sraw));
  DecodeMxfp4(raw->data(), sraw.data(), rows, cols, out->values.data());
  return Status::Ok();
}

// NAME_shape of a pack-quantized matrix: the logical [rows, cols], which the
// packed words alone cannot give (cols is rounded up to a multiple of 8).
Result<std::pair<int64_t, int64_t>> ReadInt4Shape(const Checkpoint& ckpt, const std::string& name,
                                                  const std::string& packed_what) {
  const TensorEntry* t = ckpt.Find(name + "_shape");
  if (t == nullptr) {
    return FormatError(
        fmt::format("{}: int4 codes without their shape tensor {}_shape (the column "
                    "count is never guessed from the padded words)",
                    packed_what, name));
  }
  const std::string what = TensorWhat(ckpt, *t);
  if ((t->dtype != DType::kI32 && t->dtype != DType::kI64) || t->elements() != 2 ||
      t->shape.size() != 1) {
    return FormatError(
        fmt::format("{}: dtype {} shape [{}], expected 2 elements of I32 or I64 "
                    "(rows, cols)",
                    what, DTypeName(t->dtype), fmt::join(t->shape, ", ")));
  }
  std::vector<uint8_t> bytes;
  WASTE_TRY(ckpt.ReadRaw(*t, &bytes));
  int64_t v[2];
  for (int i = 0; i < 2; ++i) {
    // Little endian either way (the file's order, whatever the host's).
    if (t->dtype == DType::kI32) {
      v[i] = static_cast<int32_t>(format::LoadU32(bytes.data() + 4 * i));
    } else {
      const uint64_t lo = format::LoadU32(bytes.data() + 8 * i);
      const uint64_t hi = format::LoadU32(bytes.data() + 8 * i + 4);
      v[i] = static_cast<int64_t>(lo | hi << 32);
    }
  }
  if (v[0] < 1 || v[1] < 1) {
    return FormatError(fmt::format("{}: [{}, {}] is not a matrix shape", what, v[0], v[1]));
  }
  return std::pair<int64_t, int64_t>{v[0], v[1]};
}

// compressed-tensors pack-quantized int4 (Kimi-K2-Thinking's routed experts):
// NAME_packed I32 [rows, ceil(cols/8)], NAME_scale float [rows,
// ceil(cols/group)], NAME_shape [rows, cols]. Every shape is checked against
// NAME_shape and the config's group size before a code is decoded; companions
// this decoder does not apply (a zero point, a column permutation) are refused
// rather than ignored.
Status LoadInt4(const Checkpoint& ckpt, const std::string& name, const TensorEntry& p,
                const SourceQuant& q, F32Tensor* out, std::vector<uint8_t>* raw) {
  const std::string what = TensorWhat(ckpt, p);
  if (!q.int4_packed || q.int4_group < 1) {
    return FormatError(fmt::format(
        "{}: dtype I32 (pack-quantized int4), but config.json's quantization_config is not "
        "compressed-tensors \"pack-quantized\" with a group size (the group is never guessed)",
        what));
  }
  if (p.dtype != DType::kI32) {
    return FormatError(fmt::format(
        "{}: dtype {}, but config.json declares pack-quantized int4, stored as I32 words (U8 "
        "_packed codes are MXFP4)",
        what, DTypeName(p.dtype)));
  }
  for (const char* refused : {"_zero_point", "_g_idx"}) {
    if (ckpt.Has(name + refused)) {
      return UnsupportedError(fmt::format(
          "{}: {}{} is present; only symmetric int4 with contiguous groups is supported (no zero "
          "point, no activation-order permutation)",
          what, name, refused));
    }
  }
  const TensorEntry* s = ckpt.Find(name + "_scale");
  if (s == nullptr) {
    return FormatError(
        fmt::format("{}: int4 codes without their scale tensor {}_scale", what, name));
  }
  WASTE_ASSIGN_OR_RETURN(auto shape, ReadInt4Shape(ckpt, name, what));
  const auto [rows, cols] = shape;
  const int64_t words = CeilDiv(cols, 8), groups = CeilDiv(cols, q.int4_group);
  if (p.shape.size() != 2 || p.shape[0] != rows || p.shape[1] != words) {
    return FormatError(
        fmt::format("{}: packed shape [{}], a [{}, {}] matrix ({}_shape) needs [{}, {}] "
                    "(8 columns per I32 word)",
                    what, fmt::join(p.shape, ", "), rows, cols, name, rows, words));
  }
  if (s->shape.size() != 2 || s->shape[0] != rows || s->shape[1] != groups) {
    return FormatError(fmt::format(
        "{}: shape [{}], a [{}, {}] matrix in groups of {} columns "
        "needs [{}, {}]",
        TensorWhat(ckpt, *s), fmt::join(s->shape, ", "), rows, cols, q.int4_group, rows, groups));
  }
  std::vector<float> scale(static_cast<size_t>(rows * groups));
  WASTE_TRY(ckpt.ReadRaw(*s, raw));
  WASTE_TRY(DecodeFloats(s->dtype, raw->data(), scale.size(), scale.data(), TensorWhat(ckpt, *s)));
  out->shape = {rows, cols};
  out->values.resize(static_cast<size_t>(rows * cols));
  WASTE_TRY(ckpt.ReadRaw(p, raw));
  DecodeInt4(raw->data(), scale.data(), rows, cols, q.int4_group, out->values.data());
  return Status::Ok();
}

}  // namespace

Status LoadF32Into(const Checkpoint& ckpt, const std::string& name, const SourceQuant& q,
                   F32Tensor* out, std::vector<uint8_t>* raw) {
  if (const TensorEntry* t = ckpt.Find(name)) {
    const std::string what = fmt::format("{}: tensor {}", ckpt.ShardPath(*t), name);
    out->shape = t->shape;
    out->values.resize(static_cast<size_t>(t->elements()));
    WASTE_TRY(ckpt.ReadRaw(*t, raw));
    WASTE_TRY(DecodeFloats(t->dtype, raw->data(), out->values.size(), out->values.data(), what));
    const bool fp8 = t->dtype == DType::kF8E4M3 || t->dtype == DType::kF8E5M2;
    const TensorEntry* s = ckpt.Find(name + "_scale_inv");
    if (fp8 && s == nullptr && name.ends_with("_proj.weight")) {
      return FormatError(fmt::format("{}: fp8 matrix without its scale tensor {}_scale_inv", what,
                                     name));
    }
    if (s != nullptr) {
      if (!fp8) {
        return FormatError(fmt::format("{}: has a scale tensor but dtype {} (expected F8_E4M3)",
                                       what, DTypeName(t->dtype)));
      }
      if (t->shape.size() != 2 || s->shape.size() != 2) {
        return FormatError(fmt::format("{}: fp8 block scales need 2-D tensors", what));
      }
      if (!q.fp8_block_known) {
        return FormatError(fmt::format(
            "{}: fp8 with block scales but config.json has no "
            "quantization_config.weight_block_size (the tile is never guessed)", what));
      }
      std::vector<float> scale(static_cast<size_t>(s->elements()));
      std::vector<uint8_t> sraw;
      WASTE_TRY(ckpt.ReadRaw(*s, &sraw));
      WASTE_TRY(DecodeFloats(s->dtype, sraw.data(), scale.size(), scale.data(), what + "_scale_inv"));
      WASTE_TRY(ApplyBlockScales(out->values.data(), t->shape[0], t->shape[1], scale.data(),
                                 s->shape[0], s->shape[1], q.fp8_block_rows, q.fp8_block_cols,
                                 what));
    }
    return Status::Ok();
  }
  const TensorEntry* p = ckpt.Find(name + "_packed");
  if (p == nullptr) return FormatError(fmt::format("{}: tensor {} is missing", ckpt.dir(), name));
  // Two formats share the _packed suffix; the dtype and the config must agree
  // on which one this is, or the codes would be read with the wrong layout.
  if (p->dtype == DType::kI32 || q.int4_packed) return LoadInt4(ckpt, name, *p, q, out, raw);
  return LoadMxfp4(ckpt, name, *p, out, raw);
}

Result<std::vector<int64_t>> SourceShape(const Checkpoint& ckpt, const std::string& name) {
  if (const TensorEntry* t = ckpt.Find(name)) return t->shape;
  const TensorEntry* p = ckpt.Find(name + "_packed");
  if (p == nullptr) return FormatError(fmt::format("{}: tensor {} is missing", ckpt.dir(), name));
  if (p->dtype == DType::kI32) {
    WASTE_ASSIGN_OR_RETURN(auto shape, ReadInt4Shape(ckpt, name, TensorWhat(ckpt, *p)));
    return std::vector<int64_t>{shape.first, shape.second};
  }
  if (p->shape.size() != 2) return p->shape;  // refused when read
  return std::vector<int64_t>{p->shape[0], p->shape[1] * 2};
}

Result<F32Tensor> LoadF32(const Checkpoint& ckpt, const std::string& name, const SourceQuant& q) {
  F32Tensor out;
  std::vector<uint8_t> raw;
  WASTE_TRY(LoadF32Into(ckpt, name, q, &out, &raw));
  return out;
}

}  // namespace waste::convert
