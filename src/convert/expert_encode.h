// Encoding one routed expert into a container record: per row, vectors of 8
// normalised by the f16 row scale the engine multiplies by, greedy residual
// assignment against the layer's f16 books, then the row scale refitted by
// least squares to the decoded row (kept only when it lowers that row's
// error). Also the training-vector sampler.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "convert/vq.h"
#include "writer/expert_record_builder.h"

namespace waste::convert {

// The books of one (layer, kind): f32 [stages][entries][8], f16 values.
struct KindBooks {
  std::vector<float> values;
  std::vector<BookSearch> stages;
  void Build(std::vector<float> books, int n_stages, int entries);
};

struct MatrixError {
  double err = 0;   // sum of squared differences
  double norm = 0;  // sum of squares of the source
  double rel() const { return norm > 0 ? std::sqrt(err / norm) : 0.0; }
};

// Encodes w [rows][cols] (the layout's matrix `kind`) into `b`.
// `reference`: normalise by the f32 max and keep it (the reference's way).
MatrixError EncodeMatrix(ExpertRecordBuilder& b, int kind, const float* w, const KindBooks& books,
                         bool reference = false);

// Appends `count` row-normalised training vectors of w [rows][cols], drawn
// uniformly (with replacement) by `rng_seed`; all vectors when count >= rows*cols/8.
// `weights` (optional, [count]): the square of each vector's row scale, the
// factor its squared error carries back in the weights' units.
void SampleTrainingVectors(const float* w, int rows, int cols, size_t count, uint64_t rng_seed,
                           float* out, float* weights = nullptr);

}  // namespace waste::convert
