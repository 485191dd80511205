// BudgetedGrammar (waste/grammar.h): a TriggeredGrammarMatcher whose
// closing mode follows the tokens left.
#include <algorithm>

#include "waste/grammar.h"

namespace waste {

BudgetedGrammar::BudgetedGrammar(std::shared_ptr<const Grammar> grammar,
                                 std::shared_ptr<const Vocabulary> vocab, int max_tokens,
                                 std::vector<int> triggers, std::vector<int> end_tokens)
    : matcher_(std::move(grammar), std::move(vocab), std::move(triggers)), max_tokens_(max_tokens) {
  if (!end_tokens.empty()) matcher_.SetEndTokens(std::move(end_tokens));
  UpdateClosing();
}

void BudgetedGrammar::UpdateClosing() noexcept {
  // Each step of closing mode shortens the shortest ending by at least one
  // byte, so the tokens left must cover it (plus one spare).
  const int left = max_tokens_ - used_;
  matcher_.SetClosing(left <= matcher_.MinBytesToEnd() + 1);
  // And no token may start what the tokens left after it cannot finish
  // (each closing step shortens the ending by a byte at least).
  matcher_.SetMaxBytesToEnd(std::max(0, left - 2));
}

void BudgetedGrammar::Accept(int token) noexcept {
  matcher_.Accept(token);
  ++used_;
  UpdateClosing();
}

bool BudgetedGrammar::complete() const noexcept {
  const GrammarMatcher* active = matcher_.matcher();
  return active == nullptr || active->CanEnd();
}

}  // namespace waste
