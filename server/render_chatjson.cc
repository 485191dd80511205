// chat.json containers (Kimi-Linear, ChatML) and the built-in kimi and
// deepseek formats (waste/chat.h, ChatTemplate::Stock): `begin`, then
// [prefix] content [suffix] per message, then `open`. Conversation,
// <think> reasoning, and Kimi's tool calls where the tokenizer has their
// markers. See render.h.
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
// the last close tag, as DeepSeek-R1's template does
// (content.split('</think>')[-1]: the whitespace after the tag stays).
void DropReasoning(const ChatTemplate& tmpl, std::vector<std::string>* parts) {
  if (tmpl.think_close.empty()) return;
  for (size_t k = parts->size(); k-- > 0;) {
    std::string& part = (*parts)[k];
    const size_t close = part.rfind(tmpl.think_close);
    if (close == std::string::npos) continue;
    part.erase(0, close + tmpl.think_close.size());
    parts->erase(parts->begin(), parts->begin() + static_cast<std::ptrdiff_t>(k));
    return;
  }
}

// A message's text parts (a string content is one part).
std::vector<std::string> TextParts(const Json& m) {
  std::vector<std::string> parts;
  auto content = m.find("content");
  if (content != m.end() && content->is_string()) {
    parts.push_back(content->get<std::string>());
  } else if (content != m.end() && content->is_array()) {
    for (const Json& part : *content) parts.push_back(part["text"].get<std::string>());
  }
  return parts;
}

std::string JoinParts(const std::vector<std::string>& parts) {
  std::string all;
  for (const std::string& p : parts) all += p;
  return all;
}

}  // namespace

std::optional<ApiError> RenderChatJson(const Json& body, const ChatTemplate& tmpl,
                                       RenderedPrompt* out, bool kimi_tools) {
  auto present = [&](const char* key) {
    auto it = body.find(key);
    return it != body.end() && !it->is_null();
  };
  if (auto e = ValidateMessages(body)) return e;
  std::string why = "this container is served from " +
                    (tmpl.stock_name.empty() ? std::string("its chat.json")
                                             : "the built-in " + tmpl.stock_name + " format") +
                    ", which cannot express ";
  if (!kimi_tools && present("tools") && !(body["tools"].is_array() && body["tools"].empty())) {
    return BadRequest(why + "tool definitions; drop 'tools', or use a container whose chat "
                            "format carries them (Kimi K3, or Kimi's tool-call markers)",
                      "tools");
  }
  if (auto e = ValidateToolOptions(body)) return e;
  if (kimi_tools) {
    if (present("tools")) out->tools = body["tools"];
    // (ValidateToolOptions checked the shapes.) "required" and a named
    // function become the forced-call grammar, "none" a ban on the calls
    // section's marker (constraint.cc, prepare.cc).
    if (present("tool_choice")) {
      const Json& choice = body["tool_choice"];
      if (choice.is_string()) {
        out->tool_choice = choice.get<std::string>();
      } else {
        out->tool_choice = "required";
        const Json& fn = choice["function"];
        if (fn.is_object() && fn.contains("name") && fn["name"].is_string()) {
          out->forced_tool = fn["name"].get<std::string>();
        }
      }
    }
    if (auto p = body.find("parallel_tool_calls"); p != body.end() && p->is_boolean()) {
      out->parallel_tool_calls = p->get<bool>();
    }
  } else if (present("tool_choice") && body["tool_choice"] != "none") {
    // tool_choice "none" and response_format text ask for nothing.
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
  // is accepted; a budget caps it when it does (waste::ThinkTagBudget).
  if (thinking && tmpl.think_open.empty()) {
    return BadRequest(
        "this container has no reasoning channel in its tokenizer, so it cannot think on "
        "request; pass reasoning_effort 'none' or thinking false",
        "reasoning_effort");
  }
  const Json& messages = body["messages"];
  for (size_t i = 0; i < messages.size() && !kimi_tools; ++i) {
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
  // Kimi-K2's template: the tools, as compact JSON, in a system turn of
  // their own before the conversation.
  if (kimi_tools && out->tools.is_array() && !out->tools.empty()) {
    markup("<|im_system|>tool_declare<|im_middle|>");
    plain(Dump(out->tools, JsonStyle::kCompact));
    markup("<|im_end|>");
  }
  int call_counter = 0;  // ids for calls sent without one, numbered as Kimi numbers them
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
    } else if (role == "tool" && kimi_tools) {
      // "## Return of ID" then the result, in a system turn named tool.
      static const std::string kToolPrefix = "<|im_system|>tool<|im_middle|>";
      markup(kToolPrefix);
      std::string id;
      if (auto it = m.find("tool_call_id"); it != m.end() && it->is_string()) id = it->get<std::string>();
      plain("## Return of " + id + "\n" + JoinParts(TextParts(m)));
      markup(tmpl.system_suffix);
      continue;
    }
    if (!prefix) {
      return BadRequest("messages[" + std::to_string(i) + "] is a \"" + role +
                            "\" turn, and this container's chat format does not describe one",
                        "messages[" + std::to_string(i) + "].role");
    }
    markup(*prefix);
    std::vector<std::string> parts = TextParts(m);
    const bool continued = continue_final && i + 1 == messages.size();
    if (role == "assistant" && !continued) DropReasoning(tmpl, &parts);
    for (const std::string& part : parts) plain(part);
    auto calls = m.find("tool_calls");
    if (kimi_tools && role == "assistant" && calls != m.end() && calls->is_array() &&
        !calls->empty()) {
      markup("<|tool_calls_section_begin|>");
      for (const Json& call : *calls) {
        const Json& fn = CallFunction(call);
        std::string id;
        if (auto it = call.find("id"); it != call.end() && it->is_string()) id = it->get<std::string>();
        if (id.empty()) id = "functions." + fn.value("name", std::string()) + ":" + std::to_string(call_counter);
        ++call_counter;
        std::string args = "{}";
        if (auto a = fn.find("arguments"); a != fn.end() && !a->is_null()) {
          args = a->is_string() ? a->get<std::string>() : Dump(*a, JsonStyle::kCompact);
        }
        markup("<|tool_call_begin|>");
        plain(id);
        markup("<|tool_call_argument_begin|>");
        plain(args);
        markup("<|tool_call_end|>");
      }
      markup("<|tool_calls_section_end|>");
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
