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

// ---- MARK: VQ3R in byte planes -------------------------------------------
// An 8-bit-index apply is a lookup per (row, v, stage) into a 256-entry f32
// table. Scalar loops top out near two cycles per (row, v) on this core
// (loads and f32 adds), gathers are slower still (docs/KERNELS.md). Here the
// table is kept as four byte planes (LutBuildArgs::planes): byte b of entry
// c at plane b. For 64 rows at once, two vpermi2b per plane look the 64
// indices up in entries 0..127 and 128..255, a blend on index bit 7 picks
// one, and two rounds of unpacks rebuild the 64 exact f32 values. Results
// are bit-identical to the baseline: each row still adds
// ((T0 + T1) + T2) per v, in v order, then multiplies by its scale.
//
// Loop order: a chunk of up to kChunkBlocks 64-row blocks is swept v by v;
// for each v and stage the 16 plane registers are loaded once and used for
// every block of the chunk, while per-row partial sums live in L1.

// Planes from 16-float vectors: vpermb gathers byte b of the 16 entries
// into 128-bit lane b, then a 4x4 transpose of lanes over four vectors
// gives plane b for 64 consecutive entries.
inline void StorePlanes64(const __m512 f[4], const __m512i& group, uint8_t* out, size_t entries) {
  __m512i g[4];
  for (int i = 0; i < 4; ++i) g[i] = _mm512_permutexvar_epi8(group, _mm512_castps_si512(f[i]));
  const __m512i x0 = _mm512_shuffle_i64x2(g[0], g[1], 0x44);
  const __m512i x1 = _mm512_shuffle_i64x2(g[0], g[1], 0xEE);
  const __m512i x2 = _mm512_shuffle_i64x2(g[2], g[3], 0x44);
  const __m512i x3 = _mm512_shuffle_i64x2(g[2], g[3], 0xEE);
  _mm512_storeu_si512(out, _mm512_shuffle_i64x2(x0, x2, 0x88));
  _mm512_storeu_si512(out + entries, _mm512_shuffle_i64x2(x0, x2, 0xDD));
  _mm512_storeu_si512(out + 2 * entries, _mm512_shuffle_i64x2(x1, x3, 0x88));
  _mm512_storeu_si512(out + 3 * entries, _mm512_shuffle_i64x2(x1, x3, 0xDD));
}

// lut_build as in avx512.cc (books transposed to [stage][t][entry], an
// in-order FMA chain over t per entry), writing f32 or byte planes.
void LutBuild(const LutBuildArgs& a, size_t v_begin, size_t v_end) {
  if (a.vec_dim != 8 || a.entries % 64 != 0 || a.stages > 8 ||
      a.stages * a.entries * 8 > baseline::kLutMaxBookFloats) {
    return baseline::LutBuild(a, v_begin, v_end);
  }
  alignas(64) float bt[baseline::kLutMaxBookFloats];
  const float* bs[8];  // per stage [t][entry]: the caller's transposed books, or ours
  baseline::TransposedBooks(a, bt, bs);
  alignas(64) uint8_t group_b[64];
  for (int b = 0; b < 4; ++b) {
    for (int j = 0; j < 16; ++j) group_b[16 * b + j] = static_cast<uint8_t>(4 * j + b);
  }
  const __m512i group = _mm512_load_si512(group_b);
  for (size_t v = v_begin; v < v_end; ++v) {
    __m512 xv[8];
    for (int t = 0; t < 8; ++t) xv[t] = _mm512_set1_ps(a.x[v * 8 + t]);
    for (size_t s = 0; s < a.stages; ++s) {
      const float* b = bs[s];
      for (size_t c = 0; c < a.entries; c += 64) {
        __m512 acc[4];
        for (int i = 0; i < 4; ++i) {
          const float* bc = b + c + 16 * i;
          acc[i] = _mm512_mul_ps(xv[0], _mm512_loadu_ps(bc));
          for (size_t t = 1; t < 8; ++t) acc[i] = _mm512_fmadd_ps(xv[t], _mm512_loadu_ps(bc + t * a.entries), acc[i]);
        }
        if (a.planes != nullptr) {
          StorePlanes64(acc, group, a.planes + (v * a.stages + s) * 4 * a.entries + c, a.entries);
        } else {
          float* out = a.table + (v * a.stages + s) * a.entries + c;
          for (int i = 0; i < 4; ++i) _mm512_storeu_ps(out + 16 * i, acc[i]);
        }
      }
    }
  }
}

constexpr size_t kChunkBlocks = 4;   // 256 rows per sweep over v (fewer index streams: see KERNELS.md)
constexpr size_t kInputGroup = 2;    // inputs swept together (batched form)
constexpr size_t kIndexPrefetchV = 4;

