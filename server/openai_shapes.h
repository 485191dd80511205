// The OpenAI response objects the server writes: chat completions (blocking
// and stream chunks), text completions, usage and the `waste` counters.
#pragma once

#include <cstdint>
#include <string>

#include "json_text.h"
#include "waste/waste.h"

namespace waste::server {

struct ReplyHeader {
  std::string id;       // chatcmpl-<24 hex> / cmpl-<24 hex>
  int64_t created = 0;  // unix seconds
  std::string model;
};

// "<prefix>-" + 24 random lowercase hex digits.
std::string NewResponseId(const std::string& prefix);

Json Usage(int prompt_tokens, int completion_tokens);
// Engine counters (cumulative since open) and this request's wall time.
Json WasteCounters(const Stats& stats, double ms);

Json ChatCompletion(const ReplyHeader& h, const Json& message, const std::string& finish_reason,
                    const Json& usage, const Json& waste);
// One chat.completion.chunk with a delta; `finish_reason` null or a string.
Json DeltaChunk(const ReplyHeader& h, const Json& delta, const Json& finish_reason);
// choices: [] chunks: the usage chunk and the trailing waste chunk.
Json UsageChunk(const ReplyHeader& h, const Json& usage);
Json WasteChunk(const ReplyHeader& h, const Json& waste);
// One server-sent event: "data: <json>\n\n".
std::string SseEvent(const Json& chunk);

}  // namespace waste::server
