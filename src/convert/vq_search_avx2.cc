// AVX2 + FMA nearest-entry search for BookSearch (x86-64 builds; chosen at
// run time when the CPU has AVX2). Eight entries per step; the first
// minimum wins, as in the portable loop.
#include <immintrin.h>

#include <limits>

namespace waste::convert {

int NearestAvx2(const float* t, const float* norm, int n, const float* x) {
  __m256 xs[8];
  for (int j = 0; j < 8; ++j) xs[j] = _mm256_set1_ps(-2.0f * x[j]);
  __m256 best = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  __m256i best_i = _mm256_setzero_si256();
  __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i eight = _mm256_set1_epi32(8);
  for (int c = 0; c < n; c += 8) {
    __m256 s = _mm256_loadu_ps(norm + c);
    for (int j = 0; j < 8; ++j) {
      s = _mm256_fmadd_ps(xs[j], _mm256_loadu_ps(t + static_cast<size_t>(j) * n + c), s);
    }
    const __m256 lt = _mm256_cmp_ps(s, best, _CMP_LT_OQ);
    best = _mm256_blendv_ps(best, s, lt);
    best_i = _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(best_i), _mm256_castsi256_ps(idx), lt));
    idx = _mm256_add_epi32(idx, eight);
  }
  alignas(32) float b[8];
  alignas(32) int bi[8];
  _mm256_store_ps(b, best);
  _mm256_store_si256(reinterpret_cast<__m256i*>(bi), best_i);
  int out = bi[0];
  float v = b[0];
  for (int k = 1; k < 8; ++k) {
    if (b[k] < v || (b[k] == v && bi[k] < out)) {
      v = b[k];
      out = bi[k];
    }
  }
  return out;
}

}  // namespace waste::convert
