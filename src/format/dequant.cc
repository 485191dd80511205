// Reference dequantiser of trunk rows (FORMAT.md §4.3–4.4): plain loops,
// the definition the kernels are tested against.
#include <algorithm>
#include <cstring>

#include "container/container.h"
#include "format/format.h"

namespace waste {

void DequantizeRow(const TensorView& t, int64_t row, float* out) {
  const size_t cols = static_cast<size_t>(t.cols);
  const uint8_t* data = t.data + static_cast<size_t>(row) * t.row_bytes;
  if (t.fmt == TensorFmt::kF32) {
    std::memcpy(out, data, cols * sizeof(float));
    return;
  }
  const TensorFmt fmt = t.fmt;
  const uint16_t* scales = t.scales + static_cast<size_t>(row) * t.groups;
  const size_t group = static_cast<size_t>(t.group);
  for (size_t g = 0; g * group < cols; ++g) {
    const float s = format::F16ToF32(scales[g]);
    const size_t end = std::min(cols, (g + 1) * group);
    for (size_t i = g * group; i < end; ++i) {
      out[i] = s * static_cast<float>(format::TrunkCode(fmt, data, static_cast<int64_t>(i)));
    }
  }
}

}  // namespace waste
