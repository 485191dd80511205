// chat.json containers (Kimi-Linear, ChatML): [prefix] content [suffix] per
// message, then `open`. Plain conversation only. See render.h.
#include <regex>

#include "chat_request.h"
#include "render.h"

namespace waste::server {

std::string ChatJsonStopMarker(const ChatTemplate& tmpl) {
  static const std::regex kMarker(R"(<\|[^|>]*\|>)");
  std::smatch m;
  if (std::regex_search(tmpl.assistant_suffix, m, kMarker)) return m.str();
  return "";
}

std::optional<ApiError> RenderChatJson(const Json& body, const ChatTemplate& tmpl,
                                       RenderedPrompt* out) {
  auto present = [&](const char* key) {
    auto it = body.find(key);
    return it != body.end() && !it->is_null();
  };
  if (auto e = ValidateMessages(body)) return e;
  std::string why = "this container is served from its chat.json, which cannot express ";
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
  if (thinking) {
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
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";
    const std::string* prefix = nullptr;
    const std::string* suffix = nullptr;
    if (role == "user") {
      prefix = &tmpl.user_prefix;
      suffix = &tmpl.user_suffix;
    } else if (role == "system" && !(tmpl.system_prefix.empty() && tmpl.system_suffix.empty())) {
      prefix = &tmpl.system_prefix;
      suffix = &tmpl.system_suffix;
    } else if (role == "assistant") {
      prefix = &tmpl.assistant_prefix;
      suffix = &tmpl.assistant_suffix;
    }
    if (!prefix) {
      return BadRequest("messages[" + std::to_string(i) + "] is a \"" + role +
                            "\" turn, and this container's chat.json does not describe one",
                        "messages[" + std::to_string(i) + "].role");
    }
    markup(*prefix);
    auto content = m.find("content");
    if (content != m.end() && content->is_string()) {
      plain(content->get<std::string>());
    } else if (content != m.end() && content->is_array()) {
      for (const Json& part : *content) plain(part["text"].get<std::string>());
    }
    // Continued: the last (assistant) turn stays open, and no new one starts.
    if (continue_final && i + 1 == messages.size()) break;
    markup(*suffix);
  }
  if (!continue_final) markup(tmpl.open);
  out->think_channel = false;
  return std::nullopt;
}

}  // namespace waste::server
