// POST /v1/messages, the request side: a Messages request translated into
// the chat completions body it means (anthropic_request.h).
#include "anthropic_request.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace waste::server {
namespace {

std::string At(const std::string& base, size_t i) { return base + "[" + std::to_string(i) + "]"; }

// An image block's source as a chat image_url part: base64 data as a data:
// URL, a URL as it is (the chat side fetches neither: it takes data: URLs
// and says so for others).
std::optional<ApiError> ImagePart(const Json& block, const std::string& at, Json* part) {
  const Json* source = Field(block, "source");
  if (!source || !source->is_object()) return BadRequest(at + ".source must be an object", at + ".source");
  const Json* type = Field(*source, "type");
  if (type && *type == "base64") {
    const Json* media = Field(*source, "media_type");
    const Json* data = Field(*source, "data");
    if (!media || !media->is_string()) {
      return BadRequest(at + ".source.media_type must be a string", at + ".source.media_type");
    }
    if (!data || !data->is_string()) return BadRequest(at + ".source.data must be a string", at + ".source.data");
    *part = {{"type", "image_url"},
             {"image_url", {{"url", "data:" + media->get<std::string>() + ";base64," + data->get<std::string>()}}}};
    return std::nullopt;
  }
  if (type && *type == "url") {
    const Json* url = Field(*source, "url");
    if (!url || !url->is_string()) return BadRequest(at + ".source.url must be a string", at + ".source.url");
    *part = {{"type", "image_url"}, {"image_url", {{"url", *url}}}};
    return std::nullopt;
  }
  return Unsupported(at + ".source.type", "image sources are base64 data or a url (no file ids)");
}

// Text, or text and image blocks (a tool result's content), as chat content.
std::optional<ApiError> PlainContent(const Json& content, const std::string& at, Json* out) {
  if (content.is_string()) {
    *out = content;
    return std::nullopt;
  }
  if (!content.is_array()) return BadRequest(at + " must be a string or an array of content blocks", at);
  Json parts = Json::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& block = content[i];
    const std::string bat = At(at, i);
    const Json* type = block.is_object() ? Field(block, "type") : nullptr;
    if (!type || !type->is_string()) return BadRequest(bat + ".type must be a string", bat + ".type");
    if (*type == "text") {
      const Json* text = Field(block, "text");
      if (!text || !text->is_string()) return BadRequest(bat + ".text must be a string", bat + ".text");
      parts.push_back({{"type", "text"}, {"text", *text}});
    } else if (*type == "image") {
      Json part;
      if (auto e = ImagePart(block, bat, &part)) return e;
      parts.push_back(std::move(part));
    } else {
      return Unsupported(bat + ".type", "a tool result holds text and image blocks");
    }
  }
  *out = std::move(parts);
  return std::nullopt;
}

