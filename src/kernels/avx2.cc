// AVX2 + FMA + F16C kernels. Built with those flags on this file alone
// (cmake/WasteIsa.cmake) and only called after dispatch.cc saw the CPU and OS
// support them. Everything but RegisterAvx2 lives in an unnamed namespace and
// nothing here instantiates a header template, so no function compiled for
// AVX2 can be merged into code that runs elsewhere (STYLE.md §6.3).
// Tails: AVX2 has no byte-masked loads, so partial chunks are copied into a
// small zeroed stack buffer first (never read past the caller's data).
#include "kernels/isa_register.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define WASTE_AVX2_BODY 1
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cstddef>
#include <cstdint>

#include "kernels/baseline.h"
#include "kernels/kernel_args.h"
#include "kernels/numerics.h"
#endif

namespace waste::kernels::avx2 {
#if defined(WASTE_AVX2_BODY)
namespace {

inline size_t MinSize(size_t a, size_t b) { return a < b ? a : b; }

inline float HSum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

// Lane mask for the first n (< 8) lanes, for vmaskmovps.
inline __m256i TailMask8(size_t n) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lanes);
}

float DotF32(const float* a, const float* b, size_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  if (i < n) {
    const __m256i m = TailMask8(n - i);
    acc1 = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m), acc1);
  }
  return HSum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
}

// Separate multiply and add, like the baseline: bit-identical.
void AxpyF32(float a, const float* x, float* y, size_t n) {
  const __m256 av = _mm256_set1_ps(a);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(av, _mm256_loadu_ps(x + i))));
  }
  for (; i < n; ++i) y[i] += a * x[i];
}

void MatVecF32(const MatVecArgs& a, size_t row_begin, size_t row_end) {
  for (size_t r = row_begin; r < row_end; ++r) {
    a.y[r] = DotF32(reinterpret_cast<const float*>(a.weights + r * a.row_bytes), a.x, a.cols);
  }
}

// ---- MARK: grouped trunk matvec ---------------------------------------------
// As in avx512.cc: R rows share the x loads; per group a vector accumulator,
// scaled into a per-row outer vector; elements >= cols meet zeroed x lanes.

// x[i..i+n) with zeros after n (n <= 32): the tail of a group.
inline void LoadTailX(const float* x, size_t n, float* buf32) {
  for (int j = 0; j < 32; ++j) buf32[j] = 0.0f;
  memcpy(buf32, x, n * sizeof(float));
}

// Q4G: 8 bytes = 16 elements. x is split into even/odd lanes (shared by the
// R rows); nibbles become floats by integer subtract and convert.
inline void SplitEvenOdd(const float* x16, __m256* even, __m256* odd) {
  const __m256 a = _mm256_loadu_ps(x16), b = _mm256_loadu_ps(x16 + 8);
  const __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));  // a0 a2 b0 b2 | a4 a6 b4 b6
  const __m256 o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
  *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8));
  *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), 0xD8));
}

template <int R>
void Q4gRows(const MatVecArgs& a, size_t r0) {
  const __m256i low4 = _mm256_set1_epi32(15), eight = _mm256_set1_epi32(8);
  const uint8_t* rows[R];
  __m256 outer[R];
  for (int j = 0; j < R; ++j) {
    rows[j] = a.weights + (r0 + j) * a.row_bytes;
    outer[j] = _mm256_setzero_ps();
  }
  alignas(32) float xt[32];
  alignas(16) uint8_t qt[16];
  for (size_t k = 0; k < a.groups; ++k) {
    const size_t begin = k * a.group;
    const size_t n = MinSize(a.group, a.cols - begin);
    __m256 ie[R], io[R];
    for (int j = 0; j < R; ++j) ie[j] = io[j] = _mm256_setzero_ps();
    for (size_t i = 0; i < n; i += 16) {
      const bool full = i + 16 <= n;
      __m256 xe, xo;
      if (full) {
        SplitEvenOdd(a.x + begin + i, &xe, &xo);
      } else {
        LoadTailX(a.x + begin + i, n - i, xt);
        SplitEvenOdd(xt, &xe, &xo);
      }
      for (int j = 0; j < R; ++j) {
        const uint8_t* src = rows[j] + (begin + i) / 2;
        if (!full) {
          memset(qt, 0, 16);
          memcpy(qt, src, (n - i + 1) / 2);
          src = qt;
        }
        const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src)));
        const __m256 lo = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(b, low4), eight));
        const __m256 hi = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(b, 4), eight));
        ie[j] = _mm256_fmadd_ps(lo, xe, ie[j]);
        io[j] = _mm256_fmadd_ps(hi, xo, io[j]);
      }
    }
    for (int j = 0; j < R; ++j) {
      const float s = _cvtsh_ss(a.scales[(r0 + j) * a.groups + k]);
      outer[j] = _mm256_fmadd_ps(_mm256_set1_ps(s), _mm256_add_ps(ie[j], io[j]), outer[j]);
    }
  }
  for (int j = 0; j < R; ++j) a.y[r0 + j] = HSum(outer[j]);
}

