// The vision term of the memory plan (docs/VISION.md "Memory"): computed
// from the manifest and vision.json alone, like the rest of the plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "container/container.h"
#include "vision/vision_config.h"

namespace waste::vision {

// Stored bytes (payload + scales) of every index entry outside the text
// model's prefix (with no prefix: the vision_tower. / mm_projector. ones).
uint64_t StoredBytesOutsidePrefix(const std::vector<TensorInfo>& trunk, const std::string& prefix);

// weights + 2 queues of 32 images at max_patches + the pixel tensor + the
// tower's activations + one decoded image at the pixel limit.
uint64_t VisionPlanBytes(const VisionConfig& cfg, uint64_t weight_bytes);

// For a container: 0 when no tensor lies outside the text model's prefix;
// the stored bytes of those tensors alone when vision.json is missing or
// out of bounds (opening with vision would then fail anyway); else the
// whole figure.
uint64_t ContainerVisionBytes(const std::string& dir, const Manifest& m);

}  // namespace waste::vision
