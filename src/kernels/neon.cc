// AArch64 Advanced SIMD (NEON) kernels. NEON is part of every AArch64 CPU,
// so dispatch.cc registers these unconditionally there; on other
// architectures this file compiles to an empty RegisterNeon. Everything but
// RegisterNeon lives in an unnamed namespace (STYLE.md §6.3). Checked against
// the baseline under qemu by tools/cross/aarch64_kernel_tests.sh.
#include "kernels/isa_register.h"

#if defined(__aarch64__)
#define WASTE_NEON_BODY 1
#include <arm_neon.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cstddef>
#include <cstdint>

#include "kernels/baseline.h"
#include "kernels/kernel_args.h"
#include "kernels/numerics.h"
#endif

namespace waste::kernels::neon {
#if defined(WASTE_NEON_BODY)
namespace {

inline size_t MinSize(size_t a, size_t b) { return a < b ? a : b; }

float DotF32(const float* a, const float* b, size_t n) {
  float32x4_t acc0 = vdupq_n_f32(0), acc1 = vdupq_n_f32(0), acc2 = vdupq_n_f32(0), acc3 = vdupq_n_f32(0);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = vfmaq_f32(acc0, vld1q_f32(a + i), vld1q_f32(b + i));
    acc1 = vfmaq_f32(acc1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
    acc2 = vfmaq_f32(acc2, vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
    acc3 = vfmaq_f32(acc3, vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
  }
  for (; i + 4 <= n; i += 4) acc0 = vfmaq_f32(acc0, vld1q_f32(a + i), vld1q_f32(b + i));
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return vaddvq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3))) + tail;
}

// Separate multiply and add, like the baseline: bit-identical.
void AxpyF32(float a, const float* x, float* y, size_t n) {
  const float32x4_t av = vdupq_n_f32(a);
  size_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), vmulq_f32(av, vld1q_f32(x + i))));
  for (; i < n; ++i) y[i] += a * x[i];
}

void MatVecF32(const MatVecArgs& a, size_t row_begin, size_t row_end) {
  for (size_t r = row_begin; r < row_end; ++r) {
    a.y[r] = DotF32(reinterpret_cast<const float*>(a.weights + r * a.row_bytes), a.x, a.cols);
  }
}

// ---- MARK: grouped trunk matvec ---------------------------------------------
// 16 int8 weights (natural element order) times 16 x values into one f32x4
// accumulator chain per row; tails go through zero-padded stack copies.

inline float32x4_t Fma16(float32x4_t acc, int8x16_t q, const float* x) {
  const int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_high_s8(q);
  acc = vfmaq_f32(acc, vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), vld1q_f32(x));
  acc = vfmaq_f32(acc, vcvtq_f32_s32(vmovl_high_s16(lo)), vld1q_f32(x + 4));
  acc = vfmaq_f32(acc, vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), vld1q_f32(x + 8));
  return vfmaq_f32(acc, vcvtq_f32_s32(vmovl_high_s16(hi)), vld1q_f32(x + 12));
}

// Q4G: 8 bytes -> 16 values in element order (vzip of low and high nibbles).
inline int8x16_t Unpack16Q4(const uint8_t* p) {
  const uint8x8_t b = vld1_u8(p);
  const uint8x8x2_t z = vzip_u8(vand_u8(b, vdup_n_u8(15)), vshr_n_u8(b, 4));
  return vsubq_s8(vreinterpretq_s8_u8(vcombine_u8(z.val[0], z.val[1])), vdupq_n_s8(8));
}

