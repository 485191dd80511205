// The tower and projector tensors (names without the text model's prefix),
// read from trunk.bin only when vision is asked for. Every shape and format
// the forward pass relies on is checked here, at open, with the tensor
// named: the reference reads whatever the index says, so a quantized norm
// or a 4-D quantized patch kernel would be misread there; we refuse it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "container/container.h"
#include "platform/platform.h"
#include "vision/vision_config.h"
#include "waste/status.h"

namespace waste::vision {

struct BlockWeights {
  const float* norm0 = nullptr;     // [D]
  const float* norm1 = nullptr;     // [D]
  TensorView wqkv;                  // [3Q][D]
  TensorView wo;                    // [D][Q]
  TensorView fc0;                   // [I][D]
  TensorView fc1;                   // [D][I]
};

struct TowerWeights {
  TensorView patch;                 // [D][588]
  std::vector<float> pos_grid;      // [Ph*Pw][D], dequantised once at load
  std::vector<BlockWeights> blocks;
  const float* final_norm = nullptr;  // [D]
  TensorView proj0;                 // [4D][4D]
  TensorView proj2;                 // [H][4D]
  const float* post_norm = nullptr; // [H]

  platform::AlignedPtr<uint8_t> buffer;  // payloads and scales of all of the above
  uint64_t buffer_bytes = 0;
};

// True when the container carries a tower (its patch kernel is indexed).
bool HasVisionTower(const std::vector<TensorInfo>& trunk);

// Loads and checks every tensor of the tower for `cfg` from
// <dir>/trunk.bin. kFormat naming the tensor when one is missing or has a
// shape or format the tower cannot use.
Result<std::unique_ptr<TowerWeights>> LoadTowerWeights(const std::string& dir,
                                                       const std::vector<TensorInfo>& trunk,
                                                       const VisionConfig& cfg);

}  // namespace waste::vision
