// AVX-512 nearest-entry scan for BookSearch (x86-64 builds; chosen at run
// time when the CPU has AVX-512F). Register-blocked: 16 entries per block,
// their 8 coordinates held in registers while kGroup vectors are scored
// against them (each coordinate of x broadcast straight from memory into the
// FMA). The running minimum carries the block number in its low mantissa
// bits (one vpternlogd), so one vminps keeps value and position together; a
// vmaxps/vminps pair keeps the second lowest score for the proof in vq.cc.
// Only intrinsics and functions with internal linkage live here: nothing
// compiled with -mavx512f can be shared with code that runs elsewhere.
// GCC 12 reports its own _mm512_undefined_ps() placeholders inside
// _mm512_min_ps / _mm512_reduce_min_ps as uninitialised (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "convert/vq_search.h"

namespace waste::convert {
namespace {

constexpr int kGroup = 8;

inline int BlockBits(int blocks) {
  int b = 0;
  while ((1 << b) < blocks) ++b;
  return b;
}

template <int V>
inline void ScanGroup(const float* t, const float* norm, int n, const float* x, int32_t* idx,
                      float* best_out, float* second_out) {
  alignas(64) float xs[V][8];
  for (int v = 0; v < V; ++v) {
    for (int j = 0; j < 8; ++j) xs[v][j] = -2.0f * x[v * 8 + j];
  }
  const int blocks = n / 16;
  const int bits = BlockBits(blocks);
  const __m512i keep = _mm512_set1_epi32(static_cast<int>(~((1u << bits) - 1u)));
  const __m512 inf = _mm512_set1_ps(__builtin_inff());
  __m512 best[V], sec[V];
  for (int v = 0; v < V; ++v) best[v] = sec[v] = inf;
  const size_t sn = static_cast<size_t>(n);
  for (int b = 0; b < blocks; ++b) {
    const float* tb = t + static_cast<size_t>(b) * 16;
    const __m512 c0 = _mm512_loadu_ps(tb), c1 = _mm512_loadu_ps(tb + sn);
    const __m512 c2 = _mm512_loadu_ps(tb + 2 * sn), c3 = _mm512_loadu_ps(tb + 3 * sn);
    const __m512 c4 = _mm512_loadu_ps(tb + 4 * sn), c5 = _mm512_loadu_ps(tb + 5 * sn);
    const __m512 c6 = _mm512_loadu_ps(tb + 6 * sn), c7 = _mm512_loadu_ps(tb + 7 * sn);
    const __m512 nr = _mm512_loadu_ps(norm + static_cast<size_t>(b) * 16);
    const __m512i tag = _mm512_set1_epi32(b);
    for (int v = 0; v < V; ++v) {
      __m512 s = _mm512_fmadd_ps(_mm512_set1_ps(xs[v][0]), c0, nr);
      s = _mm512_fmadd_ps(_mm512_set1_ps(xs[v][1]), c1, s);
      s = _mm512_fmadd_ps(_mm512_set1_ps(xs[v][2]), c2, s);
      s = _mm512_fmadd_ps(_mm512_set1_ps(xs[v][3]), c3, s);
      s = _mm512_fmadd_ps(_mm512_set1_ps(xs[v][4]), c4, s);
      s = _mm512_fmadd_ps(_mm512_set1_ps(xs[v][5]), c5, s);
      s = _mm512_fmadd_ps(_mm512_set1_ps(xs[v][6]), c6, s);
      s = _mm512_fmadd_ps(_mm512_set1_ps(xs[v][7]), c7, s);
      // (s & keep) | tag: the block number replaces the lowest mantissa bits.
      s = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_castps_si512(s), keep, tag, 0xEA));
      // Operand order: a NaN score (never produced for guarded inputs) is dropped.
      const __m512 hi = _mm512_max_ps(s, best[v]);
      best[v] = _mm512_min_ps(s, best[v]);
      sec[v] = _mm512_min_ps(hi, sec[v]);
    }
  }
  for (int v = 0; v < V; ++v) {
    const float m = _mm512_reduce_min_ps(best[v]);
    const __mmask16 eq = _mm512_cmpeq_ps_mask(best[v], _mm512_set1_ps(m));
    if (eq == 0) {  // no finite score at all: let the exact rescan decide
      idx[v] = 0;
      best_out[v] = m;
      second_out[v] = m;
      continue;
    }
    const int lane = __builtin_ctz(static_cast<unsigned>(eq));
    uint32_t mb;
    std::memcpy(&mb, &m, sizeof mb);
    idx[v] = static_cast<int32_t>((mb & ((1u << bits) - 1u)) * 16u + static_cast<uint32_t>(lane));
    const __m512 others = _mm512_mask_mov_ps(best[v], static_cast<__mmask16>(1u << lane), inf);
    best_out[v] = m;
    second_out[v] = _mm512_reduce_min_ps(_mm512_min_ps(others, sec[v]));
  }
}

void ScanAvx512(const float* t, const float* norm, int n, const float* x, int count,
                int32_t* idx, float* best, float* second) {
  int i = 0;
  for (; i + kGroup <= count; i += kGroup) {
    ScanGroup<kGroup>(t, norm, n, x + static_cast<size_t>(i) * 8, idx + i, best + i, second + i);
  }
  for (; i < count; ++i) {
    ScanGroup<1>(t, norm, n, x + static_cast<size_t>(i) * 8, idx + i, best + i, second + i);
  }
}

}  // namespace

extern const SearchKernel kSearchAvx512;
const SearchKernel kSearchAvx512{"avx512", 16, true, 256, ScanAvx512};

}  // namespace waste::convert
