#include "vision/vision_context.h"

#include <fmt/format.h>

#include "vision/image_decode.h"
#include "vision/preprocess.h"
#include "vision/vision_weights.h"

namespace waste::vision {

Result<std::unique_ptr<VisionContext>> VisionContext::Open(const Container& container) {
  const ModelConfig& m = container.config();
  WASTE_ASSIGN_OR_RETURN(VisionConfig cfg, LoadVisionConfig(container.dir(), m.hidden, m.vocab));
  WASTE_ASSIGN_OR_RETURN(std::unique_ptr<TowerWeights> w,
                         LoadTowerWeights(container.dir(), container.trunk_index(), cfg));
  return std::unique_ptr<VisionContext>(new VisionContext(cfg, std::move(w)));
}

Status VisionContext::CheckRoom() const {
  if (queue_.images() >= kMaxQueuedImages) {
    return ArgError(fmt::format("at most {} images can wait for a prompt", kMaxQueuedImages));
  }
  return Status::Ok();
}

Result<int> VisionContext::AddDecoded(const Ops& ops, const RgbImage& image) {
  WASTE_TRY(CheckRoom());
  const VisionConfig& c = tower_->config();
  PatchGrid grid = ChoosePatchGrid(image.width, image.height, c.max_patches);
  std::vector<float> x0 = BuildPatches(image, grid, c.mean, c.std);
  WASTE_ASSIGN_OR_RETURN(std::vector<float> rows, tower_->Encode(ops, x0, grid));
  WASTE_TRY(queue_.Add(std::move(rows)));
  return grid.tokens();
}

Result<int> VisionContext::AddFile(const Ops& ops, const std::string& path) {
  WASTE_TRY(CheckRoom());
  WASTE_ASSIGN_OR_RETURN(RgbImage img, DecodeImageFile(path));
  return AddDecoded(ops, img);
}

Result<int> VisionContext::AddBytes(const Ops& ops, std::span<const uint8_t> bytes,
                                    std::string_view name) {
  WASTE_TRY(CheckRoom());
  WASTE_ASSIGN_OR_RETURN(RgbImage img, DecodeImage(bytes, name));
  return AddDecoded(ops, img);
}

}  // namespace waste::vision