// Byte permutations that pull stage s of the 64 runs (3 bytes each) out of
// the 192-byte run block, in the lane order the unpacks undo: position
// p = 16L + 4k + j holds row 16k + 4L + j.
struct Vq3Const {
  __m512i lo[3], hi[3];
  __mmask64 from_hi[3];
};

Vq3Const MakeVq3Const() {
  Vq3Const c;
  for (int s = 0; s < 3; ++s) {
    alignas(64) uint8_t lo[64], hi[64];
    uint64_t m = 0;
    for (int p = 0; p < 64; ++p) {
      const int row = 16 * ((p >> 2) & 3) + 4 * (p >> 4) + (p & 3);
      const int q = 3 * row + s;
      lo[p] = static_cast<uint8_t>(q < 128 ? q : 0);
      hi[p] = static_cast<uint8_t>(q >= 128 ? q - 128 : 0);
      if (q >= 128) m |= uint64_t{1} << p;
    }
    c.lo[s] = _mm512_load_si512(lo);
    c.hi[s] = _mm512_load_si512(hi);
    c.from_hi[s] = m;
  }
  return c;
}

// The 64 f32 entries T[idx[p]] of one stage table (16 plane registers) for
// 64 rows, as four vectors of 16 rows in row order.
inline void Lookup64(const __m512i* planes, const __m512i idx, __m512 out[4]) {
  const __mmask64 top = _mm512_movepi8_mask(idx);
  __m512i b[4];
  for (int p = 0; p < 4; ++p) {
    const __m512i lo = _mm512_permutex2var_epi8(planes[4 * p], idx, planes[4 * p + 1]);
    const __m512i hi = _mm512_permutex2var_epi8(planes[4 * p + 2], idx, planes[4 * p + 3]);
    b[p] = _mm512_mask_blend_epi8(top, lo, hi);
  }
  const __m512i w01l = _mm512_unpacklo_epi8(b[0], b[1]), w01h = _mm512_unpackhi_epi8(b[0], b[1]);
  const __m512i w23l = _mm512_unpacklo_epi8(b[2], b[3]), w23h = _mm512_unpackhi_epi8(b[2], b[3]);
  out[0] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(w01l, w23l));
  out[1] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(w01l, w23l));
  out[2] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(w01h, w23h));
  out[3] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(w01h, w23h));
}

// Blocks sharing one pass over a tile of the table (kVTile vector
// positions, 3 KiB of planes each): the tile is loaded from L3/DRAM once
// and reused from L2 by every chunk of the super-chunk.
constexpr size_t kSuperBlocks = 16;
constexpr size_t kVTile = 32;