// One Messages message as chat messages: a user turn's tool_result blocks
// become tool messages (first, in order: the results of the calls before
// it), its other blocks one user message; an assistant turn's text one
// assistant message with its tool_use blocks as tool_calls (thinking
// blocks are dropped, as chat history drops reasoning).
std::optional<ApiError> Message(const Json& m, const std::string& at, Json* messages) {
  if (!m.is_object()) return BadRequest(at + " must be an object", at);
  const Json* role = Field(m, "role");
  if (!role || (*role != "user" && *role != "assistant")) {
    return BadRequest(at + ".role must be 'user' or 'assistant' (the system prompt is 'system')",
                      at + ".role");
  }
  const bool user = *role == "user";
  const Json* content = Field(m, "content");
  if (!content) return BadRequest(at + ".content is required", at + ".content");
  if (content->is_string()) {
    messages->push_back({{"role", *role}, {"content", *content}});
    return std::nullopt;
  }
  if (!content->is_array()) {
    return BadRequest(at + ".content must be a string or an array of content blocks", at + ".content");
  }
  Json parts = Json::array(), calls = Json::array();
  std::string text;  // an assistant's text blocks, joined
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& block = (*content)[i];
    const std::string bat = At(at + ".content", i);
    const Json* type = block.is_object() ? Field(block, "type") : nullptr;
    if (!type || !type->is_string()) return BadRequest(bat + ".type must be a string", bat + ".type");
    const std::string& t = type->get_ref<const std::string&>();
    if (t == "text") {
      const Json* s = Field(block, "text");
      if (!s || !s->is_string()) return BadRequest(bat + ".text must be a string", bat + ".text");
      if (user) {
        parts.push_back({{"type", "text"}, {"text", *s}});
      } else {
        text += s->get<std::string>();
      }
    } else if (t == "image" && user) {
      Json part;
      if (auto e = ImagePart(block, bat, &part)) return e;
      parts.push_back(std::move(part));
    } else if (t == "tool_result" && user) {
      const Json* id = Field(block, "tool_use_id");
      if (!id || !id->is_string()) return BadRequest(bat + ".tool_use_id must be a string", bat + ".tool_use_id");
      Json result = "";
      if (const Json* c = Field(block, "content")) {
        if (auto e = PlainContent(*c, bat + ".content", &result)) return e;
      }
      if (const Json* err = Field(block, "is_error"); err && !err->is_boolean()) {
        return BadRequest(bat + ".is_error must be a boolean", bat + ".is_error");
      }
      messages->push_back({{"role", "tool"}, {"tool_call_id", *id}, {"content", std::move(result)}});
    } else if (t == "tool_use" && !user) {
      const Json* id = Field(block, "id");
      const Json* name = Field(block, "name");
      const Json* input = Field(block, "input");
      if (!id || !id->is_string()) return BadRequest(bat + ".id must be a string", bat + ".id");
      if (!name || !name->is_string()) return BadRequest(bat + ".name must be a string", bat + ".name");
      if (input && !input->is_object()) return BadRequest(bat + ".input must be an object", bat + ".input");
      calls.push_back({{"id", *id},
                       {"type", "function"},
                       {"function", {{"name", *name},
                                     {"arguments", Dump(input ? *input : Json::object(), JsonStyle::kCompact)}}}});
    } else if ((t == "thinking" || t == "redacted_thinking") && !user) {
      // A previous turn's reasoning: chat history carries none either.
    } else {
      return Unsupported(bat + ".type", user ? "user content blocks are text, image and tool_result"
                                             : "assistant content blocks are text, tool_use and thinking");
    }
  }
  if (user) {
    if (!parts.empty()) messages->push_back({{"role", "user"}, {"content", std::move(parts)}});
    return std::nullopt;
  }
  Json assistant = {{"role", "assistant"}, {"content", text.empty() && !calls.empty() ? Json(nullptr) : Json(text)}};
  if (!calls.empty()) assistant["tool_calls"] = std::move(calls);
  messages->push_back(std::move(assistant));
  return std::nullopt;
}

std::optional<ApiError> System(const Json& system, Json* messages) {
  if (system.is_string()) {
    if (!system.get_ref<const std::string&>().empty()) {
      messages->push_back({{"role", "system"}, {"content", system}});
    }
    return std::nullopt;
  }
  if (!system.is_array()) return BadRequest("'system' must be a string or an array of text blocks", "system");
  std::string text;
  for (size_t i = 0; i < system.size(); ++i) {
    const Json& block = system[i];
    const std::string at = At("system", i);
    const Json* type = block.is_object() ? Field(block, "type") : nullptr;
    if (!type || *type != "text") return BadRequest(at + ".type must be 'text'", at + ".type");
    const Json* s = Field(block, "text");
    if (!s || !s->is_string()) return BadRequest(at + ".text must be a string", at + ".text");
    if (!text.empty()) text += "\n\n";
    text += s->get<std::string>();
  }
  if (!text.empty()) messages->push_back({{"role", "system"}, {"content", std::move(text)}});
  return std::nullopt;
}

std::optional<ApiError> Tools(const Json& tools, Json* chat) {
  if (!tools.is_array()) return BadRequest("'tools' must be an array", "tools");
  Json out = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const std::string at = At("tools", i);
    if (!t.is_object()) return BadRequest(at + " must be an object", at);
    // Client tools have no type or "custom"; the typed ones (bash_..., web_search_...) are
    // Anthropic's own, run by their platform.
    if (const Json* type = Field(t, "type"); type && *type != "custom") {
      return Unsupported(at + ".type", "only client tools with an input_schema are served");
    }
    const Json* schema = Field(t, "input_schema");
    if (!schema || !schema->is_object()) return BadRequest(at + ".input_schema must be an object", at + ".input_schema");
    Json fn = {{"name", t.value("name", Json(nullptr))}, {"parameters", *schema}};
    if (const Json* d = Field(t, "description")) fn["description"] = *d;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  (*chat)["tools"] = std::move(out);
  return std::nullopt;
}

