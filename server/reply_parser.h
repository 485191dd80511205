// Generated tokens -> an assistant message (reasoning, content, tool
// calls). Structure is decided by token id only: a token is a marker iff
// its id is one of the format's marker ids, so text that merely spells
// "<|sep|>" stays text.
//
// XTML: a small state machine over <|open|>HEADER<|sep|> and
// <|close|>NAME<|sep|> with an element stack; <think> text is reasoning,
// <response> (and anything unknown) is content, <tools>/<call> hold calls
// whose <argument key= type=> or <json> children become the arguments.
// chat.json: every piece is content until the stop id.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "json_text.h"

namespace waste::server {

struct XtmlMarkers {
  int end_of_msg = -1, open = -1, close = -1, sep = -1;
};

struct ParsedCall {
  std::string id;            // unique per server ("call_<hex>") unless the model wrote one
  int index = 0;             // the XTML index (ordering only)
  std::string name;
  Json arguments = Json::object();  // typed arguments, first-insertion order
  std::optional<std::string> json_block;
  // Generation ended (without the end marker: the length limit) inside
  // this call, before its element closed.
  bool cut = false;
  // The OpenAI `arguments` string: valid JSON, except for a call that was
  // cut, which carries the <json> text generated so far (as OpenAI returns
  // a call cut by max_tokens, with finish_reason "length").
  std::string ArgumentsString() const;
};

class ReplyParser {
 public:
  // XTML; `think_channel`: the prompt opened <think>.
  ReplyParser(XtmlMarkers markers, bool think_channel);
  // chat.json: plain text until `stop_id`.
  explicit ReplyParser(int stop_id);

  void Push(int id, std::string_view piece);
  // End of generation (also after the end marker).
  void Finish();

  bool done() const { return done_; }
  std::string& content() { return content_; }
  const std::string& reasoning() const { return reasoning_; }
  const std::vector<ParsedCall>& calls() const { return calls_; }

 private:
  void Emit(std::string_view text);
  void OpenElement(const std::string& header);
  void CloseElement(const std::string& header);
  void CloseArgument();
  void CloseJson();

  bool xtml_ = true;
  XtmlMarkers m_;
  int stop_id_ = -1;
  bool done_ = false;
  std::string reasoning_, content_;
  std::vector<ParsedCall> calls_;
  std::vector<std::string> stack_;
  std::optional<std::string> pending_;
  bool pending_is_open_ = false;
  std::string arg_key_, arg_type_, arg_text_;
  bool json_active_ = false;
  bool call_open_ = false;  // the last call's element has not closed
  std::string json_text_;
};

// "call_" + 24 random lowercase hex digits.
std::string NewCallId();

}  // namespace waste::server