// Inputs [0, n_in <= kInputGroup) of a batched (or single) call over the
// blocks of rows [row_begin, row_end). Per super-chunk of blocks: for each
// tile of v, each chunk of blocks is swept v by v; per-row sums live in
// acc across tiles, so every row still adds its v in order.
void Vq3PlanesRange(const VqApply8Args& a, const uint8_t* const* planes, float* const* ys,
                    size_t n_in, size_t row_begin, size_t row_end) {
  const Vq3Const c = MakeVq3Const();
  alignas(64) float acc[kInputGroup][kSuperBlocks * 64];
  alignas(64) float part[kChunkBlocks * 64];
  alignas(64) uint8_t idx[kChunkBlocks][3][64];
  const size_t blk_lo = row_begin / 64, blk_hi = (row_end + 63) / 64;
  const size_t run_stride = a.nv * 192;
  for (size_t sb = blk_lo; sb < blk_hi; sb += kSuperBlocks) {
    const size_t nsb = MinSize(kSuperBlocks, blk_hi - sb);
    for (size_t i = 0; i < n_in; ++i) {
      for (size_t r = 0; r < nsb * 64; r += 16) _mm512_store_ps(acc[i] + r, _mm512_setzero_ps());
    }
    for (size_t vt = 0; vt < a.nv; vt += kVTile) {
      const size_t vt_end = MinSize(a.nv, vt + kVTile);
      for (size_t cb = sb; cb < sb + nsb; cb += kChunkBlocks) {
        const size_t nb = MinSize(kChunkBlocks, sb + nsb - cb);
        const size_t ao = (cb - sb) * 64;  // this chunk's rows in acc
        for (size_t v = vt; v < vt_end; ++v) {
          // Stage-planar indices of every block of the chunk for this v.
          for (size_t k = 0; k < nb; ++k) {
            const uint8_t* runs = a.indices + (cb + k) * run_stride + v * 192;
            if (v + kIndexPrefetchV < a.nv) {
              const char* pf = reinterpret_cast<const char*>(runs + kIndexPrefetchV * 192);
              _mm_prefetch(pf, _MM_HINT_T0);
              _mm_prefetch(pf + 64, _MM_HINT_T0);
              _mm_prefetch(pf + 128, _MM_HINT_T0);
            }
            const __m512i r0 = _mm512_loadu_si512(runs);
            const __m512i r1 = _mm512_loadu_si512(runs + 64);
            const __m512i r2 = _mm512_loadu_si512(runs + 128);
            for (int s = 0; s < 3; ++s) {
              const __m512i lo = _mm512_permutex2var_epi8(r0, c.lo[s], r1);
              _mm512_store_si512(idx[k][s], _mm512_mask_permutexvar_epi8(lo, c.from_hi[s], c.hi[s], r2));
            }
          }
          for (size_t i = 0; i < n_in; ++i) {
            const uint8_t* pv = planes[i] + v * 3 * 1024;
            __m512i p[16];
            __m512 f[4];
            for (int j = 0; j < 16; ++j) p[j] = _mm512_loadu_si512(pv + 64 * j);
            for (size_t k = 0; k < nb; ++k) {
              Lookup64(p, _mm512_load_si512(idx[k][0]), f);
              for (int q = 0; q < 4; ++q) _mm512_store_ps(part + k * 64 + 16 * q, f[q]);
            }
            for (int j = 0; j < 16; ++j) p[j] = _mm512_loadu_si512(pv + 1024 + 64 * j);
            for (size_t k = 0; k < nb; ++k) {
              Lookup64(p, _mm512_load_si512(idx[k][1]), f);
              for (int q = 0; q < 4; ++q) {
                float* pp = part + k * 64 + 16 * q;
                _mm512_store_ps(pp, _mm512_add_ps(_mm512_load_ps(pp), f[q]));
              }
            }
            for (int j = 0; j < 16; ++j) p[j] = _mm512_loadu_si512(pv + 2048 + 64 * j);
            for (size_t k = 0; k < nb; ++k) {
              Lookup64(p, _mm512_load_si512(idx[k][2]), f);
              for (int q = 0; q < 4; ++q) {
                float* ap = acc[i] + ao + k * 64 + 16 * q;
                const __m512 sum = _mm512_add_ps(_mm512_load_ps(part + k * 64 + 16 * q), f[q]);
                _mm512_store_ps(ap, _mm512_add_ps(_mm512_load_ps(ap), sum));
              }
            }
          }
        }
      }
    }
    // y = acc * f16(scale) for the rows of this super-chunk inside the range.
    for (size_t k = 0; k < nsb; ++k) {
      for (size_t q = 0; q < 4; ++q) {
        const size_t r0 = (sb + k) * 64 + 16 * q;
        if (r0 >= row_end || r0 + 16 <= row_begin) continue;
        const size_t a0 = row_begin > r0 ? row_begin - r0 : 0;
        const size_t a1 = MinSize(16, row_end - r0);
        const __mmask16 m = static_cast<__mmask16>(((1u << a1) - 1u) & ~((1u << a0) - 1u));
        const __m512 sc = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a.scales + r0));
        for (size_t i = 0; i < n_in; ++i) {
          _mm512_mask_storeu_ps(ys[i] + r0, m, _mm512_mul_ps(_mm512_load_ps(acc[i] + k * 64 + 16 * q), sc));
        }
      }
    }
  }
}

void VqApply8(const VqApply8Args& a, size_t row_begin, size_t row_end) {
  if (a.stages != 3 || a.entries != 256) return baseline::VqApply8(a, row_begin, row_end);
  if (a.count == 0) {
    if (a.planes == nullptr) return baseline::VqApply8(a, row_begin, row_end);
    float* y = a.y;
    Vq3PlanesRange(a, &a.planes, &y, 1, row_begin, row_end);
    return;
  }
  if (a.plane_sets == nullptr) return baseline::VqApply8(a, row_begin, row_end);
  for (size_t i = 0; i < a.count; i += kInputGroup) {
    Vq3PlanesRange(a, a.plane_sets + i, a.ys + i, MinSize(kInputGroup, a.count - i), row_begin, row_end);
  }
}

}  // namespace
#endif  // WASTE_AVX512_VBMI_BODY

void RegisterAvx512Vbmi(KernelTable& t) {
#if defined(WASTE_AVX512_VBMI_BODY)
  t.vq_apply6 = VqApply6;
  t.vq_apply8 = VqApply8;
  t.lut_build = LutBuild;
  t.vq8_planes = true;
  baseline::AppendTableName(t, "+VBMI");
#else
  (void)t;
#endif
}

}  // namespace waste::kernels::avx512_vbmi
