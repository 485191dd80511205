// Token sampling, bit-exact to the reference rules (MODEL.md §8,
// ENGINE.md §7.3): greedy argmax; otherwise one 64-bit LCG draw per token,
// optional top-k / top-p truncation over logits sorted descending (ties by
// lower id), temperature-scaled exp in f32.
//
// Optional adjustments (off by default, and then the logits are used as
// given, so greedy and seeded sampling stay bit-identical): logit bias,
// repetition / presence / frequency penalties over the last N tokens seen
// (Accept), and min-p, all applied to a copy of the logits before the rules
// above, in that order (as llama.cpp's default chain does).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace waste {

struct SamplerParams {
  float temperature = 0.0f;
  float top_p = 1.0f;
  int top_k = 0;
  uint64_t seed = 0;  // 0 = 0x853c49e6748fea9b
  float min_p = 0.0f;             // keep logits >= max + ln(min_p); 0 = off
  float repeat_penalty = 1.0f;    // seen token: l > 0 ? l / rp : l * rp; 1 = off
  int repeat_last_n = 64;         // window of Accept()ed tokens the penalties use
  float presence_penalty = 0.0f;  // - pp once for each token in the window
  float frequency_penalty = 0.0f; // - fp * its count in the window
  std::vector<std::pair<int, float>> logit_bias;  // + bias (-inf bans); ids out of range ignored
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& params);
  int Sample(std::span<const float> logits);
  // A token the model has seen (prompt or generated), for the penalties.
  void Accept(int token);

 private:
  float NextUniform();
  bool Adjusts() const;
  // Bias, penalties and min-p on a copy of `logits`; returns the copy.
  std::span<const float> Adjust(std::span<const float> logits);
  std::vector<float> adjusted_;
  std::vector<int> recent_;  // ring of the last repeat_last_n tokens
  size_t recent_next_ = 0;
  SamplerParams p_;
  uint64_t state_;
  std::vector<int> order_;
  std::vector<float> probs_;
};

// First index of the maximum (strict '>' scan).
int Argmax(std::span<const float> logits);

}  // namespace waste
