// Generated tokens -> an assistant message (reasoning, content, tool
// calls). Structure is decided by token id only: a token is a marker iff
// its id is one of the format's marker ids, so text that merely spells
// "<|sep|>" stays text.
//
// XTML: a small state machine over <|open|>HEADER<|sep|> and
// <|close|>NAME<|sep|> with an element stack; <think> text is reasoning,
// <response> (and anything unknown) is content, <tools>/<call> hold calls
// whose <argument key= type=> or <json> children become the arguments.
// chat.json and the built-in formats: every piece is content until the
// stop id; with think tags, a reply that opens (after whitespace) with the
// open tag is reasoning up to the close tag, content after it (the text
// convention of DeepSeek-R1 and Kimi-K2-Thinking; tags matched in the
// text, so a tag split over tokens or spelled in plain tokens counts).
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

// Kimi's tool-call markers (Kimi-K2, Kimi-Linear; docs/SERVER.md "Built-in
// chat formats"): a reply's calls are
// <|tool_calls_section_begin|> (<|tool_call_begin|>ID<|tool_call_argument_begin|>
// JSON<|tool_call_end|>)* <|tool_calls_section_end|>, ID "functions.NAME:N".
struct KimiToolMarkers {
  int section_begin = -1, section_end = -1, call_begin = -1, argument_begin = -1, call_end = -1;
  bool ok() const {
    return section_begin >= 0 && section_end >= 0 && call_begin >= 0 && argument_begin >= 0 &&
           call_end >= 0;
  }
};

// The function name in a Kimi call id: "functions.get_weather:0" ->
// "get_weather" (the part before the last ':', after the last '.').
std::string KimiCallName(std::string_view id);

class ReplyParser {
 public:
  // XTML; `think_channel`: the prompt opened <think>.
  ReplyParser(XtmlMarkers markers, bool think_channel);
  // chat.json: plain text until `stop_id`; reasoning between `think_open`
  // and `think_close` at the start (both empty: none).
  explicit ReplyParser(int stop_id, std::string think_open = {}, std::string think_close = {});

  // chat.json with Kimi's tool markers: calls parsed from them (text in a
  // calls section but outside a call is dropped). `max_calls` >= 0 keeps
  // that many (parallel_tool_calls false: 1).
  void EnableKimiTools(const KimiToolMarkers& markers, int max_calls = -1);

  void Push(int id, std::string_view piece);
  // End of generation (also after the end marker).
  void Finish();

  bool done() const { return done_; }
  std::string& content() { return content_; }
  const std::string& reasoning() const { return reasoning_; }
  const std::vector<ParsedCall>& calls() const { return calls_; }

 private:
  void Emit(std::string_view text);
  // chat.json text through the think tags (tag_state_).
  void EmitTagged(std::string_view text);
  void AppendReasoning(std::string_view text);
  void FlushHeld();
  // A Kimi tool marker (kimi_.ok()).
  void KimiMarker(int id);
  // Ends the Kimi call being read: its arguments are the text so far.
  void EndKimiCall();
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
  // chat.json's think tags: before the reply's first non-space text, in
  // the reasoning, past it (leading whitespace still dropped), or plain
  // content; `held_` is text that may still be (part of) a tag.
  enum class TagState { kStart, kThinking, kAfterThinking, kContent };
  std::string think_open_, think_close_;
  TagState tag_state_ = TagState::kContent;
  std::string held_;
  // Kimi tool calls: where the text goes (the call's id, its arguments).
  KimiToolMarkers kimi_;
  int max_calls_ = -1;
  bool in_calls_section_ = false;
  // (kDropped: a call past max_calls, its text swallowed up to its end.)
  enum class KimiPhase { kNone, kId, kArguments, kDropped } kimi_phase_ = KimiPhase::kNone;
  std::string kimi_text_;
};

// "call_" + 24 random lowercase hex digits.
std::string NewCallId();

}  // namespace waste::server
