// SplitMix64: the converter's only random source. Streams are derived from
// (seed, purpose, layer, kind, expert), never from thread identity, so every
// draw is the same at any thread count.
#pragma once

#include <cstdint>

namespace waste::convert {

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  Rng(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0, uint64_t d = 0)
      : s_(Mix(Mix(Mix(Mix(seed ^ 0x243F6A8885A308D3ull) ^ a) ^ (b + 1)) ^ (c + 7)) ^ (d + 13)) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    return Mix(z);
  }
  // Uniform in [0, n).
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : Next() % n; }
  // Uniform in [0, 1).
  double Unit() { return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0); }

 private:
  static uint64_t Mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t s_;
};

}  // namespace waste::convert
