#include "convert/expert_encode.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "convert/rng.h"
#include "format/format.h"

namespace waste::convert {

void KindBooks::Build(std::vector<float> books, int n_stages, int entries) {
  values = std::move(books);
  stages.clear();
  for (int s = 0; s < n_stages; ++s) {
    stages.emplace_back(values.data() + static_cast<size_t>(s) * entries * kVecDim, entries);
  }
}

namespace {

// max(1e-8, max |row|). Eight running maxima (the compiler keeps them in
// vector registers; a single one it will not vectorise): the largest of a
// set does not depend on the order it is taken in, and the values are finite
// (checked when the tensor is loaded), so the result is the same.
float RowScale(const float* row, int cols) {
  float m[8];
  for (float& v : m) v = 1e-8f;
  int i = 0;
  for (; i + 8 <= cols; i += 8) {
    for (int q = 0; q < 8; ++q) m[q] = std::max(m[q], std::fabs(row[i + q]));
  }
  for (int q = 0; i < cols; ++i, ++q) m[q] = std::max(m[q], std::fabs(row[i]));
  float amax = m[0];
  for (int q = 1; q < 8; ++q) amax = std::max(amax, m[q]);
  return amax;
}

}  // namespace

MatrixError EncodeMatrix(ExpertRecordBuilder& b, int kind, const float* w, const KindBooks& books,
                         bool reference) {
  const format::RecordLayout& l = b.layout();
  const format::MatrixLayout& m = l.m[kind];
  const int n_stages = static_cast<int>(books.stages.size());
  uint16_t* scales = b.scales(kind);
  std::vector<float> unit(static_cast<size_t>(m.cols));  // decoded row at scale 1
  std::vector<float> rho(static_cast<size_t>(m.cols));   // what is left to encode
  std::vector<int32_t> picks(static_cast<size_t>(n_stages) * m.nv);
  MatrixError out;
  uint8_t idx[8];
  for (int r = 0; r < m.rows; ++r) {
    const float* row = w + static_cast<size_t>(r) * m.cols;
    const uint16_t h = format::F32ToF16(RowScale(row, m.cols));
    const float a = reference ? RowScale(row, m.cols) : format::F16ToF32(h);
    const float inv = a > 0.0f ? 1.0f / a : 0.0f;
    for (int i = 0; i < m.cols; ++i) rho[i] = row[i] * inv;
    std::fill(unit.begin(), unit.end(), 0.0f);
    // Stage by stage over the whole row (one batched search per stage).
    for (int s = 0; s < n_stages; ++s) {
      int32_t* ps = picks.data() + static_cast<size_t>(s) * m.nv;
      books.stages[s].NearestBatch(rho.data(), static_cast<size_t>(m.nv), ps);
      for (int v = 0; v < m.nv; ++v) {
        // Through local copies: the compiler cannot tell that the three
        // buffers never overlap, and would otherwise go lane by lane.
        float ev[kVecDim], res[kVecDim], acc[kVecDim];
        float* rv = rho.data() + static_cast<size_t>(v) * kVecDim;
        float* uv = unit.data() + static_cast<size_t>(v) * kVecDim;
        std::memcpy(ev, books.stages[s].entry(ps[v]), sizeof ev);
        std::memcpy(res, rv, sizeof res);
        std::memcpy(acc, uv, sizeof acc);
        for (int j = 0; j < kVecDim; ++j) {
          res[j] -= ev[j];
          acc[j] += ev[j];
        }
        std::memcpy(rv, res, sizeof res);
        std::memcpy(uv, acc, sizeof acc);
      }
    }
    for (int v = 0; v < m.nv; ++v) {
      for (int s = 0; s < n_stages; ++s) idx[s] = static_cast<uint8_t>(picks[static_cast<size_t>(s) * m.nv + v]);
      b.SetRun(kind, r, v, idx);
    }
    // Least-squares row scale for the chosen indices, in f16.
    // Four interleaved partial sums per quantity (independent adds the CPU
    // overlaps, and the compiler vectorises), combined in a fixed order.
    double pwu[4] = {0, 0, 0, 0}, puu[4] = {0, 0, 0, 0}, pww[4] = {0, 0, 0, 0};
    int i = 0;
    for (; i + 4 <= m.cols; i += 4) {
      for (int q = 0; q < 4; ++q) {
        const double wr = row[i + q], un = unit[i + q];
        pwu[q] += wr * un;
        puu[q] += un * un;
        pww[q] += wr * wr;
      }
    }
    for (int q = 0; i < m.cols; ++i, ++q) {
      const double wr = row[i], un = unit[i];
      pwu[q] += wr * un;
      puu[q] += un * un;
      pww[q] += wr * wr;
    }
    const double wu = (pwu[0] + pwu[1]) + (pwu[2] + pwu[3]);
    const double uu = (puu[0] + puu[1]) + (puu[2] + puu[3]);
    const double ww = (pww[0] + pww[1]) + (pww[2] + pww[3]);
    auto row_err = [&](float s) { return ww - 2.0 * s * wu + static_cast<double>(s) * s * uu; };
    uint16_t best = h;
    double best_e = row_err(a);
    if (reference) {
      // Error as the engine decodes it: f16 scale, f16 books.
      best_e = 0;
      for (int v = 0; v < m.nv; ++v) {
        float u16[kVecDim] = {0};
        uint8_t s8[8];
        b.GetRun(kind, r, v, s8);
        for (int s = 0; s < n_stages; ++s) {
          for (int j = 0; j < kVecDim; ++j) u16[j] += RoundBookValue(books.stages[s].entry(s8[s])[j]);
        }
        for (int j = 0; j < kVecDim; ++j) {
          const double d = row[v * kVecDim + j] - static_cast<double>(format::F16ToF32(h)) * u16[j];
          best_e += d * d;
        }
      }
    } else if (uu > 0) {
      const uint16_t h2 = format::F32ToF16(static_cast<float>(wu / uu));
      if (format::F16IsFinite(h2)) {
        const double e2 = row_err(format::F16ToF32(h2));
        if (e2 < best_e) {
          best = h2;
          best_e = e2;
        }
      }
    }
    scales[r] = best;
    out.err += std::max(0.0, best_e);
    out.norm += ww;
  }
  return out;
}

void SampleTrainingVectors(const float* w, int rows, int cols, size_t count, uint64_t rng_seed,
                           float* out, float* weights) {
  const int nv = cols / kVecDim;
  const size_t total = static_cast<size_t>(rows) * nv;
  std::vector<float> inv(static_cast<size_t>(rows)), a2(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    const float a = format::F16ToF32(format::F32ToF16(RowScale(w + static_cast<size_t>(r) * cols, cols)));
    inv[r] = a > 0.0f ? 1.0f / a : 0.0f;
    a2[r] = a * a;
  }
  Rng rng(rng_seed);
  for (size_t k = 0; k < count; ++k) {
    const size_t p = count >= total ? k % total : rng.Below(total);
    const size_t r = p / nv, v = p % nv;
    const float* src = w + r * cols + v * kVecDim;
    for (int j = 0; j < kVecDim; ++j) out[k * kVecDim + j] = src[j] * inv[r];
    if (weights != nullptr) weights[k] = a2[r];
  }
}

}  // namespace waste::convert
