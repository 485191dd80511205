#include "vision/vision_config.h"

#include <fmt/format.h>

#include <cmath>

#include "format/json_reader.h"
#include "platform/platform.h"

namespace waste::vision {
namespace {

void ReadInt(const json::Json* obj, std::string_view key, int* out) {
  std::optional<int64_t> v = json::Integer(json::Member(obj, key));
  if (!v) return;
  // Saturate into int so the bounds check refuses, never wraps.
  *out = static_cast<int>(std::clamp<int64_t>(*v, INT32_MIN, INT32_MAX));
}

// A present array of three numbers overrides per channel; anything else
// keeps the default for the channels it does not give.
void ReadTriple(const json::Json* obj, std::string_view key, std::array<float, 3>* out,
                bool* bad) {
  const json::Json* v = json::Member(obj, key);
  if (v == nullptr) return;
  if (!v->is_array() || v->size() != 3) {
    *bad = true;
    return;
  }
  for (size_t c = 0; c < 3; ++c) {
    std::optional<double> d = json::Number(&(*v)[c]);
    if (!d || !std::isfinite(*d)) {
      *bad = true;
      return;
    }
    (*out)[c] = static_cast<float>(*d);
  }
}

Status Bad(std::string_view what) {
  return FormatError(
      fmt::format("vision.json geometry is unsupported or out of range: {}", what));
}

}  // namespace

Result<VisionConfig> ParseVisionConfig(std::string_view json_text, int text_hidden) {
  WASTE_ASSIGN_OR_RETURN(json::Json doc, json::ParseFirstWins(json_text, "vision.json"));
  if (!doc.is_object()) return Bad("the file is not a JSON object");
  VisionConfig c;
  c.text_hidden = text_hidden;
  const json::Json* o = &doc;
  ReadInt(o, "vt_hidden_size", &c.hidden);
  ReadInt(o, "vt_num_attention_heads", &c.heads);
  ReadInt(o, "qkv_hidden_size", &c.qkv);
  ReadInt(o, "vt_intermediate_size", &c.inter);
  ReadInt(o, "vt_num_hidden_layers", &c.blocks);
  ReadInt(o, "init_pos_emb_height", &c.pos_h);
  ReadInt(o, "init_pos_emb_width", &c.pos_w);
  ReadInt(o, "text_hidden_size", &c.text_hidden);
  ReadInt(o, "patch_size", &c.patch);
  ReadInt(o, "media_placeholder_token_id", &c.pad_id);
  ReadInt(o, "max_patches", &c.max_patches);
  bool bad = false;
  ReadTriple(o, "image_mean", &c.mean, &bad);
  ReadTriple(o, "image_std", &c.std, &bad);
  if (bad) return Bad("image_mean / image_std must be three finite numbers");
  return c;
}

Status ValidateVisionConfig(const VisionConfig& c, int text_hidden, int vocab) {
  auto in = [](int v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; };
  if (!in(c.hidden, 1, 1 << 20)) return Bad(fmt::format("vt_hidden_size {}", c.hidden));
  if (!in(c.qkv, 1, 1 << 20)) return Bad(fmt::format("qkv_hidden_size {}", c.qkv));
  if (!in(c.heads, 1, 1 << 16) || c.qkv % c.heads != 0) {
    return Bad(fmt::format("vt_num_attention_heads {} (must divide qkv_hidden_size {})", c.heads,
                           c.qkv));
  }
  // Our 2-D rotary works on pairs of pairs (one width and one height
  // pair per frequency), so the head dimension must be even.
  if (c.head_dim() % 2 != 0) return Bad(fmt::format("head dimension {} is odd", c.head_dim()));
  if (!in(c.inter, 1, 1 << 22)) return Bad(fmt::format("vt_intermediate_size {}", c.inter));
  if (!in(c.blocks, 1, 256)) return Bad(fmt::format("vt_num_hidden_layers {}", c.blocks));
  if (!in(c.pos_h, 1, 1 << 16) || !in(c.pos_w, 1, 1 << 16)) {
    return Bad(fmt::format("position grid {}x{}", c.pos_h, c.pos_w));
  }
  if (c.text_hidden != text_hidden) {
    return Bad(fmt::format("text_hidden_size {} differs from the model's hidden size {}",
                           c.text_hidden, text_hidden));
  }
  if (c.patch != kPatch) return Bad(fmt::format("patch_size {} (must be 14)", c.patch));
  if (c.pad_id < 0 || c.pad_id >= vocab) {
    return Bad(fmt::format("media_placeholder_token_id {} is outside the vocabulary", c.pad_id));
  }
  if (!in(c.max_patches, 4, 1 << 20)) return Bad(fmt::format("max_patches {}", c.max_patches));
  for (float s : c.std) {
    if (!(s > 0.0f)) return Bad("image_std must be > 0");
  }
  return Status::Ok();
}

Result<VisionConfig> LoadVisionConfig(const std::string& dir, int text_hidden, int vocab) {
  std::string path = dir.empty() || dir.back() == '/' ? dir + "vision.json" : dir + "/vision.json";
  Result<std::string> text = platform::ReadWholeFile(path);
  if (!text) return Bad("vision.json is missing or unreadable");
  WASTE_ASSIGN_OR_RETURN(VisionConfig c, ParseVisionConfig(*text, text_hidden));
  WASTE_TRY(ValidateVisionConfig(c, text_hidden, vocab));
  return c;
}

}  // namespace waste::vision
