// AVX2 + FMA nearest-entry scan for BookSearch (x86-64 builds; chosen at run
// time when the CPU has AVX2 and FMA but not AVX-512). The same scheme as
// vq_search_avx512.cc with 8 entries per block: their coordinates held in
// registers while kGroup vectors are scored, the block number packed into
// the low mantissa bits of the running minimum, the second lowest score kept
// for the proof in vq.cc. Only intrinsics and internal-linkage functions.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "convert/vq_search.h"

namespace waste::convert {
namespace {

constexpr int kGroup = 2;  // 16 ymm registers: 8 coordinates + norm + 2 x (best, second) + temporaries

inline int BlockBits(int blocks) {
  int b = 0;
  while ((1 << b) < blocks) ++b;
  return b;
}

inline float HMin(__m256 v) {
  __m128 m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_min_ps(m, _mm_movehl_ps(m, m));
  m = _mm_min_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

template <int V>
inline void ScanGroup(const float* t, const float* norm, int n, const float* x, int32_t* idx,
                      float* best_out, float* second_out) {
  alignas(32) float xs[V][8];
  for (int v = 0; v < V; ++v) {
    for (int j = 0; j < 8; ++j) xs[v][j] = -2.0f * x[v * 8 + j];
  }
  const int blocks = n / 8;
  const int bits = BlockBits(blocks);
  const __m256 keep = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(~((1u << bits) - 1u))));
  const __m256 inf = _mm256_set1_ps(__builtin_inff());
  __m256 best[V], sec[V];
  for (int v = 0; v < V; ++v) best[v] = sec[v] = inf;
  const size_t sn = static_cast<size_t>(n);
  for (int b = 0; b < blocks; ++b) {
    const float* tb = t + static_cast<size_t>(b) * 8;
    const __m256 c0 = _mm256_loadu_ps(tb), c1 = _mm256_loadu_ps(tb + sn);
    const __m256 c2 = _mm256_loadu_ps(tb + 2 * sn), c3 = _mm256_loadu_ps(tb + 3 * sn);
    const __m256 c4 = _mm256_loadu_ps(tb + 4 * sn), c5 = _mm256_loadu_ps(tb + 5 * sn);
    const __m256 c6 = _mm256_loadu_ps(tb + 6 * sn), c7 = _mm256_loadu_ps(tb + 7 * sn);
    const __m256 nr = _mm256_loadu_ps(norm + static_cast<size_t>(b) * 8);
    const __m256 tag = _mm256_castsi256_ps(_mm256_set1_epi32(b));
    for (int v = 0; v < V; ++v) {
      __m256 s = _mm256_fmadd_ps(_mm256_broadcast_ss(&xs[v][0]), c0, nr);
      s = _mm256_fmadd_ps(_mm256_broadcast_ss(&xs[v][1]), c1, s);
      s = _mm256_fmadd_ps(_mm256_broadcast_ss(&xs[v][2]), c2, s);
      s = _mm256_fmadd_ps(_mm256_broadcast_ss(&xs[v][3]), c3, s);
      s = _mm256_fmadd_ps(_mm256_broadcast_ss(&xs[v][4]), c4, s);
      s = _mm256_fmadd_ps(_mm256_broadcast_ss(&xs[v][5]), c5, s);
      s = _mm256_fmadd_ps(_mm256_broadcast_ss(&xs[v][6]), c6, s);
      s = _mm256_fmadd_ps(_mm256_broadcast_ss(&xs[v][7]), c7, s);
      s = _mm256_or_ps(_mm256_and_ps(s, keep), tag);
      const __m256 hi = _mm256_max_ps(s, best[v]);
      best[v] = _mm256_min_ps(s, best[v]);
      sec[v] = _mm256_min_ps(hi, sec[v]);
    }
  }
  for (int v = 0; v < V; ++v) {
    const float m = HMin(best[v]);
    const int eq = _mm256_movemask_ps(_mm256_cmp_ps(best[v], _mm256_set1_ps(m), _CMP_EQ_OQ));
    if (eq == 0) {  // no finite score at all: let the exact rescan decide
      idx[v] = 0;
      best_out[v] = m;
      second_out[v] = m;
      continue;
    }
    const int lane = __builtin_ctz(static_cast<unsigned>(eq));
    uint32_t mb;
    std::memcpy(&mb, &m, sizeof mb);
    idx[v] = static_cast<int32_t>((mb & ((1u << bits) - 1u)) * 8u + static_cast<uint32_t>(lane));
    alignas(32) static const int32_t kLaneMask[16] = {0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0, 0, 0};
    const __m256 one = _mm256_castsi256_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLaneMask + 8 - lane)));
    const __m256 others = _mm256_blendv_ps(best[v], inf, one);
    best_out[v] = m;
    second_out[v] = HMin(_mm256_min_ps(others, sec[v]));
  }
}

void ScanAvx2(const float* t, const float* norm, int n, const float* x, int count, int32_t* idx,
              float* best, float* second) {
  int i = 0;
  for (; i + kGroup <= count; i += kGroup) {
    ScanGroup<kGroup>(t, norm, n, x + static_cast<size_t>(i) * 8, idx + i, best + i, second + i);
  }
  for (; i < count; ++i) {
    ScanGroup<1>(t, norm, n, x + static_cast<size_t>(i) * 8, idx + i, best + i, second + i);
  }
}

}  // namespace

extern const SearchKernel kSearchAvx2;
const SearchKernel kSearchAvx2{"avx2", 8, true, 256, ScanAvx2};

}  // namespace waste::convert
