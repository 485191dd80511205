// BookSearch: the nearest entry by the exact float distance, found with the
// fastest kernel this CPU runs (vq_search.h) and proved, or rescanned.
//
// The answer is defined as: the entry c minimising ExactDist2(x, c) (float,
// dimensions summed in order, no fused multiply-add: this file is built with
// -ffp-contract=off), the lowest index among equal distances. A kernel's pick
// w is accepted when every other entry's score is above w's by more than a
// margin that bounds all rounding involved: the kernel's (its FMA chain and
// any packed block bits) and ExactDist2's own. Otherwise the vector is
// rescanned exactly. So every kernel, thread count and ISA gives the same
// indices, and the brute-force loop in the tests is the specification.
//
// The margin: for an entry that can compete with w, ||c||^2 <= 2||x||^2 +
// 2 d(x,c), so every score error is a small multiple of u (2^-24) times
// ||x||^2 + d(x,w) (about 300 u with 16 packed blocks). The margin is 2^-13
// times 2||x||^2 + |score of w|, which bounds that sum up to rounding (so
// 2048 u of it, doubled per further packed bit), several times the bound; a tiny absolute floor covers subnormal underflow. Vectors or books
// beyond 2^60 in squared norm, where the scores could overflow, always take
// the exact path.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "base/engine_env.h"
#include "convert/vq.h"
#include "convert/vq_search.h"
#include "kernels/kernel_table.h"

