// Trunk quantisation (Q8G / Q4G, group 128) with the scale of every group
// chosen to minimise that group's squared error as the engine decodes it
// (code x f16(scale)): candidates over clipping and over which end of the
// signed code range the group's largest magnitude maps to. The reference
// max-scales (scale = max|x| / qmax), which never uses the code -8 and
// spends resolution on single outliers.
#pragma once

#include <cstdint>
#include <vector>

#include "format/format.h"

namespace waste::convert {

inline constexpr int kTrunkGroup = 128;

// One row of `cols` values into the packed payload (row_bytes, padding
// encodes quantised zero) and ceil(cols/128) f16 scales. fmt: 2 = Q8G, 3 = Q4G.
void QuantizeTrunkRow(format::TensorFmt fmt, const float* x, int64_t cols, uint8_t* packed,
                      uint16_t* scales);

// Squared error of one row as quantised above (for reports and tests).
double TrunkRowError(format::TensorFmt fmt, const float* x, int64_t cols, const uint8_t* packed,
                     const uint16_t* scales);

// The reference's max-scaling, for comparison in tests and benchmarks.
void QuantizeTrunkRowMaxScale(format::TensorFmt fmt, const float* x, int64_t cols, uint8_t* packed,
                              uint16_t* scales);

}  // namespace waste::convert
