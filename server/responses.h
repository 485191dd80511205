// POST /v1/responses, OpenAI's Responses API (what the Agents SDK and
// newer agent clients speak), served by the chat path: a request is
// translated into the chat completions body it means (responses_request.h),
// prepared and generated exactly as a chat request, and the chat reply is
// translated back here: the message, its reasoning and its tool calls
// become output items, and a stream's chat chunks become the Responses
// events (response.created ... response.output_text.delta ...
// response.completed). docs/SERVER.md, "The Responses API", says what is
// and is not taken.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "json_text.h"

namespace waste::server {

// What a Response object repeats of its request, with the defaults filled
// (temperature 0: this server's greedy default).
struct ResponseHeader {
  std::string id;           // resp_<24 hex>
  int64_t created_at = 0;
  std::string model;
  Json echo;                // instructions, max_output_tokens, tools, ... as the API echoes them
  bool text_logprobs = false;  // output_text parts carry `logprobs` (WantsTextLogprobs)
};
ResponseHeader NewResponseHeader(const Json& body, const std::string& model, int64_t now);

// The Response object of a finished blocking chat.completion body.
Json ResponseFromChat(const ResponseHeader& h, const Json& chat_completion);

// A chat stream's events ("data: {chunk}\n\n", "data: [DONE]\n\n") in,
// Responses events ("event: TYPE\ndata: {...}\n\n") out, each with its
// sequence_number. Start() gives response.created and response.in_progress;
// the chat stream's end (its finish and usage chunks, then [DONE]) closes
// the open items and gives response.completed (or response.incomplete when
// cut by max_output_tokens); a chat error event becomes an `error` event.
// With text logprobs, each output_text delta carries the entries of its
// tokens (an entry the chat stream sent ahead of its text waits for it),
// and the done events and the part carry them all.
class ResponsesStream {
 public:
  explicit ResponsesStream(ResponseHeader header) : h_(std::move(header)) {}
  std::vector<std::string> Start();
  std::vector<std::string> OnChatEvent(const std::string& sse);
  // The last `n` events returned were not sent (the stream is closing):
  // their numbers are given back, so whatever is sent next (a shutdown's
  // last words) follows the last event the client got.
  void Unsent(size_t n) { sequence_ -= static_cast<int64_t>(n); }

 private:
  enum class Open { kNone, kReasoning, kMessage };
  std::string Event(Json event);
  Json Snapshot(const std::string& status) const;
  void OpenText(Open kind, std::vector<std::string>* out);
  void CloseText(std::vector<std::string>* out);
  void OnDelta(const Json& delta, std::vector<std::string>* out);
  void Finish(std::vector<std::string>* out);

  ResponseHeader h_;
  int64_t sequence_ = 0;
  Json items_ = Json::array();  // the output items in order, open ones included
  Open open_ = Open::kNone;     // the reasoning or message item being written
  size_t open_index_ = 0;       // its place in items_
  std::string text_;            // its text so far
  Json text_logprobs_ = Json::array();     // the open message's token entries so far
  Json pending_logprobs_ = Json::array();  // entries that came before their text
  std::vector<size_t> calls_;   // items_ index of each chat tool-call index
  std::string finish_reason_;
  Json usage_;
  bool done_ = false;
};

}  // namespace waste::server