template <int R, bool kQ4>
void GroupedRows(const MatVecArgs& a, size_t r0) {
  const uint8_t* rows[R];
  float32x4_t outer[R];
  for (int j = 0; j < R; ++j) {
    rows[j] = a.weights + (r0 + j) * a.row_bytes;
    outer[j] = vdupq_n_f32(0);
  }
  float xt[16];
  uint8_t qt[16];
  for (size_t k = 0; k < a.groups; ++k) {
    const size_t begin = k * a.group;
    const size_t n = MinSize(a.group, a.cols - begin);
    float32x4_t inner[R];
    for (int j = 0; j < R; ++j) inner[j] = vdupq_n_f32(0);
    for (size_t i = 0; i < n; i += 16) {
      const bool full = i + 16 <= n;
      const float* x = a.x + begin + i;
      if (!full) {
        memset(xt, 0, sizeof xt);
        memcpy(xt, x, (n - i) * sizeof(float));
        x = xt;
      }
      for (int j = 0; j < R; ++j) {
        const uint8_t* src = rows[j] + (kQ4 ? (begin + i) / 2 : begin + i);
        if (!full) {
          memset(qt, kQ4 ? 0x88 : 0, sizeof qt);
          memcpy(qt, src, kQ4 ? (n - i + 1) / 2 : n - i);
          src = qt;
        }
        const int8x16_t q = kQ4 ? Unpack16Q4(src) : vld1q_s8(reinterpret_cast<const int8_t*>(src));
        inner[j] = Fma16(inner[j], q, x);
      }
    }
    for (int j = 0; j < R; ++j) {
      const float s = F16ToF32(a.scales[(r0 + j) * a.groups + k]);
      outer[j] = vfmaq_f32(outer[j], vdupq_n_f32(s), inner[j]);
    }
  }
  for (int j = 0; j < R; ++j) a.y[r0 + j] = vaddvq_f32(outer[j]);
}

void MatVecQ8G(const MatVecArgs& a, size_t row_begin, size_t row_end) {
  if (a.group % 16 != 0) return baseline::MatVecQ8G(a, row_begin, row_end);
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) GroupedRows<4, false>(a, r);
  for (; r < row_end; ++r) GroupedRows<1, false>(a, r);
}

void MatVecQ4G(const MatVecArgs& a, size_t row_begin, size_t row_end) {
  if (a.group % 16 != 0) return baseline::MatVecQ4G(a, row_begin, row_end);
  size_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) GroupedRows<4, true>(a, r);
  for (; r < row_end; ++r) GroupedRows<1, true>(a, r);
}

// ---- MARK: batched matmul ---------------------------------------------------------

template <int R, int T>
void DotTile(const float* const* w, const MatMulArgs& m, size_t r0, size_t t0) {
  const size_t cols = m.w.cols;
  float32x4_t acc[R][T];
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) acc[i][t] = vdupq_n_f32(0);
  const float* xt[T];
  for (int t = 0; t < T; ++t) xt[t] = m.x + (t0 + t) * m.x_stride;
  size_t c = 0;
  for (; c + 4 <= cols; c += 4) {
    float32x4_t wv[R];
    for (int i = 0; i < R; ++i) wv[i] = vld1q_f32(w[i] + c);
    for (int t = 0; t < T; ++t) {
      const float32x4_t xv = vld1q_f32(xt[t] + c);
      for (int i = 0; i < R; ++i) acc[i][t] = vfmaq_f32(acc[i][t], wv[i], xv);
    }
  }
  for (int i = 0; i < R; ++i) {
    for (int t = 0; t < T; ++t) {
      float s = vaddvq_f32(acc[i][t]);
      for (size_t cc = c; cc < cols; ++cc) s += w[i][cc] * xt[t][cc];
      m.y[(t0 + t) * m.y_stride + r0 + i] = s;
    }
  }
}

template <int R>
void DotRows(const float* const* w, const MatMulArgs& m, size_t r0) {
  size_t t = 0;
  for (; t + 4 <= m.tokens; t += 4) DotTile<R, 4>(w, m, r0, t);
  for (; t < m.tokens; ++t) DotTile<R, 1>(w, m, r0, t);
}

void DotRowsAny(const float* const* w, int nrows, const MatMulArgs& m, size_t r0) {
  if (nrows == 4) return DotRows<4>(w, m, r0);
  for (int i = 0; i < nrows; ++i) DotRows<1>(w + i, m, r0 + i);
}

