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
// The `waste` object of a reply: this request's engine counters (`after`
// minus `before`, the engine's cumulative Stats read around the request)
// and its wall time in ms. docs/SERVER.md, "The waste object".
Json WasteCounters(const Stats& before, const Stats& after, double ms);

// One entry of a chat.completion's `choices` (`logprobs` null when not asked).
Json ChatChoice(int index, const Json& message, const std::string& finish_reason,
                Json logprobs = nullptr);
// `choices`: ChatChoice entries, index 0 first.
Json ChatCompletion(const ReplyHeader& h, Json choices, const Json& usage, const Json& waste);
// One chat.completion.chunk with a delta for choice `index`; `finish_reason`
// null or a string.
Json DeltaChunk(const ReplyHeader& h, const Json& delta, const Json& finish_reason, int index = 0);
// A choice's last chunk: an empty delta and the finish_reason; the last
// choice's also carries the request's `waste` object (null `waste`: none).
Json FinishChunk(const ReplyHeader& h, const std::string& finish_reason, const Json& waste,
                 int index = 0);
// With stream_options.include_usage only: the chunk after the finish chunk
// whose choices are [] and which carries `usage` (OpenAI's shape; every
// other chunk of such a stream then has "usage": null, see WithNullUsage).
// `object`: "chat.completion.chunk" or "text_completion".
Json UsageChunk(const ReplyHeader& h, const Json& usage,
                const char* object = "chat.completion.chunk");
Json WithNullUsage(Json chunk);
// One text_completion chunk of a streamed /v1/completions reply, for choice `index`.
Json TextChunk(const ReplyHeader& h, const std::string& text, const Json& finish_reason,
               int index = 0);
// One server-sent event: "data: <json>\n\n".
std::string SseEvent(const Json& chunk);
// A chat stream's event read back, as the translators of other APIs
// (responses.cc, anthropic_reply.cc) take it: kDone for "data: [DONE]";
// kError for an error event (`error`: its object); kChunk for a chunk
// (`usage`: its usage object or null; `choice`: its first choice or null);
// kOther for anything else.
struct ChatStreamEvent {
  enum class Kind { kOther, kDone, kError, kChunk } kind = Kind::kOther;
  Json error, usage, choice;
};
ChatStreamEvent ReadChatStreamEvent(const std::string& sse);

}  // namespace waste::server
