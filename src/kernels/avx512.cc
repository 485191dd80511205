// AVX-512 (F/BW/VL/DQ) kernels. Built with AVX-512 flags on this file alone
// (cmake/WasteIsa.cmake) and only called after dispatch.cc saw the CPU and OS
// support them. Everything but RegisterAvx512 lives in an unnamed namespace
// and nothing here instantiates a header template, so no function compiled
// for AVX-512 can be merged into code that runs elsewhere (STYLE.md §6.3).
// VBMI kernels live in avx512_vbmi.cc so this file never emits vpermb.
#include "kernels/isa_register.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && \
    defined(__AVX512VL__) && defined(__AVX512DQ__) && defined(__F16C__)
#define WASTE_AVX512_BODY 1
// GCC 12 warns inside its own AVX-512 headers (maskz intrinsics built on
// _mm512_undefined_*; GCC PR105593): a false positive, silenced for this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
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

namespace waste::kernels::avx512 {
#if defined(WASTE_AVX512_BODY)
namespace {

inline __mmask16 TailMask16(size_t n) {  // n < 16 lanes
  return static_cast<__mmask16>((1u << n) - 1u);
}

inline size_t MinSize(size_t a, size_t b) { return a < b ? a : b; }

float DotF32(const float* a, const float* b, size_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
    acc2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), acc2);
    acc3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), acc3);
  }
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
  }
  if (i < n) {
    const __mmask16 m = TailMask16(n - i);
    acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

// y += a*x as a separate multiply and add, like the baseline: bit-identical,
// and the loop is bound by memory, not by the extra rounding step.
void AxpyF32(float a, const float* x, float* y, size_t n) {
  const __m512 av = _mm512_set1_ps(a);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(y + i),
                                          _mm512_mul_ps(av, _mm512_loadu_ps(x + i))));
  }
  if (i < n) {
    const __mmask16 m = TailMask16(n - i);
    const __m512 r = _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i),
                                   _mm512_mul_ps(av, _mm512_maskz_loadu_ps(m, x + i)));
    _mm512_mask_storeu_ps(y + i, m, r);
  }
}

void MatVecF32(const MatVecArgs& a, size_t row_begin, size_t row_end) {
  for (size_t r = row_begin; r < row_end; ++r) {
    a.y[r] = DotF32(reinterpret_cast<const float*>(a.weights + r * a.row_bytes), a.x, a.cols);
  }
}

// ---- MARK: grouped trunk matvec ------------------------------------------
// R rows at once share each x load. Per group an f32 vector accumulator per
// row; the group scale multiplies it into a per-row outer vector (in k order
// per lane); one horizontal sum per row at the end. Elements >= cols are
// neutralised by zero-masked x loads (weights are small integers, so 0*w = 0).

constexpr size_t kQ8PrefetchBytes = 512;
constexpr size_t kQ4PrefetchBytes = 2048;

template <int R>
void Q8gRows(const MatVecArgs& a, size_t r0) {
  const uint8_t* rows[R];
  __m512 outer[R];
  for (int j = 0; j < R; ++j) {
    rows[j] = a.weights + (r0 + j) * a.row_bytes;
    outer[j] = _mm512_setzero_ps();
  }
  for (size_t k = 0; k < a.groups; ++k) {
    const size_t begin = k * a.group;
    const size_t n = MinSize(a.group, a.cols - begin);
    const float* x = a.x + begin;
    __m512 inner[R];
    for (int j = 0; j < R; ++j) {
      inner[j] = _mm512_setzero_ps();
      // Software prefetch a few groups ahead on each row stream: the
      // hardware prefetchers alone leave DRAM-resident rows latency-bound.
      _mm_prefetch(reinterpret_cast<const char*>(rows[j] + begin + kQ8PrefetchBytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(rows[j] + begin + kQ8PrefetchBytes + 64), _MM_HINT_T0);
    }
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m512 xv = _mm512_loadu_ps(x + i);
      for (int j = 0; j < R; ++j) {
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[j] + begin + i));
        inner[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), xv, inner[j]);
      }
    }
    if (i < n) {
      const __mmask16 m = TailMask16(n - i);
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
      for (int j = 0; j < R; ++j) {
        const __m128i q = _mm_maskz_loadu_epi8(m, rows[j] + begin + i);
        inner[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), xv, inner[j]);
      }
    }
    for (int j = 0; j < R; ++j) {
      const float s = _cvtsh_ss(a.scales[(r0 + j) * a.groups + k]);
      outer[j] = _mm512_fmadd_ps(_mm512_set1_ps(s), inner[j], outer[j]);
    }
  }
  for (int j = 0; j < R; ++j) a.y[r0 + j] = _mm512_reduce_add_ps(outer[j]);
}

// Q4G: a byte holds element 2i (low nibble) and 2i+1 (high nibble). Rather
// than interleave weights we split x into even and odd lanes once per 32
// elements (shared by the R rows) and turn nibbles into floats with one
// 16-entry vpermps table (it reads only the low 4 bits of each index).
template <int R>
void Q4gRows(const MatVecArgs& a, size_t r0) {
  const __m512 lut = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const uint8_t* rows[R];
  __m512 outer[R];
  for (int j = 0; j < R; ++j) {
    rows[j] = a.weights + (r0 + j) * a.row_bytes;
    outer[j] = _mm512_setzero_ps();
  }
  for (size_t k = 0; k < a.groups; ++k) {
    const size_t begin = k * a.group;
    const size_t n = MinSize(a.group, a.cols - begin);
    const float* x = a.x + begin;
    const size_t byte0 = begin / 2;
    __m512 ie[R], io[R];
    for (int j = 0; j < R; ++j) ie[j] = io[j] = _mm512_setzero_ps();
    for (size_t i = 0; i < n; i += 32) {
      __m512 x0, x1;
      __m128i q[R];
      if (i + 32 <= n) {
        x0 = _mm512_loadu_ps(x + i);
        x1 = _mm512_loadu_ps(x + i + 16);
        for (int j = 0; j < R; ++j) {
          q[j] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[j] + byte0 + i / 2));
        }
      } else {
        const size_t rem = n - i;
        x0 = _mm512_maskz_loadu_ps(rem >= 16 ? 0xFFFF : TailMask16(rem), x + i);
        x1 = rem > 16 ? _mm512_maskz_loadu_ps(TailMask16(rem - 16), x + i + 16) : _mm512_setzero_ps();
        const __mmask16 bm = TailMask16((rem + 1) / 2);
        for (int j = 0; j < R; ++j) q[j] = _mm_maskz_loadu_epi8(bm, rows[j] + byte0 + i / 2);
      }
      const __m512 xe = _mm512_permutex2var_ps(x0, even, x1);
      const __m512 xo = _mm512_permutex2var_ps(x0, odd, x1);
      for (int j = 0; j < R; ++j) {
        const __m512i b = _mm512_cvtepu8_epi32(q[j]);
        ie[j] = _mm512_fmadd_ps(_mm512_permutexvar_ps(b, lut), xe, ie[j]);
        io[j] = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), lut), xo, io[j]);
      }
    }
    for (int j = 0; j < R; ++j) {
      const float s = _cvtsh_ss(a.scales[(r0 + j) * a.groups + k]);
      outer[j] = _mm512_fmadd_ps(_mm512_set1_ps(s), _mm512_add_ps(ie[j], io[j]), outer[j]);
    }
  }
  for (int j = 0; j < R; ++j) a.y[r0 + j] = _mm512_reduce_add_ps(outer[j]);
}

