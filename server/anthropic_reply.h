// POST /v1/messages, the reply side (the request side:
// anthropic_request.h): a chat reply as Anthropic's Message object —
// reasoning as a thinking block, the text as a text block, each tool call
// as a tool_use block with its input as an object — and a chat stream's
// chunks as the Messages events (message_start, content_block_start /
// _delta / _stop, message_delta, message_stop). docs/SERVER.md, "The
// Anthropic Messages API".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "json_text.h"

namespace waste::server {

struct MessagesHeader {
  std::string id;         // msg_<24 hex>
  std::string model;
  int prompt_tokens = 0;  // the prompt's size, for message_start (before prefix reuse is known)
};
MessagesHeader NewMessagesHeader(const std::string& model, int prompt_tokens);

// Chat usage -> Messages usage: input_tokens are the prompt tokens read
// (not those resumed from a restore point), cache_read_input_tokens those
// resumed, cache_creation_input_tokens 0 (keeping a point costs nothing).
Json MessagesUsage(const Json& chat_usage);

// A chat finish_reason (and the stop string that fired, if any) as
// stop_reason: "end_turn", "max_tokens", "stop_sequence" or "tool_use".
std::string StopReason(const std::string& finish_reason, const std::string& stop_string);

// GET /v1/models for Anthropic's clients (they send `anthropic-version`):
// the model object (type, id, display_name, created_at in RFC 3339 UTC —
// here the server's start —, lifecycle "active", max_input_tokens and
// max_tokens the context, capabilities and line null: not known), and the
// list of the one model served, with Anthropic's paging fields.
Json AnthropicModel(const std::string& id, int64_t created_unix, int64_t ctx_tokens);
Json AnthropicModelList(const std::string& id, int64_t created_unix, int64_t ctx_tokens);

// The Message object of a finished blocking chat.completion body.
Json MessageFromChat(const MessagesHeader& h, const Json& chat_completion);

// A chat stream's events in ("data: {chunk}\n\n", "data: [DONE]\n\n"),
// Messages events out ("event: TYPE\ndata: {...}\n\n"). Start() gives
// message_start. Reasoning and text stream as thinking_delta and
// text_delta in blocks of their own; tool_use blocks are sent whole when
// their arguments are (the chat stream sends a call's arguments at the
// end); [DONE] closes the open block and gives message_delta (stop
// reason, final usage) and message_stop. A chat error event becomes an
// `error` event and ends the stream.
class MessagesStream {
 public:
  explicit MessagesStream(MessagesHeader header) : h_(std::move(header)) {}
  std::vector<std::string> Start();
  std::vector<std::string> OnChatEvent(const std::string& sse);
  // Events not sent (the stream is closing): Messages events carry no
  // sequence numbers, so there is nothing to give back.
  void Unsent(size_t) {}

 private:
  enum class Open { kNone, kThinking, kText };
  struct Call {
    std::string id, name, arguments;
  };
  static std::string Event(const Json& event);
  void OpenBlock(Open kind, std::vector<std::string>* out);
  void CloseBlock(std::vector<std::string>* out);
  void Finish(std::vector<std::string>* out);

  MessagesHeader h_;
  Open open_ = Open::kNone;
  int next_index_ = 0;  // the next content block's index
  std::vector<Call> calls_;
  std::string finish_reason_, stop_string_;
  Json usage_;
  bool done_ = false;
};

}  // namespace waste::server
