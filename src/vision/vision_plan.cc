#include "vision/vision_plan.h"

#include "vision/image_decode.h"
#include "format/format.h"

namespace waste::vision {

uint64_t StoredBytesOutsidePrefix(const std::vector<TensorInfo>& trunk, const std::string& prefix) {
  uint64_t total = 0;
  for (const TensorInfo& t : trunk) {
    if (!prefix.empty() && t.name.starts_with(prefix)) continue;
    if (prefix.empty() && !t.name.starts_with("vision_tower.") &&
        !t.name.starts_with("mm_projector.")) {
      continue;
    }
    format::TrunkGeometry g =
        format::ComputeTrunkGeometry(t.fmt, t.shape, t.group);
    total += g.payload_bytes + g.scale_bytes;
  }
  return total;
}

uint64_t VisionPlanBytes(const VisionConfig& c, uint64_t weight_bytes) {
  const uint64_t l = static_cast<uint64_t>(c.max_patches), d = static_cast<uint64_t>(c.hidden);
  const uint64_t q = static_cast<uint64_t>(c.qkv), in = static_cast<uint64_t>(c.inter);
  const uint64_t cells = static_cast<uint64_t>(c.pos_h) * static_cast<uint64_t>(c.pos_w);
  const uint64_t h = static_cast<uint64_t>(c.text_hidden);
  const uint64_t queue = 32 * ((l + 3) / 4) * h * 4;
  const uint64_t pixels = l * kPatchValues * 4;
  const uint64_t tower = 4 * (3 * l * d + 3 * l * q + l * q + l * in + l + cells * d + 2 * l * d);
  const uint64_t decode = kMaxImagePixels * 3;
  return weight_bytes + 2 * queue + pixels + tower + decode;
}

uint64_t ContainerVisionBytes(const std::string& dir, const Manifest& m) {
  const uint64_t weights = StoredBytesOutsidePrefix(m.trunk, m.config.tensor_prefix);
  if (weights == 0) return 0;
  Result<VisionConfig> cfg = LoadVisionConfig(dir, m.config.hidden, m.config.vocab);
  if (!cfg) return weights;
  return VisionPlanBytes(*cfg, weights);
}

}  // namespace waste::vision