// Q3G: 16 elements = 6 bytes. The 7 bytes covering them (the 7th may be the
// row's guard byte) are broadcast to every 128-bit lane; vpshufb puts bytes
// B and B+1 of element j into its dword, a variable shift aligns the code,
// and a vpermps table maps the low 3 bits (the 4th is duplicated) to u - 4.
struct Q3gConst {
  __m512i pick, shift;
  __m512 lut;
};

inline Q3gConst MakeQ3gConst() {
  alignas(64) uint8_t pick[64];
  alignas(64) uint32_t shift[16];
  for (int j = 0; j < 16; ++j) {
    const int b = (3 * j) >> 3;
    pick[4 * j] = static_cast<uint8_t>(b);
    pick[4 * j + 1] = static_cast<uint8_t>(b + 1);
    pick[4 * j + 2] = 0x80;
    pick[4 * j + 3] = 0x80;
    shift[j] = static_cast<uint32_t>((3 * j) & 7);
  }
  Q3gConst c;
  c.pick = _mm512_load_si512(pick);
  c.shift = _mm512_load_si512(shift);
  c.lut = _mm512_setr_ps(-4, -3, -2, -1, 0, 1, 2, 3, -4, -3, -2, -1, 0, 1, 2, 3);
  return c;
}

inline __m512 Q3gChunk(const Q3gConst& c, const uint8_t* p) {
  const __m128i raw = _mm_maskz_loadu_epi8(0x7F, p);
  const __m512i sel = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(raw), c.pick);
  return _mm512_permutexvar_ps(_mm512_srlv_epi32(sel, c.shift), c.lut);
}

template <int R>
void Q3gRows(const MatVecArgs& a, size_t r0, const Q3gConst& c) {
  const uint8_t* rows[R];
  __m512 outer[R];
  for (int j = 0; j < R; ++j) {
    rows[j] = a.weights + (r0 + j) * a.row_bytes;
    outer[j] = _mm512_setzero_ps();
  }
  for (size_t k = 0; k < a.groups; ++k) {
    const size_t begin = k * a.group;
    const size_t n = MinSize(a.group, a.cols - begin);
    const float* x = a.x + begin;
    __m512 inner[R];
    for (int j = 0; j < R; ++j) inner[j] = _mm512_setzero_ps();
    for (size_t i = 0; i < n; i += 16) {
      const __m512 xv = (i + 16 <= n) ? _mm512_loadu_ps(x + i)
                                      : _mm512_maskz_loadu_ps(TailMask16(n - i), x + i);
      const size_t off = (begin + i) / 16 * 6;
      for (int j = 0; j < R; ++j) inner[j] = _mm512_fmadd_ps(Q3gChunk(c, rows[j] + off), xv, inner[j]);
    }
    for (int j = 0; j < R; ++j) {
      const float s = _cvtsh_ss(a.scales[(r0 + j) * a.groups + k]);
      outer[j] = _mm512_fmadd_ps(_mm512_set1_ps(s), inner[j], outer[j]);
    }
  }
  for (int j = 0; j < R; ++j) a.y[r0 + j] = _mm512_reduce_add_ps(outer[j]);
}

// One row, four independent accumulator chains per group: with a single
// chain the 8 FMAs of a 128-element group wait on each other (4-cycle
// latency), which capped DRAM-resident rows at ~11 GB/s; four chains reach
// 15-16 GB/s on one core (docs/KERNELS.md).
void Q8gRow(const MatVecArgs& a, size_t r) {
  const uint8_t* row = a.weights + r * a.row_bytes;
  __m512 outer = _mm512_setzero_ps();
  for (size_t k = 0; k < a.groups; ++k) {
    const size_t begin = k * a.group;
    const size_t n = MinSize(a.group, a.cols - begin);
    const float* x = a.x + begin;
    _mm_prefetch(reinterpret_cast<const char*>(row + begin + kQ8PrefetchBytes), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(row + begin + kQ8PrefetchBytes + 64), _MM_HINT_T0);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
      for (int j = 0; j < 4; ++j) {
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + begin + i + 16 * j));
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), _mm512_loadu_ps(x + i + 16 * j), acc[j]);
      }
    }
    for (int j = 0; i < n; i += 16, ++j) {
      const __mmask16 m = (i + 16 <= n) ? 0xFFFF : TailMask16(n - i);
      const __m128i q = _mm_maskz_loadu_epi8(m, row + begin + i);
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), _mm512_maskz_loadu_ps(m, x + i), acc[j]);
    }
    const __m512 inner = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    outer = _mm512_fmadd_ps(_mm512_set1_ps(_cvtsh_ss(a.scales[r * a.groups + k])), inner, outer);
  }
  a.y[r] = _mm512_reduce_add_ps(outer);
}

void MatVecQ8G(const MatVecArgs& a, size_t row_begin, size_t row_end) {
  for (size_t r = row_begin; r < row_end; ++r) Q8gRow(a, r);
}

// Q4G fast path for group 128 (what writers emit). x is permuted once per
// call so that lane k of vector m holds x[8k + m] within each group; then a
// row's group is ONE 64-byte load whose dword k holds elements 8k..8k+7, and
// nibble m of every dword is (w >> 4m) & 15 — no shuffles at all. A nibble
// becomes a float by OR-ing it into the mantissa of 2^23 and subtracting
// 2^23 + 8 (exact). One row at a time: a single sequential stream is what
// the DRAM prefetchers serve best (docs/KERNELS.md).
constexpr size_t kMaxPermutedCols = 16384;  // 64 KiB of stack

