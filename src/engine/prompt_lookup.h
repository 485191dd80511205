// Prompt-lookup drafting (docs/DRAFTING.md): guesses of the next tokens
// taken from the text itself. When the last few tokens of the history
// occurred before, the tokens that followed that earlier occurrence are a
// likely continuation: an agent rewriting a file it was sent, a quoted
// passage, code that repeats its own identifiers. No draft model, no
// training; Generate verifies the guesses in one forward pass and keeps the
// ones its own sampling agrees with.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace waste {

struct LookupLimits {
  size_t min_ngram = 2;  // a single repeated token says little about the next
  size_t max_ngram = 4;
  // How far back the search goes (tokens): bounds the cost of a step at a
  // long context (a scan of the window per drafting step).
  size_t window = 1 << 16;
};

// The tokens that followed the latest earlier occurrence of the history's
// last n tokens, trying n from max_ngram down to min_ngram (a longer match
// is the better witness); at most `max_tokens` of them. An occurrence so
// late that fewer tokens follow it gives way to the latest one with
// `max_tokens` after it (a repeating token or short cycle), else to the one
// with the most. Empty when nothing matches.
std::vector<int> LookupDraft(std::span<const int> history, size_t max_tokens,
                             const LookupLimits& limits = {});

}  // namespace waste
