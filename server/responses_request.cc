// POST /v1/responses, the request side: a Responses request translated into
// the chat completions body it means (responses_request.h).
#include "responses_request.h"

#include <utility>

namespace waste::server {
namespace {

// A message's content parts: input_text / output_text become chat text
// parts, input_image an image_url part (a URL or data: URL; file ids need
// a file store this server does not have).
std::optional<ApiError> ContentParts(const Json& content, const std::string& at, Json* out) {
  if (content.is_string()) {
    *out = content;
    return std::nullopt;
  }
  if (!content.is_array()) {
    return BadRequest(at + " must be a string or an array of content parts", at);
  }
  Json parts = Json::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string pat = at + "[" + std::to_string(i) + "]";
    const Json* type = part.is_object() ? Field(part, "type") : nullptr;
    if (!type || !type->is_string()) return BadRequest(pat + ".type must be a string", pat + ".type");
    const std::string& t = type->get_ref<const std::string&>();
    if (t == "input_text" || t == "output_text" || t == "text") {
      const Json* text = Field(part, "text");
      if (!text || !text->is_string()) return BadRequest(pat + ".text must be a string", pat + ".text");
      parts.push_back({{"type", "text"}, {"text", *text}});
    } else if (t == "input_image") {
      const Json* url = Field(part, "image_url");
      if (!url || !url->is_string()) {
        return Unsupported(pat + ".file_id", "images are taken as image_url (a URL or a data: URL)");
      }
      parts.push_back({{"type", "image_url"}, {"image_url", {{"url", *url}}}});
    } else if (t == "refusal") {
      const Json* text = Field(part, "refusal");
      if (text && text->is_string()) parts.push_back({{"type", "text"}, {"text", *text}});
    } else {
      return Unsupported(pat + ".type", "content parts are input_text, output_text and input_image");
    }
  }
  *out = std::move(parts);
  return std::nullopt;
}

// The last message when it is an assistant's, so that the function calls
// that follow it join it (a chat assistant turn holds its text and calls).
Json* OpenAssistant(Json& messages) {
  if (messages.empty()) return nullptr;
  Json& last = messages.back();
  return last["role"] == "assistant" ? &last : nullptr;
}

std::optional<ApiError> InputItems(const Json& input, Json* messages) {
  if (input.is_string()) {
    messages->push_back({{"role", "user"}, {"content", input}});
    return std::nullopt;
  }
  if (!input.is_array()) {
    return BadRequest("'input' must be a string or an array of input items", "input");
  }
  for (size_t i = 0; i < input.size(); ++i) {
    const Json& item = input[i];
    const std::string at = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) return BadRequest(at + " must be an object", at);
    const Json* type = Field(item, "type");
    if (type && !type->is_string()) return BadRequest(at + ".type must be a string", at + ".type");
    const std::string t = type ? type->get<std::string>() : "message";
    if (t == "message") {
      const Json* role = Field(item, "role");
      if (!role || !role->is_string()) {
        return BadRequest(at + ".role must be one of 'user', 'assistant', 'system', 'developer'",
                          at + ".role");
      }
      const Json* content = Field(item, "content");
      if (!content) return BadRequest(at + ".content is required", at + ".content");
      Json parts;
      if (auto e = ContentParts(*content, at + ".content", &parts)) return e;
      messages->push_back({{"role", *role}, {"content", std::move(parts)}});
    } else if (t == "function_call") {
      const Json* call_id = Field(item, "call_id");
      const Json* name = Field(item, "name");
      const Json* args = Field(item, "arguments");
      if (!call_id || !call_id->is_string()) {
        return BadRequest(at + ".call_id must be a string", at + ".call_id");
      }
      if (!name || !name->is_string()) return BadRequest(at + ".name must be a string", at + ".name");
      Json call = {{"id", *call_id},
                   {"type", "function"},
                   {"function", {{"name", *name}, {"arguments", args ? *args : Json("{}")}}}};
      Json* assistant = OpenAssistant(*messages);
      if (!assistant) {
        messages->push_back({{"role", "assistant"}, {"content", nullptr}});
        assistant = &messages->back();
      }
      (*assistant)["tool_calls"].push_back(std::move(call));
    } else if (t == "function_call_output") {
      const Json* call_id = Field(item, "call_id");
      const Json* output = Field(item, "output");
      if (!call_id || !call_id->is_string()) {
        return BadRequest(at + ".call_id must be a string", at + ".call_id");
      }
      Json content;
      if (!output) return BadRequest(at + ".output is required", at + ".output");
      if (auto e = ContentParts(*output, at + ".output", &content)) return e;
      messages->push_back({{"role", "tool"}, {"tool_call_id", *call_id}, {"content", std::move(content)}});
    } else if (t == "reasoning") {
      // A previous turn's reasoning: chat history carries none either.
    } else {
      return Unsupported(at + ".type", "input items are messages, function_call, "
                                       "function_call_output and reasoning");
    }
  }
  return std::nullopt;
}

}  // namespace