void PermuteXForQ4g(const MatVecArgs& a, float* xt) {
  for (size_t g = 0; g < a.groups; ++g) {
    for (size_t m = 0; m < 8; ++m) {
      for (size_t k = 0; k < 16; ++k) {
        const size_t i = g * 128 + 8 * k + m;
        xt[g * 128 + m * 16 + k] = i < a.cols ? a.x[i] : 0.0f;
      }
    }
  }
}

void Q4gRowPermuted(const MatVecArgs& a, const float* xt, size_t r) {
  const uint8_t* row = a.weights + r * a.row_bytes;
  const uint16_t* sc = a.scales + r * a.groups;
  const __m512 base = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  for (size_t g = 0; g < a.groups; ++g) {
    _mm_prefetch(reinterpret_cast<const char*>(row + g * 64 + kQ4PrefetchBytes), _MM_HINT_T0);
    const __m512i w = _mm512_loadu_si512(row + g * 64);
    const float* xg = xt + g * 128;
    const __m512 lut = _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(sc[g])), base);
    for (int m = 0; m < 8; ++m) {
      const __m512i u = m == 0 ? w : _mm512_srli_epi32(w, 4 * m);
      acc[m & 3] = _mm512_fmadd_ps(_mm512_permutexvar_ps(u, lut), _mm512_load_ps(xg + m * 16), acc[m & 3]);
    }
  }
  a.y[r] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

void MatVecQ4G(const MatVecArgs& a, size_t row_begin, size_t row_end) {
  if (a.group % 2 != 0) return baseline::MatVecQ4G(a, row_begin, row_end);
  if (a.group == 128 && a.groups * 128 <= kMaxPermutedCols) {
    alignas(64) float xt[kMaxPermutedCols];
    PermuteXForQ4g(a, xt);
    for (size_t r = row_begin; r < row_end; ++r) Q4gRowPermuted(a, xt, r);
    return;
  }
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) Q4gRows<4>(a, r);
  for (; r < row_end; ++r) Q4gRows<1>(a, r);
}

void MatVecQ3G(const MatVecArgs& a, size_t row_begin, size_t row_end) {
  if (a.group % 16 != 0) return baseline::MatVecQ3G(a, row_begin, row_end);
  const Q3gConst c = MakeQ3gConst();
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) Q3gRows<4>(a, r, c);
  for (; r < row_end; ++r) Q3gRows<1>(a, r, c);
}

// ---- MARK: batched matmul (prefill) ----------------------------------------
// Rows are dequantised to f32 exactly as the baseline does (one multiply,
// q * s), then an R x T register tile of dot products streams the row and
// token buffers once per tile.

template <int R, int T>
void DotTile(const float* const* w, const float* x, size_t x_stride, size_t cols, float* y,
             size_t y_stride, size_t r0, size_t t0) {
  __m512 acc[R][T];
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_ps();
  const float* xt[T];
  for (int t = 0; t < T; ++t) xt[t] = x + (t0 + t) * x_stride;
  size_t c = 0;
  for (; c + 16 <= cols; c += 16) {
    __m512 wv[R];
    for (int i = 0; i < R; ++i) wv[i] = _mm512_loadu_ps(w[i] + c);
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_loadu_ps(xt[t] + c);
      for (int i = 0; i < R; ++i) acc[i][t] = _mm512_fmadd_ps(wv[i], xv, acc[i][t]);
    }
  }
  if (c < cols) {
    const __mmask16 m = TailMask16(cols - c);
    __m512 wv[R];
    for (int i = 0; i < R; ++i) wv[i] = _mm512_maskz_loadu_ps(m, w[i] + c);
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, xt[t] + c);
      for (int i = 0; i < R; ++i) acc[i][t] = _mm512_fmadd_ps(wv[i], xv, acc[i][t]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) y[(t0 + t) * y_stride + r0 + i] = _mm512_reduce_add_ps(acc[i][t]);
}

template <int R>
void DotRows(const float* const* w, const MatMulArgs& m, size_t r0) {
  size_t t = 0;
  for (; t + 4 <= m.tokens; t += 4) DotTile<R, 4>(w, m.x, m.x_stride, m.w.cols, m.y, m.y_stride, r0, t);
  switch (m.tokens - t) {
    case 3: DotTile<R, 3>(w, m.x, m.x_stride, m.w.cols, m.y, m.y_stride, r0, t); break;
    case 2: DotTile<R, 2>(w, m.x, m.x_stride, m.w.cols, m.y, m.y_stride, r0, t); break;
    case 1: DotTile<R, 1>(w, m.x, m.x_stride, m.w.cols, m.y, m.y_stride, r0, t); break;
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

// Dequantisers: out[i] = q[i] * f16(scale) for i < cols; the caller's buffer
// is only read below cols.
void DequantQ8(const MatVecArgs& a, size_t r, float* out) {
  const uint8_t* row = a.weights + r * a.row_bytes;
  for (size_t k = 0; k < a.groups; ++k) {
    const size_t begin = k * a.group;
    const size_t n = MinSize(a.group, a.cols - begin);
    const __m512 s = _mm512_set1_ps(_cvtsh_ss(a.scales[r * a.groups + k]));
    for (size_t i = 0; i < n; i += 16) {
      const __mmask16 m = (i + 16 <= n) ? 0xFFFF : TailMask16(n - i);
      const __m128i q = _mm_maskz_loadu_epi8(m, row + begin + i);
      _mm512_mask_storeu_ps(out + begin + i, m,
                            _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), s));
    }
  }
}

void DequantQ4(const MatVecArgs& a, size_t r, float* out) {
  const __m512 lut = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  const __m512i lo_idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi_idx =
      _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const uint8_t* row = a.weights + r * a.row_bytes;
  for (size_t k = 0; k < a.groups; ++k) {
    const size_t begin = k * a.group;
    const size_t n = MinSize(a.group, a.cols - begin);
    const __m512 s = _mm512_set1_ps(_cvtsh_ss(a.scales[r * a.groups + k]));
    for (size_t i = 0; i < n; i += 32) {
      const size_t rem = n - i;
      const __mmask16 bm = rem >= 32 ? 0xFFFF : TailMask16((rem + 1) / 2);
      const __m512i b = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(bm, row + (begin + i) / 2));
      const __m512 ev = _mm512_permutexvar_ps(b, lut);
      const __m512 od = _mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), lut);
      const __m512 v0 = _mm512_mul_ps(_mm512_permutex2var_ps(ev, lo_idx, od), s);
      const __m512 v1 = _mm512_mul_ps(_mm512_permutex2var_ps(ev, hi_idx, od), s);
      const __mmask16 m0 = rem >= 16 ? 0xFFFF : TailMask16(rem);
      const __mmask16 m1 = rem >= 32 ? 0xFFFF : (rem > 16 ? TailMask16(rem - 16) : 0);
      _mm512_mask_storeu_ps(out + begin + i, m0, v0);
      _mm512_mask_storeu_ps(out + begin + i + 16, m1, v1);
    }
  }
}