// Dequantisers: out[i] = q[i] * f16(scale) for i < cols, one rounding per
// element as in the baseline (an int converts to float exactly), sixteen
// elements at a time with the scale converted once per group; a group's
// ragged end goes element by element. (They were per element with a
// division and a scale conversion each, the prefill's bottleneck on AVX2,
// which had the same code: docs/PERFORMANCE.md.)
inline void Store16(float* out, int8x16_t q, float32x4_t s) {
  const int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_high_s8(q);
  vst1q_f32(out, vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), s));
  vst1q_f32(out + 4, vmulq_f32(vcvtq_f32_s32(vmovl_high_s16(lo)), s));
  vst1q_f32(out + 8, vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), s));
  vst1q_f32(out + 12, vmulq_f32(vcvtq_f32_s32(vmovl_high_s16(hi)), s));
}

void DequantQ8(const MatVecArgs& a, size_t r, float* out) {
  const uint8_t* row = a.weights + r * a.row_bytes;
  for (size_t k = 0; k < a.groups; ++k) {
    const size_t begin = k * a.group;
    const size_t n = MinSize(a.group, a.cols - begin);
    const float s = F16ToF32(a.scales[r * a.groups + k]);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      Store16(out + begin + i, vld1q_s8(reinterpret_cast<const int8_t*>(row + begin + i)),
              vdupq_n_f32(s));
    }
    for (; i < n; ++i) out[begin + i] = static_cast<float>(static_cast<int8_t>(row[begin + i])) * s;
  }
}

