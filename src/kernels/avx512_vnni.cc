// AVX-512 VNNI prototype: the trunk Q4G matvec as integer dot products
// (vpdpbusd) on x in per-group block fixed point. NOT in the dispatch table:
// it beats the float AVX-512 kernel on cache-resident matrices (medians +1
// to +30 %) but not on the DRAM-resident ones that decode streams (one core:
// -26 to +8 %; two threads: 4-23 % slower), and its error on heavy-tailed x
// is ~6x the float kernel's (docs/KERNELS.md, "Negative results"). Kept,
// tested against a double-precision reference and benchmarked beside the
// float kernel, so the comparison can be re-run on a quiet machine or
// another CPU; shipping it is one line in dispatch.cc (plus a name suffix).
// Its own file (own flags) because VNNI is absent on AVX-512 CPUs before
// Cascade Lake. Same rules as avx512.cc: everything but the entry point in
// an unnamed namespace, no header templates instantiated here.
#include "kernels/isa_register.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && \
    defined(__AVX512VL__) && defined(__AVX512VNNI__) && defined(__F16C__)
#define WASTE_AVX512_VNNI_BODY 1
// GCC 12 warns inside its own AVX-512 headers (maskz intrinsics built on
// _mm512_undefined_*; GCC PR105593): a false positive, silenced for this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/baseline.h"
#include "kernels/kernel_args.h"
#endif