void DequantQ3(const MatVecArgs& a, size_t r, float* out) {
  const Q3gConst c = MakeQ3gConst();
  const uint8_t* row = a.weights + r * a.row_bytes;
  for (size_t k = 0; k < a.groups; ++k) {
    const size_t begin = k * a.group;
    const size_t n = MinSize(a.group, a.cols - begin);
    const __m512 s = _mm512_set1_ps(_cvtsh_ss(a.scales[r * a.groups + k]));
    for (size_t i = 0; i < n; i += 16) {
      const __mmask16 m = (i + 16 <= n) ? 0xFFFF : TailMask16(n - i);
      const __m512 v = _mm512_mul_ps(Q3gChunk(c, row + (begin + i) / 16 * 6), s);
      _mm512_mask_storeu_ps(out + begin + i, m, v);
    }
  }
}

using DequantFn = void (*)(const MatVecArgs&, size_t, float*);

// Returns false (nothing written) when the row buffer cannot be allocated.
bool MatMulGrouped(const MatMulArgs& m, size_t row_begin, size_t row_end, DequantFn deq) {
  const size_t stride = (m.w.cols + 15) & ~size_t{15};
  float* buf = static_cast<float*>(aligned_alloc(64, 4 * stride * sizeof(float)));
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

// Prompts (kPanelMinTokens and more): packed panels. 32 rows are dequantised once
// (the same row dequantisers, so every weight is q * s exactly as above),
// then, 128 columns at a time, transposed into a panel P[k][32] that stays
// in L1. A tile of up to 14 tokens keeps 28 accumulators of 16 rows each:
// per column k it loads P[k] (two vectors) and broadcasts one x[t][k] per
// token, so no horizontal sums and no x traffic beyond L1. Each output is a
// fused multiply-add chain over the block's 128 columns; the blocks' sums
// are added to y in column order. Results do not depend on the row split.
constexpr size_t kPanelRows = 32;
constexpr size_t kPanelCols = 128;
constexpr int kPanelTokens = 14;

// 16 x 16 transpose: out row j (stride out_stride) holds element j of the
// 16 input rows in[0..15].
void Transpose16(const float* const* in, float* out, size_t out_stride) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(in[i]);
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xDD);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xDD);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
    r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xDD);
  }
  for (int i = 0; i < 16; ++i) _mm512_storeu_ps(out + i * out_stride, r[i]);
}

// acc[t][h] (rows 16h..16h+15 of the panel, token t) over the block's kc columns.
template <int T>
void PanelTile(const float* panel, size_t kc, const float* const* x, float* const* y,
               __mmask16 m0, __mmask16 m1, bool first) {
  __m512 acc[T][2];
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
  for (size_t k = 0; k < kc; ++k) {
    const __m512 w0 = _mm512_load_ps(panel + k * kPanelRows);
    const __m512 w1 = _mm512_load_ps(panel + k * kPanelRows + 16);
    for (int t = 0; t < T; ++t) {
      const __m512 b = _mm512_set1_ps(x[t][k]);
      acc[t][0] = _mm512_fmadd_ps(w0, b, acc[t][0]);
      acc[t][1] = _mm512_fmadd_ps(w1, b, acc[t][1]);
    }
  }
  for (int t = 0; t < T; ++t) {
    if (!first) {
      acc[t][0] = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, y[t]), acc[t][0]);
      acc[t][1] = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, y[t] + 16), acc[t][1]);
    }
    _mm512_mask_storeu_ps(y[t], m0, acc[t][0]);
    _mm512_mask_storeu_ps(y[t] + 16, m1, acc[t][1]);
  }
}

void PanelTileAny(int n, const float* panel, size_t kc, const float* const* x, float* const* y,
                  __mmask16 m0, __mmask16 m1, bool first) {
  switch (n) {
    case 14: return PanelTile<14>(panel, kc, x, y, m0, m1, first);
    case 13: return PanelTile<13>(panel, kc, x, y, m0, m1, first);
    case 12: return PanelTile<12>(panel, kc, x, y, m0, m1, first);
    case 11: return PanelTile<11>(panel, kc, x, y, m0, m1, first);
    case 10: return PanelTile<10>(panel, kc, x, y, m0, m1, first);
    case 9: return PanelTile<9>(panel, kc, x, y, m0, m1, first);
    case 8: return PanelTile<8>(panel, kc, x, y, m0, m1, first);
    case 7: return PanelTile<7>(panel, kc, x, y, m0, m1, first);
    case 6: return PanelTile<6>(panel, kc, x, y, m0, m1, first);
    case 5: return PanelTile<5>(panel, kc, x, y, m0, m1, first);
    case 4: return PanelTile<4>(panel, kc, x, y, m0, m1, first);
    case 3: return PanelTile<3>(panel, kc, x, y, m0, m1, first);
    case 2: return PanelTile<2>(panel, kc, x, y, m0, m1, first);
    default: return PanelTile<1>(panel, kc, x, y, m0, m1, first);
  }
}