void DequantQ4(const MatVecArgs& a, size_t r, float* out) {
  const uint8_t* row = a.weights + r * a.row_bytes;
  for (size_t k = 0; k < a.groups; ++k) {
    const size_t begin = k * a.group;
    const size_t n = MinSize(a.group, a.cols - begin);
    const float s = F16ToF32(a.scales[r * a.groups + k]);
    size_t i = 0;
    if (begin % 2 == 0) {
      for (; i + 16 <= n; i += 16)
        Store16(out + begin + i, Unpack16Q4(row + (begin + i) / 2), vdupq_n_f32(s));
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
  const size_t stride = (m.w.cols + 3) & ~size_t{3};
  float* buf = static_cast<float*>(malloc(4 * stride * sizeof(float) + 16));
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

// ---- MARK: VQ ------------------------------------------------------------------------

// Books transposed once per call to [stage][t][entry]; per entry an in-order
// FMA chain over t.
void LutBuild(const LutBuildArgs& a, size_t v_begin, size_t v_end) {
  if (a.vec_dim != 8 || a.entries % 4 != 0 || a.stages > 8 ||
      a.stages * a.entries * 8 > baseline::kLutMaxBookFloats) {
    return baseline::LutBuild(a, v_begin, v_end);
  }
  if (a.planes != nullptr) return baseline::LutBuildPlanesVia(LutBuild, a, v_begin, v_end);
  float bt[baseline::kLutMaxBookFloats];
  const float* bs[8];  // per stage [t][entry]: the caller's transposed books, or ours
  baseline::TransposedBooks(a, bt, bs);
  for (size_t v = v_begin; v < v_end; ++v) {
    const float* xv = a.x + v * 8;
    for (size_t s = 0; s < a.stages; ++s) {
      const float* b = bs[s];
      float* out = a.table + (v * a.stages + s) * a.entries;
      for (size_t c = 0; c < a.entries; c += 4) {
        float32x4_t acc = vmulq_n_f32(vld1q_f32(b + c), xv[0]);
        for (size_t t = 1; t < 8; ++t) acc = vfmaq_n_f32(acc, vld1q_f32(b + t * a.entries + c), xv[t]);
        vst1q_f32(out + c, acc);
      }
    }
  }
}

// VQ4P apply, bit-identical to the baseline. 16 rows at a time: vld3q_u8
// de-interleaves their 3-byte runs, shifts cut the 6-bit indices, and each
// stage's 64-entry int8 table is four q registers for one vqtbl4q_s8. Sums
// stay exact in int16 within a 32-position block (|sum| <= 4*127*32).
void VqApply6(const VqApply6Args& a, size_t row_begin, size_t row_end) {
  const uint8x16_t m63 = vdupq_n_u8(63);
  for (size_t blk = row_begin / 64; blk * 64 < row_end; ++blk) {
    const size_t lo = blk * 64 > row_begin ? blk * 64 : row_begin;
    const size_t hi = MinSize(blk * 64 + 64, row_end);
    const size_t q0 = (lo - blk * 64) / 16, q1 = (hi - 1 - blk * 64) / 16;
    const uint8_t* base = a.indices + blk * a.nv * 192;
    float32x4_t acc[4][4];
    for (int q = 0; q < 4; ++q)
      for (int l = 0; l < 4; ++l) acc[q][l] = vdupq_n_f32(0);
    for (size_t b = 0; b * 32 < a.nv; ++b) {
      const size_t v1 = MinSize(a.nv, b * 32 + 32);
      int16x8_t s16[4][2];
      for (int q = 0; q < 4; ++q) s16[q][0] = s16[q][1] = vdupq_n_s16(0);
      for (size_t v = b * 32; v < v1; ++v) {
        const int8_t* tv = a.table + v * 256;
        const int8x16x4_t t0 = vld1q_s8_x4(tv), t1 = vld1q_s8_x4(tv + 64);
        const int8x16x4_t t2 = vld1q_s8_x4(tv + 128), t3 = vld1q_s8_x4(tv + 192);
        const uint8_t* runs = base + v * 192;
        for (size_t q = q0; q <= q1; ++q) {
          const uint8x16x3_t r = vld3q_u8(runs + q * 48);
          const uint8x16_t i0 = vandq_u8(r.val[0], m63);
          const uint8x16_t i1 = vorrq_u8(vshrq_n_u8(r.val[0], 6), vshlq_n_u8(vandq_u8(r.val[1], vdupq_n_u8(15)), 2));
          const uint8x16_t i2 = vorrq_u8(vshrq_n_u8(r.val[1], 4), vshlq_n_u8(vandq_u8(r.val[2], vdupq_n_u8(3)), 4));
          const uint8x16_t i3 = vshrq_n_u8(r.val[2], 2);
          const int8x16_t p0 = vqtbl4q_s8(t0, i0), p1 = vqtbl4q_s8(t1, i1);
          const int8x16_t p2 = vqtbl4q_s8(t2, i2), p3 = vqtbl4q_s8(t3, i3);
          int16x8_t lo16 = vaddl_s8(vget_low_s8(p0), vget_low_s8(p1));
          int16x8_t hi16 = vaddl_high_s8(p0, p1);
          lo16 = vaddw_s8(vaddw_s8(lo16, vget_low_s8(p2)), vget_low_s8(p3));
          hi16 = vaddw_high_s8(vaddw_high_s8(hi16, p2), p3);
          s16[q][0] = vaddq_s16(s16[q][0], lo16);
          s16[q][1] = vaddq_s16(s16[q][1], hi16);
        }
      }
      const float32x4_t tau = vdupq_n_f32(a.tau[b]);
      for (size_t q = q0; q <= q1; ++q) {
        const float32x4_t f[4] = {vcvtq_f32_s32(vmovl_s16(vget_low_s16(s16[q][0]))),
                                  vcvtq_f32_s32(vmovl_high_s16(s16[q][0])),
                                  vcvtq_f32_s32(vmovl_s16(vget_low_s16(s16[q][1]))),
                                  vcvtq_f32_s32(vmovl_high_s16(s16[q][1]))};
        for (int l = 0; l < 4; ++l) acc[q][l] = vaddq_f32(acc[q][l], vmulq_f32(tau, f[l]));
      }
    }
    for (size_t q = q0; q <= q1; ++q) {
      float ys[16];
      for (int l = 0; l < 4; ++l) vst1q_f32(ys + 4 * l, acc[q][l]);
      for (size_t j = 0; j < 16; ++j) {
        const size_t r = blk * 64 + q * 16 + j;
        if (r >= lo && r < hi) a.y[r] = ys[j] * F16ToF32(a.scales[r]);
      }
    }
  }
}

// Identical bytes to the baseline: fcvtns rounds half to even.
void LutQuantize(const LutQuantizeArgs& a, size_t block_begin, size_t block_end) {
  for (size_t b = block_begin; b < block_end; ++b) {
    const size_t begin = b * 32 * a.per_v;
    const size_t end = MinSize(a.nv, (b + 1) * 32) * a.per_v;
    float32x4_t mv = vdupq_n_f32(0);
    size_t i = begin;
    for (; i + 4 <= end; i += 4) mv = vmaxq_f32(mv, vabsq_f32(vld1q_f32(a.table + i)));
    float m = vmaxvq_f32(mv);
    for (; i < end; ++i) m = fabsf(a.table[i]) > m ? fabsf(a.table[i]) : m;
    a.tau[b] = m / 127.0f;
    const float inv = (m == 0.0f) ? 0.0f : 127.0f / m;
    for (i = begin; i + 4 <= end; i += 4) {
      int32x4_t q = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(a.table + i), inv));
      q = vminq_s32(vmaxq_s32(q, vdupq_n_s32(-127)), vdupq_n_s32(127));
      const int16x4_t h = vmovn_s32(q);
      const int8x8_t bytes = vmovn_s16(vcombine_s16(h, h));
      a.out[i] = vget_lane_s8(bytes, 0);
      a.out[i + 1] = vget_lane_s8(bytes, 1);
      a.out[i + 2] = vget_lane_s8(bytes, 2);
      a.out[i + 3] = vget_lane_s8(bytes, 3);
    }
    for (; i < end; ++i) {
      float q = RoundHalfEvenSmall(a.table[i] * inv);
      q = q < -127.0f ? -127.0f : (q > 127.0f ? 127.0f : q);
      a.out[i] = static_cast<int8_t>(q);
    }
  }
}

// ---- MARK: KDA ---------------------------------------------------------------------------
// Same element-wise multiply/add sequence as the baseline: bit-identical.
constexpr size_t kMaxKdaDim = 1024;

void KdaStep(const KdaStepArgs& a, size_t head_begin, size_t head_end) {
  const size_t d = a.dim;
  if (d % 4 != 0 || d > kMaxKdaDim) return baseline::KdaStep(a, head_begin, head_end);
  float delta[kMaxKdaDim];
  float o[kMaxKdaDim];
  for (size_t h = head_begin; h < head_end; ++h) {
    float* st = a.state + h * d * d;
    const float* q = a.q + h * d;
    const float* k = a.k + h * d;
    const float* v = a.v + h * d;
    const float* g = a.g + h * d;
    for (size_t j = 0; j < d; j += 4) vst1q_f32(delta + j, vdupq_n_f32(0));
    for (size_t i = 0; i < d; ++i) {
      const float e = expf(g[i]);
      float* row = st + i * d;
      for (size_t j = 0; j < d; j += 4) {
        const float32x4_t s = vmulq_n_f32(vld1q_f32(row + j), e);
        vst1q_f32(row + j, s);
        vst1q_f32(delta + j, vaddq_f32(vld1q_f32(delta + j), vmulq_n_f32(s, k[i])));
      }
    }
    const float32x4_t beta = vdupq_n_f32(a.beta[h]);
    for (size_t j = 0; j < d; j += 4) {
      vst1q_f32(delta + j, vmulq_f32(beta, vsubq_f32(vld1q_f32(v + j), vld1q_f32(delta + j))));
      vst1q_f32(o + j, vdupq_n_f32(0));
    }
    for (size_t i = 0; i < d; ++i) {
      float* row = st + i * d;
      for (size_t j = 0; j < d; j += 4) {
        const float32x4_t s = vaddq_f32(vld1q_f32(row + j), vmulq_n_f32(vld1q_f32(delta + j), k[i]));
        vst1q_f32(row + j, s);
        vst1q_f32(o + j, vaddq_f32(vld1q_f32(o + j), vmulq_n_f32(s, q[i])));
      }
    }
    for (size_t j = 0; j < d; ++j) a.out[h * d + j] = o[j];
  }
}

}  // namespace
#endif  // WASTE_NEON_BODY

void RegisterNeon(KernelTable& t) {
#if defined(WASTE_NEON_BODY)
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
  t.vq_apply6 = VqApply6;
  t.lut_quantize = LutQuantize;
  t.kda_step = KdaStep;
  baseline::SetTableName(t, "NEON");
#else
  (void)t;
#endif
}

}  // namespace waste::kernels::neon
