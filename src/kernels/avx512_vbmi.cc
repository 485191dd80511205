// AVX-512 VBMI kernels: the VQ4P apply, whose 64-entry int8 tables are
// exactly one zmm register, so a table lookup is one vpermi2b. Its own file
// (own flags) because VBMI is absent on AVX-512 CPUs before Ice Lake: the
// compiler must not slip vpermb into the plain AVX-512 kernels.
#include "kernels/isa_register.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && \
    defined(__AVX512VL__) && defined(__AVX512VBMI__) && defined(__F16C__)
#define WASTE_AVX512_VBMI_BODY 1
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

namespace waste::kernels::avx512_vbmi {
#if defined(WASTE_AVX512_VBMI_BODY)
namespace {

inline size_t MinSize(size_t a, size_t b) { return a < b ? a : b; }

// VQ4P apply (MODEL.md §6.4), bit-identical to the baseline: the per-block
// sums are exact integers and the f32 steps are the same multiply and add.
//
// One (64-row block, position v) is 192 bytes: 64 runs of 3 bytes. Per 16
// rows: vpermb spreads the 48 bytes into one dword per row, vpmultishiftqb
// cuts the four 6-bit fields into the dword's four bytes, and a byte lookup
// maps byte s of a row to T[v][s][idx_s]. vpermi2b covers two 64-entry
// tables at once (index bit 6 picks the table), so stages 0/1 and 2/3 are two
// lookups and a blend. vpmaddubsw (x1) adds stage pairs into int16, kept
// per 32-position block (|sum| <= 4*127*32/2 per lane fits), then vpmaddwd
// folds the pair into the row's int32 block sum.
void VqApply6(const VqApply6Args& a, size_t row_begin, size_t row_end) {
  alignas(64) uint8_t spread_b[64];
  for (int j = 0; j < 16; ++j) {
    for (int t = 0; t < 4; ++t) spread_b[4 * j + t] = static_cast<uint8_t>(3 * j + (t < 3 ? t : 2));
  }
  const __m512i spread = _mm512_load_si512(spread_b);
  const __m512i shifts = _mm512_set1_epi64(0x322C2620120C0600LL);  // bits 0,6,12,18,32,38,44,50
  const __m512i low6 = _mm512_set1_epi8(0x3F);
  const __m512i stage_bit = _mm512_set1_epi32(0x40004000);  // bit 6 set for stages 1 and 3
  const __mmask64 upper_pair = 0xCCCCCCCCCCCCCCCCull;       // bytes of stages 2 and 3
  const __m512i ones8 = _mm512_set1_epi8(1);
  const __m512i ones16 = _mm512_set1_epi16(1);
  const size_t nblocks = (a.nv + 31) / 32;

  for (size_t blk = row_begin / 64; blk * 64 < row_end; ++blk) {
    const size_t lo = blk * 64 > row_begin ? blk * 64 : row_begin;
    const size_t hi = MinSize(blk * 64 + 64, row_end);
    const size_t q0 = (lo - blk * 64) / 16, q1 = (hi - 1 - blk * 64) / 16;
    const uint8_t* base = a.indices + blk * a.nv * 192;
    __m512 acc[4];
    for (int q = 0; q < 4; ++q) acc[q] = _mm512_setzero_ps();
    for (size_t b = 0; b < nblocks; ++b) {
      const size_t v1 = MinSize(a.nv, b * 32 + 32);
      __m512i sum16[4];
      for (int q = 0; q < 4; ++q) sum16[q] = _mm512_setzero_si512();
      for (size_t v = b * 32; v < v1; ++v) {
        const int8_t* tv = a.table + v * 256;
        const __m512i t0 = _mm512_loadu_si512(tv);
        const __m512i t1 = _mm512_loadu_si512(tv + 64);
        const __m512i t2 = _mm512_loadu_si512(tv + 128);
        const __m512i t3 = _mm512_loadu_si512(tv + 192);
        const uint8_t* runs = base + v * 192;
        for (size_t q = q0; q <= q1; ++q) {
          // The last 16 rows' 48 bytes end the 192-byte run block: mask the
          // load so it never reads past the index region.
          const __m512i raw = (q < 3) ? _mm512_loadu_si512(runs + q * 48)
                                      : _mm512_maskz_loadu_epi8(0xFFFFFFFFFFFFull, runs + 144);
          const __m512i w = _mm512_permutexvar_epi8(spread, raw);
          const __m512i fields = _mm512_multishift_epi64_epi8(shifts, w);
          const __m512i idx = _mm512_ternarylogic_epi32(fields, low6, stage_bit, 0xEA);  // (a&b)|c
          const __m512i p01 = _mm512_permutex2var_epi8(t0, idx, t1);
          const __m512i p23 = _mm512_permutex2var_epi8(t2, idx, t3);
          const __m512i p = _mm512_mask_blend_epi8(upper_pair, p01, p23);
          sum16[q] = _mm512_add_epi16(sum16[q], _mm512_maddubs_epi16(ones8, p));
        }
      }
      const __m512 tau = _mm512_set1_ps(a.tau[b]);
      for (size_t q = q0; q <= q1; ++q) {
        const __m512 s = _mm512_cvtepi32_ps(_mm512_madd_epi16(sum16[q], ones16));
        acc[q] = _mm512_add_ps(acc[q], _mm512_mul_ps(tau, s));
      }
    }
    for (size_t q = q0; q <= q1; ++q) {
      const size_t r0 = blk * 64 + q * 16;
      const size_t a0 = lo > r0 ? lo - r0 : 0;
      const size_t a1 = MinSize(16, hi - r0);
      const __mmask16 m = static_cast<__mmask16>(((1u << a1) - 1u) & ~((1u << a0) - 1u));
      const __m512 sc = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a.scales + r0));
      _mm512_mask_storeu_ps(a.y + r0, m, _mm512_mul_ps(acc[q], sc));
    }
  }
}

}  // namespace
#endif  // WASTE_AVX512_VBMI_BODY

void RegisterAvx512Vbmi(KernelTable& t) {
#if defined(WASTE_AVX512_VBMI_BODY)
  t.vq_apply6 = VqApply6;
  baseline::AppendTableName(t, "+VBMI");
#else
  (void)t;
#endif
}

}  // namespace waste::kernels::avx512_vbmi
