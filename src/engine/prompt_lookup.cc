#include "engine/prompt_lookup.h"

#include <algorithm>

namespace waste {
namespace {

std::vector<int> Slice(std::span<const int> history, size_t from, size_t count) {
  return std::vector<int>(history.begin() + static_cast<std::ptrdiff_t>(from),
                          history.begin() + static_cast<std::ptrdiff_t>(from + count));
}

}  // namespace

std::vector<int> LookupDraft(std::span<const int> history, size_t max_tokens,
                             const LookupLimits& limits, size_t* from_out) {
  const size_t len = history.size();
  if (max_tokens == 0 || limits.min_ngram == 0) return {};
  const size_t lowest = len > limits.window ? len - limits.window : 0;
  for (size_t n = std::min(limits.max_ngram, len > 0 ? len - 1 : 0); n >= limits.min_ngram; --n) {
    const int* key = history.data() + (len - n);
    // Latest occurrence first (an occurrence ending before the key's own
    // start); one so late that its continuation runs into the key itself
    // (a token repeating, a short cycle) gives fewer tokens, so an earlier
    // one with a whole continuation wins over it.
    size_t best_from = 0, best_take = 0;
    for (size_t i = len - n; i-- > lowest;) {
      if (history[i + n - 1] != key[n - 1] || !std::equal(key, key + n - 1, history.data() + i)) {
        continue;
      }
      const size_t from = i + n, take = std::min(max_tokens, len - from);
      if (take > best_take) best_from = from, best_take = take;
      if (take == max_tokens) break;
    }
    if (best_take > 0) {
      if (from_out != nullptr) *from_out = best_from;
      return Slice(history, best_from, best_take);
    }
  }
  return {};
}

std::vector<int> LookupDrafter::Guess(std::span<const int> history, size_t max_tokens) {
  const size_t len = history.size();
  if (max_tokens == 0 || limits_.min_ngram == 0 || len < limits_.min_ngram + 1) return {};
  if (aligned_ && len > at_len_) {
    // Where the passage has got to if the reply followed it token for token.
    const size_t expected = source_ + (len - at_len_);
    const size_t n = limits_.min_ngram;
    const int* key = history.data() + (len - n);
    // The passage's own next place, then a little further on; each
    // occurrence must end before the tail itself.
    const size_t last = std::min(expected + kRealignTokens, len - 1);
    for (size_t from = expected; from <= last; ++from) {
      if (from < n) continue;
      if (!std::equal(key, key + n, history.data() + (from - n))) continue;
      const size_t take = std::min(max_tokens, len - from);
      source_ = from;
      at_len_ = len;
      return Slice(history, from, take);
    }
  }
  // Elsewhere. Nothing found keeps the passage: a few tokens on, past an
  // edit, the reply may agree with it again.
  size_t from = 0;
  std::vector<int> guess = LookupDraft(history, max_tokens, limits_, &from);
  if (!guess.empty()) {
    aligned_ = true;
    source_ = from;
    at_len_ = len;
  }
  return guess;
}

}  // namespace waste
