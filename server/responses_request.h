// POST /v1/responses, the request side (the reply side: responses.h): a
// Responses request as the chat completions body it means — input items ->
// messages, flat function tools -> chat tools, text.format ->
// response_format, max_output_tokens, reasoning.effort — and the chat
// checks' refusals put back in the Responses names.
#pragma once

#include <optional>

#include "api_error.h"
#include "json_text.h"

namespace waste::server {

// The chat completions body a Responses request means, or the 400 naming
// the Responses field that cannot be served (param as the client sent it:
// "input[2].call_id", "tools[0].type", "previous_response_id").
std::optional<ApiError> ResponsesToChat(const Json& body, Json* chat);

// Whether the request asks for the log probabilities of the message's text
// (`include: ["message.output_text.logprobs"]`, or `top_logprobs` > 0):
// then each output_text part carries `logprobs`.
bool WantsTextLogprobs(const Json& body);

// A refusal by the chat checks of a translated request, put in the
// Responses API's names: max_tokens -> max_output_tokens, response_format
// -> text.format, reasoning_effort -> reasoning.effort, tools[i].function.X
// -> tools[i].X, and a message's fault -> param "input" (the message text
// keeps the index in the conversation the items make, instructions first).
void RenameChatFields(ApiError* e);

}  // namespace waste::server
