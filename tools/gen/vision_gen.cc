#include "vision_gen.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "rng.h"

namespace waste::gen {

Result<VisionSpec> ParseVisionSpec(const std::string& text) {
  std::vector<int> v;
  std::stringstream ss(text);
  std::string part, format = "q8";
  while (std::getline(ss, part, ',')) {
    if (v.size() == 8 && (part == "q8" || part == "q4" || part == "f32")) {
      format = part;
      continue;
    }
    char* end = nullptr;
    long n = std::strtol(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || n <= 0 || n > (1 << 20)) {
      return ArgError(fmt::format("--vision {}: \"{}\" is not a positive number", text, part));
    }
    v.push_back(static_cast<int>(n));
  }
  if (v.size() != 8) {
    return ArgError(fmt::format("--vision {}: want D,HEADS,Q,I,BLOCKS,POS_H,POS_W,MAX_PATCHES",
                                text));
  }
  VisionSpec s{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], format};
  if (s.qkv % s.heads != 0 || (s.qkv / s.heads) % 2 != 0 || s.max_patches < 4 || s.blocks > 256) {
    return ArgError(fmt::format("--vision {}: Q must split into even heads, MAX_PATCHES >= 4",
                                text));
  }
  return s;
}

Status WriteVisionTower(ContainerWriter& w, const VisionSpec& s, int text_hidden, int pad_id,
                        uint64_t seed) {
  // Matrices: uniform with std 1/sqrt(in), so activations stay near unit
  // scale through the tower; norms near 1.
  const TensorFmt mfmt = s.format == "f32"  ? TensorFmt::kF32
                        : s.format == "q4" ? TensorFmt::kQ4G
                                           : TensorFmt::kQ8G;
  // `shape` as stored (F32 may be 4-D); `in` the logical input width.
  auto stored = [&](const std::string& name, std::vector<int64_t> shape, int64_t in) {
    Rng rng(seed, name);
    const float a = std::sqrt(3.0f / static_cast<float>(in));
    const size_t last = static_cast<size_t>(shape.back());
    return w.AddTensor(name, mfmt, shape, [&](int64_t, float* out) { rng.FillUniform(out, last, a); });
  };
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    return stored(name, {rows, cols}, cols);
  };
  auto norm = [&](const std::string& name, int64_t n) {
    Rng rng(seed, name);
    return w.AddTensor(name, TensorFmt::kF32, {n}, [&](int64_t, float* out) {
      for (int64_t i = 0; i < n; ++i) out[i] = rng.Uniform(0.9f, 1.1f);
    });
  };
  const int64_t d = s.hidden, q = s.qkv, in = s.inter, h = text_hidden;
  if (mfmt == TensorFmt::kF32) {
    WASTE_TRY(stored("vision_tower.patch_embed.proj.weight", {d, 3, 14, 14}, 588));
  } else {
    WASTE_TRY(matrix("vision_tower.patch_embed.proj.weight", d, 588));
  }
  {
    const std::string name = "vision_tower.patch_embed.pos_emb.weight";
    Rng rng(seed, name);
    const std::vector<int64_t> shape =
        mfmt == TensorFmt::kF32 ? std::vector<int64_t>{s.pos_h, s.pos_w, d}
                                : std::vector<int64_t>{static_cast<int64_t>(s.pos_h) * s.pos_w, d};
    WASTE_TRY(w.AddTensor(name, mfmt, shape,
                          [&](int64_t, float* out) {
                            for (int64_t i = 0; i < d; ++i) out[i] = rng.Uniform(-0.5f, 0.5f);
                          }));
  }
  for (int b = 0; b < s.blocks; ++b) {
    const std::string p = fmt::format("vision_tower.encoder.blocks.{}.", b);
    WASTE_TRY(norm(p + "norm0.weight", d));
    WASTE_TRY(matrix(p + "wqkv.weight", 3 * q, d));
    WASTE_TRY(matrix(p + "wo.weight", d, q));
    WASTE_TRY(norm(p + "norm1.weight", d));
    WASTE_TRY(matrix(p + "mlp.fc0.weight", in, d));
    WASTE_TRY(matrix(p + "mlp.fc1.weight", d, in));
  }
  WASTE_TRY(norm("vision_tower.encoder.final_layernorm.weight", d));
  WASTE_TRY(matrix("mm_projector.proj.0.weight", 4 * d, 4 * d));
  WASTE_TRY(matrix("mm_projector.proj.2.weight", h, 4 * d));
  WASTE_TRY(norm("mm_projector.post_norm.weight", h));

  nlohmann::ordered_json j = {{"vt_hidden_size", s.hidden},
                              {"vt_num_attention_heads", s.heads},
                              {"qkv_hidden_size", s.qkv},
                              {"vt_intermediate_size", s.inter},
                              {"vt_num_hidden_layers", s.blocks},
                              {"init_pos_emb_height", s.pos_h},
                              {"init_pos_emb_width", s.pos_w},
                              {"patch_size", 14},
                              {"merge_kernel_size", {2, 2}},
                              {"text_hidden_size", text_hidden},
                              {"vt_rms_eps", 1.1920928955078125e-07},
                              {"media_placeholder_token_id", pad_id},
                              {"max_patches", s.max_patches},
                              {"image_mean", {0.5, 0.5, 0.5}},
                              {"image_std", {0.5, 0.5, 0.5}}};
  return w.AddFile("vision.json", j.dump(1) + "\n");
}

}  // namespace waste::gen