// What a panel product reads. A source gives cols() and tokens(); Row(r,
// buf) returns row r (decoded into buf, or in place when !decodes(); in
// place rows are readable below cols only); X(t) and Y(t) are token t's
// input and output (indexed by column and by row); Finish(r0, nr) runs once
// a panel's outputs are complete.
template <class Source>
bool Panels(const Source& src, size_t row_begin, size_t row_end) {
  const size_t cols = src.cols(), tokens = src.tokens();
  const size_t stride = (cols + kPanelCols - 1) / kPanelCols * kPanelCols;
  float* rows_buf = nullptr;
  if (src.decodes()) {
    rows_buf = static_cast<float*>(aligned_alloc(64, kPanelRows * stride * sizeof(float)));
    if (rows_buf == nullptr) return false;
  }
  // The panel, then one zero row that stands in for rows past the range.
  float* panel = static_cast<float*>(aligned_alloc(64, (kPanelCols + 1) * kPanelRows * sizeof(float)));
  if (panel == nullptr) {
    free(rows_buf);
    return false;
  }
  float* zeros = panel + kPanelCols * kPanelRows;
  memset(zeros, 0, kPanelRows * sizeof(float));
  if (rows_buf != nullptr) {
    // Rows are written below cols only; the rest is read by the last
    // block's transpose (its products are never summed, but stay finite).
    for (size_t i = 0; i < kPanelRows; ++i) memset(rows_buf + i * stride + cols, 0, (stride - cols) * sizeof(float));
  }
  for (size_t r0 = row_begin; r0 < row_end; r0 += kPanelRows) {
    const size_t nr = MinSize(kPanelRows, row_end - r0);
    const float* rows[kPanelRows];
    for (size_t i = 0; i < kPanelRows; ++i) rows[i] = i < nr ? src.Row(r0 + i, rows_buf + i * stride) : nullptr;
    const __mmask16 m0 = nr >= 16 ? 0xFFFF : TailMask16(nr);
    const __mmask16 m1 = nr >= 32 ? 0xFFFF : (nr > 16 ? TailMask16(nr - 16) : 0);
    for (size_t c0 = 0; c0 < cols; c0 += kPanelCols) {
      const size_t kc = MinSize(kPanelCols, cols - c0);
      // Transpose 16 x 16 blocks; rows read in place end at cols, so their
      // ragged last block goes element by element.
      for (size_t h = 0; h < 2; ++h) {
        const float* const* in = rows + 16 * h;
        for (size_t k = 0; k < kc; k += 16) {
          float* out = panel + k * kPanelRows + 16 * h;
          if (rows_buf != nullptr || k + 16 <= kc) {
            const float* from[16];
            for (size_t i = 0; i < 16; ++i) from[i] = in[i] != nullptr ? in[i] + c0 + k : zeros;
            Transpose16(from, out, kPanelRows);
          } else {
            for (size_t kk = 0; k + kk < kc; ++kk)
              for (size_t i = 0; i < 16; ++i)
                out[kk * kPanelRows + i] = in[i] != nullptr ? in[i][c0 + k + kk] : 0.0f;
          }
        }
      }
      // Tiles as even as possible (64 tokens: five tiles of 12 or 13, not 14 x 4 + 8).
      const size_t tiles = (tokens + kPanelTokens - 1) / kPanelTokens;
      for (size_t tile = 0, t0 = 0; tile < tiles; ++tile) {
        const int n = static_cast<int>((tokens - t0) / (tiles - tile));
        const float* x[kPanelTokens];
        float* y[kPanelTokens];
        for (int t = 0; t < n; ++t) {
          x[t] = src.X(t0 + t) + c0;
          y[t] = src.Y(t0 + t) + r0;
        }
        PanelTileAny(n, panel, kc, x, y, m0, m1, c0 == 0);
        t0 += static_cast<size_t>(n);
      }
    }
    src.Finish(r0, nr);
  }
  free(panel);
  free(rows_buf);
  return true;
}

// Trunk rows: dequantised by `deq`, or f32 in place when deq is null.
struct TrunkRows {
  const MatMulArgs& m;
  DequantFn deq;
  size_t cols() const { return m.w.cols; }
  size_t tokens() const { return m.tokens; }
  bool decodes() const { return deq != nullptr; }
  const float* Row(size_t r, float* buf) const {
    if (deq == nullptr) return reinterpret_cast<const float*>(m.w.weights + r * m.w.row_bytes);
    deq(m.w, r, buf);
    return buf;
  }
  const float* X(size_t t) const { return m.x + t * m.x_stride; }
  float* Y(size_t t) const { return m.y + t * m.y_stride; }
  void Finish(size_t, size_t) const {}
};

// Returns false (nothing written) when the buffers cannot be allocated.
bool MatMulPanels(const MatMulArgs& m, size_t row_begin, size_t row_end, DequantFn deq) {
  return Panels(TrunkRows{m, deq}, row_begin, row_end);
}

// The dequant slots: the same row dequantisers the matmuls use.
void DequantRows(const DequantArgs& d, size_t row_begin, size_t row_end, DequantFn deq) {
  for (size_t r = row_begin; r < row_end; ++r) deq(d.w, r, d.out + r * d.out_stride);
}

void DequantQ8G(const DequantArgs& d, size_t row_begin, size_t row_end) {
  DequantRows(d, row_begin, row_end, DequantQ8);
}

void DequantQ4G(const DequantArgs& d, size_t row_begin, size_t row_end) {
  if (d.w.group % 2 != 0) return baseline::DequantQ4G(d, row_begin, row_end);
  DequantRows(d, row_begin, row_end, DequantQ4);
}

void DequantQ3G(const DequantArgs& d, size_t row_begin, size_t row_end) {
  if (d.w.group % 16 != 0) return baseline::DequantQ3G(d, row_begin, row_end);
  DequantRows(d, row_begin, row_end, DequantQ3);
}

// Below this many tokens the 4 x 4 dot-product tiles win: the panel's
// transpose is paid per weight and shared by fewer tokens (kernels_bench:
// 8 tokens 81 vs 76 GFLOP/s, 16 tokens 97 vs 109, 64 tokens 118 vs 145).
constexpr size_t kPanelMinTokens = 12;

// ---- MARK: few-token matmul (short prompt chunks) ---------------------------
// Below kPanelMinTokens a matmul used to dequantise each row to f32 and dot
// it with every token: at 2 tokens the KDA projections and the dense FFN
// took 3-4x a matvec's time per token (docs/PERFORMANCE.md, "Short
// chunks"). These run the
// matvec's own arithmetic for up to kFewTokens tokens per pass over a row:
// each group's weights are turned into floats once, in registers, and
// multiplied into every token, and every token's chain of operations is the
// matvec's, op for op. So each token's output is bit-identical to a matvec
// of that token alone (FewTokenMatMul.EachTokenEqualsItsMatVecOnAvx512), and the
// weights stream once per chunk instead of once per token.
constexpr size_t kFewTokens = 4;
// Rows per block: a block's weights stay in L2 while each tile of
// kFewTokens tokens passes over them, and a tile's inputs stay in L1 (with
// every token's input streamed per row, 8 tokens of 2304 columns spilled
// out of L1 and ran slower than the dequantising path).
constexpr size_t kFewBlockRows = 16;

