#include "vision/vision_weights.h"

#include <fmt/format.h>

#include <string_view>
#include <unordered_map>

#include "format/format.h"

namespace waste::vision {
namespace {

constexpr uint64_t kAlign = kTrunkAlignment;
uint64_t AlignUp(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

bool IsQuantized(TensorFmt f) {
  return f == TensorFmt::kQ8G || f == TensorFmt::kQ4G || f == TensorFmt::kQ3G;
}

std::string ShapeText(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

int64_t Elements(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return s.empty() ? 0 : n;
}

Status Refuse(const TensorInfo& t, std::string_view want) {
  return FormatError(fmt::format("vision tensor {} is {} {}; the tower needs {}", t.name,
                                 TensorFmtName(t.fmt), ShapeText(t.shape), want));
}

// What a tensor must be, checked before anything is read.
enum class Role { kMatrix, kNorm, kPosGrid };

class Loader {
 public:
  Loader(const std::vector<TensorInfo>& trunk) {
    for (const TensorInfo& t : trunk) first_.emplace(t.name, &t);  // first entry wins
  }

  // Checks and records tensor `name`; its view is filled by Read().
  Status Want(const std::string& name, Role role, int64_t rows, int64_t cols, TensorView* view) {
    auto it = first_.find(name);
    if (it == first_.end()) {
      return FormatError(fmt::format("vision tensor {} is missing from the trunk index", name));
    }
    const TensorInfo& t = *it->second;
    const bool quant = IsQuantized(t.fmt);
    if (t.fmt != TensorFmt::kF32 && !quant) return Refuse(t, "F32, Q8G, Q4G or Q3G");
    switch (role) {
      case Role::kNorm:
        if (t.fmt != TensorFmt::kF32 || Elements(t.shape) != cols) {
          return Refuse(t, fmt::format("F32 with {} values", cols));
        }
        break;
      case Role::kMatrix:
        // Quantization groups run along the last stored axis, so a
        // quantized matrix is usable only stored 2-D as [out, in].
        if (quant ? (t.shape.size() != 2 || t.shape[0] != rows || t.shape[1] != cols)
                  : Elements(t.shape) != rows * cols) {
          return Refuse(t, fmt::format("[{}, {}] ({}2-D when quantized)", rows, cols,
                                       quant ? "" : "any shape of that size as F32; "));
        }
        break;
      case Role::kPosGrid:
        if (quant ? (t.shape.back() != cols || Elements(t.shape) != rows * cols)
                  : Elements(t.shape) != rows * cols) {
          return Refuse(t, fmt::format("{} rows of {} (last axis {} when quantized)", rows, cols,
                                       cols));
        }
        break;
    }
    format::TrunkGeometry g = format::ComputeTrunkGeometry(t.fmt,
                                                           quant ? t.shape : std::vector<int64_t>{rows, cols},
                                                           t.group);
    TensorView v;
    v.fmt = t.fmt;
    v.rows = rows;
    v.cols = cols;
    v.row_bytes = static_cast<size_t>(g.row_bytes);
    v.group = t.group;
    v.groups = static_cast<size_t>(g.groups);
    v.info = &t;
    plan_.push_back({&t, view, g, total_});
    *view = v;
    total_ += AlignUp(g.payload_bytes) + AlignUp(g.scale_bytes);
    return Status::Ok();
  }

  // One buffer for everything; then every payload and scale array is read.
  Status Read(const std::string& dir, TowerWeights* w) {
    std::string path = dir.empty() || dir.back() == '/' ? dir + "trunk.bin" : dir + "/trunk.bin";
    Result<platform::File> f = platform::File::Open(path);
    if (!f) return IoError(fmt::format("trunk.bin: {}", f.error().message()));
    w->buffer.reset(static_cast<uint8_t*>(platform::AlignedAlloc(kAlign, static_cast<size_t>(total_))));
    if (!w->buffer) {
      return OomError(fmt::format("cannot allocate {} bytes for the vision tower", total_));
    }
    w->buffer_bytes = total_;
    for (const Placement& p : plan_) {
      uint8_t* data = w->buffer.get() + p.at;
      // Offsets and sizes were checked against trunk.bin when the container
      // opened (every index entry, not only the text model's).
      Status st = f->ReadAt(p.t->off, data, static_cast<size_t>(p.g.payload_bytes));
      if (!st.ok()) {
        return IoError(fmt::format("trunk.bin: vision tensor {}: {}", p.t->name, st.message()));
      }
      p.view->data = data;
      if (p.g.scale_bytes > 0) {
        uint8_t* scales = data + AlignUp(p.g.payload_bytes);
        st = f->ReadAt(p.t->scale_off, scales, static_cast<size_t>(p.g.scale_bytes));
        if (!st.ok()) {
          return IoError(fmt::format("trunk.bin: vision tensor {} scales: {}", p.t->name,
                                     st.message()));
        }
        p.view->scales = reinterpret_cast<const uint16_t*>(scales);
      }
    }
    return Status::Ok();
  }

 private:
  struct Placement {
    const TensorInfo* t;
    TensorView* view;
    format::TrunkGeometry g;
    uint64_t at;
  };
  std::unordered_map<std::string_view, const TensorInfo*> first_;
  std::vector<Placement> plan_;
  uint64_t total_ = 0;
};

}  // namespace

bool HasVisionTower(const std::vector<TensorInfo>& trunk) {
  for (const TensorInfo& t : trunk) {
    if (t.name == "vision_tower.patch_embed.proj.weight") return true;
  }
  return false;
}

Result<std::unique_ptr<TowerWeights>> LoadTowerWeights(const std::string& dir,
                                                       const std::vector<TensorInfo>& trunk,
                                                       const VisionConfig& c) {
  auto w = std::make_unique<TowerWeights>();
  const int64_t d = c.hidden, q = c.qkv, in = c.inter, h = c.text_hidden;
  const int64_t cells = static_cast<int64_t>(c.pos_h) * c.pos_w;
  Loader l(trunk);
  TensorView pos;
  std::vector<TensorView> norms(2 * static_cast<size_t>(c.blocks) + 2);
  WASTE_TRY(l.Want("vision_tower.patch_embed.proj.weight", Role::kMatrix, d, kPatchValues, &w->patch));
  WASTE_TRY(l.Want("vision_tower.patch_embed.pos_emb.weight", Role::kPosGrid, cells, d, &pos));
  w->blocks.resize(static_cast<size_t>(c.blocks));
  for (int b = 0; b < c.blocks; ++b) {
    BlockWeights& bw = w->blocks[static_cast<size_t>(b)];
    std::string p = fmt::format("vision_tower.encoder.blocks.{}.", b);
    WASTE_TRY(l.Want(p + "norm0.weight", Role::kNorm, 1, d, &norms[2 * static_cast<size_t>(b)]));
    WASTE_TRY(l.Want(p + "norm1.weight", Role::kNorm, 1, d, &norms[2 * static_cast<size_t>(b) + 1]));
    WASTE_TRY(l.Want(p + "wqkv.weight", Role::kMatrix, 3 * q, d, &bw.wqkv));
    WASTE_TRY(l.Want(p + "wo.weight", Role::kMatrix, d, q, &bw.wo));
    WASTE_TRY(l.Want(p + "mlp.fc0.weight", Role::kMatrix, in, d, &bw.fc0));
    WASTE_TRY(l.Want(p + "mlp.fc1.weight", Role::kMatrix, d, in, &bw.fc1));
  }
  const size_t last = norms.size() - 2;
  WASTE_TRY(l.Want("vision_tower.encoder.final_layernorm.weight", Role::kNorm, 1, d, &norms[last]));
  WASTE_TRY(l.Want("mm_projector.proj.0.weight", Role::kMatrix, 4 * d, 4 * d, &w->proj0));
  WASTE_TRY(l.Want("mm_projector.proj.2.weight", Role::kMatrix, h, 4 * d, &w->proj2));
  WASTE_TRY(l.Want("mm_projector.post_norm.weight", Role::kNorm, 1, h, &norms[last + 1]));
  WASTE_TRY(l.Read(dir, w.get()));

  for (int b = 0; b < c.blocks; ++b) {
    w->blocks[static_cast<size_t>(b)].norm0 = norms[2 * static_cast<size_t>(b)].f32();
    w->blocks[static_cast<size_t>(b)].norm1 = norms[2 * static_cast<size_t>(b) + 1].f32();
  }
  w->final_norm = norms[last].f32();
  w->post_norm = norms[last + 1].f32();
  // The position grid as f32 rows, once (the reference redoes it per image).
  w->pos_grid.resize(static_cast<size_t>(cells * d));
  for (int64_t r = 0; r < cells; ++r) DequantizeRow(pos, r, w->pos_grid.data() + r * d);
  return w;
}

}  // namespace waste::vision
