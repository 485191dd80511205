// The trunk pass: every non-expert tensor of the checkpoint, in source-name
// order, dequantised to f32 one tensor at a time and stored F32, Q8G or Q4G
// (trunk_quant.h) into trunk.bin. Rows are quantised in parallel; bytes do
// not depend on the thread count.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "convert/dequant.h"
#include "convert/passes.h"
#include "convert/trunk_quant.h"
#include "format/format.h"

namespace waste::convert {

std::vector<int64_t> TrunkShapeFor(const TrunkSource& t, const std::vector<int64_t>& shape) {
  if (shape.empty()) return {1};
  if (t.vision && shape.size() > 2) {
    // The engine reads the vision tower as 2-D matrices: a conv kernel
    // [out, in, kh, kw] as [out, in*kh*kw], a position grid [h, w, D] as [h*w, D].
    int64_t rest = 1;
    if (shape.size() == 4) {
      for (size_t i = 1; i < 4; ++i) rest *= shape[i];
      return {shape[0], rest};
    }
    for (size_t i = 0; i + 1 < shape.size(); ++i) rest *= shape[i];
    return {rest, shape.back()};
  }
  return shape;
}

Result<TrunkFormats> ParseTrunkFormats(bool trunk8, const std::vector<TensorFormatRule>& rules) {
  TrunkFormats out;
  out.trunk8 = trunk8;
  for (const TensorFormatRule& r : rules) {
    const std::string text = r.pattern + "=" + r.format;
    if (r.pattern.empty()) {
      return ArgError(fmt::format("tensor format rule \"{}\": the name pattern is empty", text));
    }
    format::TensorFmt f;
    if (r.format == "f32") {
      f = format::TensorFmt::kF32;
    } else if (r.format == "q8g") {
      f = format::TensorFmt::kQ8G;
    } else if (r.format == "q4g") {
      f = format::TensorFmt::kQ4G;
    } else {
      return ArgError(fmt::format("tensor format rule \"{}\": the format must be f32, q8g or q4g", text));
    }
    out.rules.push_back({r.pattern, f, text});
  }
  return out;
}

format::TensorFmt TrunkFormatFor(const TrunkSource& t, const std::vector<int64_t>& shape,
                                 const TrunkFormats& formats, int* rule_used) {
  if (rule_used != nullptr) *rule_used = -1;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  // Small and non-matrix tensors stay F32 whatever the rules say: the engine
  // reads norms, biases and kernels as F32, and a small matrix gains nothing.
  if (shape.size() != 2 || n < 65536) return format::TensorFmt::kF32;
  // The vision tower stays Q8G, the layout the reference's post-processing
  // writes (docs/VISION.md); the rules are for the language model's trunk.
  if (t.vision) return format::TensorFmt::kQ8G;
  for (size_t i = 0; i < formats.rules.size(); ++i) {
    if (t.target.find(formats.rules[i].pattern) != std::string::npos) {
      if (rule_used != nullptr) *rule_used = static_cast<int>(i);
      return formats.rules[i].fmt;
    }
  }
  if (formats.trunk8 || t.target.ends_with("embed_tokens.weight") ||
      t.target.ends_with("lm_head.weight")) {
    return format::TensorFmt::kQ8G;
  }
  return format::TensorFmt::kQ4G;
}

Result<TrunkResult> WriteTrunk(const Checkpoint& ckpt, const SourceModel& model, const TrunkFormats& formats,
                               const ResidualBasis& basis, bool reference,
                               const std::string& out_dir, ThreadPool* pool,
                               const std::function<void(int done, int total)>& tick) {
  TrunkResult out;
  out.index = nlohmann::json::array();
  WASTE_ASSIGN_OR_RETURN(std::unique_ptr<StagedFile> file,
                         StagedFile::Create(JoinPath(out_dir, "trunk.bin")));
  const int total = static_cast<int>(model.trunk.size());
  for (int ti = 0; ti < total; ++ti) {
    const TrunkSource& t = model.trunk[ti];
    WASTE_ASSIGN_OR_RETURN(F32Tensor x, LoadF32(ckpt, t.source, model.quant));
    out.source_bytes += SourceBytes(ckpt, t.source);
    WASTE_TRY(basis.ApplyToTrunk(t.target, &x));
    for (float v : x.values) {
      if (!std::isfinite(v)) {
        return FormatError(fmt::format("{}: tensor {} holds a value that is not finite", ckpt.dir(),
                                       t.source));
      }
    }
    const std::vector<int64_t> shape = TrunkShapeFor(t, x.shape);
    const format::TensorFmt fmt = TrunkFormatFor(t, shape, formats);
    nlohmann::json e = nlohmann::json::object();
    e["name"] = t.target;
    e["fmt"] = fmt;
    e["off"] = file->size();
    e["shape"] = shape;
    if (fmt == format::TensorFmt::kF32) {
      WASTE_TRY(file->Write(x.values.data(), x.values.size() * sizeof(float)));
      e["bytes"] = x.values.size() * sizeof(float);
    } else {
      const format::TrunkGeometry g = format::ComputeTrunkGeometry(fmt, shape, kTrunkGroup);
      std::vector<uint8_t> packed(static_cast<size_t>(g.payload_bytes));
      std::vector<uint16_t> scales(static_cast<size_t>(g.rows * g.groups));
      std::vector<double> err(static_cast<size_t>(g.rows)), norm(static_cast<size_t>(g.rows));
      auto rows = [&](size_t b, size_t end) {
        for (size_t r = b; r < end; ++r) {
          const float* row = x.values.data() + r * static_cast<size_t>(g.cols);
          uint8_t* p = packed.data() + r * g.row_bytes;
          uint16_t* s = scales.data() + r * static_cast<size_t>(g.groups);
          if (reference) {
            QuantizeTrunkRowMaxScale(fmt, row, g.cols, p, s);
          } else {
            QuantizeTrunkRow(fmt, row, g.cols, p, s);
          }
          err[r] = TrunkRowError(fmt, row, g.cols, p, s);
          double n2 = 0;
          for (int64_t i = 0; i < g.cols; ++i) n2 += static_cast<double>(row[i]) * row[i];
          norm[r] = n2;
        }
      };
      if (pool != nullptr) {
        pool->ParallelFor(static_cast<size_t>(g.rows), 16, rows);
      } else {
        rows(0, static_cast<size_t>(g.rows));
      }
      for (int64_t r = 0; r < g.rows; ++r) {
        out.err += err[r];
        out.norm += norm[r];
      }
      WASTE_TRY(file->Write(packed.data(), packed.size()));
      e["group"] = kTrunkGroup;
      e["scale_off"] = file->size();
      WASTE_TRY(file->Write(scales.data(), scales.size() * sizeof(uint16_t)));
      e["bytes"] = g.payload_bytes + g.scale_bytes;
    }
    out.index.push_back(std::move(e));
    if (tick) tick(ti + 1, total);
  }
  out.bytes = file->size();
  out.crc = file->crc();
  WASTE_TRY(file->Commit());
  return out;
}

}  // namespace waste::convert
