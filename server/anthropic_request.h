// POST /v1/messages, Anthropic's Messages API, the request side (the reply
// side: anthropic_reply.h). Editors and agents written for Claude speak
// it; like the Responses API it is served by the chat path: a Messages
// request is translated into the chat completions body it means — system
// blocks -> a system message, content blocks (text, image, tool_use,
// tool_result) -> chat messages and tool calls, a last assistant message
// -> continue_final_message (a prefill the reply continues), input_schema
// tools -> function tools, tool_choice, thinking, stop_sequences -> stop — and the
// chat checks' refusals are put back in the Messages names.
// docs/SERVER.md, "The Anthropic Messages API".
#pragma once

#include <optional>

#include "api_error.h"
#include "json_text.h"

namespace waste::server {

// The chat completions body a Messages request means, or the 400 naming
// the Messages field that cannot be served (param as the client sent it:
// "messages[1].content[0].type", "tools[0].input_schema").
std::optional<ApiError> MessagesToChat(const Json& body, Json* chat);

// A refusal by the chat checks of a translated request, in the Messages
// names: max_tokens stays, stop -> stop_sequences, tools[i].function.X ->
// tools[i].X (parameters -> input_schema), thinking -> thinking.type.
void RenameChatFieldsForMessages(ApiError* e);

// An error body in Anthropic's shape: {"type": "error", "error": {"type",
// "message"}}, the type from the status (invalid_request_error,
// authentication_error, not_found_error, request_too_large,
// rate_limit_error, api_error, overloaded_error). `param` and `code` are
// kept beside them for people reading the body.
Json AnthropicErrorBody(const ApiError& e);

}  // namespace waste::server