std::optional<ApiError> ToolChoice(const Json& choice, Json* chat) {
  const Json* type = choice.is_object() ? Field(choice, "type") : nullptr;
  if (!type || !type->is_string()) {
    return BadRequest("'tool_choice.type' must be 'auto', 'any', 'tool' or 'none'", "tool_choice.type");
  }
  if (*type == "auto") {
    (*chat)["tool_choice"] = "auto";
  } else if (*type == "any") {
    (*chat)["tool_choice"] = "required";
  } else if (*type == "none") {
    (*chat)["tool_choice"] = "none";
  } else if (*type == "tool") {
    const Json* name = Field(choice, "name");
    if (!name || !name->is_string()) return BadRequest("'tool_choice.name' must be a string", "tool_choice.name");
    (*chat)["tool_choice"] = {{"type", "function"}, {"function", {{"name", *name}}}};
  } else {
    return BadRequest("'tool_choice.type' must be 'auto', 'any', 'tool' or 'none'", "tool_choice.type");
  }
  if (const Json* one = Field(choice, "disable_parallel_tool_use")) {
    if (!one->is_boolean()) {
      return BadRequest("'tool_choice.disable_parallel_tool_use' must be a boolean",
                        "tool_choice.disable_parallel_tool_use");
    }
    (*chat)["parallel_tool_calls"] = !one->get<bool>();
  }
  return std::nullopt;
}

