#include "openai_shapes.h"

#include <cmath>
#include <random>

namespace waste::server {

std::string NewResponseId(const std::string& prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kHex = "0123456789abcdef";
  std::string out = prefix + "-";
  for (int i = 0; i < 24; ++i) out.push_back(kHex[rng() & 15]);
  return out;
}

Json Usage(int prompt_tokens, int completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

Json WasteCounters(const Stats& before, const Stats& after, double ms) {
  auto diff = [](uint64_t a, uint64_t b) { return b >= a ? b - a : 0; };
  uint64_t hit = diff(before.experts_hit, after.experts_hit);
  uint64_t missed = diff(before.experts_missed, after.experts_missed);
  uint64_t all = hit + missed;
  return {{"tokens_generated", diff(before.tokens_generated, after.tokens_generated)},
          {"experts_hit", hit},
          {"experts_missed", missed},
          {"expert_hit_rate", all ? Json(static_cast<double>(hit) / static_cast<double>(all))
                                  : Json(nullptr)},
          {"bytes_read", diff(before.bytes_read, after.bytes_read)},
          {"draft_tokens", diff(before.draft_tokens, after.draft_tokens)},
          {"draft_accepted", diff(before.draft_accepted, after.draft_accepted)},
          {"direct_io", after.direct_io},
          {"ms", std::round(ms * 10.0) / 10.0}};
}

Json ChatChoice(int index, const Json& message, const std::string& finish_reason, Json logprobs) {
  return {{"index", index},
          {"message", message},
          {"logprobs", std::move(logprobs)},
          {"finish_reason", finish_reason}};
}

Json ChatCompletion(const ReplyHeader& h, Json choices, const Json& usage, const Json& waste) {
  return {{"id", h.id},
          {"object", "chat.completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", std::move(choices)},
          {"usage", usage},
          {"waste", waste}};
}

Json DeltaChunk(const ReplyHeader& h, const Json& delta, const Json& finish_reason, int index) {
  return {{"id", h.id},
          {"object", "chat.completion.chunk"},
          {"created", h.created},
          {"model", h.model},
          {"choices", Json::array({{{"index", index},
                                    {"delta", delta},
                                    {"logprobs", nullptr},
                                    {"finish_reason", finish_reason}}})}};
}

Json FinishChunk(const ReplyHeader& h, const std::string& finish_reason, const Json& waste,
                 int index) {
  Json c = DeltaChunk(h, Json::object(), finish_reason, index);
  if (!waste.is_null()) c["waste"] = waste;
  return c;
}

Json UsageChunk(const ReplyHeader& h, const Json& usage, const char* object) {
  return {{"id", h.id},       {"object", object},         {"created", h.created},
          {"model", h.model}, {"choices", Json::array()}, {"usage", usage}};
}

Json WithNullUsage(Json chunk) {
  chunk["usage"] = nullptr;
  return chunk;
}

Json TextChunk(const ReplyHeader& h, const std::string& text, const Json& finish_reason,
               int index) {
  return {{"id", h.id},
          {"object", "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", Json::array({{{"index", index},
                                    {"text", text},
                                    {"logprobs", nullptr},
                                    {"finish_reason", finish_reason}}})}};
}

std::string SseEvent(const Json& chunk) {
  return "data: " + Dump(chunk, JsonStyle::kSpaced) + "\n\n";
}

ChatStreamEvent ReadChatStreamEvent(const std::string& sse) {
  using Kind = ChatStreamEvent::Kind;
  ChatStreamEvent ev;
  const std::string prefix = "data: ";
  if (sse.rfind(prefix, 0) != 0) return ev;
  std::string data = sse.substr(prefix.size());
  while (!data.empty() && (data.back() == '\n' || data.back() == '\r')) data.pop_back();
  if (data == "[DONE]") {
    ev.kind = Kind::kDone;
    return ev;
  }
  Json chunk;
  std::string err;
  if (!ParseJson(data, &chunk, &err) || !chunk.is_object()) return ev;
  if (auto e = chunk.find("error"); e != chunk.end() && e->is_object()) {
    ev.kind = Kind::kError;
    ev.error = std::move(*e);
    return ev;
  }
  ev.kind = Kind::kChunk;
  if (auto u = chunk.find("usage"); u != chunk.end() && u->is_object()) ev.usage = std::move(*u);
  if (auto c = chunk.find("choices"); c != chunk.end() && c->is_array() && !c->empty() && (*c)[0].is_object()) {
    ev.choice = std::move((*c)[0]);
  }
  return ev;
}

}  // namespace waste::server
