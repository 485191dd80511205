// Everything one engine context holds for images: the loaded tower, the
// queue of encoded images and the rules of the public image calls. The
// engine owns one when opened with vision on a container with a tower and
// forwards its image calls here (keeps src/engine/engine.cc thin).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "container/container.h"
#include "runtime/ops.h"
#include "vision/image_queue.h"
#include "vision/tower.h"

namespace waste::vision {

class VisionContext {
 public:
  // Reads vision.json and the tower's tensors (kFormat naming what is
  // wrong). Precondition: HasVisionTower(container.trunk_index()).
  static Result<std::unique_ptr<VisionContext>> Open(const Container& container);

  const VisionTower& tower() const { return *tower_; }
  ImageQueue& queue() { return queue_; }
  const ImageQueue& queue() const { return queue_; }

  // Decode + grid + tower + projector, then queue the rows; returns the
  // row count. The queue limit is checked before any decoding.
  Result<int> AddFile(const Ops& ops, const std::string& path);
  Result<int> AddBytes(const Ops& ops, std::span<const uint8_t> bytes, std::string_view name);
  Result<int> AddDecoded(const Ops& ops, const RgbImage& image);

 private:
  VisionContext(const VisionConfig& cfg, std::unique_ptr<TowerWeights> w)
      : tower_(std::make_unique<VisionTower>(cfg, std::move(w))),
        queue_(cfg.pad_id, cfg.text_hidden) {}
  Status CheckRoom() const;

  std::unique_ptr<VisionTower> tower_;
  ImageQueue queue_;
};

}  // namespace waste::vision