// output_config: `effort` as the chat route's reasoning_effort (xhigh is
// K3's max), `format` (structured outputs: a JSON Schema) as its
// response_format json_schema.
std::optional<ApiError> OutputConfig(const Json& output, Json* chat) {
  if (!output.is_object()) return BadRequest("'output_config' must be an object", "output_config");
  if (const Json* effort = Field(output, "effort"); effort && !effort->is_null()) {
    static const std::pair<const char*, const char*> kEfforts[] = {
        {"low", "low"}, {"medium", "medium"}, {"high", "high"}, {"xhigh", "max"}, {"max", "max"}};
    const auto* found = std::find_if(std::begin(kEfforts), std::end(kEfforts),
                                     [&](const auto& e) { return *effort == e.first; });
    if (found == std::end(kEfforts)) {
      return BadRequest("'output_config.effort' must be 'low', 'medium', 'high', 'xhigh' or 'max'",
                        "output_config.effort");
    }
    // Without thinking the effort has nothing to steer on K3 (chat would
    // call the pair a contradiction; Anthropic's effort also shapes the
    // answer, which K3 has no control for).
    if (chat->value("thinking", true)) (*chat)["reasoning_effort"] = found->second;
  }
  if (const Json* format = Field(output, "format"); format && !format->is_null()) {
    const Json* type = format->is_object() ? Field(*format, "type") : nullptr;
    const Json* schema = format->is_object() ? Field(*format, "schema") : nullptr;
    if (!type || *type != "json_schema" || !schema || !schema->is_object()) {
      return BadRequest("'output_config.format' must be {\"type\": \"json_schema\", \"schema\": {...}}",
                        "output_config.format");
    }
    (*chat)["response_format"] = {{"type", "json_schema"},
                                  {"json_schema", {{"name", "output"}, {"schema", *schema}}}};
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> MessagesToChat(const Json& body, Json* chat) {
  *chat = Json::object();
  const Json* max_tokens = Field(body, "max_tokens");
  if (!max_tokens) return BadRequest("'max_tokens' is a required property", "max_tokens");
  (*chat)["max_tokens"] = *max_tokens;  // the chat side checks it (an integer, at least 1)

  Json messages = Json::array();
  if (const Json* system = Field(body, "system")) {
    if (auto e = System(*system, &messages)) return e;
  }
  const Json* input = Field(body, "messages");
  if (!input) return BadRequest("'messages' is a required property", "messages");
  if (!input->is_array() || input->empty()) return BadRequest("'messages' must be a non-empty array", "messages");
  for (size_t i = 0; i < input->size(); ++i) {
    if (auto e = Message((*input)[i], At("messages", i), &messages)) return e;
  }
  (*chat)["messages"] = std::move(messages);
  // A last assistant message is a prefill: the reply continues its text.
  if (input->back().is_object() && input->back().value("role", std::string()) == "assistant") {
    (*chat)["continue_final_message"] = true;
  }

  if (const Json* tools = Field(body, "tools")) {
    if (auto e = Tools(*tools, chat)) return e;
  }
  if (const Json* choice = Field(body, "tool_choice")) {
    if (auto e = ToolChoice(*choice, chat)) return e;
  }
  if (const Json* thinking = Field(body, "thinking")) {
    const Json* type = thinking->is_object() ? Field(*thinking, "type") : nullptr;
    // adaptive (the model decides how much to think) and between_tools are
    // thinking on for K3, whose think channel opens every turn and whose
    // length is its own unless capped.
    if (type && (*type == "adaptive" || *type == "between_tools")) {
      if (const Json* display = Field(*thinking, "display");
          display && !display->is_null() && *display != "summarized" && *display != "omitted") {
        return BadRequest("'thinking.display' must be 'summarized' or 'omitted'", "thinking.display");
      }
      (*chat)["thinking"] = true;
    } else if (!type || (*type != "enabled" && *type != "disabled")) {
      return BadRequest("'thinking.type' must be 'enabled', 'disabled', 'adaptive' or 'between_tools'",
                        "thinking.type");
    } else {
    if (const Json* budget = Field(*thinking, "budget_tokens")) {
      // Enforced (the think channel is closed when it is spent); not held
      // to Anthropic's minimum of 1024, which protects their service's
      // answers, not this one's.
      if (!IsNonNegativeInteger(*budget)) {
        return BadRequest("'thinking.budget_tokens' must be a non-negative integer",
                          "thinking.budget_tokens");
      }
      if (*type == "enabled") (*chat)["reasoning"] = {{"max_tokens", *budget}};
    }
    (*chat)["thinking"] = *type == "enabled";
    }
  }
  if (const Json* output = Field(body, "output_config")) {
    if (auto e = OutputConfig(*output, chat)) return e;
  }
  if (const Json* stops = Field(body, "stop_sequences")) {
    if (!stops->is_array()) return BadRequest("'stop_sequences' must be an array of strings", "stop_sequences");
    (*chat)["stop"] = *stops;  // the chat side checks the elements
  }
  for (const char* key : {"temperature", "top_p", "top_k", "stream"}) {
    if (const Json* v = Field(body, key)) (*chat)[key] = *v;
  }
  if (const Json* v = Field(body, "metadata"); v && !v->is_object()) {
    return BadRequest("'metadata' must be an object", "metadata");
  }
  for (const char* key : {"container", "mcp_servers"}) {
    if (Field(body, key)) return Unsupported(key, "Anthropic's hosted features are not served");
  }
  // A stream's last chat chunk carries the usage the final events need.
  if (const Json* stream = Field(body, "stream"); stream && *stream == true) {
    (*chat)["stream_options"] = {{"include_usage", true}};
  }
  return std::nullopt;
}

void RenameChatFieldsForMessages(ApiError* e) {
  auto rename = [](std::string* s) {
    if (s->rfind("tools[", 0) == 0 || s->find("tools[") != std::string::npos) {
      ReplaceAll(s, "].function.parameters", "].input_schema");
      ReplaceAll(s, "].function.", "].");
    }
    ReplaceAll(s, "'stop'", "'stop_sequences'");
    ReplaceAll(s, "'continue_final_message'", "a final assistant message (a prefill)");
    ReplaceAll(s, "'parallel_tool_calls'", "'tool_choice.disable_parallel_tool_use'");
    ReplaceAll(s, "response_format", "output_config.format");
  };
  rename(&e->message);
  if (e->param) {
    std::string& p = *e->param;
    rename(&p);
    if (p == "stop") p = "stop_sequences";
    if (p == "thinking") p = "thinking.type";
    if (p == "continue_final_message") p = "messages";
    if (p == "parallel_tool_calls") p = "tool_choice.disable_parallel_tool_use";
    if (p == "reasoning_effort") p = "output_config.effort";
    if (p.rfind("messages", 0) == 0) {
      // The chat message index counts the system prompt and the tool
      // messages the results became: point at the request's messages.
      e->message += " (in the chat form of the request: the system prompt first, each tool_result "
                    "a message of its own)";
      p = "messages";
    }
  }
}

Json AnthropicErrorBody(const ApiError& e) {
  const char* type = "invalid_request_error";
  switch (e.status) {
    case 401: type = "authentication_error"; break;
    case 403: type = "permission_error"; break;
    case 404: type = "not_found_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 503: type = "overloaded_error"; break;
    default:
      if (e.status >= 500) type = "api_error";
  }
  Json error = {{"type", type}, {"message", e.message}};
  if (e.param) error["param"] = *e.param;
  if (e.code) error["code"] = *e.code;
  return {{"type", "error"}, {"error", std::move(error)}};
}

}  // namespace waste::server
