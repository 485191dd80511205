// Constrained replies for the chat route: response_format json_object /
// json_schema becomes a grammar over the whole XTML reply (an optional
// think channel, then the response channel holding exactly one JSON value,
// then <|end_of_msg|>), enforced token by token by the library's
// BudgetedGrammar (waste/grammar.h). A token budget keeps it honest: when the tokens left
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

// The reply grammar for a prepared XTML chat, or null when the request
// asks for no constraint. A schema we cannot compile is a 400 naming the
// keyword (param response_format). `triggers` (empty = from the start):
// the tokens after which the grammar applies (tool_choice auto: each call
// the model opens is constrained, the rest of the reply is free).
std::optional<ApiError> ReplyGrammar(const PreparedChat& chat, const ChatFormat& format,
                                     std::shared_ptr<const Grammar>* out,
                                     std::vector<int>* triggers);

}  // namespace waste::server