namespace waste::kernels::avx512_vnni {
#if defined(WASTE_AVX512_VNNI_BODY)
namespace {

// ---- MARK: x in block fixed point -------------------------------------------
// Per group g of 128 elements, x is written exactly enough as
//   x_i ≈ P_i · sx_g · 2^-16,  P_i = round(x_i · 2^(16-e_g)),  sx_g = 2^e_g
// with e_g the smallest exponent such that max|x_g| <= 127 · sx_g, so
// |P_i| <= 127 · 2^16 and |x_i - P_i·sx·2^-16| <= sx·2^-17 < max|x_g|·2^-23.
// P is split into three balanced signed radix-256 digits
// P = p0·2^16 + p1·2^8 + p2 (p0 in [-127,127], p1 and p2 in [-128,127]),
// each an int8 that vpdpbusd multiplies by the unsigned nibbles q in 0..15.
// Per dword lane the digit sums combine exactly in int32 as
// ((a0·2^8 + a1)·2^8 + a2): a lane takes 4 low-nibble and 4 high-nibble
// products, so every partial value is at most
// 8·15·(127·2^16 + 128·2^8 + 128) < 2^30.
//
// The -8 of the format (value = q - 8) is folded in per lane as an exact
// integer, -8·ΣP over the lane's eight elements, precomputed per call, so
// the lane value is Σ(q-8)·P exactly (|.| <= 8·8·127·2^16 < 2^29; < 2^31
// at every step). It is then converted to f32 once and scaled by
// s_g·2^(e_g-16): the only roundings left are the cvt (2^-24 of a lane),
// the f32 accumulation as in the float kernel, and the representation of x
// above, which dominates for heavy-tailed groups (docs/KERNELS.md).
//
// To keep s_g·2^(e_g-16) a normal float for any x, the factor is taken
// relative to the largest group exponent E (2^(e_g-16-E) <= 2^-16) and the
// row's sum is multiplied by 2^E at the end. Calls whose nonzero groups span
// more than 2^60 (never seen in activations), or whose x holds inf/NaN, go to
// the float kernel instead, which handles them like the baseline.

constexpr size_t kMaxGroups = 128;  // 16384 columns: 58 KiB of stack per call
constexpr int kMaxGroupSpread = 60;
constexpr size_t kQ4PrefetchBytes = 2048;  // as the float kernel (docs/KERNELS.md)

struct FixedPointX {
  // Per group 6 vectors: digit d for the even elements (the low nibbles:
  // byte b of the group's 64 bytes holds elements 2b and 2b+1), then for the
  // odd ones (high nibbles). Byte b of each vector belongs to byte b of w,
  // so a 64-byte weight load lines up with it after one and/shift.
  alignas(64) int8_t digits[kMaxGroups][6][64];
  alignas(64) int32_t offset[kMaxGroups][16];  // -8·ΣP per dword lane
  alignas(64) float exp_adj[kMaxGroups];       // e_g - 16 - E (for vscalefps)
  int e_max = 0;                                // E
};

// Smallest e with m <= 127·2^e, for the bits m of a finite nonzero |x|.
int GroupExponent(uint32_t m) {
  int exp;
  uint32_t frac;
  if (m >= 0x00800000u) {
    exp = static_cast<int>(m >> 23) - 127;
    frac = m & 0x007FFFFFu;
  } else {  // subnormal: normalise the mantissa
    const int sh = __builtin_clz(m) - 8;
    exp = -126 - sh;
    frac = (m << sh) & 0x007FFFFFu;
  }
  // m = 1.f · 2^exp; 127 = 1.984375 · 2^6 and 1.984375 has fraction 0x7E0000.
  return exp - 6 + (frac > 0x007E0000u ? 1 : 0);
}

inline __mmask16 ValidLanes(size_t first, size_t cols) {  // lanes first..first+15 below cols
  if (first >= cols) return 0;
  const size_t n = cols - first;
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}

// The lane dot product of one group: Σ q·P per dword lane for nibbles lo
// (even elements) and hi (odd), digits d, as one exact int32 chain.
inline __m512i GroupDot(__m512i lo, __m512i hi, const int8_t (*d)[64]) {
  const __m512i* v = reinterpret_cast<const __m512i*>(d);
  __m512i t = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_load_si512(v + 0));
  t = _mm512_dpbusd_epi32(t, hi, _mm512_load_si512(v + 1));
  t = _mm512_slli_epi32(t, 8);
  t = _mm512_dpbusd_epi32(t, lo, _mm512_load_si512(v + 2));
  t = _mm512_dpbusd_epi32(t, hi, _mm512_load_si512(v + 3));
  t = _mm512_slli_epi32(t, 8);
  t = _mm512_dpbusd_epi32(t, lo, _mm512_load_si512(v + 4));
  return _mm512_dpbusd_epi32(t, hi, _mm512_load_si512(v + 5));
}

// Splits the int32 P of 16 elements into its three int8 digits.
inline void StoreDigits(__m512i p, int8_t* d0, int8_t* d1, int8_t* d2) {
  // Sign-extending the low byte gives the balanced digit; the subtraction
  // leaves an exact multiple of 256.
  const __m512i p2 = _mm512_srai_epi32(_mm512_slli_epi32(p, 24), 24);
  const __m512i r1 = _mm512_srai_epi32(_mm512_sub_epi32(p, p2), 8);
  const __m512i p1 = _mm512_srai_epi32(_mm512_slli_epi32(r1, 24), 24);
  const __m512i p0 = _mm512_srai_epi32(_mm512_sub_epi32(r1, p1), 8);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(d0), _mm512_cvtepi32_epi8(p0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(d1), _mm512_cvtepi32_epi8(p1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(d2), _mm512_cvtepi32_epi8(p2));
}

// Fills X from a.x (group 128, a.groups <= kMaxGroups). Returns false when
// x holds inf/NaN or its groups span too many binades (see above).
bool PrepareX(const MatVecArgs& a, FixedPointX& X) {
  const __m512i abs_bits = _mm512_set1_epi32(0x7FFFFFFF);
  int e[kMaxGroups];
  bool any = false;
  int e_min = 0, e_max = 0;
  for (size_t g = 0; g < a.groups; ++g) {
    __m512i mx = _mm512_setzero_si512();
    for (size_t c = 0; c < 8; ++c) {
      const size_t i = g * 128 + c * 16;
      const __m512i v = _mm512_maskz_loadu_epi32(ValidLanes(i, a.cols), a.x + i);
      mx = _mm512_max_epu32(mx, _mm512_and_si512(v, abs_bits));  // |x| bits order like |x|
    }
    const uint32_t m = _mm512_reduce_max_epu32(mx);
    if (m >= 0x7F800000u) return false;  // inf or NaN
    e[g] = m == 0 ? INT32_MIN : GroupExponent(m);
    if (m != 0) {
      e_min = any && e_min < e[g] ? e_min : e[g];
      e_max = any && e_max > e[g] ? e_max : e[g];
      any = true;
    }
  }
  if (any && e_max - e_min > kMaxGroupSpread) return false;
  X.e_max = e_max;

  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512i eights = _mm512_set1_epi8(8);
  for (size_t g = 0; g < a.groups; ++g) {
    const bool zero = e[g] == INT32_MIN;
    // Zero groups: every P is 0 whatever the exponent; any finite factor will do.
    const int eg = zero ? 0 : e[g];
    X.exp_adj[g] = zero ? -16.0f : static_cast<float>(eg - 16 - e_max);
    const __m512 k = _mm512_set1_ps(static_cast<float>(16 - eg));
    for (size_t c = 0; c < 4; ++c) {
      const size_t i = g * 128 + c * 32;
      const __m512 v0 = _mm512_maskz_loadu_ps(ValidLanes(i, a.cols), a.x + i);
      const __m512 v1 = _mm512_maskz_loadu_ps(ValidLanes(i + 16, a.cols), a.x + i + 16);
      // x·2^(16-e) is exact (a power-of-two scale of a float, no overflow
      // since it is <= 127·2^16); the conversion rounds to nearest even.
      const __m512 xe = _mm512_scalef_ps(_mm512_permutex2var_ps(v0, even, v1), k);
      const __m512 xo = _mm512_scalef_ps(_mm512_permutex2var_ps(v0, odd, v1), k);
      const __m512i pe = _mm512_cvt_roundps_epi32(xe, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m512i po = _mm512_cvt_roundps_epi32(xo, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      int8_t(*d)[64] = X.digits[g];
      StoreDigits(pe, d[0] + 16 * c, d[2] + 16 * c, d[4] + 16 * c);
      StoreDigits(po, d[1] + 16 * c, d[3] + 16 * c, d[5] + 16 * c);
    }
    // -8·ΣP per lane: the same dot product with every nibble 8.
    const __m512i t = GroupDot(eights, eights, X.digits[g]);
    _mm512_store_si512(X.offset[g], _mm512_sub_epi32(_mm512_setzero_si512(), t));
  }
  return true;
}

// One row: per group one 64-byte load, two nibble masks, six vpdpbusd, two
// shifts, the offset add, one cvt and one FMA (14 vector ops per 128
// weights; the float kernel needs ~26). One row at a time, as the float
// kernel: a single sequential stream per core is what the prefetchers serve.
void RowFixedPoint(const MatVecArgs& a, const FixedPointX& X, size_t r) {
  const uint8_t* row = a.weights + r * a.row_bytes;
  const uint16_t* sc = a.scales + r * a.groups;
  // The row's factors s_g·2^(e_g-16-E), 16 groups per step, exact.
  alignas(64) float f[kMaxGroups];
  for (size_t g = 0; g < a.groups; g += 16) {
    const __m512 s = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(ValidLanes(g, a.groups), sc + g));
    _mm512_store_ps(f + g, _mm512_scalef_ps(s, _mm512_load_ps(X.exp_adj + g)));
  }
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  for (size_t g = 0; g < a.groups; ++g) {
    _mm_prefetch(reinterpret_cast<const char*>(row + g * 64 + kQ4PrefetchBytes), _MM_HINT_T0);
    const __m512i w = _mm512_loadu_si512(row + g * 64);
    const __m512i lo = _mm512_and_si512(w, low4);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), low4);
    const __m512i t = _mm512_add_epi32(GroupDot(lo, hi, X.digits[g]), _mm512_load_si512(X.offset[g]));
    const __m512 v = _mm512_cvtepi32_ps(t);
    if (g & 1) {
      acc1 = _mm512_fmadd_ps(v, _mm512_set1_ps(f[g]), acc1);
    } else {
      acc0 = _mm512_fmadd_ps(v, _mm512_set1_ps(f[g]), acc0);
    }
  }
  const float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
  a.y[r] = _mm_cvtss_f32(_mm_scalef_ss(_mm_set_ss(sum), _mm_set_ss(static_cast<float>(X.e_max))));
}

void MatVecQ4GImpl(const MatVecArgs& a, size_t row_begin, size_t row_end) {
  if (a.group != 128 || a.groups > kMaxGroups || row_begin >= row_end) {
    return avx512::MatVecQ4GFloat(a, row_begin, row_end);
  }
  FixedPointX X;
  if (!PrepareX(a, X)) return avx512::MatVecQ4GFloat(a, row_begin, row_end);
  for (size_t r = row_begin; r < row_end; ++r) RowFixedPoint(a, X, r);
}

}  // namespace
#endif  // WASTE_AVX512_VNNI_BODY

void MatVecQ4GFixedPoint(const MatVecArgs& a, size_t row_begin, size_t row_end) {
#if defined(WASTE_AVX512_VNNI_BODY)
  MatVecQ4GImpl(a, row_begin, row_end);
#else
  avx512::MatVecQ4GFloat(a, row_begin, row_end);
#endif
}

}  // namespace waste::kernels::avx512_vnni
