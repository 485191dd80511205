// Token sampling, bit-exact to the reference rules (MODEL.md §8,
// ENGINE.md §7.3): greedy argmax; otherwise one 64-bit LCG draw per token,
// optional top-k / top-p truncation over logits sorted descending (ties by
// lower id), temperature-scaled exp in f32.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace waste {

struct SamplerParams {
  float temperature = 0.0f;
  float top_p = 1.0f;
  int top_k = 0;
  uint64_t seed = 0;  // 0 = 0x853c49e6748fea9b
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& params);
  int Sample(std::span<const float> logits);

 private:
  float NextUniform();
  SamplerParams p_;
  uint64_t state_;
  std::vector<int> order_;
  std::vector<float> probs_;
};

// First index of the maximum (strict '>' scan).
int Argmax(std::span<const float> logits);

}  // namespace waste
