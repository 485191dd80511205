// `waste run --grammar FILE` / `--json-schema FILE`: the generated text is
// constrained token by token by the library's grammar engine
// (waste/grammar.h). The grammar is compiled before the model opens (a bad
// file fails fast); the matcher needs the model's vocabulary. A token budget
// (-n) keeps the output complete: when the tokens left barely cover the
// shortest way to the end, only tokens that bring the end closer are
// allowed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "options.h"
#include "waste/grammar.h"
#include "waste/waste.h"

namespace waste::cli {

// Null grammar when neither option was given; kIo/kFormat/kUnsupported
// with the file named otherwise.
Result<std::shared_ptr<const Grammar>> LoadGrammarOption(const Options& o) noexcept;

class BudgetedGrammar : public TokenConstraint {
 public:
  // `end_ids`: tokens that end the output once the grammar is complete
  // (end of sequence, the chat template's end of turn).
  BudgetedGrammar(const Engine& engine, std::shared_ptr<const Grammar> grammar,
                  std::vector<int> end_ids, int max_tokens);
  bool Allows(int token) noexcept override { return matcher_.Allows(token); }
  void Mask(std::span<float> logits) noexcept override { matcher_.Mask(logits); }
  void Accept(int token) noexcept override;
  bool complete() const { return matcher_.CanEnd(); }

 private:
  void UpdateClosing();
  GrammarMatcher matcher_;
  int max_tokens_;
  int used_ = 0;
};

}  // namespace waste::cli
