#include "responses.h"

#include "openai_shapes.h"

namespace waste::server {
namespace {

const Json* Field(const Json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

// The Responses API's ids: resp_, msg_, rs_, fc_ and 24 hex digits.
std::string ItemId(const char* prefix) {
  std::string id = NewResponseId(prefix);
  id[std::string(prefix).size()] = '_';
  return id;
}

ApiError Unsupported(const std::string& param, const std::string& what) {
  return BadRequest("'" + param + "' is not supported by this server: " + what, param,
                    "unsupported_parameter");
}

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
  }
  // Logprobs of output text are a chat feature not carried over here yet:
  // refused rather than silently left out.
  if (const Json* top = Field(body, "top_logprobs"); top && !(top->is_number() && top->get<double>() == 0)) {
    return Unsupported("top_logprobs", "log probabilities are served by /v1/chat/completions");
  }
  if (const Json* include = Field(body, "include"); include && include->is_array()) {
    for (const Json& what : *include) {
      if (what == "message.output_text.logprobs") {
        return Unsupported("include", "log probabilities are served by /v1/chat/completions");
      }
    }
  }
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

namespace {

void ReplaceAll(std::string* s, const std::string& from, const std::string& to) {
  for (size_t at = s->find(from); at != std::string::npos; at = s->find(from, at + to.size())) {
    s->replace(at, from.size(), to);
  }
}

}  // namespace

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

ResponseHeader NewResponseHeader(const Json& body, const std::string& model, int64_t now) {
  ResponseHeader h;
  h.id = ItemId("resp");
  h.created_at = now;
  h.model = model;
  auto get = [&](const char* key, Json fallback) {
    const Json* v = Field(body, key);
    return v ? *v : fallback;
  };
  Json reasoning = {{"effort", nullptr}, {"summary", nullptr}};
  if (const Json* r = Field(body, "reasoning"); r && r->is_object()) {
    if (const Json* e = Field(*r, "effort")) reasoning["effort"] = *e;
  }
  h.echo = {{"instructions", get("instructions", nullptr)},
            {"max_output_tokens", get("max_output_tokens", nullptr)},
            {"metadata", get("metadata", Json::object())},
            {"parallel_tool_calls", get("parallel_tool_calls", true)},
            {"previous_response_id", nullptr},
            {"reasoning", std::move(reasoning)},
            {"store", false},
            {"temperature", get("temperature", 0.0)},
            {"text", get("text", Json{{"format", {{"type", "text"}}}})},
            {"tool_choice", get("tool_choice", "auto")},
            {"tools", get("tools", Json::array())},
            {"top_p", get("top_p", 1.0)},
            {"truncation", "disabled"}};
  if (const Json* user = Field(body, "user")) h.echo["user"] = *user;
  return h;
}

namespace {

Json Skeleton(const ResponseHeader& h, const std::string& status, Json output) {
  Json r = {{"id", h.id},
            {"object", "response"},
            {"created_at", h.created_at},
            {"status", status},
            {"error", nullptr},
            {"incomplete_details", nullptr},
            {"model", h.model},
            {"output", std::move(output)}};
  for (auto it = h.echo.begin(); it != h.echo.end(); ++it) r[it.key()] = it.value();
  return r;
}

// Chat usage -> Responses usage.
Json ResponseUsage(const Json& usage) {
  if (!usage.is_object()) return nullptr;
  int64_t in = usage.value("prompt_tokens", 0), out = usage.value("completion_tokens", 0);
  int64_t cached = 0, reasoning = 0;
  if (auto d = usage.find("prompt_tokens_details"); d != usage.end() && d->is_object()) {
    cached = d->value("cached_tokens", 0);
  }
  if (auto d = usage.find("completion_tokens_details"); d != usage.end() && d->is_object()) {
    reasoning = d->value("reasoning_tokens", 0);
  }
  return {{"input_tokens", in},
          {"input_tokens_details", {{"cached_tokens", cached}}},
          {"output_tokens", out},
          {"output_tokens_details", {{"reasoning_tokens", reasoning}}},
          {"total_tokens", in + out}};
}

// The final fields of a finished response: status from the chat
// finish_reason (cut by the token cap: incomplete), usage.
void Conclude(Json* r, const std::string& finish_reason, const Json& usage) {
  if (finish_reason == "length") {
    (*r)["status"] = "incomplete";
    (*r)["incomplete_details"] = {{"reason", "max_output_tokens"}};
  } else {
    (*r)["status"] = "completed";
  }
  (*r)["usage"] = ResponseUsage(usage);
}

Json ReasoningItem(const std::string& text, const char* status) {
  return {{"type", "reasoning"},
          {"id", ItemId("rs")},
          {"summary", Json::array()},
          {"content", Json::array({{{"type", "reasoning_text"}, {"text", text}}})},
          {"status", status}};
}

Json OutputText(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}};
}

Json MessageItem(Json content, const char* status) {
  return {{"type", "message"},
          {"id", ItemId("msg")},
          {"status", status},
          {"role", "assistant"},
          {"content", std::move(content)}};
}

Json CallItem(const std::string& call_id, const std::string& name, const std::string& arguments,
              const char* status) {
  return {{"type", "function_call"},
          {"id", ItemId("fc")},
          {"call_id", call_id},
          {"name", name},
          {"arguments", arguments},
          {"status", status}};
}

}  // namespace

