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
// `from` (optional): where in the history the guesses start.
std::vector<int> LookupDraft(std::span<const int> history, size_t max_tokens,
                             const LookupLimits& limits = {}, size_t* from = nullptr);

// LookupDraft that stays with the passage it is copying. A reply that
// copies its context (a file rewritten with a few edits) repeats short
// n-grams of it all over (")", "return", an indentation run): the latest
// occurrence of the tail is often another place of the file. So the
// drafter remembers where its last guesses came from and, while the reply
// still agrees with that passage (an edit that replaced a few tokens
// included), goes on from there: first the place the passage has reached,
// then a little further on (text the reply skipped or the edit replaced),
// and only then the latest occurrence anywhere.
class LookupDrafter {
 public:
  explicit LookupDrafter(const LookupLimits& limits = {}) : limits_(limits) {}
  std::vector<int> Guess(std::span<const int> history, size_t max_tokens);
  // The reply that starts at history index `at_len` is expected to copy the
  // history from index `source` on (a prediction of the reply that the host
  // sent, GenParams::draft_prediction): the first guesses come from there.
  // As for any passage, the tail is checked against the tokens before the
  // expected place, so the token(s) before `source` should be those before
  // `at_len` (the prompt's last).
  void Follow(size_t source, size_t at_len) {
    aligned_ = true;
    source_ = source;
    at_len_ = at_len;
  }

  // How far past the passage's expected place an occurrence of the tail is
  // still taken as the same passage.
  static constexpr size_t kRealignTokens = 32;

 private:
  LookupLimits limits_;
  bool aligned_ = false;
  size_t source_ = 0;  // history index the last guesses started at
  size_t at_len_ = 0;  // the history's length then
};

}  // namespace waste
