#include "convert/trunk_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "format/format.h"

namespace waste::convert {
namespace {

struct Range {
  int qmin, qmax;
};
Range RangeOf(format::TensorFmt fmt) { return fmt == format::TensorFmt::kQ8G ? Range{-127, 127} : Range{-8, 7}; }
// Q8G never uses -128 (the engine's kernels assume |code| <= 127).

inline int Code(float x, float inv, Range r) {
  float q = std::nearbyint(x * inv);
  return static_cast<int>(std::clamp(q, static_cast<float>(r.qmin), static_cast<float>(r.qmax)));
}

void Store(format::TensorFmt fmt, int64_t i, int code, uint8_t* packed) {
  if (fmt == format::TensorFmt::kQ8G) {
    packed[i] = static_cast<uint8_t>(static_cast<int8_t>(code));
  } else {
    packed[i >> 1] |= static_cast<uint8_t>((code + 8) << (4 * (i & 1)));
  }
}

// Error of one group at f16 scale h.
double GroupError(const float* x, int n, uint16_t h, Range r) {
  const float s = format::F16ToF32(h);
  if (!(s > 0.0f)) {
    double e = 0;
    for (int i = 0; i < n; ++i) e += static_cast<double>(x[i]) * x[i];
    return e;
  }
  const float inv = 1.0f / s;
  float e = 0.0f;
  for (int i = 0; i < n; ++i) {
    float d = x[i] - static_cast<float>(Code(x[i], inv, r)) * s;
    e += d * d;
  }
  return e;
}

uint16_t BestScale(format::TensorFmt fmt, const float* x, int n) {
  const Range r = RangeOf(fmt);
  float amax = 0.0f, vmax = 0.0f, vmin = 0.0f;
  for (int i = 0; i < n; ++i) {
    amax = std::max(amax, std::fabs(x[i]));
    vmax = std::max(vmax, x[i]);
    vmin = std::min(vmin, x[i]);
  }
  if (amax == 0.0f || !std::isfinite(amax)) return format::F32ToF16(amax == 0.0f ? 0.0f : amax);
  // Largest magnitude on the negative side can map to qmin (-8 for Q4G):
  // one more level of resolution for free.
  const float top = (-vmin > vmax && fmt != format::TensorFmt::kQ8G) ? static_cast<float>(-r.qmin)
                                                             : static_cast<float>(r.qmax);
  const int steps = fmt == format::TensorFmt::kQ8G ? 6 : 20;
  const float lowest = fmt == format::TensorFmt::kQ8G ? 0.94f : 0.70f;
  uint16_t best = format::F32ToF16(amax / top);
  double best_e = GroupError(x, n, best, r);
  for (int k = 1; k <= steps; ++k) {
    const float clip = 1.0f - (1.0f - lowest) * static_cast<float>(k) / steps;
    const uint16_t h = format::F32ToF16(amax * clip / top);
    if (h == best) continue;
    const double e = GroupError(x, n, h, r);
    if (e < best_e) {
      best_e = e;
      best = h;
    }
  }
  return best;
}

}  // namespace

void QuantizeTrunkRow(format::TensorFmt fmt, const float* x, int64_t cols, uint8_t* packed,
                      uint16_t* scales) {
  const Range r = RangeOf(fmt);
  const int64_t groups = (cols + kTrunkGroup - 1) / kTrunkGroup;
  const int64_t padded = groups * kTrunkGroup;
  // Store() ORs codes in; padding elements get code 0 below.
  std::memset(packed, 0, static_cast<size_t>(fmt == format::TensorFmt::kQ8G ? padded : padded / 2));
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t b = g * kTrunkGroup, e = std::min(cols, b + kTrunkGroup);
    const int n = static_cast<int>(e - b);
    uint16_t h = BestScale(fmt, x + b, n);
    if (format::F16IsSubnormal(h) || !format::F16IsFinite(h)) {
      // Subnormal scales decode exactly in the engine; infinite ones cannot
      // come from finite bf16 data below 65504 * 7.
      if (!format::F16IsFinite(h)) h = 0x7BFF;
    }
    scales[g] = h;
    const float s = format::F16ToF32(h);
    const float inv = s > 0.0f ? 1.0f / s : 0.0f;
    for (int64_t i = b; i < b + kTrunkGroup; ++i) {
      const int code = i < e ? Code(x[i], inv, r) : 0;
      Store(fmt, i, code, packed);
    }
  }
}

void QuantizeTrunkRowMaxScale(format::TensorFmt fmt, const float* x, int64_t cols, uint8_t* packed,
                              uint16_t* scales) {
  const Range r = RangeOf(fmt);
  const int64_t groups = (cols + kTrunkGroup - 1) / kTrunkGroup;
  std::memset(packed, 0, static_cast<size_t>(fmt == format::TensorFmt::kQ8G ? groups * kTrunkGroup
                                                                     : groups * kTrunkGroup / 2));
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t b = g * kTrunkGroup, e = std::min(cols, b + kTrunkGroup);
    float amax = 1e-8f;
    for (int64_t i = b; i < e; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float s = amax / static_cast<float>(r.qmax);
    scales[g] = format::F32ToF16(s);
    for (int64_t i = b; i < b + kTrunkGroup; ++i) {
      Store(fmt, i, i < e ? Code(x[i], 1.0f / s, r) : 0, packed);
    }
  }
}

double TrunkRowError(format::TensorFmt fmt, const float* x, int64_t cols, const uint8_t* packed,
                     const uint16_t* scales) {
  double err = 0;
  for (int64_t i = 0; i < cols; ++i) {
    const float v = static_cast<float>(format::TrunkCode(fmt, packed, i)) *
                    format::F16ToF32(scales[i / kTrunkGroup]);
    const double d = static_cast<double>(x[i]) - v;
    err += d * d;
  }
  return err;
}

}  // namespace waste::convert