// row(r, t, n): n <= kFewTokens tokens from t, of row r; rows in blocks,
// token tiles within a block.
template <class RowFn>
void FewTokenBlocks(const MatMulArgs& m, size_t row_begin, size_t row_end, RowFn&& row) {
  for (size_t b = row_begin; b < row_end; b += kFewBlockRows) {
    const size_t e = MinSize(row_end, b + kFewBlockRows);
    for (size_t t = 0; t < m.tokens; t += kFewTokens) {
      const size_t n = MinSize(kFewTokens, m.tokens - t);
      for (size_t r = b; r < e; ++r) row(r, t, n);
    }
  }
}

// Q4G, group 128: Q4gRowPermuted for T tokens; xt[t] is token t's permuted x.
template <int T>
void Q4gRowPermutedTokens(const MatMulArgs& m, const float* const* xt, size_t r, size_t t0) {
  const MatVecArgs& a = m.w;
  const uint8_t* row = a.weights + r * a.row_bytes;
  const uint16_t* sc = a.scales + r * a.groups;
  const __m512 base = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  __m512 acc[T][4];
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < 4; ++j) acc[t][j] = _mm512_setzero_ps();
  for (size_t g = 0; g < a.groups; ++g) {
    _mm_prefetch(reinterpret_cast<const char*>(row + g * 64 + kQ4PrefetchBytes), _MM_HINT_T0);
    const __m512i w = _mm512_loadu_si512(row + g * 64);
    const __m512 lut = _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(sc[g])), base);
    for (int q = 0; q < 8; ++q) {
      const __m512i u = q == 0 ? w : _mm512_srli_epi32(w, 4 * q);
      const __m512 wv = _mm512_permutexvar_ps(u, lut);
      for (int t = 0; t < T; ++t) {
        acc[t][q & 3] =
            _mm512_fmadd_ps(wv, _mm512_load_ps(xt[t0 + t] + g * 128 + q * 16), acc[t][q & 3]);
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    m.y[(t0 + t) * m.y_stride + r] = _mm512_reduce_add_ps(
        _mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]), _mm512_add_ps(acc[t][2], acc[t][3])));
  }
}

// Returns false (nothing written) when the permuted inputs cannot be allocated.
bool MatMulQ4gFew(const MatMulArgs& m, size_t row_begin, size_t row_end) {
  const size_t per_token = m.w.groups * 128;
  float* buf = static_cast<float*>(aligned_alloc(64, m.tokens * per_token * sizeof(float)));
  if (buf == nullptr) return false;
  const float* xt[kPanelMinTokens];
  for (size_t t = 0; t < m.tokens; ++t) {
    MatVecArgs a = m.w;
    a.x = m.x + t * m.x_stride;
    PermuteXForQ4g(a, buf + t * per_token);
    xt[t] = buf + t * per_token;
  }
  FewTokenBlocks(m, row_begin, row_end, [&](size_t r, size_t t, size_t n) {
    switch (n) {
      case 4:
        Q4gRowPermutedTokens<4>(m, xt, r, t);
        break;
      case 3:
        Q4gRowPermutedTokens<3>(m, xt, r, t);
        break;
      case 2:
        Q4gRowPermutedTokens<2>(m, xt, r, t);
        break;
      default:
        Q4gRowPermutedTokens<1>(m, xt, r, t);
        break;
    }
  });
  free(buf);
  return true;
}

// Q8G: Q8gRow for T tokens.
template <int T>
void Q8gRowTokens(const MatMulArgs& m, size_t r, size_t t0) {
  const MatVecArgs& a = m.w;
  const uint8_t* row = a.weights + r * a.row_bytes;
  const float* xs[T];
  for (int t = 0; t < T; ++t) xs[t] = m.x + (t0 + t) * m.x_stride;
  __m512 outer[T];
  for (int t = 0; t < T; ++t) outer[t] = _mm512_setzero_ps();
  for (size_t k = 0; k < a.groups; ++k) {
    const size_t begin = k * a.group;
    const size_t n = MinSize(a.group, a.cols - begin);
    _mm_prefetch(reinterpret_cast<const char*>(row + begin + kQ8PrefetchBytes), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(row + begin + kQ8PrefetchBytes + 64), _MM_HINT_T0);
    __m512 acc[T][4];
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < 4; ++j) acc[t][j] = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
      for (int j = 0; j < 4; ++j) {
        const __m128i q =
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + begin + i + 16 * j));
        const __m512 wv = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q));
        for (int t = 0; t < T; ++t) {
          acc[t][j] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xs[t] + begin + i + 16 * j), acc[t][j]);
        }
      }
    }
    for (int j = 0; i < n; i += 16, ++j) {
      const __mmask16 mk = (i + 16 <= n) ? 0xFFFF : TailMask16(n - i);
      const __m128i q = _mm_maskz_loadu_epi8(mk, row + begin + i);
      const __m512 wv = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q));
      for (int t = 0; t < T; ++t) {
        acc[t][j] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(mk, xs[t] + begin + i), acc[t][j]);
      }
    }
    const __m512 s = _mm512_set1_ps(_cvtsh_ss(a.scales[r * a.groups + k]));
    for (int t = 0; t < T; ++t) {
      const __m512 inner =
          _mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]), _mm512_add_ps(acc[t][2], acc[t][3]));
      outer[t] = _mm512_fmadd_ps(s, inner, outer[t]);
    }
  }
  for (int t = 0; t < T; ++t) m.y[(t0 + t) * m.y_stride + r] = _mm512_reduce_add_ps(outer[t]);
}

void MatMulQ8gFew(const MatMulArgs& m, size_t row_begin, size_t row_end) {
  FewTokenBlocks(m, row_begin, row_end, [&](size_t r, size_t t, size_t n) {
    switch (n) {
      case 4:
        Q8gRowTokens<4>(m, r, t);
        break;
      case 3:
        Q8gRowTokens<3>(m, r, t);
        break;
      case 2:
        Q8gRowTokens<2>(m, r, t);
        break;
      default:
        Q8gRowTokens<1>(m, r, t);
        break;
    }
  });
}

void MatMulF32(const MatMulArgs& m, size_t row_begin, size_t row_end) {
  if (m.tokens >= kPanelMinTokens && MatMulPanels(m, row_begin, row_end, nullptr)) return;
  for (size_t r = row_begin; r < row_end; r += 4) {
    const int nrows = static_cast<int>(MinSize(4, row_end - r));
    const float* rows[4];
    for (int i = 0; i < nrows; ++i) {
      rows[i] = reinterpret_cast<const float*>(m.w.weights + (r + i) * m.w.row_bytes);
    }
    DotRowsAny(rows, nrows, m, r);
  }
}

