#include "responses.h"

#include "openai_shapes.h"
#include "responses_request.h"

namespace waste::server {
namespace {

// The Responses API's ids: resp_, msg_, rs_, fc_ and 24 hex digits.
std::string ItemId(const char* prefix) {
  std::string id = NewResponseId(prefix);
  id[std::string(prefix).size()] = '_';
  return id;
}
}  // namespace

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
  if (const Json* top = Field(body, "top_logprobs")) h.echo["top_logprobs"] = *top;
  h.text_logprobs = WantsTextLogprobs(body);
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

// An output_text part; `logprobs` (an array of the chat's token entries,
// {token, logprob, bytes, top_logprobs}) when they were asked for.
Json OutputText(const std::string& text, const Json* logprobs = nullptr) {
  Json part = {{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}};
  if (logprobs) part["logprobs"] = *logprobs;
  return part;
}

// A chat choice's logprobs.content, or an empty array.
Json ChoiceLogprobs(const Json& choice) {
  auto lp = choice.find("logprobs");
  if (lp == choice.end() || !lp->is_object()) return Json::array();
  auto content = lp->find("content");
  return content != lp->end() && content->is_array() ? *content : Json::array();
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
    const Json logprobs = ChoiceLogprobs(choice);
    output.push_back(MessageItem(Json::array({OutputText(content.is_string() ? content.get<std::string>() : "",
                                                         h.text_logprobs ? &logprobs : nullptr)}),
                                 "completed"));
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
  text_logprobs_ = Json::array();
  items_.push_back(kind == Open::kReasoning
                       ? ReasoningItem("", "in_progress")
                       : MessageItem(Json::array(), "in_progress"));
  if (kind == Open::kReasoning) items_.back()["content"] = Json::array();
  out->push_back(Event({{"type", "response.output_item.added"},
                        {"output_index", open_index_},
                        {"item", items_.back()}}));
  const Json& id = items_.back()["id"];
  if (kind == Open::kMessage) {
    const Json none = Json::array();
    out->push_back(Event({{"type", "response.content_part.added"},
                          {"item_id", id},
                          {"output_index", open_index_},
                          {"content_index", 0},
                          {"part", OutputText("", h_.text_logprobs ? &none : nullptr)}}));
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
    // Entries whose text never came (held back, then cut) end with the text.
    for (Json& e : pending_logprobs_) text_logprobs_.push_back(std::move(e));
    pending_logprobs_ = Json::array();
    const Json* logprobs = h_.text_logprobs ? &text_logprobs_ : nullptr;
    Json done = {{"type", "response.output_text.done"},
                 {"item_id", id},
                 {"output_index", open_index_},
                 {"content_index", 0},
                 {"text", text_}};
    if (logprobs) done["logprobs"] = *logprobs;
    out->push_back(Event(std::move(done)));
    out->push_back(Event({{"type", "response.content_part.done"},
                          {"item_id", id},
                          {"output_index", open_index_},
                          {"content_index", 0},
                          {"part", OutputText(text_, logprobs)}}));
    item["content"] = Json::array({OutputText(text_, logprobs)});
  }
  item["status"] = "completed";
  out->push_back(Event({{"type", "response.output_item.done"}, {"output_index", open_index_}, {"item", item}}));
  open_ = Open::kNone;
}

void ResponsesStream::OnDelta(const Json& delta, std::vector<std::string>* out) {
  if (auto r = delta.find("reasoning_content"); r != delta.end() && r->is_string() && !r->get_ref<const std::string&>().empty()) {
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
    Json event = {{"type", "response.output_text.delta"},
                  {"item_id", items_[open_index_]["id"]},
                  {"output_index", open_index_},
                  {"content_index", 0},
                  {"delta", *c}};
    if (h_.text_logprobs) {
      event["logprobs"] = std::move(pending_logprobs_);
      pending_logprobs_ = Json::array();
      for (const Json& e : event["logprobs"]) text_logprobs_.push_back(e);
    }
    out->push_back(Event(std::move(event)));
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
  const ChatStreamEvent ev = ReadChatStreamEvent(sse);
  if (ev.kind == ChatStreamEvent::Kind::kDone) {
    Finish(&out);
    done_ = true;
    return out;
  }
  if (ev.kind == ChatStreamEvent::Kind::kError) {
    const Json* e = &ev.error;
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
  if (ev.usage.is_object()) usage_ = ev.usage;
  if (!ev.choice.is_object()) return out;
  const Json& choice = ev.choice;
  // A chunk's entries are of tokens up to its own text: taken first.
  if (h_.text_logprobs) {
    for (Json& e : ChoiceLogprobs(choice)) pending_logprobs_.push_back(std::move(e));
  }
  if (auto d = choice.find("delta"); d != choice.end() && d->is_object()) OnDelta(*d, &out);
  if (auto f = choice.find("finish_reason"); f != choice.end() && f->is_string()) {
    finish_reason_ = f->get<std::string>();
  }
  return out;
}

}  // namespace waste::server