// One row, four independent accumulator chains per group, as avx512.cc's
// Q8gRow: with one chain the 16 FMAs of a 128-element group wait on each
// other (docs/PERFORMANCE.md, "Short chunks").
void Q8gRow(const MatVecArgs& a, size_t r) {
  const uint8_t* row = a.weights + r * a.row_bytes;
  __m256 outer = _mm256_setzero_ps();
  alignas(32) float xt[32];
  alignas(16) uint8_t qt[16];
  for (size_t k = 0; k < a.groups; ++k) {
    const size_t begin = k * a.group;
    const size_t n = MinSize(a.group, a.cols - begin);
    const float* x = a.x + begin;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
      for (int j = 0; j < 4; ++j) {
        const __m128i q =
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + begin + i + 8 * j));
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)),
                                 _mm256_loadu_ps(x + i + 8 * j), acc[j]);
      }
    }
    for (int j = 0; i + 8 <= n; i += 8, ++j) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + begin + i));
      acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), _mm256_loadu_ps(x + i),
                               acc[j]);
    }
    if (i < n) {
      LoadTailX(x + i, n - i, xt);
      memset(qt, 0, 16);
      memcpy(qt, row + begin + i, n - i);
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(qt));
      acc[3] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), _mm256_load_ps(xt), acc[3]);
    }
    const __m256 inner =
        _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    outer = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(a.scales[r * a.groups + k])), inner, outer);
  }
  a.y[r] = HSum(outer);
}

// One row at a time: four interleaved row streams measured at about half
// the DRAM throughput of one sequential stream (docs/KERNELS.md).
void MatVecQ8G(const MatVecArgs& a, size_t row_begin, size_t row_end) {
  for (size_t r = row_begin; r < row_end; ++r) Q8gRow(a, r);
}

void MatVecQ4G(const MatVecArgs& a, size_t row_begin, size_t row_end) {
  if (a.group % 16 != 0) return baseline::MatVecQ4G(a, row_begin, row_end);
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) Q4gRows<4>(a, r);
  for (; r < row_end; ++r) Q4gRows<1>(a, r);
}

// ---- MARK: batched matmul (prefill) -------------------------------------------
// Dequantise rows exactly like the baseline (q * s, one rounding), then an
// R x T tile of AVX2 dot products. (A few-token kernel running the matvec's
// arithmetic per token, as avx512.cc has, was slower here than this path
// once the dequantisers were vectorised: docs/PERFORMANCE.md.)

template <int R, int T>
void DotTile(const float* const* w, const MatMulArgs& m, size_t r0, size_t t0) {
  const size_t cols = m.w.cols;
  __m256 acc[R][T];
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) acc[i][t] = _mm256_setzero_ps();
  const float* xt[T];
  for (int t = 0; t < T; ++t) xt[t] = m.x + (t0 + t) * m.x_stride;
  size_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    __m256 wv[R];
    for (int i = 0; i < R; ++i) wv[i] = _mm256_loadu_ps(w[i] + c);
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_loadu_ps(xt[t] + c);
      for (int i = 0; i < R; ++i) acc[i][t] = _mm256_fmadd_ps(wv[i], xv, acc[i][t]);
    }
  }
  if (c < cols) {
    const __m256i mk = TailMask8(cols - c);
    __m256 wv[R];
    for (int i = 0; i < R; ++i) wv[i] = _mm256_maskload_ps(w[i] + c, mk);
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_maskload_ps(xt[t] + c, mk);
      for (int i = 0; i < R; ++i) acc[i][t] = _mm256_fmadd_ps(wv[i], xv, acc[i][t]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) m.y[(t0 + t) * m.y_stride + r0 + i] = HSum(acc[i][t]);
}