void MatMulQ8G(const MatMulArgs& m, size_t row_begin, size_t row_end) {
  if (m.tokens >= kPanelMinTokens && MatMulPanels(m, row_begin, row_end, DequantQ8)) return;
  if (m.tokens < kPanelMinTokens) return MatMulQ8gFew(m, row_begin, row_end);
  if (!MatMulGrouped(m, row_begin, row_end, DequantQ8)) baseline::MatMulQ8G(m, row_begin, row_end);
}

void MatMulQ4G(const MatMulArgs& m, size_t row_begin, size_t row_end) {
  if (m.w.group % 2 == 0 && m.tokens >= kPanelMinTokens && MatMulPanels(m, row_begin, row_end, DequantQ4)) return;
  if (m.tokens < kPanelMinTokens && m.w.group == 128 && m.w.groups * 128 <= kMaxPermutedCols &&
      MatMulQ4gFew(m, row_begin, row_end)) {
    return;
  }
  if (m.w.group % 2 != 0 || !MatMulGrouped(m, row_begin, row_end, DequantQ4)) {
    baseline::MatMulQ4G(m, row_begin, row_end);
  }
}

void MatMulQ3G(const MatMulArgs& m, size_t row_begin, size_t row_end) {
  if (m.w.group % 16 == 0 && m.tokens >= kPanelMinTokens && MatMulPanels(m, row_begin, row_end, DequantQ3)) return;
  if (m.w.group % 16 != 0 || !MatMulGrouped(m, row_begin, row_end, DequantQ3)) {
    baseline::MatMulQ3G(m, row_begin, row_end);
  }
}

// ---- MARK: VQ rows decoded (prompts) --------------------------------------
// vq_matmul8 on the matmul's panels: each row is decoded to f32 once
// ((B0 + B1) + B2 per 8-wide vector, the baseline's order), the panels
// multiply it into every token, and the row scale is applied last, as the
// lookup-table apply does.

// Book entry i of b: 8 floats at b + 8i (size_t arithmetic: no sign
// extension per index).
inline const float* Entry(const float* b, uint8_t i) { return b + (static_cast<size_t>(i) << 3); }

void DecodeVqRow(const VqMatMul8Args& a, size_t r, float* out) {
  const size_t nv = a.nv, run = a.stages, step = 64 * run;
  const uint8_t* p = a.indices + VqRunOffset(r, 0, nv, run);
  const float* b0 = a.books[0];
  if (run == 3) {
    const float* b1 = a.books[1];
    const float* b2 = a.books[2];
    size_t v = 0;
    // Two positions per step: one 16-float add chain and store.
    for (; v + 2 <= nv; v += 2, p += 2 * step) {
      const uint8_t* q = p + step;
      const __m512 c0 = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(Entry(b0, p[0]))), _mm256_loadu_ps(Entry(b0, q[0])), 1);
      const __m512 c1 = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(Entry(b1, p[1]))), _mm256_loadu_ps(Entry(b1, q[1])), 1);
      const __m512 c2 = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(Entry(b2, p[2]))), _mm256_loadu_ps(Entry(b2, q[2])), 1);
      _mm512_storeu_ps(out + v * 8, _mm512_add_ps(_mm512_add_ps(c0, c1), c2));
    }
    if (v < nv) {
      const __m256 w = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(Entry(b0, p[0])), _mm256_loadu_ps(Entry(b1, p[1]))),
                                     _mm256_loadu_ps(Entry(b2, p[2])));
      _mm256_storeu_ps(out + v * 8, w);
    }
    return;
  }
  for (size_t v = 0; v < nv; ++v, p += step) {
    __m256 w = _mm256_loadu_ps(Entry(b0, p[0]));
    for (size_t s = 1; s < run; ++s) w = _mm256_add_ps(w, _mm256_loadu_ps(Entry(a.books[s], p[s])));
    _mm256_storeu_ps(out + v * 8, w);
  }
}

struct VqRows {
  const VqMatMul8Args& a;
  size_t cols() const { return a.nv * 8; }
  size_t tokens() const { return a.count; }
  bool decodes() const { return true; }
  const float* Row(size_t r, float* buf) const {
    DecodeVqRow(a, r, buf);
    return buf;
  }
  const float* X(size_t t) const { return a.xs[t]; }
  float* Y(size_t t) const { return a.ys[t]; }
  void Finish(size_t r0, size_t nr) const {
    for (size_t i = 0; i < nr; ++i) {
      const float scale = _cvtsh_ss(a.scales[r0 + i]);
      for (size_t t = 0; t < a.count; ++t) a.ys[t][r0 + i] *= scale;
    }
  }
};

void VqMatMul8(const VqMatMul8Args& a, size_t row_begin, size_t row_end) {
  if (a.vec_dim != 8 || a.entries != 256 || a.stages == 0 || !Panels(VqRows{a}, row_begin, row_end)) {
    baseline::VqMatMul8(a, row_begin, row_end);
  }
}

// ---- MARK: VQ lookup tables -------------------------------------------------
// No vq_apply8 here: 16-lane gathers (3 per 16 rows) measured slower than the
// baseline's row-interleaved scalar loop on this CPU (docs/KERNELS.md).

// The books are transposed once per call to [stage][t][entry] so that 16
// entries of one stage are a vector; then each table entry is an in-order
// FMA chain over t (MODEL.md §6.4: "FMA on SIMD builds").
void LutBuild(const LutBuildArgs& a, size_t v_begin, size_t v_end) {
  if (a.vec_dim != 8 || a.entries % 16 != 0 || a.stages > 8 ||
      a.stages * a.entries * 8 > baseline::kLutMaxBookFloats) {
    return baseline::LutBuild(a, v_begin, v_end);
  }
  if (a.planes != nullptr) return baseline::LutBuildPlanesVia(LutBuild, a, v_begin, v_end);
  alignas(64) float bt[baseline::kLutMaxBookFloats];
  const float* bs[8];  // per stage [t][entry]: the caller's transposed books, or ours
  baseline::TransposedBooks(a, bt, bs);
  for (size_t v = v_begin; v < v_end; ++v) {
    __m512 xv[8];
    for (int t = 0; t < 8; ++t) xv[t] = _mm512_set1_ps(a.x[v * 8 + t]);
    for (size_t s = 0; s < a.stages; ++s) {
      const float* b = bs[s];
      float* out = a.table + (v * a.stages + s) * a.entries;
      for (size_t c = 0; c < a.entries; c += 16) {
        __m512 acc = _mm512_mul_ps(xv[0], _mm512_loadu_ps(b + c));
        for (size_t t = 1; t < 8; ++t) acc = _mm512_fmadd_ps(xv[t], _mm512_loadu_ps(b + t * a.entries + c), acc);
        _mm512_storeu_ps(out + c, acc);
      }
    }
  }
}