Json ResponseFromChat(const ResponseHeader& h, const Json& chat_completion) {
  const Json& choice = chat_completion["choices"][0];
  const Json& message = choice["message"];
  Json output = Json::array();
  if (auto r = message.find("reasoning_content"); r != message.end() && r->is_string()) {
    output.push_back(ReasoningItem(r->get<std::string>(), "completed"));
  }
  const Json& content = message["content"];
  const bool has_calls = message.contains("tool_calls");
  // A message when there is text, or an empty one when nothing else came.
  if (content.is_string() || (!has_calls && output.empty())) {
    output.push_back(MessageItem(
        Json::array({OutputText(content.is_string() ? content.get<std::string>() : "")}), "completed"));
  }
  if (has_calls) {
    for (const Json& call : message["tool_calls"]) {
      output.push_back(CallItem(call["id"], call["function"]["name"], call["function"]["arguments"],
                                "completed"));
    }
  }
  Json r = Skeleton(h, "completed", std::move(output));
  Conclude(&r, choice.value("finish_reason", std::string("stop")), chat_completion["usage"]);
  return r;
}

// --- streaming --------------------------------------------------------------

std::string ResponsesStream::Event(Json event) {
  event["sequence_number"] = sequence_++;
  const std::string type = event["type"];
  return "event: " + type + "\ndata: " + Dump(event, JsonStyle::kSpaced) + "\n\n";
}

Json ResponsesStream::Snapshot(const std::string& status) const {
  return Skeleton(h_, status, items_);
}

std::vector<std::string> ResponsesStream::Start() {
  return {Event({{"type", "response.created"}, {"response", Snapshot("in_progress")}}),
          Event({{"type", "response.in_progress"}, {"response", Snapshot("in_progress")}})};
}

void ResponsesStream::OpenText(Open kind, std::vector<std::string>* out) {
  if (open_ == kind) return;
  CloseText(out);
  open_ = kind;
  open_index_ = items_.size();
  text_.clear();
  items_.push_back(kind == Open::kReasoning
                       ? ReasoningItem("", "in_progress")
                       : MessageItem(Json::array(), "in_progress"));
  if (kind == Open::kReasoning) items_.back()["content"] = Json::array();
  out->push_back(Event({{"type", "response.output_item.added"},
                        {"output_index", open_index_},
                        {"item", items_.back()}}));
  const Json& id = items_.back()["id"];
  if (kind == Open::kMessage) {
    out->push_back(Event({{"type", "response.content_part.added"},
                          {"item_id", id},
                          {"output_index", open_index_},
                          {"content_index", 0},
                          {"part", OutputText("")}}));
  }
}

void ResponsesStream::CloseText(std::vector<std::string>* out) {
  if (open_ == Open::kNone) return;
  Json& item = items_[open_index_];
  const Json id = item["id"];
  if (open_ == Open::kReasoning) {
    out->push_back(Event({{"type", "response.reasoning_text.done"},
                          {"item_id", id},
                          {"output_index", open_index_},
                          {"content_index", 0},
                          {"text", text_}}));
    item["content"] = Json::array({{{"type", "reasoning_text"}, {"text", text_}}});
  } else {
    out->push_back(Event({{"type", "response.output_text.done"},
                          {"item_id", id},
                          {"output_index", open_index_},
                          {"content_index", 0},
                          {"text", text_}}));
    out->push_back(Event({{"type", "response.content_part.done"},
                          {"item_id", id},
                          {"output_index", open_index_},
                          {"content_index", 0},
                          {"part", OutputText(text_)}}));
    item["content"] = Json::array({OutputText(text_)});
  }
  item["status"] = "completed";
  out->push_back(Event({{"type", "response.output_item.done"}, {"output_index", open_index_}, {"item", item}}));
  open_ = Open::kNone;
}

