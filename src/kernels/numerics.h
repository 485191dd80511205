// Scalar numeric helpers shared by every kernel file (baseline and each ISA),
// so that all of them decode f16 and round exactly the same way. Everything
// here is `static inline`: each translation unit gets its own copy, so a copy
// compiled with -mavx512f can never be merged by the linker into code that
// runs on an older CPU (STYLE.md §6.3).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace waste::kernels {

// Bit cast without <bit> (std::bit_cast is a template: keep ISA files free
// of shared template instantiations).
static inline float BitsToF32(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

static inline uint32_t F32ToBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// IEEE half -> float, subnormals decoded exactly (mantissa * 2^-24): the
// trunk-scale rule of MODEL.md §0. Exponent 31 decodes to inf/NaN like the
// hardware converters (F16C, NEON fcvt); writers never emit it (FORMAT.md
// §4.4), so SIMD and scalar agree on every value that can occur.
static inline float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0) {
    if (mant == 0) return BitsToF32(sign);
    // Subnormal: renormalise. value = mant * 2^-24.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    mant &= 0x3FFu;
    return BitsToF32(sign | ((112u - static_cast<uint32_t>(e)) << 23) | (mant << 13));
  }
  if (exp == 31) return BitsToF32(sign | 0x7F800000u | (mant << 13));
  return BitsToF32(sign | ((exp + 112u) << 23) | (mant << 13));
}

// IEEE half -> float with subnormals flushed to a signed zero: the codebook
// rule (MODEL.md §6.4, a quirk of the reference kept for bit agreement).
static inline float F16ToF32FlushSubnormals(uint16_t h) {
  if ((h & 0x7C00u) == 0) return BitsToF32(static_cast<uint32_t>(h & 0x8000u) << 16);
  return F16ToF32(h);
}

// float -> IEEE half, round to nearest even, overflow to inf, subnormal
// results produced exactly. Used by writers and tests to make f16 scales.
static inline uint16_t F32ToF16(float f) {
  const uint32_t x = F32ToBits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to inf
  if (abs < 0x38800000u) {  // result is subnormal (or zero) in half
    if (abs < 0x33000000u) return sign;  // below half of the smallest subnormal
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126u - e;  // value / 2^-24 = m * 2^(e - 126)
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t q = ((abs >> 23) - 112u) << 10 | ((abs >> 13) & 0x3FFu);
  const uint32_t rem = abs & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;  // carry into exponent is correct
  return static_cast<uint16_t>(sign | q);
}

// Round half to even for |v| < 2^22 by the add-and-subtract trick, which is
// exact under the default rounding mode and needs no libm call; identical
// to cvtps2dq / fcvtns on every value lut_quantize can produce (|v| <= 127).
static inline float RoundHalfEvenSmall(float v) {
  const float kMagic = 12582912.0f;  // 1.5 * 2^23: forces rounding at the units bit
  return (v >= 0.0f) ? (v + kMagic) - kMagic : (v - kMagic) + kMagic;
}

// The 6-bit stage indices of a VQ4P run (FORMAT.md §6.3).
static inline void UnpackVq4pRun(const uint8_t* run, unsigned idx[4]) {
  const uint32_t w = static_cast<uint32_t>(run[0]) | static_cast<uint32_t>(run[1]) << 8 |
                     static_cast<uint32_t>(run[2]) << 16;
  idx[0] = w & 63u;
  idx[1] = (w >> 6) & 63u;
  idx[2] = (w >> 12) & 63u;
  idx[3] = (w >> 18) & 63u;
}

// Byte offset of the index run of (row r, vector position v) in a matrix
// with nv positions per row, in the 64-row blocked layout (FORMAT.md §6.3).
static inline size_t VqRunOffset(size_t r, size_t v, size_t nv, size_t run_bytes) {
  return (((r >> 6) * nv + v) * 64 + (r & 63)) * run_bytes;
}

// Q3G code of element i of a row: 3 bits at bit 3i, LSB first; the row's
// guard byte keeps the two-byte read inside the row (FORMAT.md §4.4).
static inline int Q3gValue(const uint8_t* row, size_t i) {
  const size_t t = 3 * i;
  const size_t b = t >> 3;
  const unsigned k = static_cast<unsigned>(t & 7);
  const unsigned u = ((static_cast<unsigned>(row[b]) >> k) |
                      (static_cast<unsigned>(row[b + 1]) << (8 - k))) & 7u;
  return static_cast<int>(u) - 4;
}

}  // namespace waste::kernels
