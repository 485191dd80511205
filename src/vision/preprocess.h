// Image to patch tensor: the patch-grid choice and the bilinear resample,
// /255 and per-channel normalisation, laid out patch by patch (details and
// the reference's exact float order in docs/VISION.md).
#pragma once

#include <array>
#include <vector>

#include "vision/image_decode.h"

namespace waste::vision {

struct PatchGrid {
  int rows = 0;  // gh, even, >= 2
  int cols = 0;  // gw, even, >= 2
  int patches() const { return rows * cols; }
  int tokens() const { return (rows / 2) * (cols / 2); }
};

// The grid for a sw x sh source under a budget of `max_patches` (>= 4):
// scale to the budget (never up), round half up, at least 2, even, then
// shrink the longer side (ties: width) until it fits.
PatchGrid ChoosePatchGrid(int sw, int sh, int max_patches);

// X0 [gh*gw][588]: patch py*gw+px, value c*196 + j*14 + k is pixel
// (px*14+k, py*14+j) of channel c after resampling onto (14 gw) x (14 gh).
std::vector<float> BuildPatches(const RgbImage& img, const PatchGrid& grid,
                                const std::array<float, 3>& mean, const std::array<float, 3>& std);

}  // namespace waste::vision
