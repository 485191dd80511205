#include "runtime/ops.h"

#include <algorithm>
#include <cmath>
#include <span>

namespace waste {

kernels::MatVecFn MatVecSlot(const kernels::KernelTable& k, TensorFmt fmt) {
  switch (fmt) {
    case TensorFmt::kF32: return k.matvec_f32;
    case TensorFmt::kQ8G: return k.matvec_q8g;
    case TensorFmt::kQ4G: return k.matvec_q4g;
    case TensorFmt::kQ3G: return k.matvec_q3g;
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

namespace {

kernels::MatMulFn MatMulSlot(const kernels::KernelTable& k, TensorFmt fmt) {
  switch (fmt) {
    case TensorFmt::kF32: return k.matmul_f32;
    case TensorFmt::kQ8G: return k.matmul_q8g;
    case TensorFmt::kQ4G: return k.matmul_q4g;
    case TensorFmt::kQ3G: return k.matmul_q3g;
    default: return nullptr;
  }
}

// Rows per task: enough work (~16k weights) to hide a fork-join.
size_t MinRows(const TensorView& w) {
  size_t cols = static_cast<size_t>(w.cols > 0 ? w.cols : 1);
  size_t rows = (16384 + cols - 1) / cols;
  return rows < 4 ? 4 : rows;
}

// One job of a fused region (Ops::MatVecs / MatMuls): its kernel arguments
// and where its rows sit in the concatenation of all jobs' rows.
template <class Args, class Fn>
struct RowJob {
  Args a;
  Fn fn;
  size_t first;
  size_t rows;
};

// Rows [b, e) of the concatenation, each part handed to its job's kernel.
template <class Job>
void RunJobRows(const Job* p, size_t n, size_t b, size_t e) {
  for (size_t i = 0; i < n; ++i) {
    const size_t lo = std::max(b, p[i].first), hi = std::min(e, p[i].first + p[i].rows);
    if (lo < hi) p[i].fn(p[i].a, lo - p[i].first, hi - p[i].first);
  }
}

}  // namespace

void Ops::MatVec(const TensorView& w, const float* x, float* y, int64_t row_begin,
                 int64_t row_end) const {
  if (row_begin == 0 && (row_end < 0 || row_end == w.rows)) {
    MatVecs({{&w, x, y}});
    return;
  }
  if (row_end < 0) row_end = w.rows;
  // Offsetting the weights (not y) keeps every pointer inside its array.
  kernels::MatVecArgs a = WeightArgs(RowSlice(w, row_begin, row_end - row_begin));
  a.x = x;
  a.y = y;
  kernels::MatVecFn fn = MatVecSlot(k_, w.fmt);
  size_t n = static_cast<size_t>(row_end - row_begin);
  For(n, MinRows(w), [&](size_t b, size_t e) { fn(a, b, e); });
}

void Ops::RunMatVecs(const MatVecJob* jobs, size_t n_jobs) const {
  using Prepared = RowJob<kernels::MatVecArgs, kernels::MatVecFn>;
  Prepared p[kMaxJobs];
  size_t n = 0, total = 0, min_rows = 0;
  for (const MatVecJob& j : std::span(jobs, n_jobs)) {
    if (j.w == nullptr) continue;  // an optional weight that is absent
    Prepared& q = p[n++];
    q.a = WeightArgs(*j.w);
    q.a.x = j.x;
    q.a.y = j.y;
    q.fn = MatVecSlot(k_, j.w->fmt);
    q.first = total;
    q.rows = static_cast<size_t>(j.w->rows);
    total += q.rows;
    min_rows = std::max(min_rows, MinRows(*j.w));
  }
  auto run = [&](size_t b, size_t e) { RunJobRows(p, n, b, e); };
  if (pool_ == nullptr || total <= min_rows) {
    run(0, total);
    return;
  }
  // A few chunks per thread, claimed dynamically: a descheduled thread
  // delays its chunk, not half of the work.
  size_t chunk = std::max(min_rows, (total + 4 * static_cast<size_t>(pool_->size()) - 1) /
                                        (4 * static_cast<size_t>(pool_->size())));
  pool_->ParallelForDynamic(total, chunk, run);
}

void Ops::RunMatMuls(size_t tokens, const MatMulJob* jobs, size_t n_jobs) const {
  using Prepared = RowJob<kernels::MatMulArgs, kernels::MatMulFn>;
  Prepared p[kMaxJobs];
  size_t n = 0, total = 0;
  for (const MatMulJob& j : std::span(jobs, n_jobs)) {
    if (j.w == nullptr) continue;  // an optional weight that is absent
    Prepared& q = p[n++];
    q.a.w = WeightArgs(*j.w);
    q.a.tokens = tokens;
    q.a.x = j.x;
    q.a.x_stride = j.x_stride;
    q.a.y = j.y;
    q.a.y_stride = j.y_stride;
    q.fn = MatMulSlot(k_, j.w->fmt);
    q.first = total;
    q.rows = static_cast<size_t>(j.w->rows);
    total += q.rows;
  }
  auto run = [&](size_t b, size_t e) { RunJobRows(p, n, b, e); };
  if (pool_ == nullptr || total <= 16) {
    run(0, total);
    return;
  }
  const size_t parts = 4 * static_cast<size_t>(pool_->size());
  size_t chunk = (total + parts - 1) / parts;
  chunk = (chunk + 3) / 4 * 4;  // whole 4-row tiles
  pool_->ParallelForDynamic(total, chunk, run);
}

void Ops::MatMul(const TensorView& w, const float* x, size_t x_stride, size_t tokens, float* y,
                 size_t y_stride) const {
  if (pool_ != nullptr) {
    MatMuls(tokens, {{&w, x, x_stride, y, y_stride}});
    return;
  }
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
