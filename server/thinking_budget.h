// A cap on the think channel of an XTML reply (`reasoning.max_tokens`, the
// Messages API's `thinking.budget_tokens`, `serve --reasoning-budget`):
// once the model has spent the budget inside <think>, the next tokens are
// forced to close it and open the response (<|close|>think<|sep|>
// <|open|>response<|sep|>), so the model answers with what it has thought
// so far instead of running out of max_tokens mid-thought.
//
// It only waits for a clean point: never inside an element the model
// opened within its reasoning, nor between a marker and its <|sep|>
// (closing there would leave malformed markup). A model that closes its
// think channel on its own first is never touched. Composes with the
// reply's other constraint (a response_format or tool-call grammar): a
// token must satisfy both.
#pragma once

#include <span>
#include <vector>

#include "reply_parser.h"
#include "waste/grammar.h"

namespace waste::server {

class ThinkingBudget : public TokenConstraint {
 public:
  // `budget`: tokens the think channel may take (0: closed at once).
  // `close_ids`: the tokens that close it and open the response.
  // `inner`: the reply's other constraint, or null; not owned.
  ThinkingBudget(int budget, std::vector<int> close_ids, XtmlMarkers markers,
                 TokenConstraint* inner);

  bool Allows(int token) noexcept override;
  void Mask(std::span<float> logits) noexcept override;
  void Accept(int token) noexcept override;

  // The budget ran out and the server closed the channel (or is closing it).
  bool closed_early() const noexcept { return forced_ > 0; }
  // The think channel has ended (by the model or by the budget).
  bool done() const noexcept { return done_; }

 private:
  // The token the budget requires next, or -1 when the model is free.
  int Forced() const noexcept;

  int budget_;
  std::vector<int> close_ids_;
  XtmlMarkers markers_;
  TokenConstraint* inner_;
  int spent_ = 0;      // tokens generated inside the channel
  int depth_ = 0;      // elements the model opened inside it
  bool in_tag_ = false;  // between <|open|>/<|close|> and its <|sep|>
  size_t forced_ = 0;  // close_ids_ already emitted
  bool done_ = false;
};

}  // namespace waste::server