namespace waste::convert {

#ifdef WASTE_CONVERT_X86_SEARCH
extern const SearchKernel kSearchAvx2;    // vq_search_avx2.cc
extern const SearchKernel kSearchAvx512;  // vq_search_avx512.cc
#endif

namespace {

constexpr float kHugeNorm = 1.152921504606846976e18f;  // 2^60
constexpr float kMarginFloor = 7.52316384526264e-37f;   // 2^-120

// Scores in blocks of 64 entries (a loop the compiler vectorises), then the
// lowest and second lowest in index order.
void ScanPortable(const float* t, const float* norm, int n, const float* x, int count,
                  int32_t* idx, float* best_out, float* second_out) {
  const size_t sn = static_cast<size_t>(n);
  float score[64];
  for (int i = 0; i < count; ++i) {
    const float* xi = x + static_cast<size_t>(i) * kVecDim;
    const float x0 = -2 * xi[0], x1 = -2 * xi[1], x2 = -2 * xi[2], x3 = -2 * xi[3];
    const float x4 = -2 * xi[4], x5 = -2 * xi[5], x6 = -2 * xi[6], x7 = -2 * xi[7];
    float best = std::numeric_limits<float>::infinity(), second = best;
    int best_c = 0;
    for (size_t b = 0; b < sn; b += 64) {
      const size_t m = std::min<size_t>(64, sn - b);
      for (size_t c = 0; c < m; ++c) {
        const size_t k = b + c;
        score[c] = norm[k] + x0 * t[k] + x1 * t[sn + k] + x2 * t[2 * sn + k] + x3 * t[3 * sn + k] +
                   x4 * t[4 * sn + k] + x5 * t[5 * sn + k] + x6 * t[6 * sn + k] + x7 * t[7 * sn + k];
      }
      for (size_t c = 0; c < m; ++c) {
        if (score[c] < best) {
          second = best;
          best = score[c];
          best_c = static_cast<int>(b + c);
        } else if (score[c] < second) {
          second = score[c];
        }
      }
    }
    idx[i] = best_c;
    best_out[i] = best;
    second_out[i] = second;
  }
}

const SearchKernel kSearchPortable{"portable", 1, false, std::numeric_limits<int>::max(), ScanPortable};

float SquaredNorm(const float* x) {
  float s = 0.0f;
  for (int j = 0; j < kVecDim; ++j) s += x[j] * x[j];
  return s;
}

}  // namespace

float ExactDist2(const float* a, const float* b) {
  float d = 0.0f;
  for (int j = 0; j < kVecDim; ++j) {
    const float t = a[j] - b[j];
    d += t * t;
  }
  return d;
}

std::vector<const SearchKernel*> SupportedSearchKernels() {
  std::vector<const SearchKernel*> out{&kSearchPortable};
#ifdef WASTE_CONVERT_X86_SEARCH
  const std::vector<kernels::Isa> isas = kernels::SupportedIsas();
  const bool avx2 = std::find(isas.begin(), isas.end(), kernels::Isa::kAvx2) != isas.end();
  const bool avx512 = std::find(isas.begin(), isas.end(), kernels::Isa::kAvx512) != isas.end();
  if (avx2 || avx512) out.push_back(&kSearchAvx2);  // the AVX-512 level implies AVX2 + FMA
  if (avx512) out.push_back(&kSearchAvx512);
#endif
  return out;
}

const SearchKernel* PortableSearchKernel() { return &kSearchPortable; }

const SearchKernel* ChosenSearchKernel() {
  static const SearchKernel* const chosen = [] {
    // Per process, read once (docs/ENV.md), through the library's one
    // environment reader.
    if (EnvString("WASTE_BACKEND") == "cpu") return &kSearchPortable;
    const std::vector<const SearchKernel*> all = SupportedSearchKernels();
    // WASTE_CONVERT_SEARCH=portable|avx2|avx512 picks a supported kernel
    // by name (for measurements; the output is the same with any of them).
    const std::string want = EnvString("WASTE_CONVERT_SEARCH");
    for (const SearchKernel* k : all) {
      if (!want.empty() && want == k->name) return k;
    }
    return all.back();
  }();
  return chosen;
}

BookSearch::BookSearch(const float* book, int n) : BookSearch(book, n, ChosenSearchKernel()) {}

BookSearch::BookSearch(const float* book, int n, const SearchKernel* kernel)
    : n_(n),
      rows_(book, book + static_cast<size_t>(n) * kVecDim),
      t_(static_cast<size_t>(n) * kVecDim),
      norm_(static_cast<size_t>(n)) {
  bool finite = true;
  float max_norm = 0.0f;
  for (int c = 0; c < n; ++c) {
    float s = 0.0f;
    for (int j = 0; j < kVecDim; ++j) {
      const float v = book[static_cast<size_t>(c) * kVecDim + j];
      finite = finite && std::isfinite(v);
      t_[static_cast<size_t>(j) * n + c] = v;
      s += v * v;
    }
    norm_[c] = s;
    max_norm = std::max(max_norm, s);
  }
  // The kernel must take this n; otherwise the portable one (any n).
  const int blocks = kernel->lanes > 0 ? n / kernel->lanes : 0;
  if (n <= 0 || n % kernel->lanes != 0 || blocks > kernel->max_blocks) kernel = &kSearchPortable;
  kernel_ = kernel;
  int bits = 0;
  if (kernel->packs_block) {
    while ((1 << bits) < n / kernel->lanes) ++bits;
  }
  margin_scale_ = std::ldexp(1.0f, -13 + std::max(0, bits - 4));
  exact_only_ = n <= 0 || !finite || !(max_norm < kHugeNorm);
}

int BookSearch::ExactNearest(const float* x, float* dist) const {
  float best = std::numeric_limits<float>::infinity();
  int best_c = 0;
  for (int c = 0; c < n_; ++c) {
    const float d = ExactDist2(x, entry(c));
    if (d < best) {
      best = d;
      best_c = c;
    }
  }
  if (dist != nullptr) *dist = ExactDist2(x, entry(best_c));
  return best_c;
}

void BookSearch::NearestBatch(const float* x, size_t count, int32_t* out, float* dist) const {
  constexpr int kStep = 64;
  int32_t idx[kStep];
  float best[kStep], second[kStep];
  for (size_t b = 0; b < count; b += kStep) {
    const int m = static_cast<int>(std::min<size_t>(kStep, count - b));
    const float* xb = x + b * kVecDim;
    if (!exact_only_) kernel_->scan(t_.data(), norm_.data(), n_, xb, m, idx, best, second);
    for (int i = 0; i < m; ++i) {
      const float* xi = xb + static_cast<size_t>(i) * kVecDim;
      float* di = dist != nullptr ? dist + b + i : nullptr;
      const float xx = SquaredNorm(xi);
      if (!exact_only_ && xx < kHugeNorm) {
        // ||x||^2 + d(x,w) <= 2 ||x||^2 + |best| up to rounding far inside the
        // margin's slack, so the exact distance is computed only when asked for.
        const float margin = margin_scale_ * (2.0f * xx + std::fabs(best[i])) + kMarginFloor;
        if (second[i] - best[i] > margin) {
          out[b + i] = idx[i];
          if (di != nullptr) *di = ExactDist2(xi, entry(idx[i]));
          continue;
        }
      }
      out[b + i] = ExactNearest(xi, di);
    }
  }
}

int BookSearch::Nearest(const float* x, float* dist) const {
  int32_t c;
  NearestBatch(x, 1, &c, dist);
  return c;
}

}  // namespace waste::convert
