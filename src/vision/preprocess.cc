#include "vision/preprocess.h"

#include <algorithm>
#include <cmath>

#include "vision/vision_config.h"

namespace waste::vision {

PatchGrid ChoosePatchGrid(int sw, int sh, int max_patches) {
  // In double, then truncated, exactly as the reference.
  double s = std::sqrt(static_cast<double>(max_patches) /
                       (static_cast<double>(sw) * static_cast<double>(sh) / 196.0));
  s = std::min(s, 1.0);
  int gw = static_cast<int>(static_cast<double>(sw) * s / 14.0 + 0.5);
  int gh = static_cast<int>(static_cast<double>(sh) * s / 14.0 + 0.5);
  gw = std::max(gw, 2) & ~1;
  gh = std::max(gh, 2) & ~1;
  while (static_cast<int64_t>(gw) * gh > max_patches && (gw > 2 || gh > 2)) {
    if (gw >= gh && gw > 2) {
      gw -= 2;
    } else if (gh > 2) {
      gh -= 2;
    } else {
      break;
    }
  }
  return {gh, gw};
}

std::vector<float> BuildPatches(const RgbImage& img, const PatchGrid& grid,
                                const std::array<float, 3>& mean, const std::array<float, 3>& std) {
  const int sw = img.width, sh = img.height;
  const int gw = grid.cols, gh = grid.rows;
  const int W = kPatch * gw, H = kPatch * gh;
  const float rx = static_cast<float>(sw) / static_cast<float>(W);
  const float ry = static_cast<float>(sh) / static_cast<float>(H);
  const uint8_t* s = img.pixels();
  std::vector<float> x0(static_cast<size_t>(gw) * gh * kPatchValues);
  // Column taps and weights are the same for every row: computed once.
  std::vector<int> cx0(static_cast<size_t>(W)), cx1(static_cast<size_t>(W));
  std::vector<float> wxs(static_cast<size_t>(W));
  for (int X = 0; X < W; ++X) {
    float fx = (static_cast<float>(X) + 0.5f) * rx - 0.5f;
    float x0f = std::floor(fx);
    wxs[static_cast<size_t>(X)] = fx - x0f;  // from the unclamped tap
    int a = static_cast<int>(x0f), b = a + 1;
    cx0[static_cast<size_t>(X)] = std::clamp(a, 0, sw - 1);
    cx1[static_cast<size_t>(X)] = std::clamp(b, 0, sw - 1);
  }
  for (int Y = 0; Y < H; ++Y) {
    float fy = (static_cast<float>(Y) + 0.5f) * ry - 0.5f;
    float y0f = std::floor(fy);
    const float wy = fy - y0f;
    const int y0 = std::clamp(static_cast<int>(y0f), 0, sh - 1);
    const int y1 = std::clamp(static_cast<int>(y0f) + 1, 0, sh - 1);
    const uint8_t* r0 = s + static_cast<size_t>(y0) * sw * 3;
    const uint8_t* r1 = s + static_cast<size_t>(y1) * sw * 3;
    const int py = Y / kPatch, j = Y % kPatch;
    for (int X = 0; X < W; ++X) {
      const float wx = wxs[static_cast<size_t>(X)];
      const size_t a = static_cast<size_t>(cx0[static_cast<size_t>(X)]) * 3;
      const size_t b = static_cast<size_t>(cx1[static_cast<size_t>(X)]) * 3;
      const int px = X / kPatch, k = X % kPatch;
      float* patch = x0.data() + (static_cast<size_t>(py) * gw + px) * kPatchValues;
      for (int c = 0; c < 3; ++c) {
        float v = (1.0f - wy) * ((1.0f - wx) * static_cast<float>(r0[a + c]) +
                                 wx * static_cast<float>(r0[b + c])) +
                  wy * ((1.0f - wx) * static_cast<float>(r1[a + c]) +
                        wx * static_cast<float>(r1[b + c]));
        v = v / 255.0f;
        patch[c * 196 + j * kPatch + k] = (v - mean[static_cast<size_t>(c)]) / std[static_cast<size_t>(c)];
      }
    }
  }
  return x0;
}

}  // namespace waste::vision
