// `waste run --grammar FILE` / `--json-schema FILE`: the generated text is
// constrained token by token by the library's grammar engine
// (waste/grammar.h). The grammar is compiled before the model opens (a bad
// file fails fast); the matcher (waste::BudgetedGrammar, so the token
// budget -n still ends the output complete) needs the model's vocabulary.
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

}  // namespace waste::cli