// int8 table quantisation: same f32 max, tau, 127/m product and
// round-half-even (cvtps2dq with explicit nearest-even) as the baseline,
// so the bytes are identical.
void LutQuantize(const LutQuantizeArgs& a, size_t block_begin, size_t block_end) {
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  for (size_t b = block_begin; b < block_end; ++b) {
    const size_t begin = b * 32 * a.per_v;
    const size_t end = MinSize(a.nv, (b + 1) * 32) * a.per_v;
    __m512 mv = _mm512_setzero_ps();
    size_t i = begin;
    for (; i + 16 <= end; i += 16) mv = _mm512_max_ps(mv, _mm512_and_ps(_mm512_loadu_ps(a.table + i), abs_mask));
    if (i < end) {
      mv = _mm512_max_ps(mv, _mm512_and_ps(_mm512_maskz_loadu_ps(TailMask16(end - i), a.table + i), abs_mask));
    }
    const float m = _mm512_reduce_max_ps(mv);
    a.tau[b] = m / 127.0f;
    const __m512 inv = _mm512_set1_ps(m == 0.0f ? 0.0f : 127.0f / m);
    for (i = begin; i < end; i += 16) {
      const __mmask16 k = (i + 16 <= end) ? 0xFFFF : TailMask16(end - i);
      const __m512 p = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, a.table + i), inv);
      __m512i q = _mm512_cvt_roundps_epi32(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      q = _mm512_min_epi32(_mm512_max_epi32(q, lo), hi);
      _mm_mask_storeu_epi8(a.out + i, k, _mm512_cvtepi32_epi8(q));
    }
  }
}

// ---- MARK: KDA recurrence ---------------------------------------------------
// Vectorised over value columns j; every element sees the same multiply and
// add sequence as the baseline (no FMA), so the state stays bit-identical.
constexpr size_t kMaxKdaDim = 1024;

void KdaStep(const KdaStepArgs& a, size_t head_begin, size_t head_end) {
  const size_t d = a.dim;
  if (d % 16 != 0 || d > kMaxKdaDim) return baseline::KdaStep(a, head_begin, head_end);
  alignas(64) float delta[kMaxKdaDim];
  alignas(64) float o[kMaxKdaDim];
  for (size_t h = head_begin; h < head_end; ++h) {
    float* st = a.state + h * d * d;
    const float* q = a.q + h * d;
    const float* k = a.k + h * d;
    const float* v = a.v + h * d;
    const float* g = a.g + h * d;
    for (size_t j = 0; j < d; j += 16) _mm512_store_ps(delta + j, _mm512_setzero_ps());
    for (size_t i = 0; i < d; ++i) {
      const __m512 e = _mm512_set1_ps(expf(g[i]));
      const __m512 ki = _mm512_set1_ps(k[i]);
      float* row = st + i * d;
      for (size_t j = 0; j < d; j += 16) {
        const __m512 s = _mm512_mul_ps(_mm512_loadu_ps(row + j), e);
        _mm512_storeu_ps(row + j, s);
        _mm512_store_ps(delta + j, _mm512_add_ps(_mm512_load_ps(delta + j), _mm512_mul_ps(s, ki)));
      }
    }
    const __m512 beta = _mm512_set1_ps(a.beta[h]);
    for (size_t j = 0; j < d; j += 16) {
      const __m512 u = _mm512_load_ps(delta + j);
      _mm512_store_ps(delta + j, _mm512_mul_ps(beta, _mm512_sub_ps(_mm512_loadu_ps(v + j), u)));
      _mm512_store_ps(o + j, _mm512_setzero_ps());
    }
    for (size_t i = 0; i < d; ++i) {
      const __m512 ki = _mm512_set1_ps(k[i]);
      const __m512 qi = _mm512_set1_ps(q[i]);
      float* row = st + i * d;
      for (size_t j = 0; j < d; j += 16) {
        const __m512 s = _mm512_add_ps(_mm512_loadu_ps(row + j), _mm512_mul_ps(ki, _mm512_load_ps(delta + j)));
        _mm512_storeu_ps(row + j, s);
        _mm512_store_ps(o + j, _mm512_add_ps(_mm512_load_ps(o + j), _mm512_mul_ps(s, qi)));
      }
    }
    for (size_t j = 0; j < d; j += 16) _mm512_storeu_ps(a.out + h * d + j, _mm512_load_ps(o + j));
  }
}

}  // namespace
#endif  // WASTE_AVX512_BODY

void RegisterAvx512(KernelTable& t) {
#if defined(WASTE_AVX512_BODY)
  t.dot_f32 = DotF32;
  t.axpy_f32 = AxpyF32;
  t.matvec_f32 = MatVecF32;
  t.matvec_q8g = MatVecQ8G;
  t.matvec_q4g = MatVecQ4G;
  t.matvec_q3g = MatVecQ3G;
  t.matmul_f32 = MatMulF32;
  t.matmul_q8g = MatMulQ8G;
  t.matmul_q4g = MatMulQ4G;
  t.matmul_q3g = MatMulQ3G;
  t.vq_matmul8 = VqMatMul8;
  t.vq_decoded_min_tokens = 8;
  t.dequant_q8g = DequantQ8G;
  t.dequant_q4g = DequantQ4G;
  t.dequant_q3g = DequantQ3G;
  t.lut_build = LutBuild;
  t.lut_quantize = LutQuantize;
  t.kda_step = KdaStep;
  baseline::SetTableName(t, "AVX-512");
#else
  (void)t;
#endif
}

void MatVecQ4GFloat(const MatVecArgs& a, size_t row_begin, size_t row_end) {
#if defined(WASTE_AVX512_BODY)
  MatVecQ4G(a, row_begin, row_end);
#else
  baseline::MatVecQ4G(a, row_begin, row_end);
#endif
}

}  // namespace waste::kernels::avx512
