// Ops: the forward pass's view of the kernels. Each call picks the kernel
// slot for a tensor's format from the table taken once at construction and
// splits output rows over the thread pool; a row is always computed by one
// kernel call, so results are bit-identical at any thread count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "container.h"
#include "kernels/kernel_table.h"
#include "profile.h"
#include "thread_pool.h"

namespace waste {

class Ops {
 public:
  Ops(const kernels::KernelTable& table, ThreadPool* pool, Profiler* profiler = nullptr)
      : k_(table), pool_(pool), profiler_(profiler) {}

  const kernels::KernelTable& k() const { return k_; }
  ThreadPool* pool() const { return pool_; }
  Profiler* profiler() const { return profiler_; }  // null unless WASTE_PROFILE

  // y[r - row_begin] = W[r,:]·x for r in [row_begin, row_end) (default: all rows).
  void MatVec(const TensorView& w, const float* x, float* y, int64_t row_begin = 0,
              int64_t row_end = -1) const;
  // Y[t][r] = W[r,:]·X[t,:] for t < tokens (weights read once per chunk).
  void MatMul(const TensorView& w, const float* x, size_t x_stride, size_t tokens, float* y,
              size_t y_stride) const;
  // Runs fn(begin, end) over [0, n) on the pool when the work is large enough.
  template <typename Fn>
  void For(size_t n, size_t min_chunk, Fn&& fn) const {
    if (pool_ == nullptr || n <= min_chunk) {
      fn(size_t{0}, n);
    } else {
      pool_->ParallelFor(n, min_chunk, fn);
    }
  }

 private:
  kernels::KernelTable k_;  // a copy: immutable, and no lifetime to get wrong
  ThreadPool* pool_;
  Profiler* profiler_;
};

// Scalar helpers used by every layer (MODEL.md §0), one definition each so
// every path rounds the same way.
float Sigmoid(float z);
float Silu(float z);
float Softplus(float z);
// y = (x * r) * w with r = 1/sqrt(mean(x²) + eps); y may alias x.
void RmsNorm(const float* x, const float* w, float eps, size_t n, float* y);

}  // namespace waste
