// Validation of /v1/chat/completions and /v1/completions bodies: the field
// checks that need no engine (messages shape, sampling options, switches),
// each failure an ApiError naming the field. Runs before a request queues.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api_error.h"
#include "json_text.h"

namespace waste::server {

// Completions a request may ask for (`n`, completions' `best_of`): each is
// generated in turn on the request's slot, so a fan-out wider than this is
// better sent as separate requests (they run on parallel slots).
inline constexpr int kMaxChoices = 128;

// Sampling and length fields shared by both POST routes.
struct SamplingRequest {
  int n = 1;                           // completions to return (1..kMaxChoices)
  float temperature = 0.0f;
  std::optional<float> top_p;
  std::optional<int> top_k;
  std::optional<uint64_t> seed;
  std::optional<uint64_t> max_tokens;  // requested cap, before the context clamp
  std::vector<std::string> stops;      // non-empty strings only
  float presence_penalty = 0.0f;       // -2..2, OpenAI's range
  float frequency_penalty = 0.0f;      // -2..2
  std::vector<std::pair<int, float>> logit_bias;  // token id (not checked against the vocabulary here), -100..100
};

// `allow_zero_max`: max_tokens 0 is accepted (a completions request that
// echoes its prompt only to score it).
std::optional<ApiError> ParseSampling(const Json& body, SamplingRequest* out,
                                      bool allow_zero_max = false);

// Token log-probabilities asked for (docs/SERVER.md, "Log probabilities").
// Chat: `logprobs` (boolean) and `top_logprobs` (0..20, needs logprobs).
// Completions: `logprobs` (0..20 alternatives; null = none) and `echo`.
struct LogprobsRequest {
  bool on = false;
  int top = 0;
  bool echo = false;  // completions: the prompt comes back, scored when `on`
  // Chat under the Responses API: only the tokens whose text went into the
  // message (ChatTurn::last_token_in_content), not reasoning, tool calls or
  // what a stop string cut.
  bool message_text_only = false;
};
inline constexpr int kMaxTopLogprobs = 20;
std::optional<ApiError> ParseLogprobs(const Json& body, bool chat, LogprobsRequest* out);

// Completions' `best_of` (1..kMaxChoices, at least `n`; default `n`): the
// completions generated, of which the `n` with the highest mean token
// log-probability are returned. More than `n` cannot be streamed (the best
// are known only once all have ended).
std::optional<ApiError> ParseBestOf(const Json& body, int n, bool stream, int* best_of);

// OpenAI fields this server does not implement and must not silently
// ignore: completions `suffix`, `response_format`.
// 400 with the field as `param` and code "unsupported_parameter".
std::optional<ApiError> RefuseUnsupported(const Json& body, bool chat);

// `stream` must be a boolean when present.
std::optional<ApiError> ParseStream(const Json& body, bool* stream, bool* include_usage);

// §3.3.5: every message an object with a known role, content a string,
// array of typed parts or null, tool_calls only on assistants and well
// formed. Image parts are refused (vision_disabled) unless `vision`.
std::optional<ApiError> ValidateMessages(const Json& body, bool vision = false);

// `tools`, `tool_choice` and `response_format` as OpenAI accepts them:
// every tool an object with a `function` object that has a non-empty
// `name` (`type`, when given, "function"); tool_choice "none", "auto",
// "required" (which needs a tool) or {"type": "function", "function":
// {"name": N}} naming a declared tool; response_format an object whose
// type is text, json_object or json_schema. Both chat formats run it
// before deciding what they can express.
std::optional<ApiError> ValidateToolOptions(const Json& body);

// `continue_final_message` (vLLM's name; Anthropic's "prefill"): true =
// the last message is an assistant's, left open, and the reply continues
// its text instead of starting a turn of its own. It must be a boolean,
// the last message an assistant's without tool calls, and no tool call may
// be forced nor response_format constrain the reply (both would have the
// continuation start a new shape mid-text). Both renderers run it.
std::optional<ApiError> ParseContinuation(const Json& body, bool* continue_final);

// Thinking resolution (reasoning_effort / thinking_effort / reasoning.effort
// and `thinking`). `effort` is set for low/high/max.
std::optional<ApiError> ResolveThinking(const Json& body, bool default_on, bool* thinking,
                                        std::string* effort);

// `reasoning.max_tokens` (OpenRouter's name; the Messages API's
// `thinking.budget_tokens` arrives as it): the most tokens the think
// channel may take before the server closes it (thinking_budget.h). A
// non-negative integer; -1 when the request does not say.
std::optional<ApiError> ParseThinkingBudget(const Json& body, int* budget);

// `prediction` (OpenAI's predicted outputs): {"type": "content", "content":
// a string or an array of {"type": "text", "text"} parts}, the text the
// reply is expected to be (an editor sends the file it asks to have
// rewritten). Drafting guesses from it (docs/DRAFTING.md); it never changes
// the reply. `text` is empty when the request has none.
std::optional<ApiError> ParsePrediction(const Json& body, std::string* text);

// The function object of a tool call: call.function when present, else the call.
const Json& CallFunction(const Json& call);

}  // namespace waste::server
