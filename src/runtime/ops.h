// Ops: the forward pass's view of the kernels. Each call picks the kernel
// slot for a tensor's format from the table taken once at construction and
// splits output rows over the thread pool; a row is always computed by one
// kernel call, so results are bit-identical at any thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "container/container.h"
#include "kernels/kernel_table.h"
#include "base/profile.h"
#include "runtime/thread_pool.h"

namespace waste {

// The matvec slot for a tensor's format, and the weight half of its
// arguments (x/y left for the caller). Shared by every layer file.
kernels::MatVecFn MatVecSlot(const kernels::KernelTable& k, TensorFmt fmt);
kernels::MatVecArgs WeightArgs(const TensorView& w);

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
  // Several matvecs as one parallel region (one fork-join instead of one
  // each): the rows of all jobs are concatenated and split over the pool;
  // every row is still computed by one kernel call, so each y is exactly
  // what MatVec gives. Jobs should have similar cost per row. A job whose
  // w is null is skipped (optional weights: one call for both shapes). More
  // than kMaxJobs jobs do not compile (they used to be dropped silently).
  static constexpr size_t kMaxJobs = 8;
  struct MatVecJob {
    const TensorView* w;
    const float* x;
    float* y;
  };
  template <size_t N>
  void MatVecs(const MatVecJob (&jobs)[N]) const {
    static_assert(N <= kMaxJobs, "Ops::MatVecs holds at most kMaxJobs jobs");
    RunMatVecs(jobs, N);
  }
  // Several matmuls over the same tokens as one parallel region (as MatVecs).
  struct MatMulJob {
    const TensorView* w;
    const float* x;
    size_t x_stride;
    float* y;
    size_t y_stride;
  };
  template <size_t N>
  void MatMuls(size_t tokens, const MatMulJob (&jobs)[N]) const {
    static_assert(N <= kMaxJobs, "Ops::MatMuls holds at most kMaxJobs jobs");
    RunMatMuls(tokens, jobs, N);
  }
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
  // fn(begin, end) over chunks of `chunk` items claimed dynamically (uneven
  // items); serial in order without a pool.
  template <typename Fn>
  void ForDynamic(size_t n, size_t chunk, Fn&& fn) const {
    if (pool_ == nullptr) {
      if (chunk == 0) chunk = 1;
      for (size_t b = 0; b < n; b += chunk) fn(b, b + chunk < n ? b + chunk : n);
    } else {
      pool_->ParallelForDynamic(n, chunk, fn);
    }
  }
  int threads() const { return pool_ != nullptr ? pool_->size() : 1; }
  // Index of the calling thread for per-thread scratch: 0..threads()-1.
  static int Worker() { return ThreadPool::CurrentWorker(); }

 private:
  void RunMatVecs(const MatVecJob* jobs, size_t n_jobs) const;
  void RunMatMuls(size_t tokens, const MatMulJob* jobs, size_t n_jobs) const;
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
