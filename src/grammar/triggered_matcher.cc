// TriggeredGrammarMatcher: a grammar that applies only after a trigger
// token (a "lazy" grammar), for output that is free until it opens a
// structure that must be exact (a tool call).
#include <algorithm>

#include "waste/grammar.h"

namespace waste {

TriggeredGrammarMatcher::TriggeredGrammarMatcher(std::shared_ptr<const Grammar> grammar,
                                                 std::shared_ptr<const Vocabulary> vocab,
                                                 std::vector<int> triggers)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), triggers_(std::move(triggers)) {
  if (triggers_.empty()) Activate();
}

TriggeredGrammarMatcher::~TriggeredGrammarMatcher() = default;

void TriggeredGrammarMatcher::Activate() noexcept {
  try {
    active_ = std::make_unique<GrammarMatcher>(grammar_, vocab_);
  } catch (...) {
    active_.reset();  // out of memory: stay unconstrained rather than fail the token
    return;
  }
  active_->SetClosing(closing_);
  active_->SetMaxBytesToEnd(max_dist_);
  if (!end_tokens_.empty()) active_->SetEndTokens(end_tokens_);
  ++activations_;
}

bool TriggeredGrammarMatcher::Allows(int token) noexcept {
  return active_ ? active_->Allows(token) : true;
}

void TriggeredGrammarMatcher::Mask(std::span<float> logits) noexcept {
  if (active_) active_->Mask(logits);
}

void TriggeredGrammarMatcher::Accept(int token) noexcept {
  if (active_) {
    active_->Accept(token);
    // A lazy grammar that is complete re-arms: the output is free again
    // until the next trigger. An eager one (no triggers) stays to the end.
    if (!triggers_.empty() && active_->MustEnd()) active_.reset();
    return;
  }
  if (std::find(triggers_.begin(), triggers_.end(), token) != triggers_.end()) Activate();
}

int TriggeredGrammarMatcher::MinBytesToEnd() const noexcept {
  return active_ ? active_->MinBytesToEnd() : 0;
}

void TriggeredGrammarMatcher::SetClosing(bool closing) noexcept {
  closing_ = closing;
  if (active_) active_->SetClosing(closing);
}

void TriggeredGrammarMatcher::SetMaxBytesToEnd(int limit) noexcept {
  max_dist_ = limit;
  if (active_) active_->SetMaxBytesToEnd(limit);
}

void TriggeredGrammarMatcher::SetEndTokens(std::vector<int> ids) noexcept {
  end_tokens_ = std::move(ids);  // a move: nothing to allocate
  if (active_) active_->SetEndTokens(end_tokens_);
}

}  // namespace waste
