// Vector quantisation of expert matrices: residual k-means codebooks
// (k-means++ seeding, empty clusters repaired, convergence test, books
// rounded to the f16 the engine decodes before the next stage trains on
// what they leave) and the nearest-entry search used both for training and
// for encoding every expert. Results depend on the seed and the data only:
// all parallel work is split into fixed chunks reduced in chunk order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/thread_pool.h"

namespace waste::convert {

inline constexpr int kVecDim = 8;

// One codebook laid out for search: entries transposed ([8][n]) plus norms.
class BookSearch {
 public:
  BookSearch() = default;
  BookSearch(const float* book, int n);  // book: f32 [n][8]
  // argmin_c ||x - c||^2 (computed as ||c||^2 - 2 x.c; ties: lowest c).
  int Nearest(const float* x, float* dist = nullptr) const;
  const float* entry(int c) const { return rows_.data() + static_cast<size_t>(c) * kVecDim; }
  int size() const { return n_; }

 private:
  int n_ = 0;
  std::vector<float> rows_;   // [n][8]
  std::vector<float> t_;      // [8][n]
  std::vector<float> norm_;   // [n]
};

struct KmeansOptions {
  int entries = 256;
  int stages = 3;
  int max_iterations = 16;
  double tolerance = 1e-4;    // stop when the error improves by less than this fraction
  uint64_t seed = 0;
};

struct KmeansReport {
  std::vector<double> stage_error;  // mean squared residual after each stage (training set)
  std::vector<int> iterations;
  int repaired = 0;                 // empty clusters re-seeded
};

// Residual codebooks for `n` training vectors (f32 [n][8], overwritten with
// the final residual). Returns f32 [stages][entries][8], every value an f16
// (subnormals flushed) exactly as the engine will read it.
std::vector<float> TrainResidualBooks(std::vector<float>& vectors, const KmeansOptions& o,
                                      ThreadPool* pool, KmeansReport* report);

// Rounds to f16 and back, subnormals flushed (what the codebook reader does).
float RoundBookValue(float v);

}  // namespace waste::convert