template <int R>
void DotRows(const float* const* w, const MatMulArgs& m, size_t r0) {
  size_t t = 0;
  for (; t + 3 <= m.tokens; t += 3) DotTile<R, 3>(w, m, r0, t);
  switch (m.tokens - t) {
    case 2: DotTile<R, 2>(w, m, r0, t); break;
    case 1: DotTile<R, 1>(w, m, r0, t); break;
    default: break;
  }
}

void DotRowsAny(const float* const* w, int nrows, const MatMulArgs& m, size_t r0) {
  switch (nrows) {
    case 4: DotRows<4>(w, m, r0); break;
    case 3: DotRows<3>(w, m, r0); break;
    case 2: DotRows<2>(w, m, r0); break;
    default: DotRows<1>(w, m, r0); break;
  }
}

// Dequantisers: out[i] = q[i] * f16(scale) for i < cols, one rounding per
// element as in the baseline (an int converts to float exactly), eight or
// sixteen elements at a time; a group's ragged end goes element by element.
void DequantQ8(const MatVecArgs& a, size_t r, float* out) {
  const uint8_t* row = a.weights + r * a.row_bytes;
  for (size_t k = 0; k < a.groups; ++k) {
    const size_t begin = k * a.group;
    const size_t n = MinSize(a.group, a.cols - begin);
    const float s = _cvtsh_ss(a.scales[r * a.groups + k]);
    const __m256 sv = _mm256_set1_ps(s);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + begin + i));
      _mm256_storeu_ps(out + begin + i,
                       _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), sv));
    }
    for (; i < n; ++i) out[begin + i] = static_cast<float>(static_cast<int8_t>(row[begin + i])) * s;
  }
}

void DequantQ4(const MatVecArgs& a, size_t r, float* out) {
  const __m256i low4 = _mm256_set1_epi32(15), eight = _mm256_set1_epi32(8);
  const uint8_t* row = a.weights + r * a.row_bytes;
  for (size_t k = 0; k < a.groups; ++k) {
    const size_t begin = k * a.group;
    const size_t n = MinSize(a.group, a.cols - begin);
    const float s = _cvtsh_ss(a.scales[r * a.groups + k]);
    const __m256 sv = _mm256_set1_ps(s);
    size_t i = 0;
    if (begin % 2 == 0) {
      for (; i + 16 <= n; i += 16) {
        const __m256i b = _mm256_cvtepu8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + (begin + i) / 2)));
        const __m256i lo = _mm256_sub_epi32(_mm256_and_si256(b, low4), eight);  // even elements
        const __m256i hi = _mm256_sub_epi32(_mm256_srli_epi32(b, 4), eight);    // odd elements
        const __m256i a0 = _mm256_unpacklo_epi32(lo, hi), a1 = _mm256_unpackhi_epi32(lo, hi);
        const __m256i e0 = _mm256_permute2x128_si256(a0, a1, 0x20);  // elements 0..7
        const __m256i e1 = _mm256_permute2x128_si256(a0, a1, 0x31);  // elements 8..15
        _mm256_storeu_ps(out + begin + i, _mm256_mul_ps(_mm256_cvtepi32_ps(e0), sv));
        _mm256_storeu_ps(out + begin + i + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(e1), sv));
      }
    }
    for (; i < n; ++i) {
      const size_t e = begin + i;
      const unsigned b = row[e >> 1];
      out[e] = static_cast<float>(static_cast<int>((e & 1) ? (b >> 4) : (b & 15u)) - 8) * s;
    }
  }
}

using DequantFn = void (*)(const MatVecArgs&, size_t, float*);

// The dequant slots: the same row dequantisers the matmuls use.
void DequantQ8G(const DequantArgs& d, size_t row_begin, size_t row_end) {
  for (size_t r = row_begin; r < row_end; ++r) DequantQ8(d.w, r, d.out + r * d.out_stride);
}

void DequantQ4G(const DequantArgs& d, size_t row_begin, size_t row_end) {
  for (size_t r = row_begin; r < row_end; ++r) DequantQ4(d.w, r, d.out + r * d.out_stride);
}

