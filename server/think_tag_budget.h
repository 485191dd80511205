// A cap on the reasoning of a model that thinks in text tags (DeepSeek-R1,
// Kimi-K2-Thinking: a reply opening with <think>, reasoning up to
// </think>; the built-in chat formats, docs/SERVER.md): the same requests
// as XTML's ThinkingBudget (`reasoning.max_tokens`, `thinking.budget_tokens`,
// `serve --reasoning-budget`). Once the model has spent the budget inside
// <think>, the next tokens are forced to `close_ids` (the close tag and a
// blank line, as these models write them) and the model answers with what
// it has thought so far.
//
// The tags are found in the tokens' text, as the reply parser finds them
// (so whether the tokenizer has them as special tokens or not): a reply
// that does not open with the tag is never touched, nor one whose model
// closed the tag first. Composes with the reply's other constraint (the
// tool-call grammar): a token must satisfy both, and where the other
// forbids the forced token the budget wins.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "waste/grammar.h"

namespace waste::server {

class ThinkTagBudget : public TokenConstraint {
 public:
  // `budget`: tokens the reasoning may take (0: closed at once, right after
  // the open tag). `piece`: a token's text. `inner`: the other constraint
  // or null; not owned.
  ThinkTagBudget(int budget, std::string think_open, std::string think_close,
                 std::vector<int> close_ids, std::function<std::string(int)> piece,
                 TokenConstraint* inner);

  bool Allows(int token) noexcept override;
  void Mask(std::span<float> logits) noexcept override;
  void Accept(int token) noexcept override;

  // The budget ran out and the server closed the reasoning (or is closing it).
  bool closed_early() const noexcept { return forced_ > 0; }
  // The reasoning has ended, or there is none (by the model or the budget).
  bool done() const noexcept { return state_ == State::kDone; }

 private:
  int Forced() const noexcept;

  enum class State { kStart, kThinking, kDone };
  int budget_;
  std::string open_, close_;
  std::vector<int> close_ids_;
  std::function<std::string(int)> piece_;
  TokenConstraint* inner_;
  State state_ = State::kStart;
  std::string text_;   // kStart: the reply so far; kThinking: its last bytes
  int spent_ = 0;      // tokens generated inside the reasoning
  size_t forced_ = 0;  // close_ids_ already emitted
};

}  // namespace waste::server
