#include "anthropic_reply.h"

#include <chrono>
#include <cstdio>

#include "anthropic_request.h"
#include "openai_shapes.h"

namespace waste::server {

MessagesHeader NewMessagesHeader(const std::string& model, int prompt_tokens) {
  std::string id = NewResponseId("msg");  // "msg-<hex>": Anthropic's ids use '_'
  id[3] = '_';
  return {std::move(id), model, prompt_tokens};
}

Json AnthropicModel(const std::string& id, int64_t created_unix, int64_t ctx_tokens) {
  using namespace std::chrono;
  const sys_seconds t{seconds{created_unix}};
  const sys_days day = floor<days>(t);
  const year_month_day ymd{day};
  const hh_mm_ss hms{t - day};
  char when[32];
  std::snprintf(when, sizeof when, "%04d-%02u-%02uT%02d:%02d:%02dZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                static_cast<int>(hms.seconds().count()));
  return {{"type", "model"},
          {"id", id},
          {"display_name", id},
          {"created_at", when},
          {"lifecycle", "active"},
          {"deprecated_at", nullptr},
          {"retires_at", nullptr},
          {"line", nullptr},
          {"capabilities", nullptr},
          {"max_input_tokens", ctx_tokens},
          {"max_tokens", ctx_tokens}};
}

Json AnthropicModelList(const std::string& id, int64_t created_unix, int64_t ctx_tokens) {
  return {{"data", Json::array({AnthropicModel(id, created_unix, ctx_tokens)})},
          {"has_more", false},
          {"first_id", id},
          {"last_id", id}};
}

Json MessagesUsage(const Json& chat_usage) {
  int64_t prompt = 0, out = 0, cached = 0;
  if (chat_usage.is_object()) {
    prompt = chat_usage.value("prompt_tokens", int64_t{0});
    out = chat_usage.value("completion_tokens", int64_t{0});
    if (auto d = chat_usage.find("prompt_tokens_details"); d != chat_usage.end() && d->is_object()) {
      cached = d->value("cached_tokens", int64_t{0});
    }
  }
  return {{"input_tokens", prompt - cached},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", cached},
          {"output_tokens", out}};
}

std::string StopReason(const std::string& finish_reason, const std::string& stop_string) {
  if (finish_reason == "length") return "max_tokens";
  if (finish_reason == "tool_calls") return "tool_use";
  return stop_string.empty() ? "end_turn" : "stop_sequence";
}

namespace {

// A call's arguments as the object Anthropic's `input` is (the chat side
// sends valid JSON; anything else, e.g. a call cut by max_tokens, is {}).
Json Input(const std::string& arguments) {
  Json input;
  std::string err;
  if (ParseJson(arguments, &input, &err) && input.is_object()) return input;
  return Json::object();
}

Json StopSequence(const std::string& stop_string) {
  return stop_string.empty() ? Json(nullptr) : Json(stop_string);
}

}  // namespace

Json MessageFromChat(const MessagesHeader& h, const Json& chat_completion) {
  const Json& choice = chat_completion["choices"][0];
  const Json& message = choice["message"];
  Json content = Json::array();
  if (auto r = message.find("reasoning_content"); r != message.end() && r->is_string()) {
    content.push_back({{"type", "thinking"}, {"thinking", *r}, {"signature", ""}});
  }
  if (const Json& text = message["content"]; text.is_string() && !text.get_ref<const std::string&>().empty()) {
    content.push_back({{"type", "text"}, {"text", text}});
  }
  if (auto calls = message.find("tool_calls"); calls != message.end()) {
    for (const Json& call : *calls) {
      content.push_back({{"type", "tool_use"},
                         {"id", call["id"]},
                         {"name", call["function"]["name"]},
                         {"input", Input(call["function"]["arguments"].get<std::string>())}});
    }
  }
  const std::string stop_string = choice.value("stop_string", std::string());
  return {{"id", h.id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", h.model},
          {"content", std::move(content)},
          {"stop_reason", StopReason(choice.value("finish_reason", std::string("stop")), stop_string)},
          {"stop_sequence", StopSequence(stop_string)},
          {"usage", MessagesUsage(chat_completion["usage"])}};
}

// --- streaming --------------------------------------------------------------

std::string MessagesStream::Event(const Json& event) {
  const std::string type = event["type"];
  return "event: " + type + "\ndata: " + Dump(event, JsonStyle::kCompact) + "\n\n";
}

std::vector<std::string> MessagesStream::Start() {
  Json usage = {{"input_tokens", h_.prompt_tokens},
                {"cache_creation_input_tokens", 0},
                {"cache_read_input_tokens", 0},
                {"output_tokens", 0}};
  Json message = {{"id", h_.id},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"model", h_.model},
                  {"content", Json::array()},
                  {"stop_reason", nullptr},
                  {"stop_sequence", nullptr},
                  {"usage", std::move(usage)}};
  return {Event({{"type", "message_start"}, {"message", std::move(message)}})};
}

void MessagesStream::OpenBlock(Open kind, std::vector<std::string>* out) {
  if (open_ == kind) return;
  CloseBlock(out);
  open_ = kind;
  Json block = kind == Open::kThinking ? Json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                                       : Json{{"type", "text"}, {"text", ""}};
  out->push_back(Event({{"type", "content_block_start"}, {"index", next_index_}, {"content_block", block}}));
}

void MessagesStream::CloseBlock(std::vector<std::string>* out) {
  if (open_ == Open::kNone) return;
  if (open_ == Open::kThinking) {
    // No signature: the thinking is this server's own, nothing to verify.
    out->push_back(Event({{"type", "content_block_delta"},
                          {"index", next_index_},
                          {"delta", {{"type", "signature_delta"}, {"signature", ""}}}}));
  }
  out->push_back(Event({{"type", "content_block_stop"}, {"index", next_index_}}));
  ++next_index_;
  open_ = Open::kNone;
}

void MessagesStream::Finish(std::vector<std::string>* out) {
  CloseBlock(out);
  for (const Call& call : calls_) {
    out->push_back(Event({{"type", "content_block_start"},
                          {"index", next_index_},
                          {"content_block",
                           {{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", Json::object()}}}}));
    // The input as the object the blocking reply gives, in one piece.
    out->push_back(Event({{"type", "content_block_delta"},
                          {"index", next_index_},
                          {"delta", {{"type", "input_json_delta"},
                                     {"partial_json", Dump(Input(call.arguments), JsonStyle::kCompact)}}}}));
    out->push_back(Event({{"type", "content_block_stop"}, {"index", next_index_}}));
    ++next_index_;
  }
  out->push_back(Event({{"type", "message_delta"},
                        {"delta", {{"stop_reason", StopReason(finish_reason_, stop_string_)},
                                   {"stop_sequence", StopSequence(stop_string_)}}},
                        {"usage", MessagesUsage(usage_)}}));
  out->push_back(Event({{"type", "message_stop"}}));
}

std::vector<std::string> MessagesStream::OnChatEvent(const std::string& sse) {
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
    // An engine failure after the stream began: the API's error event.
    ApiError api{500, e->value("type", std::string("server_error")), e->value("message", std::string()),
                 std::nullopt, std::nullopt};
    if (api.type == "server_busy") api.status = 503;
    if (auto code = e->find("code"); code != e->end() && code->is_string()) api.code = code->get<std::string>();
    out.push_back(Event(AnthropicErrorBody(api)));
    done_ = true;
    return out;
  }
  if (ev.usage.is_object()) usage_ = ev.usage;
  if (!ev.choice.is_object()) return out;
  const Json& choice = ev.choice;
  if (auto d = choice.find("delta"); d != choice.end() && d->is_object()) {
    const Json& delta = *d;
    if (auto r = delta.find("reasoning_content"); r != delta.end() && r->is_string() && !r->get_ref<const std::string&>().empty()) {
      OpenBlock(Open::kThinking, &out);
      out.push_back(Event({{"type", "content_block_delta"},
                           {"index", next_index_},
                           {"delta", {{"type", "thinking_delta"}, {"thinking", *r}}}}));
    }
    if (auto c = delta.find("content"); c != delta.end() && c->is_string() && !c->get_ref<const std::string&>().empty()) {
      OpenBlock(Open::kText, &out);
      out.push_back(Event({{"type", "content_block_delta"},
                           {"index", next_index_},
                           {"delta", {{"type", "text_delta"}, {"text", *c}}}}));
    }
    if (auto calls = delta.find("tool_calls"); calls != delta.end() && calls->is_array()) {
      for (const Json& call : *calls) {
        const size_t index = call.value("index", size_t{0});
        if (index >= calls_.size()) calls_.resize(index + 1);
        Call& mine = calls_[index];
        if (auto id = call.find("id"); id != call.end() && id->is_string()) mine.id = *id;
        if (auto fn = call.find("function"); fn != call.end() && fn->is_object()) {
          if (auto name = fn->find("name"); name != fn->end() && name->is_string()) mine.name = *name;
          if (auto args = fn->find("arguments"); args != fn->end() && args->is_string()) {
            mine.arguments += args->get<std::string>();
          }
        }
      }
    }
  }
  if (auto f = choice.find("finish_reason"); f != choice.end() && f->is_string()) {
    finish_reason_ = f->get<std::string>();
  }
  if (auto s = choice.find("stop_string"); s != choice.end() && s->is_string()) {
    stop_string_ = s->get<std::string>();
  }
  return out;
}

}  // namespace waste::server
