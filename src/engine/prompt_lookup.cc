#include "engine/prompt_lookup.h"

#include <algorithm>

namespace waste {

std::vector<int> LookupDraft(std::span<const int> history, size_t max_tokens,
                             const LookupLimits& limits) {
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
      return std::vector<int>(history.begin() + static_cast<std::ptrdiff_t>(best_from),
                              history.begin() + static_cast<std::ptrdiff_t>(best_from + best_take));
    }
    if (n == limits.min_ngram) break;
  }
  return {};
}

}  // namespace waste
