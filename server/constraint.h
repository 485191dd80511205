// Constrained replies for the chat route: response_format json_object /
// json_schema becomes a grammar over the whole XTML reply (an optional
// think channel, then the response channel holding exactly one JSON value,
// then <|end_of_msg|>), enforced token by token by the library's
// GrammarMatcher. A token budget keeps it honest: when the tokens left
// barely cover the shortest valid ending, only tokens that bring the end
// closer are allowed, so even a random-weight model returns valid JSON.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api_error.h"
#include "prepare.h"
#include "waste/grammar.h"

namespace waste::server {

class BudgetedConstraint : public TokenConstraint {
 public:
  // `triggers` empty: the grammar applies from the first token; else it
  // applies after each trigger token (TriggeredGrammarMatcher).
  BudgetedConstraint(std::shared_ptr<const Grammar> grammar,
                     std::shared_ptr<const Vocabulary> vocab, int max_tokens,
                     std::vector<int> triggers = {});
  bool Allows(int token) noexcept override { return matcher_.Allows(token); }
  void Mask(std::span<float> logits) noexcept override { matcher_.Mask(logits); }
  void Accept(int token) noexcept override;
  const TriggeredGrammarMatcher& matcher() const { return matcher_; }

 private:
  void UpdateClosing();
  TriggeredGrammarMatcher matcher_;
  int max_tokens_;
  int used_ = 0;
};

// The reply grammar for a prepared XTML chat, or null when the request
// asks for no constraint. A schema we cannot compile is a 400 naming the
// keyword (param response_format). `triggers` (empty = from the start):
// the tokens after which the grammar applies (tool_choice auto: each call
// the model opens is constrained, the rest of the reply is free).
std::optional<ApiError> ReplyGrammar(const PreparedChat& chat, const ChatFormat& format,
                                     std::shared_ptr<const Grammar>* out,
                                     std::vector<int>* triggers);

}  // namespace waste::server
