// Chat request -> prompt segments, for the two chat formats a container can
// have: K3's XTML markup (marker tokens <|open|> <|close|> <|sep|>
// <|end_of_msg|>) and a chat.json template of [prefix, suffix] pairs.
//
// Every byte taken from the request lands in a plain segment; markup
// segments hold only markers or template strings, so a user cannot forge
// structure. Segments are tokenized one by one (Engine::TokenizeSegments).
// The XTML texts (tool declaration, system notes) are the model's trained
// protocol and must stay byte for byte as they are.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api_error.h"
#include "json_text.h"
#include "waste/chat.h"

namespace waste::server {

enum class ResponseFormat { kText, kJsonObject, kJsonSchema };

struct RenderedPrompt {
  std::vector<PromptSegment> segments;
  bool think_channel = false;          // the generation prompt opened <think>
  int thinking_budget = -1;            // reasoning.max_tokens (-1: none given)
  ResponseFormat response_format = ResponseFormat::kText;
  Json schema;                         // json_schema: the schema (null when none)
  Json tools = Json::array();          // declared tools (for argument constraints)
  std::string tool_choice;             // "", "auto", "required", "none", ...
  std::string forced_tool;             // tool_choice {"function": {"name": X}}
  bool parallel_tool_calls = true;     // false: a reply makes one call at most
};

// XTML (§ "K3 prompt format" in docs/SERVER.md). `default_thinking` is the
// server's default when the request does not say. `media_blocks` non-null
// = images are accepted: one media block per image of the request, in
// order, handed out to image parts and placeholders in order of appearance.
std::optional<ApiError> RenderXtml(const Json& body, bool default_thinking, RenderedPrompt* out,
                                   const std::vector<std::string>* media_blocks = nullptr);

// chat.json and the built-in formats: conversation and <think> reasoning
// (when the template has think tags: thinking requests accepted, earlier
// reasoning dropped); tools, tool_choice, response_format and tool
// messages are refused naming the field, except that with `kimi_tools`
// (Kimi turns and a tokenizer with Kimi's tool-call markers) tools are
// declared, calls and results rendered as Kimi-K2's template writes them,
// and tool_choice / parallel_tool_calls read as for XTML (the calls
// grammar is constraint.cc's).
std::optional<ApiError> RenderChatJson(const Json& body, const ChatTemplate& tmpl,
                                       RenderedPrompt* out, bool kimi_tools = false);

// An XTML attribute value: `&` and `"` escaped (the only characters the
// format escapes), as the renderer writes it and a constraint must expect it.
std::string XtmlAttrEscape(const std::string& v);

// The stop marker of a chat.json template: the first <|...|> in the
// assistant suffix, or "" (unusable).
std::string ChatJsonStopMarker(const ChatTemplate& tmpl);

}  // namespace waste::server