bool WantsTextLogprobs(const Json& body) {
  // Alternatives imply the chosen tokens' figures; 0 of them alone does not.
  if (const Json* top = Field(body, "top_logprobs"); top && !top->is_null() && *top != 0) return true;
  const Json* include = Field(body, "include");
  if (!include || !include->is_array()) return false;
  for (const Json& what : *include) {
    if (what == "message.output_text.logprobs") return true;
  }
  return false;
}

std::optional<ApiError> ResponsesToChat(const Json& body, Json* chat) {
  *chat = Json::object();
  if (Field(body, "previous_response_id")) {
    return Unsupported("previous_response_id",
                       "responses are not stored; send the conversation in 'input'");
  }
  if (const Json* bg = Field(body, "background"); bg && bg->is_boolean() && bg->get<bool>()) {
    return Unsupported("background", "responses run while the request waits");
  }
  const Json* input = Field(body, "input");
  if (!input) return BadRequest("'input' is a required property", "input");
  Json messages = Json::array();
  if (const Json* instructions = Field(body, "instructions")) {
    if (!instructions->is_string()) return BadRequest("'instructions' must be a string", "instructions");
    messages.push_back({{"role", "system"}, {"content", *instructions}});
  }
  if (auto e = InputItems(*input, &messages)) return e;
  (*chat)["messages"] = std::move(messages);

  if (const Json* tools = Field(body, "tools")) {
    if (!tools->is_array()) return BadRequest("'tools' must be an array", "tools");
    Json out = Json::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      const Json& t = (*tools)[i];
      const std::string at = "tools[" + std::to_string(i) + "]";
      if (!t.is_object()) return BadRequest(at + " must be an object", at);
      const Json* type = Field(t, "type");
      if (!type || *type != "function") {
        return Unsupported(at + ".type", "only function tools (no hosted tools) are served");
      }
      Json fn = {{"name", t.value("name", Json(nullptr))}};
      for (const char* key : {"description", "parameters", "strict"}) {
        if (const Json* v = Field(t, key)) fn[key] = *v;
      }
      out.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    (*chat)["tools"] = std::move(out);
  }
  if (const Json* choice = Field(body, "tool_choice")) {
    if (choice->is_object()) {
      const Json* type = Field(*choice, "type");
      if (!type || *type != "function") {
        return Unsupported("tool_choice", "only 'none', 'auto', 'required' or a function");
      }
      (*chat)["tool_choice"] = {{"type", "function"},
                                {"function", {{"name", choice->value("name", Json(nullptr))}}}};
    } else {
      (*chat)["tool_choice"] = *choice;
    }
  }
  if (const Json* text = Field(body, "text")) {
    if (!text->is_object()) return BadRequest("'text' must be an object", "text");
    if (const Json* format = Field(*text, "format")) {
      if (!format->is_object()) return BadRequest("'text.format' must be an object", "text.format");
      const Json* type = Field(*format, "type");
      if (!type || !type->is_string()) {
        return BadRequest("'text.format.type' must be 'text', 'json_object' or 'json_schema'",
                          "text.format.type");
      }
      if (*type == "json_schema") {
        const Json* name = Field(*format, "name");
        if (name && !name->is_string()) {
          return BadRequest("'text.format.name' must be a string", "text.format.name");
        }
        const Json* schema = Field(*format, "schema");
        if (!schema) return BadRequest("'text.format.schema' is required", "text.format.schema");
        Json js = {{"name", name ? *name : Json("response")}, {"schema", *schema}};
        if (const Json* strict = Field(*format, "strict")) js["strict"] = *strict;
        (*chat)["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(js)}};
      } else {
        (*chat)["response_format"] = {{"type", *type}};
      }
    }
  }
  if (const Json* reasoning = Field(body, "reasoning")) {
    if (!reasoning->is_object()) return BadRequest("'reasoning' must be an object", "reasoning");
    if (const Json* effort = Field(*reasoning, "effort")) (*chat)["reasoning_effort"] = *effort;
    // The think channel's cap (OpenRouter's reasoning.max_tokens), checked
    // here so that no chat-side renaming touches its message.
    if (const Json* cap = Field(*reasoning, "max_tokens")) {
      if (!IsNonNegativeInteger(*cap)) {
        return BadRequest("'reasoning.max_tokens' must be a non-negative integer",
                          "reasoning.max_tokens");
      }
      (*chat)["reasoning"] = {{"max_tokens", *cap}};
    }
  }
  // Log probabilities of the message's text: asked for by `include`, with
  // `top_logprobs` alternatives (which the chat side checks, 0..20).
  if (WantsTextLogprobs(body)) (*chat)["logprobs"] = true;
  if (const Json* top = Field(body, "top_logprobs"); top && !top->is_null()) (*chat)["top_logprobs"] = *top;
  for (const char* key : {"stream", "background", "parallel_tool_calls", "store"}) {
    if (const Json* v = Field(body, key); v && !v->is_boolean()) {
      return BadRequest(std::string("'") + key + "' must be a boolean", key);
    }
  }
  if (const Json* v = Field(body, "metadata"); v && !v->is_object()) {
    return BadRequest("'metadata' must be an object", "metadata");
  }
  if (const Json* v = Field(body, "user"); v && !v->is_string()) {
    return BadRequest("'user' must be a string", "user");
  }
  // The same meaning under the chat names; ParseSampling and friends check them.
  if (const Json* v = Field(body, "max_output_tokens")) (*chat)["max_tokens"] = *v;
  for (const char* key : {"temperature", "top_p", "stream", "parallel_tool_calls", "user"}) {
    if (const Json* v = Field(body, key)) (*chat)[key] = *v;
  }
  // A stream's last chat chunk carries the usage the final response needs.
  if (const Json* stream = Field(body, "stream"); stream && *stream == true) {
    (*chat)["stream_options"] = {{"include_usage", true}};
  }
  return std::nullopt;
}

void RenameChatFields(ApiError* e) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"max_completion_tokens", "max_output_tokens"},
      {"max_tokens", "max_output_tokens"},
      {"response_format", "text.format"},
      {"reasoning_effort", "reasoning.effort"}};
  for (const auto& [chat_name, name] : kNames) ReplaceAll(&e->message, chat_name, name);
  if (e->param) {
    std::string& p = *e->param;
    for (const auto& [chat_name, name] : kNames) {
      if (p.rfind(chat_name, 0) == 0) p = name + p.substr(std::string(chat_name).size());
    }
    if (p.rfind("tools[", 0) == 0) ReplaceAll(&p, "].function.", "].");
    if (p.rfind("messages", 0) == 0) {
      e->message += " (messages are the input items in order, after the instructions)";
      p = "input";
    }
  }
  if (e->message.find("tools[") != std::string::npos) ReplaceAll(&e->message, "].function.", "].");
}

}  // namespace waste::server
