// Validation of /v1/chat/completions and /v1/completions bodies: the field
// checks that need no engine (messages shape, sampling options, switches),
// each failure an ApiError naming the field. Runs before a request queues.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api_error.h"
#include "json_text.h"

namespace waste::server {

// Sampling and length fields shared by both POST routes.
struct SamplingRequest {
  float temperature = 0.0f;
  std::optional<float> top_p;
  std::optional<int> top_k;
  std::optional<uint64_t> seed;
  std::optional<uint64_t> max_tokens;  // requested cap, before the context clamp
  std::vector<std::string> stops;      // non-empty strings only
};

std::optional<ApiError> ParseSampling(const Json& body, SamplingRequest* out);

// `stream` must be a boolean when present.
std::optional<ApiError> ParseStream(const Json& body, bool* stream, bool* include_usage);

// §3.3.5: every message an object with a known role, content a string,
// array of typed parts or null, tool_calls only on assistants and well
// formed. Image parts are refused (vision_disabled) unless `vision`.
std::optional<ApiError> ValidateMessages(const Json& body, bool vision = false);

// Thinking resolution (reasoning_effort / thinking_effort / reasoning.effort
// and `thinking`). `effort` is set for low/high/max.
std::optional<ApiError> ResolveThinking(const Json& body, bool default_on, bool* thinking,
                                        std::string* effort);

// The function object of a tool call: call.function when present, else the call.
const Json& CallFunction(const Json& call);

}  // namespace waste::server