bool MatMulGrouped(const MatMulArgs& m, size_t row_begin, size_t row_end, DequantFn deq) {
  const size_t stride = (m.w.cols + 7) & ~size_t{7};
  float* buf = static_cast<float*>(aligned_alloc(32, 4 * stride * sizeof(float)));
  if (buf == nullptr) return false;
  for (size_t r = row_begin; r < row_end; r += 4) {
    const int nrows = static_cast<int>(MinSize(4, row_end - r));
    const float* rows[4];
    for (int i = 0; i < nrows; ++i) {
      deq(m.w, r + i, buf + i * stride);
      rows[i] = buf + i * stride;
    }
    DotRowsAny(rows, nrows, m, r);
  }
  free(buf);
  return true;
}

void MatMulF32(const MatMulArgs& m, size_t row_begin, size_t row_end) {
  for (size_t r = row_begin; r < row_end; r += 4) {
    const int nrows = static_cast<int>(MinSize(4, row_end - r));
    const float* rows[4];
    for (int i = 0; i < nrows; ++i) rows[i] = reinterpret_cast<const float*>(m.w.weights + (r + i) * m.w.row_bytes);
    DotRowsAny(rows, nrows, m, r);
  }
}

void MatMulQ8G(const MatMulArgs& m, size_t row_begin, size_t row_end) {
  if (!MatMulGrouped(m, row_begin, row_end, DequantQ8)) baseline::MatMulQ8G(m, row_begin, row_end);
}

void MatMulQ4G(const MatMulArgs& m, size_t row_begin, size_t row_end) {
  if (!MatMulGrouped(m, row_begin, row_end, DequantQ4)) baseline::MatMulQ4G(m, row_begin, row_end);
}

// ---- MARK: VQ ------------------------------------------------------------------
// No vq_apply8: 8-lane gathers did not beat the baseline's row-interleaved
// scalar loop (docs/KERNELS.md). No vq_apply6 yet: a 64-entry byte table is
// four vpshufb lookups per stage without VBMI (avx512_vbmi.cc); not written.

// vq_matmul8 (prompt chunks: an expert many tokens chose): each row decoded
// to f32 once, ((B0 + B1) + B2) per 8-wide vector as defined, then an R x T
// tile of dot products over the tokens, the row scale applied last. With
// no table apply of its own (above), AVX2 ran every (token, expert) pair of
// a prompt through the baseline's scalar table loop: 61 % of a 128-token
// prefill under `perf` (docs/PERFORMANCE.md, "Short chunks").
void DecodeVqRow(const VqMatMul8Args& a, size_t r, float* out) {
  const size_t run = a.stages, step = 64 * run;
  const uint8_t* p = a.indices + VqRunOffset(r, 0, a.nv, run);
  for (size_t v = 0; v < a.nv; ++v, p += step) {
    __m256 w = _mm256_loadu_ps(a.books[0] + static_cast<size_t>(p[0]) * 8);
    for (size_t s = 1; s < run; ++s)
      w = _mm256_add_ps(w, _mm256_loadu_ps(a.books[s] + static_cast<size_t>(p[s]) * 8));
    _mm256_storeu_ps(out + v * 8, w);
  }
}

template <int R, int T>
void VqDotTile(const float* const* w, const VqMatMul8Args& a, size_t r0, size_t t0) {
  __m256 acc[R][T];
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) acc[i][t] = _mm256_setzero_ps();
  const size_t cols = a.nv * 8;
  for (size_t c = 0; c < cols; c += 8) {
    __m256 wv[R];
    for (int i = 0; i < R; ++i) wv[i] = _mm256_loadu_ps(w[i] + c);
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_loadu_ps(a.xs[t0 + t] + c);
      for (int i = 0; i < R; ++i) acc[i][t] = _mm256_fmadd_ps(wv[i], xv, acc[i][t]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) a.ys[t0 + t][r0 + i] = HSum(acc[i][t]);
}

template <int R>
void VqDotRows(const float* const* w, const VqMatMul8Args& a, size_t r0) {
  size_t t = 0;
  for (; t + 3 <= a.count; t += 3) VqDotTile<R, 3>(w, a, r0, t);
  if (a.count - t == 2) VqDotTile<R, 2>(w, a, r0, t);
  if (a.count - t == 1) VqDotTile<R, 1>(w, a, r0, t);
}

