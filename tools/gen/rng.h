// Deterministic random numbers for the generator: xoshiro256** seeded by
// splitmix64 from (seed, stream name), so every tensor and record has its own
// stream and the output does not depend on generation order.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace waste::gen {

inline uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline uint64_t HashName(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

class Rng {
 public:
  Rng(uint64_t seed, std::string_view stream) {
    uint64_t x = seed ^ HashName(stream);
    for (uint64_t& w : s_) w = SplitMix64(x);
  }
  Rng(uint64_t seed, uint64_t a, uint64_t b) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull ^ (a << 32) ^ b ^ 0xD1B54A32D192ED03ull;
    for (uint64_t& w : s_) w = SplitMix64(x);
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 24 bits.
  float Unit() { return static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f); }
  // Uniform in [lo, hi).
  float Uniform(float lo, float hi) { return lo + (hi - lo) * Unit(); }
  // Standard normal (Box-Muller, one value per call; speed is not needed here).
  double Normal() {
    double u1 = (static_cast<double>(Next() >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  // `n` random bytes.
  void Fill(uint8_t* dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t v = Next();
      std::memcpy(dst + i, &v, 8);
    }
    if (i < n) {
      uint64_t v = Next();
      std::memcpy(dst + i, &v, n - i);
    }
  }
  // Fills `n` floats uniform in [-a, a) (two 24-bit draws per 64 bits).
  void FillUniform(float* dst, size_t n, float a) {
    const float scale = 2.0f * a / 16777216.0f;
    size_t i = 0;
    for (; i + 2 <= n; i += 2) {
      uint64_t v = Next();
      dst[i] = static_cast<float>(v >> 40) * scale - a;
      dst[i + 1] = static_cast<float>((v >> 8) & 0xFFFFFF) * scale - a;
    }
    if (i < n) dst[i] = static_cast<float>(Next() >> 40) * scale - a;
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace waste::gen
