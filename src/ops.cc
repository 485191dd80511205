#include "ops.h"

#include <cmath>

namespace waste {
namespace {

kernels::MatVecFn MatVecSlot(const kernels::KernelTable& k, TensorFmt fmt) {
  switch (fmt) {
    case TensorFmt::kF32: return k.matvec_f32;
    case TensorFmt::kQ8G: return k.matvec_q8g;
    case TensorFmt::kQ4G: return k.matvec_q4g;
    case TensorFmt::kQ3G: return k.matvec_q3g;
    default: return nullptr;
  }
}

kernels::MatMulFn MatMulSlot(const kernels::KernelTable& k, TensorFmt fmt) {
  switch (fmt) {
    case TensorFmt::kF32: return k.matmul_f32;
    case TensorFmt::kQ8G: return k.matmul_q8g;
    case TensorFmt::kQ4G: return k.matmul_q4g;
    case TensorFmt::kQ3G: return k.matmul_q3g;
    default: return nullptr;
  }
}

kernels::MatVecArgs WeightArgs(const TensorView& w) {
  kernels::MatVecArgs a;
  a.weights = w.data;
  a.row_bytes = w.row_bytes;
  a.scales = w.scales;
  a.groups = w.groups;
  a.group = static_cast<size_t>(w.group);
  a.cols = static_cast<size_t>(w.cols);
  return a;
}

// Rows per task: enough work (~16k weights) to hide a fork-join.
size_t MinRows(const TensorView& w) {
  size_t cols = static_cast<size_t>(w.cols > 0 ? w.cols : 1);
  size_t rows = (16384 + cols - 1) / cols;
  return rows < 4 ? 4 : rows;
}

}  // namespace

void Ops::MatVec(const TensorView& w, const float* x, float* y, int64_t row_begin,
                 int64_t row_end) const {
  if (row_end < 0) row_end = w.rows;
  kernels::MatVecArgs a = WeightArgs(w);
  // Offsetting the weights (not y) keeps every pointer inside its array.
  size_t first = static_cast<size_t>(row_begin);
  a.weights += first * a.row_bytes;
  if (a.scales != nullptr) a.scales += first * a.groups;
  a.x = x;
  a.y = y;
  kernels::MatVecFn fn = MatVecSlot(k_, w.fmt);
  size_t n = static_cast<size_t>(row_end - row_begin);
  For(n, MinRows(w), [&](size_t b, size_t e) { fn(a, b, e); });
}

void Ops::MatMul(const TensorView& w, const float* x, size_t x_stride, size_t tokens, float* y,
                 size_t y_stride) const {
  kernels::MatMulArgs a;
  a.w = WeightArgs(w);
  a.tokens = tokens;
  a.x = x;
  a.x_stride = x_stride;
  a.y = y;
  a.y_stride = y_stride;
  kernels::MatMulFn fn = MatMulSlot(k_, w.fmt);
  size_t min_rows = MinRows(w) / (tokens > 0 ? tokens : 1);
  if (min_rows < 4) min_rows = 4;
  For(static_cast<size_t>(w.rows), min_rows, [&](size_t b, size_t e) { fn(a, b, e); });
}

float Sigmoid(float z) { return 1.0f / (1.0f + std::exp(-z)); }
float Silu(float z) { return z / (1.0f + std::exp(-z)); }
float Softplus(float z) { return z > 20.0f ? z : std::log1p(std::exp(z)); }

void RmsNorm(const float* x, const float* w, float eps, size_t n, float* y) {
  float ss = 0.0f;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  float r = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (size_t i = 0; i < n; ++i) y[i] = (x[i] * r) * w[i];
}

}  // namespace waste