void ResponsesStream::OnDelta(const Json& delta, std::vector<std::string>* out) {
  if (auto r = delta.find("reasoning_content"); r != delta.end() && r->is_string() && !r->empty()) {
    OpenText(Open::kReasoning, out);
    text_ += r->get<std::string>();
    out->push_back(Event({{"type", "response.reasoning_text.delta"},
                          {"item_id", items_[open_index_]["id"]},
                          {"output_index", open_index_},
                          {"content_index", 0},
                          {"delta", *r}}));
  }
  // The role chunk's empty content opens nothing.
  if (auto c = delta.find("content"); c != delta.end() && c->is_string() && !c->get_ref<const std::string&>().empty()) {
    OpenText(Open::kMessage, out);
    text_ += c->get<std::string>();
    out->push_back(Event({{"type", "response.output_text.delta"},
                          {"item_id", items_[open_index_]["id"]},
                          {"output_index", open_index_},
                          {"content_index", 0},
                          {"delta", *c}}));
  }
  if (auto calls = delta.find("tool_calls"); calls != delta.end() && calls->is_array()) {
    for (const Json& call : *calls) {
      const size_t index = call.value("index", size_t{0});
      const Json& fn = call.contains("function") ? call["function"] : Json::object();
      if (index >= calls_.size()) {  // announced: a new item
        CloseText(out);
        calls_.resize(index + 1, 0);
        calls_[index] = items_.size();
        items_.push_back(CallItem(call.value("id", std::string()), fn.value("name", std::string()), "",
                                  "in_progress"));
        out->push_back(Event({{"type", "response.output_item.added"},
                              {"output_index", calls_[index]},
                              {"item", items_.back()}}));
      }
      const std::string args = fn.value("arguments", std::string());
      if (args.empty()) continue;
      Json& item = items_[calls_[index]];
      item["arguments"] = item["arguments"].get<std::string>() + args;
      out->push_back(Event({{"type", "response.function_call_arguments.delta"},
                            {"item_id", item["id"]},
                            {"output_index", calls_[index]},
                            {"delta", args}}));
    }
  }
}

void ResponsesStream::Finish(std::vector<std::string>* out) {
  CloseText(out);
  for (size_t index : calls_) {
    Json& item = items_[index];
    out->push_back(Event({{"type", "response.function_call_arguments.done"},
                          {"item_id", item["id"]},
                          {"output_index", index},
                          {"arguments", item["arguments"]}}));
    item["status"] = "completed";
    out->push_back(Event({{"type", "response.output_item.done"}, {"output_index", index}, {"item", item}}));
  }
  if (items_.empty()) {  // nothing generated: an empty message, as blocking gives
    OpenText(Open::kMessage, out);
    CloseText(out);
  }
  Json r = Snapshot("completed");
  Conclude(&r, finish_reason_, usage_);
  const std::string type = r["status"] == "incomplete" ? "response.incomplete" : "response.completed";
  out->push_back(Event({{"type", type}, {"response", std::move(r)}}));
}

std::vector<std::string> ResponsesStream::OnChatEvent(const std::string& sse) {
  std::vector<std::string> out;
  if (done_) return out;
  const std::string prefix = "data: ";
  if (sse.rfind(prefix, 0) != 0) return out;
  std::string data = sse.substr(prefix.size());
  while (!data.empty() && (data.back() == '\n' || data.back() == '\r')) data.pop_back();
  if (data == "[DONE]") {
    Finish(&out);
    done_ = true;
    return out;
  }
  Json chunk;
  std::string err;
  if (!ParseJson(data, &chunk, &err) || !chunk.is_object()) return out;
  if (auto e = chunk.find("error"); e != chunk.end()) {
    // An engine failure after the stream began: the API's error event, the
    // response failed.
    out.push_back(Event({{"type", "error"},
                         {"code", e->value("code", Json(nullptr))},
                         {"message", e->value("message", Json(""))},
                         {"param", e->value("param", Json(nullptr))}}));
    Json r = Snapshot("failed");
    const Json code = e->value("code", Json(nullptr));
    r["error"] = {{"code", code.is_string() ? code : e->value("type", Json("server_error"))},
                  {"message", e->value("message", Json(""))}};
    out.push_back(Event({{"type", "response.failed"}, {"response", std::move(r)}}));
    done_ = true;
    return out;
  }
  if (auto u = chunk.find("usage"); u != chunk.end() && u->is_object()) usage_ = *u;
  auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array() || choices->empty()) return out;
  const Json& choice = (*choices)[0];
  if (auto d = choice.find("delta"); d != choice.end() && d->is_object()) OnDelta(*d, &out);
  if (auto f = choice.find("finish_reason"); f != choice.end() && f->is_string()) {
    finish_reason_ = f->get<std::string>();
  }
  return out;
}

}  // namespace waste::server
