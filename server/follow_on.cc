#include "follow_on.h"

#include <algorithm>
#include <optional>
#include <string>

#include "render.h"

namespace waste::server {
namespace {

bool HasText(const Json& m, const char* key) {
  auto it = m.find(key);
  return it != m.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
}

// Does the client send the assistant's reasoning back? Its latest
// assistant message says; without one, most clients do not (DeepSeek's API
// even refuses reasoning_content in a request).
bool EchoesReasoning(const Json& messages) {
  for (auto it = messages.rbegin(); it != messages.rend(); ++it) {
    if (!it->is_object() || it->value("role", "") != "assistant") continue;
    return HasText(*it, "reasoning_content") || HasText(*it, "reasoning");
  }
  return false;
}

std::optional<std::vector<int>> Render(const Engine& engine, const ChatFormat& format,
                                       const Json& body) {
  RenderedPrompt prompt;
  std::optional<ApiError> e;
  if (format.kind == ChatFormat::Kind::kXtml) {
    // As PrepareChat renders it (a server that accepts images passes its
    // empty list of media blocks).
    const std::vector<std::string> no_blocks;
    e = RenderXtml(body, format.default_thinking, &prompt,
                   format.vision.enabled ? &no_blocks : nullptr);
  } else if (format.kind == ChatFormat::Kind::kChatJson) {
    e = RenderChatJson(body, format.tmpl, &prompt, format.kimi_tools.ok());
  } else {
    return std::nullopt;
  }
  if (e) return std::nullopt;
  auto ids = engine.TokenizeSegments(prompt.segments, /*add_bos=*/false);
  if (!ids) return std::nullopt;
  return std::move(*ids);
}

// The longest common prefix of two renderings.
std::vector<int> CommonPrefix(std::optional<std::vector<int>> a,
                              const std::optional<std::vector<int>>& b) {
  if (!a || !b) return {};
  auto [end_a, end_b] = std::mismatch(a->begin(), a->end(), b->begin(), b->end());
  a->erase(end_a, a->end());
  return std::move(*a);
}

}  // namespace

std::vector<int> NextTurnPrefix(const Engine& engine, const ChatFormat& format, const Json& body,
                                const Json& reply) {
  auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array() || !reply.is_object()) return {};
  Json sent = reply;
  if (!EchoesReasoning(*messages)) sent.erase("reasoning_content");
  Json next = body;
  next["messages"].push_back(std::move(sent));
  auto calls = reply.find("tool_calls");
  const bool called = calls != reply.end() && calls->is_array() && !calls->empty();
  auto with_next_message = [&](const std::string& text) {
    Json b = next;
    Json& m = b["messages"];
    if (called) {
      for (const Json& c : *calls) {
        m.push_back({{"role", "tool"}, {"tool_call_id", c.value("id", "")}, {"content", text}});
      }
    } else {
      m.push_back({{"role", "user"}, {"content", text}});
    }
    return Render(engine, format, b);
  };
  return CommonPrefix(with_next_message("a"), with_next_message("b"));
}

size_t SharedPrefixLength(const Engine& engine, const ChatFormat& format, const Json& body,
                          std::span<const int> prompt) {
  auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array()) return 0;
  // The request without its history (which may be long): its other fields
  // render the tools and notes; the leading system messages go back in.
  Json base = Json::object();
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (it.key() != "messages") base[it.key()] = it.value();
  }
  base["messages"] = Json::array();
  for (const Json& m : *messages) {
    const std::string role = m.is_object() ? m.value("role", "") : "";
    if (role != "system" && role != "developer") break;
    base["messages"].push_back(m);
  }
  auto with_user_message = [&](const std::string& text) {
    Json b = base;
    b["messages"].push_back({{"role", "user"}, {"content", text}});
    return Render(engine, format, b);
  };
  const std::vector<int> shared = CommonPrefix(with_user_message("a"), with_user_message("b"));
  const size_t n = std::min(shared.size(), prompt.size());
  return static_cast<size_t>(
      std::mismatch(shared.begin(), shared.begin() + static_cast<std::ptrdiff_t>(n), prompt.begin())
          .first -
      shared.begin());
}

}  // namespace waste::server
