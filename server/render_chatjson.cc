// chat.json containers (Kimi-Linear, ChatML) and the built-in kimi and
// deepseek formats (waste/chat.h, ChatTemplate::Stock): `begin`, then
// [prefix] content [suffix] per message, then `open`. Conversation and
// <think> reasoning; no tools. See render.h.
#include <algorithm>
#include <cstddef>
#include <string_view>
#include <vector>

#include "chat_request.h"
#include "render.h"

namespace waste::server {

std::string ChatJsonStopMarker(const ChatTemplate& tmpl) {
  // The first <|…|>, or DeepSeek's <｜…｜> (fullwidth bars, U+FF5C).
  // The inside holds no bar, '<' or '>'.
  const std::string& s = tmpl.assistant_suffix;
  for (size_t b = s.find('<'); b != std::string::npos; b = s.find('<', b + 1)) {
    for (const std::string_view bar : {std::string_view("|"), std::string_view("\xEF\xBD\x9C")}) {
      if (s.compare(b + 1, bar.size(), bar) != 0) continue;
      const size_t from = b + 1 + bar.size();
      const size_t e = s.find(bar, from);
      if (e == std::string::npos || s.compare(e + bar.size(), 1, ">") != 0) continue;
      const std::string_view inner = std::string_view(s).substr(from, e - from);
      if (inner.find_first_of("<>") != std::string_view::npos) continue;
      return s.substr(b, e + bar.size() + 1 - b);
    }
  }
  return "";
}

namespace {

// An earlier reply's reasoning is not shown to the model again (the
// DeepSeek and Kimi templates drop it): reasoning_content is never read,
// and a content sent back with its <think> part keeps only what follows
// the last close tag (leading whitespace trimmed), as those templates do.
void DropReasoning(const ChatTemplate& tmpl, std::vector<std::string>* parts) {
  if (tmpl.think_close.empty()) return;
  for (size_t k = parts->size(); k-- > 0;) {
    std::string& part = (*parts)[k];
    const size_t close = part.rfind(tmpl.think_close);
    if (close == std::string::npos) continue;
    part.erase(0, close + tmpl.think_close.size());
    part.erase(0, std::min(part.size(), part.find_first_not_of(" \t\r\n")));
    parts->erase(parts->begin(), parts->begin() + static_cast<std::ptrdiff_t>(k));
    return;
  }
}

}  // namespace

std::optional<ApiError> RenderChatJson(const Json& body, const ChatTemplate& tmpl,
                                       RenderedPrompt* out) {
  auto present = [&](const char* key) {
    auto it = body.find(key);
    return it != body.end() && !it->is_null();
  };
  if (auto e = ValidateMessages(body)) return e;
  std::string why = "this container is served from " +
                    (tmpl.stock_name.empty() ? std::string("its chat.json")
                                             : "the built-in " + tmpl.stock_name + " format") +
                    ", which cannot express ";
  if (present("tools") && !(body["tools"].is_array() && body["tools"].empty())) {
    return BadRequest(why + "tool definitions; drop 'tools', or use a container whose chat "
                            "format carries them (Kimi K3)",
                      "tools");
  }
  if (auto e = ValidateToolOptions(body)) return e;
  // tool_choice "none" and response_format text ask for nothing.
  if (present("tool_choice") && body["tool_choice"] != "none") {
    return BadRequest(why + "'tool_choice'", "tool_choice");
  }
  if (present("response_format") && body["response_format"]["type"] != "text") {
    return BadRequest(why + "'response_format'", "response_format");
  }
  bool continue_final = false;
  if (auto e = ParseContinuation(body, &continue_final)) return e;
  bool thinking = false;
  std::string effort;
  if (auto e = ResolveThinking(body, false, &thinking, &effort)) return e;
  // (A budget is checked like anywhere else; without a think channel it
  // has nothing to cap.)
  if (auto e = ParseThinkingBudget(body, &out->thinking_budget)) return e;
  // A format with <think> tags leaves thinking to the model (DeepSeek-R1
  // and Kimi-K2-Thinking think unasked, the others never): asking for it
  // is accepted, a budget cannot be enforced.
  if (thinking && tmpl.think_open.empty()) {
    return BadRequest(
        "this container has no reasoning channel in its tokenizer, so it cannot think on "
        "request; pass reasoning_effort 'none' or thinking false",
        "reasoning_effort");
  }
  const Json& messages = body["messages"];
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    std::string role = m["role"].get<std::string>();
    auto calls = m.find("tool_calls");
    bool has_calls = calls != m.end() && calls->is_array() && !calls->empty();
    if (role == "tool" || has_calls) {
      return BadRequest(why + "a tool call or its result", "messages[" + std::to_string(i) + "]");
    }
  }
  std::vector<PromptSegment>& segs = out->segments;
  auto markup = [&](const std::string& s) {
    if (!s.empty()) segs.push_back({SegmentMode::kMarkup, s});
  };
  auto plain = [&](const std::string& s) {
    if (!s.empty()) segs.push_back({SegmentMode::kPlain, s});
  };
  markup(tmpl.begin);
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";
    const std::string* prefix = nullptr;
    const std::string* suffix = nullptr;
    if (role == "user") {
      prefix = &tmpl.user_prefix;
      suffix = &tmpl.user_suffix;
    } else if (role == "system" && (!tmpl.system_prefix.empty() || !tmpl.system_suffix.empty() ||
                                    !tmpl.begin.empty())) {
      // (DeepSeek's system text stands bare after the BOS its `begin` is.)
      prefix = &tmpl.system_prefix;
      suffix = &tmpl.system_suffix;
    } else if (role == "assistant") {
      prefix = &tmpl.assistant_prefix;
      suffix = &tmpl.assistant_suffix;
    }
    if (!prefix) {
      return BadRequest("messages[" + std::to_string(i) + "] is a \"" + role +
                            "\" turn, and this container's chat format does not describe one",
                        "messages[" + std::to_string(i) + "].role");
    }
    markup(*prefix);
    std::vector<std::string> parts;
    auto content = m.find("content");
    if (content != m.end() && content->is_string()) {
      parts.push_back(content->get<std::string>());
    } else if (content != m.end() && content->is_array()) {
      for (const Json& part : *content) parts.push_back(part["text"].get<std::string>());
    }
    const bool continued = continue_final && i + 1 == messages.size();
    if (role == "assistant" && !continued) DropReasoning(tmpl, &parts);
    for (const std::string& part : parts) plain(part);
    // Continued: the last (assistant) turn stays open, and no new one starts.
    if (continue_final && i + 1 == messages.size()) break;
    markup(*suffix);
  }
  if (!continue_final) markup(tmpl.open);
  out->think_channel = false;
  return std::nullopt;
}

}  // namespace waste::server
