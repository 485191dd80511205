// Vector quantisation of expert matrices: residual k-means codebooks
// (k-means++ seeding, empty clusters repaired, convergence test, books
// rounded to the f16 the engine decodes before the next stage trains on
// what they leave) and the nearest-entry search used both for training and
// for encoding every expert, then rounds of refinement of all stages
// together against the greedy encoding the experts get (RefineBooks in
// vq.cc). Results depend on the seed and the data only:
// all parallel work is split into fixed chunks reduced in chunk order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/thread_pool.h"

namespace waste::convert {

inline constexpr int kVecDim = 8;

struct SearchKernel;  // vq_search.h

// The float squared distance every search answers to: dimensions summed in
// order, no fused multiply-add.
float ExactDist2(const float* a, const float* b);

// One codebook laid out for search: entries transposed ([8][n]) plus norms.
// Nearest answers argmin_c ExactDist2(x, c), lowest c on ties, whichever
// kernel runs (vq_search.cc says how the fast scan is proved exact).
class BookSearch {
 public:
  BookSearch() = default;
  BookSearch(const float* book, int n);  // book: f32 [n][8]; the process's kernel
  BookSearch(const float* book, int n, const SearchKernel* kernel);  // tests, benchmarks
  int Nearest(const float* x, float* dist = nullptr) const;
  // count vectors x [count][8]: out[i] = Nearest(x_i), dist[i] (if given) its distance.
  void NearestBatch(const float* x, size_t count, int32_t* out, float* dist = nullptr) const;
  const float* entry(int c) const { return rows_.data() + static_cast<size_t>(c) * kVecDim; }
  int size() const { return n_; }
  const SearchKernel* kernel() const { return kernel_; }

 private:
  int ExactNearest(const float* x, float* dist) const;

  int n_ = 0;
  std::vector<float> rows_;   // [n][8]
  std::vector<float> t_;      // [8][n]
  std::vector<float> norm_;   // [n]
  const SearchKernel* kernel_ = nullptr;
  float margin_scale_ = 0.0f;
  bool exact_only_ = true;
};

struct KmeansOptions {
  int entries = 256;
  int stages = 3;
  int max_iterations = 16;
  double tolerance = 1e-4;    // stop when the error improves by less than this fraction
  uint64_t seed = 0;
  bool reference = false;     // random-sample init, fixed iterations, no repair, f32 books
  // Rounds of joint refinement after the greedy stage-by-stage training
  // (vq.cc, RefineBooks); a round is kept only when it lowers the greedy
  // encoding's training error. Ignored with `reference`.
  int refine_rounds = 0;
};

struct KmeansReport {
  std::vector<double> stage_error;  // mean squared residual after each stage (training set)
  std::vector<int> iterations;
  int repaired = 0;                 // empty clusters re-seeded
  // Refinement: the greedy encoding's mean (weighted) squared error before
  // the first round, then after each round tried; `refine_kept` rounds of
  // them were kept (the last tried is dropped when it did not improve).
  std::vector<double> refine_error;
  int refine_kept = 0;
};

// Residual codebooks for `n` training vectors (f32 [n][8], overwritten with
// the final residual). Returns f32 [stages][entries][8], every value an f16
// (subnormals flushed) exactly as the engine will read it. `weights`
// (optional, [n]) weigh each vector's squared error in the refinement
// (the square of the row scale it was normalised by: the error the encoder
// makes in the weights' own units).
std::vector<float> TrainResidualBooks(std::vector<float>& vectors, const KmeansOptions& o,
                                      ThreadPool* pool, KmeansReport* report,
                                      const float* weights = nullptr);

// Rounds to f16 and back, subnormals flushed (what the codebook reader does).
float RoundBookValue(float v);

}  // namespace waste::convert
