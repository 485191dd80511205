// libFuzzer target: a /v1/chat/completions request body, through everything
// the server does before a request waits for the engine: JSON parsing, the
// field validation (messages, sampling, logprobs, stream, thinking), the
// Responses and Anthropic Messages translations to a chat body, both chat
// renderers (XTML with two media blocks on offer, a chat.json template,
// and the built-in kimi (with tools) and deepseek formats), and the grammar compilation of `response_format` json_schema
// and of every declared tool's parameter schema.
//
// Invariants beyond "no crash, no sanitizer report":
// - every refusal carries a message and an HTTP status in 400..599;
// - a request that renders has no markup segment holding request text
//   (markup segments come from the format, never from the client);
// - a schema the compiler accepts compiles to a grammar (its GBNF parses).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat_request.h"
#include "json_text.h"
#include "render.h"
#include "anthropic_request.h"
#include "responses_request.h"
#include "waste/chat.h"
#include "waste/grammar.h"

namespace {

using waste::server::ApiError;
using waste::server::Json;

void CheckError(const std::optional<ApiError>& e) {
  if (e && (e->message.empty() || e->status < 400 || e->status > 599)) __builtin_trap();
}

// Markup segments may hold only marker/template text: a fixed alphabet
// of what the XTML renderer writes between markers. A request string
// smuggled into one would let a client forge structure.
void CheckMarkup(const waste::server::RenderedPrompt& p, const std::vector<std::string>& blocks) {
  for (const auto& s : p.segments) {
    if (s.mode != waste::SegmentMode::kMarkup) continue;
    bool known = s.text.rfind("<|", 0) == 0 && s.text.size() >= 4 &&
                 s.text.compare(s.text.size() - 2, 2, "|>") == 0;
    // DeepSeek's markers: fullwidth bars.
    static const std::string kOpen = "<\xEF\xBD\x9C", kClose = "\xEF\xBD\x9C>";
    known = known || (s.text.rfind(kOpen, 0) == 0 && s.text.size() >= 8 &&
                      s.text.compare(s.text.size() - 4, 4, kClose) == 0);
    for (const auto& b : blocks) known = known || s.text == b;
    if (!known) __builtin_trap();
  }
}

void CompileSchema(const Json& schema) {
  const std::string text = waste::server::Dump(schema, waste::server::JsonStyle::kCompact);
  auto gbnf = waste::Grammar::JsonSchemaToGbnf(text);
  if (!gbnf) return;
  if (!waste::Grammar::Parse(*gbnf)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Json body;
  std::string error;
  if (!waste::server::ParseJson(text, &body, &error)) {
    if (error.empty()) __builtin_trap();
    return 0;
  }
  if (!body.is_object()) return 0;  // the HTTP layer refuses before anything below
  CheckError(waste::server::ValidateMessages(body, /*vision=*/true));
  waste::server::SamplingRequest sampling;
  CheckError(waste::server::ParseSampling(body, &sampling));
  for (const auto& s : sampling.stops) {
    if (s.empty()) __builtin_trap();
  }
  // Log probabilities, both routes' rules: what passes is in range, and a
  // chat request's alternatives come only with logprobs on.
  for (bool chat : {true, false}) {
    waste::server::LogprobsRequest lp;
    auto e = waste::server::ParseLogprobs(body, chat, &lp);
    CheckError(e);
    if (!e && (lp.top < 0 || lp.top > waste::server::kMaxTopLogprobs || (chat && lp.top > 0 && !lp.on))) {
      __builtin_trap();
    }
    waste::server::SamplingRequest echo_sampling;
    CheckError(waste::server::ParseSampling(body, &echo_sampling, /*allow_zero_max=*/true));
  }
  // The same body as a Responses request: its translation either refuses
  // (a 4xx naming the field) or is a chat body the chat checks accept or
  // refuse cleanly.
  {
    Json chat;
    auto e = waste::server::ResponsesToChat(body, &chat);
    CheckError(e);
    if (!e) {
      if (!chat.is_object() || !chat.contains("messages")) __builtin_trap();
      CheckError(waste::server::ValidateMessages(chat, /*vision=*/true));
      waste::server::SamplingRequest chat_sampling;
      CheckError(waste::server::ParseSampling(chat, &chat_sampling));
      CheckError(waste::server::ValidateToolOptions(chat));
    }
  }
  // And as an Anthropic Messages request, likewise; its error body in
  // Anthropic's shape always has the type and the message.
  {
    Json chat;
    auto e = waste::server::MessagesToChat(body, &chat);
    CheckError(e);
    if (e) {
      waste::server::RenameChatFieldsForMessages(&*e);
      const Json shaped = waste::server::AnthropicErrorBody(*e);
      if (shaped["type"] != "error" || !shaped["error"]["message"].is_string()) __builtin_trap();
    } else {
      if (!chat.is_object() || !chat.contains("messages") || !chat.contains("max_tokens")) __builtin_trap();
      CheckError(waste::server::ValidateMessages(chat, /*vision=*/true));
      waste::server::SamplingRequest chat_sampling;
      CheckError(waste::server::ParseSampling(chat, &chat_sampling));
      CheckError(waste::server::ValidateToolOptions(chat));
    }
  }
  bool stream = false, include_usage = false;
  CheckError(waste::server::ParseStream(body, &stream, &include_usage));
  bool thinking = false;
  std::string effort;
  CheckError(waste::server::ResolveThinking(body, true, &thinking, &effort));
  if (waste::server::ValidateMessages(body, true)) return 0;  // the renderers assume valid messages

  const std::vector<std::string> blocks = {"<|media_begin|>A<|media_end|>",
                                           "<|media_begin|>B<|media_end|>"};
  waste::server::RenderedPrompt xtml;
  auto xe = waste::server::RenderXtml(body, true, &xtml, &blocks);
  CheckError(xe);
  if (!xe) {
    CheckMarkup(xtml, blocks);
    if (xtml.response_format == waste::server::ResponseFormat::kJsonSchema) CompileSchema(xtml.schema);
    for (const auto& tool : xtml.tools) {
      const Json& fn = tool.contains("function") ? tool["function"] : tool;
      if (fn.is_object() && fn.contains("parameters")) CompileSchema(fn["parameters"]);
    }
  }

  waste::ChatTemplate tmpl;
  tmpl.user_prefix = "<|user|>";
  tmpl.user_suffix = "<|end|>";
  tmpl.assistant_prefix = "<|asst|>";
  tmpl.assistant_suffix = "<|end|>";
  tmpl.system_prefix = "<|sys|>";
  tmpl.system_suffix = "<|end|>";
  waste::server::RenderedPrompt chat;
  auto ce = waste::server::RenderChatJson(body, tmpl, &chat);
  CheckError(ce);
  if (!ce) CheckMarkup(chat, {});
  // The built-in formats: kimi with its tool calls, and deepseek (BOS,
  // bare system text, <think> tags).
  const auto kimi = waste::ChatTemplate::Stock([](std::string_view) { return true; });
  const auto deepseek = waste::ChatTemplate::Stock(
      [](std::string_view m) { return m.find("\xEF\xBD\x9C") != std::string_view::npos; });
  if (!kimi || kimi->stock_name != "kimi" || !deepseek || deepseek->stock_name != "deepseek") {
    __builtin_trap();
  }
  for (const auto& [stock, tools] : {std::pair{&*kimi, true}, std::pair{&*deepseek, false}}) {
    waste::server::RenderedPrompt p;
    auto e = waste::server::RenderChatJson(body, *stock, &p, tools);
    CheckError(e);
    if (!e) CheckMarkup(p, {});
  }
  return 0;
}
