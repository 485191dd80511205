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

Json WasteCounters(const Stats& s, double ms) {
  uint64_t all = s.experts_hit + s.experts_missed;
  return {{"tokens_generated", s.tokens_generated},
          {"experts_hit", s.experts_hit},
          {"experts_missed", s.experts_missed},
          {"expert_hit_rate", all ? Json(static_cast<double>(s.experts_hit) / static_cast<double>(all))
                                  : Json(nullptr)},
          {"bytes_read", s.bytes_read},
          {"direct_io", s.direct_io},
          {"ms", std::round(ms * 10.0) / 10.0}};
}

Json ChatCompletion(const ReplyHeader& h, const Json& message, const std::string& finish_reason,
                    const Json& usage, const Json& waste) {
  return {{"id", h.id},
          {"object", "chat.completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", Json::array({{{"index", 0},
                                    {"message", message},
                                    {"logprobs", nullptr},
                                    {"finish_reason", finish_reason}}})},
          {"usage", usage},
          {"waste", waste}};
}

Json DeltaChunk(const ReplyHeader& h, const Json& delta, const Json& finish_reason) {
  return {{"id", h.id},
          {"object", "chat.completion.chunk"},
          {"created", h.created},
          {"model", h.model},
          {"choices", Json::array({{{"index", 0},
                                    {"delta", delta},
                                    {"logprobs", nullptr},
                                    {"finish_reason", finish_reason}}})}};
}

Json UsageChunk(const ReplyHeader& h, const Json& usage) {
  return {{"id", h.id},          {"object", "chat.completion.chunk"}, {"created", h.created},
          {"model", h.model},    {"choices", Json::array()},          {"usage", usage}};
}

Json WasteChunk(const ReplyHeader& h, const Json& waste) {
  return {{"id", h.id},          {"object", "chat.completion.chunk"}, {"created", h.created},
          {"model", h.model},    {"choices", Json::array()},          {"waste", waste}};
}

std::string SseEvent(const Json& chunk) {
  return "data: " + Dump(chunk, JsonStyle::kSpaced) + "\n\n";
}

}  // namespace waste::server
