// Log-probabilities from a row of logits: the model's own distribution
// (the log-softmax of the raw logits, before temperature, penalties,
// logit_bias or a constraint change what is sampled). One definition for
// scoring a prompt (Forward::RunScored) and for a generated token's
// logprobs (Session::Generate), so the two agree wherever the logits do.
#pragma once

#include <span>
#include <vector>

#include "waste/types.h"

namespace waste {

class LogSoftmax {
 public:
  // `logits` must be finite (the callers check) and outlive this object.
  explicit LogSoftmax(std::span<const float> logits);

  // log p(id), in nats: logit - max - log(sum exp(logit - max)), in double.
  double operator()(int id) const;

  // The `k` most likely tokens, most likely first (ties: the lower id
  // first), replacing *out. k is clamped to the vocabulary.
  void Top(int k, std::vector<TokenLogprob>* out) const;

 private:
  std::span<const float> logits_;
  double max_ = 0;
  double log_sum_ = 0;
};

}  // namespace waste
