// Shared by the tests of constraints that force tokens (the reasoning caps:
// server/thinking_budget.h, waste::ThinkTagBudget): feeds a model's wished
// tokens through one, as generation does.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "waste/grammar.h"

namespace waste::testing {

// Feeds `tokens` as a model would pick them: each one the constraint
// allows is taken; a forbidden one is replaced by the only token its mask
// leaves (of a 32-token vocabulary). Returns what was generated.
inline std::vector<int> ForcedGeneration(TokenConstraint& c, const std::vector<int>& tokens) {
  std::vector<int> out;
  for (int t : tokens) {
    if (!c.Allows(t)) {
      std::vector<float> logits(32, 0.5f);
      c.Mask(logits);
      int kept = -1, finite = 0;
      for (int i = 0; i < 32; ++i) {
        if (std::isfinite(logits[i])) kept = i, ++finite;
      }
      EXPECT_EQ(finite, 1);
      t = kept;
    }
    c.Accept(t);
    out.push_back(t);
  }
  return out;
}

}  // namespace waste::testing
