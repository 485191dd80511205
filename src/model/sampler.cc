#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace waste {

// The first index of the largest value. Two passes: the maximum in 16
// independent lanes (the compiler turns the select into vector max/blend; one
// running "best index" is a serial dependency through a load and costs
// ~1 ms per step on a 160k vocabulary), then the first index holding it.
// NaN never wins (a comparison with it is false); all NaN gives 0.
int Argmax(std::span<const float> logits) {
  constexpr size_t kLanes = 16;
  float lane[kLanes];
  for (float& l : lane) l = -INFINITY;
  const size_t n = logits.size();
  const float* x = logits.data();
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  }
  float m = -INFINITY;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  for (float l : lane) m = l > m ? l : m;
  for (size_t k = 0; k < n; ++k) {
    if (x[k] == m) return static_cast<int>(k);
  }
  return 0;
}

Sampler::Sampler(const SamplerParams& params)
    : p_(params), state_(params.seed != 0 ? params.seed : 0x853c49e6748fea9bULL) {}

float Sampler::NextUniform() {
  state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
  return static_cast<float>(static_cast<double>(state_ >> 11) * (1.0 / 9007199254740992.0));
}

bool Sampler::Adjusts() const {
  const bool penalties = p_.repeat_last_n > 0 && (p_.repeat_penalty != 1.0f ||
                                                  p_.presence_penalty != 0.0f ||
                                                  p_.frequency_penalty != 0.0f);
  return penalties || !p_.logit_bias.empty() || p_.min_p > 0.0f;
}

void Sampler::Accept(int token) {
  if (p_.repeat_last_n <= 0 || !Adjusts()) return;
  const size_t n = static_cast<size_t>(p_.repeat_last_n);
  if (recent_.size() < n) {
    recent_.push_back(token);
  } else {
    recent_[recent_next_] = token;
    recent_next_ = (recent_next_ + 1) % n;
  }
}

std::span<const float> Sampler::Adjust(std::span<const float> logits) {
  adjusted_.assign(logits.begin(), logits.end());
  const size_t v = adjusted_.size();
  for (const auto& [id, bias] : p_.logit_bias) {
    if (id >= 0 && static_cast<size_t>(id) < v) adjusted_[static_cast<size_t>(id)] += bias;
  }
  if (!recent_.empty()) {
    // Count each distinct token once, then penalise it once.
    std::vector<int> seen(recent_);
    std::sort(seen.begin(), seen.end());
    for (size_t i = 0; i < seen.size();) {
      size_t j = i;
      while (j < seen.size() && seen[j] == seen[i]) ++j;
      const int id = seen[i];
      const float count = static_cast<float>(j - i);
      i = j;
      if (id < 0 || static_cast<size_t>(id) >= v) continue;
      float& l = adjusted_[static_cast<size_t>(id)];
      if (p_.repeat_penalty != 1.0f) l = l > 0.0f ? l / p_.repeat_penalty : l * p_.repeat_penalty;
      l -= count * p_.frequency_penalty + p_.presence_penalty;
    }
  }
  if (p_.min_p > 0.0f && v > 0) {
    const float cut = adjusted_[static_cast<size_t>(Argmax(adjusted_))] + std::log(p_.min_p);
    for (float& l : adjusted_) {
      if (l < cut) l = -INFINITY;
    }
  }
  return adjusted_;
}

int Sampler::Sample(std::span<const float> raw_logits) {
  const bool adjusting = Adjusts();
  const std::span<const float> logits = adjusting ? Adjust(raw_logits) : raw_logits;
  const size_t v = logits.size();
  if (p_.temperature <= 0.0f || v == 0) return Argmax(logits);
  const float u = NextUniform();
  const float t = p_.temperature;
  const float m = logits[static_cast<size_t>(Argmax(logits))];
  const bool use_k = p_.top_k > 0 && static_cast<size_t>(p_.top_k) < v;
  if (!use_k && p_.top_p >= 1.0f) {
    probs_.resize(v);
    float z = 0.0f;
    for (size_t i = 0; i < v; ++i) {
      probs_[i] = std::exp((logits[i] - m) / t);
      z += probs_[i];
    }
    float r = u * z, c = 0.0f;
    for (size_t i = 0; i < v; ++i) {
      c += probs_[i];
      // probs_[i] > 0: a banned (-inf) token is never drawn, even by u = 0.
      if (r <= c && (probs_[i] > 0.0f || !adjusting)) return static_cast<int>(i);
    }
    return static_cast<int>(v - 1);
  }
  order_.resize(v);
  std::iota(order_.begin(), order_.end(), 0);
  const size_t k = use_k ? static_cast<size_t>(p_.top_k) : v;
  auto by_logit = [&](int a, int b) {
    float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  if (k < v) {
    std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(k),
                      order_.end(), by_logit);
  } else {
    std::sort(order_.begin(), order_.end(), by_logit);
  }
  probs_.resize(k);
  float z = 0.0f;
  for (size_t i = 0; i < k; ++i) {
    probs_[i] = std::exp((logits[static_cast<size_t>(order_[i])] - m) / t);
    z += probs_[i];
  }
  size_t keep = k;
  float c = 0.0f;
  for (size_t i = 0; i < k; ++i) {
    c += probs_[i] / z;
    if (c >= p_.top_p) {
      keep = i + 1;
      break;
    }
  }
  float r = u * c, acc = 0.0f;
  for (size_t i = 0; i < keep; ++i) {
    acc += probs_[i] / z;
    if (r <= acc) return order_[i];
  }
  return order_[0];
}

}  // namespace waste