// An expert that this many tokens of a chunk chose is decoded rather than
// applied through tables (KernelTable::vq_decoded_min_tokens). Decoding
// wins from 2 tokens here (kernels_bench: gate 1024x2304, 2 tokens 1.06 ms
// against two table applies' 1.19, 8 tokens 1.31 against 4.7, before the
// tables' own builds; end to end 2 beat 3 and 5: docs/PERFORMANCE.md).
constexpr size_t kVqDecodedMinTokens = 2;

void VqMatMul8(const VqMatMul8Args& a, size_t row_begin, size_t row_end) {
  if (a.vec_dim != 8 || a.stages == 0) return baseline::VqMatMul8(a, row_begin, row_end);
  const size_t cols = a.nv * 8;
  float* buf = static_cast<float*>(aligned_alloc(32, 4 * cols * sizeof(float)));
  if (buf == nullptr) return baseline::VqMatMul8(a, row_begin, row_end);
  for (size_t r = row_begin; r < row_end; r += 4) {
    const size_t nrows = MinSize(4, row_end - r);
    const float* rows[4];
    for (size_t i = 0; i < nrows; ++i) {
      DecodeVqRow(a, r + i, buf + i * cols);
      rows[i] = buf + i * cols;
    }
    switch (nrows) {
      case 4:
        VqDotRows<4>(rows, a, r);
        break;
      case 3:
        VqDotRows<3>(rows, a, r);
        break;
      case 2:
        VqDotRows<2>(rows, a, r);
        break;
      default:
        VqDotRows<1>(rows, a, r);
        break;
    }
    for (size_t i = 0; i < nrows; ++i) {
      const float scale = _cvtsh_ss(a.scales[r + i]);
      for (size_t t = 0; t < a.count; ++t) a.ys[t][r + i] *= scale;
    }
  }
  free(buf);
}

// Books transposed once per call to [stage][t][entry]; each entry is an
// in-order FMA chain over t.
void LutBuild(const LutBuildArgs& a, size_t v_begin, size_t v_end) {
  if (a.vec_dim != 8 || a.entries % 8 != 0 || a.stages > 8 ||
      a.stages * a.entries * 8 > baseline::kLutMaxBookFloats) {
    return baseline::LutBuild(a, v_begin, v_end);
  }
  if (a.planes != nullptr) return baseline::LutBuildPlanesVia(LutBuild, a, v_begin, v_end);
  alignas(32) float bt[baseline::kLutMaxBookFloats];
  const float* bs[8];  // per stage [t][entry]: the caller's transposed books, or ours
  baseline::TransposedBooks(a, bt, bs);
  for (size_t v = v_begin; v < v_end; ++v) {
    __m256 xv[8];
    for (int t = 0; t < 8; ++t) xv[t] = _mm256_set1_ps(a.x[v * 8 + t]);
    for (size_t s = 0; s < a.stages; ++s) {
      const float* b = bs[s];
      float* out = a.table + (v * a.stages + s) * a.entries;
      for (size_t c = 0; c < a.entries; c += 8) {
        __m256 acc = _mm256_mul_ps(xv[0], _mm256_loadu_ps(b + c));
        for (size_t t = 1; t < 8; ++t) acc = _mm256_fmadd_ps(xv[t], _mm256_loadu_ps(b + t * a.entries + c), acc);
        _mm256_storeu_ps(out + c, acc);
      }
    }
  }
}

// Identical bytes to the baseline: same f32 max, 127/m product and
// round-half-even (vcvtps2dq under the default MXCSR mode).
void LutQuantize(const LutQuantizeArgs& a, size_t block_begin, size_t block_end) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  for (size_t b = block_begin; b < block_end; ++b) {
    const size_t begin = b * 32 * a.per_v;
    const size_t end = MinSize(a.nv, (b + 1) * 32) * a.per_v;
    __m256 mv = _mm256_setzero_ps();
    size_t i = begin;
    for (; i + 8 <= end; i += 8) mv = _mm256_max_ps(mv, _mm256_and_ps(_mm256_loadu_ps(a.table + i), abs_mask));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, mv);
    float m = 0.0f;
    for (int j = 0; j < 8; ++j) m = lanes[j] > m ? lanes[j] : m;
    for (; i < end; ++i) {
      const float v = fabsf(a.table[i]);
      m = v > m ? v : m;
    }
    a.tau[b] = m / 127.0f;
    const float inv = (m == 0.0f) ? 0.0f : 127.0f / m;
    const __m256 iv = _mm256_set1_ps(inv);
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    for (i = begin; i + 8 <= end; i += 8) {
      __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(a.table + i), iv));
      q = _mm256_min_epi32(_mm256_max_epi32(q, lo), hi);
      const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(a.out + i), _mm_packs_epi16(w, w));
    }
    for (; i < end; ++i) {
      float q = RoundHalfEvenSmall(a.table[i] * inv);
      q = q < -127.0f ? -127.0f : (q > 127.0f ? 127.0f : q);
      a.out[i] = static_cast<int8_t>(q);
    }
  }
}

// ---- MARK: KDA ------------------------------------------------------------------
// Same element-wise multiply/add sequence as the baseline: bit-identical.
constexpr size_t kMaxKdaDim = 1024;

void KdaStep(const KdaStepArgs& a, size_t head_begin, size_t head_end) {
  const size_t d = a.dim;
  if (d % 8 != 0 || d > kMaxKdaDim) return baseline::KdaStep(a, head_begin, head_end);
  alignas(32) float delta[kMaxKdaDim];
  alignas(32) float o[kMaxKdaDim];
  for (size_t h = head_begin; h < head_end; ++h) {
    float* st = a.state + h * d * d;
    const float* q = a.q + h * d;
    const float* k = a.k + h * d;
    const float* v = a.v + h * d;
    const float* g = a.g + h * d;
    for (size_t j = 0; j < d; j += 8) _mm256_store_ps(delta + j, _mm256_setzero_ps());
    for (size_t i = 0; i < d; ++i) {
      const __m256 e = _mm256_set1_ps(expf(g[i]));
      const __m256 ki = _mm256_set1_ps(k[i]);
      float* row = st + i * d;
      for (size_t j = 0; j < d; j += 8) {
        const __m256 s = _mm256_mul_ps(_mm256_loadu_ps(row + j), e);
        _mm256_storeu_ps(row + j, s);
        _mm256_store_ps(delta + j, _mm256_add_ps(_mm256_load_ps(delta + j), _mm256_mul_ps(s, ki)));
      }
    }
    const __m256 beta = _mm256_set1_ps(a.beta[h]);
    for (size_t j = 0; j < d; j += 8) {
      const __m256 u = _mm256_load_ps(delta + j);
      _mm256_store_ps(delta + j, _mm256_mul_ps(beta, _mm256_sub_ps(_mm256_loadu_ps(v + j), u)));
      _mm256_store_ps(o + j, _mm256_setzero_ps());
    }
    for (size_t i = 0; i < d; ++i) {
      const __m256 ki = _mm256_set1_ps(k[i]);
      const __m256 qi = _mm256_set1_ps(q[i]);
      float* row = st + i * d;
      for (size_t j = 0; j < d; j += 8) {
        const __m256 s = _mm256_add_ps(_mm256_loadu_ps(row + j), _mm256_mul_ps(ki, _mm256_load_ps(delta + j)));
        _mm256_storeu_ps(row + j, s);
        _mm256_store_ps(o + j, _mm256_add_ps(_mm256_load_ps(o + j), _mm256_mul_ps(s, qi)));
      }
    }
    for (size_t j = 0; j < d; j += 8) _mm256_storeu_ps(a.out + h * d + j, _mm256_load_ps(o + j));
  }
}

}  // namespace
#endif  // WASTE_AVX2_BODY

void RegisterAvx2(KernelTable& t) {
#if defined(WASTE_AVX2_BODY)
  t.dot_f32 = DotF32;
  t.axpy_f32 = AxpyF32;
  t.matvec_f32 = MatVecF32;
  t.matvec_q8g = MatVecQ8G;
  t.matvec_q4g = MatVecQ4G;
  t.matmul_f32 = MatMulF32;
  t.matmul_q8g = MatMulQ8G;
  t.matmul_q4g = MatMulQ4G;
  t.dequant_q8g = DequantQ8G;
  t.dequant_q4g = DequantQ4G;
  t.lut_build = LutBuild;
  t.vq_matmul8 = VqMatMul8;
  t.vq_decoded_min_tokens = kVqDecodedMinTokens;
  t.lut_quantize = LutQuantize;
  t.kda_step = KdaStep;
  baseline::SetTableName(t, "AVX2");
#else
  (void)t;
#endif
}

}  // namespace waste::kernels::avx2
