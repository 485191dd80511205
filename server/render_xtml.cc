// K3's XTML prompt: <|open|>name k="v"<|sep|> ... <|close|>name<|sep|>,
// each message ended by <|end_of_msg|>. See render.h.
#include <algorithm>
#include <map>
#include <utility>

#include "chat_request.h"
#include "image_input.h"
#include "render.h"

namespace waste::server {
namespace {

using Attrs = std::vector<std::pair<std::string, std::string>>;


std::string Trim(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  size_t a = s.find_first_not_of(ws);
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(ws);
  return s.substr(a, b - a + 1);
}

class Segments {
 public:
  explicit Segments(std::vector<PromptSegment>* out) : out_(out) {}
  void Markup(const std::string& marker) { out_->push_back({SegmentMode::kMarkup, marker}); }
  void Text(const std::string& s) {
    if (!s.empty()) out_->push_back({SegmentMode::kPlain, s});
  }
  void Open(const std::string& name, const Attrs& attrs = {}) {
    Markup("<|open|>");
    Text(name);
    for (const auto& [k, v] : attrs) {
      Text(" " + k);
      Text("=\"");
      Text(XtmlAttrEscape(v));
      Text("\"");
    }
    Markup("<|sep|>");
  }
  void Close(const std::string& name) {
    Markup("<|close|>");
    Text(name);
    Markup("<|sep|>");
  }
  void OpenMessage(const Attrs& attrs) { Open("message", attrs); }
  void CloseMessage() {
    Close("message");
    Markup("<|end_of_msg|>");
  }
  void SystemNote(const std::string& type, const std::string& body) {
    OpenMessage({{"role", "system"}, {"type", type}});
    Text(Trim(body));
    CloseMessage();
  }

 private:
  std::vector<PromptSegment>* out_;
};

const std::string* NonEmptyString(const Json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) {
    return nullptr;
  }
  return &it->get_ref<const std::string&>();
}

// The request's media blocks, handed out in order of appearance: each image
// part takes the next, and so does each placeholder in message text once the
// request has an image at all.
struct MediaBlocks {
  const std::vector<std::string>* blocks = nullptr;  // null: no images accepted
  size_t next = 0;
  bool overrun = false;  // more takers than images

  void Take(Segments* s) {
    if (!blocks || next >= blocks->size()) {
      overrun = true;
      return;
    }
    s->Markup((*blocks)[next++]);
  }
  // Text with every placeholder replaced by the next block (plain around).
  void Text(const std::string& text, Segments* s) {
    if (!blocks || blocks->empty()) {
      s->Text(text);
      return;
    }
    const std::string ph = kImagePlaceholder;
    size_t from = 0;
    for (size_t at; (at = text.find(ph, from)) != std::string::npos; from = at + ph.size()) {
      s->Text(text.substr(from, at - from));
      Take(s);
    }
    s->Text(text.substr(from));
  }
};

void RenderContent(const Json& m, Segments* s, MediaBlocks* media) {
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) return;
  if (it->is_string()) {
    media->Text(it->get<std::string>(), s);
    return;
  }
  for (const Json& part : *it) {
    if (media->blocks && IsImagePart(part.at("type").get<std::string>())) {
      media->Take(s);
    } else {
      media->Text(part.at("text").get<std::string>(), s);
    }
  }
}

// An assistant message up to its open response: the message element (with
// its name), its reasoning as a closed think element when thinking, and
// the response element opened with the message's text. History closes the
// response; a continued message (continue_final_message) leaves it open.
void OpenAssistantResponse(const Json& m, bool thinking, Segments* s, MediaBlocks* media) {
  Attrs attrs{{"role", "assistant"}};
  if (const std::string* name = NonEmptyString(m, "name")) attrs.emplace_back("name", *name);
  s->OpenMessage(attrs);
  if (thinking) {
    s->Open("think");
    auto r = m.find("reasoning_content");
    if (r == m.end() || r->is_null()) r = m.find("reasoning");
    if (r != m.end() && r->is_string() && !Trim(r->get<std::string>()).empty()) {
      s->Text(r->get<std::string>());
    }
    s->Close("think");
  }
  s->Open("response");
  RenderContent(m, s, media);
}

std::string ToolDeclaration(const Json& tools, bool dynamic) {
  std::string j = Dump(tools, JsonStyle::kCompact, /*sort_keys=*/true);
  if (dynamic) {
    return "## New Tools Available\nThe system dynamically extends the toolset via "
           "lazy-loading.\nYou have access to all existing and extended tools.\nHere are the "
           "specs for the extended tools.\n\n```json\n" + j + "\n```";
  }
  return "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n" + j +
         "\n```";
}

// One argument value as prompt text and its XTML type name.
std::pair<std::string, std::string> ArgumentText(const Json& v) {
  if (v.is_boolean()) return {"boolean", v.get<bool>() ? "true" : "false"};
  if (v.is_null()) return {"null", "null"};
  if (v.is_number()) return {"number", Dump(v, JsonStyle::kSpaced)};
  if (v.is_string()) return {"string", v.get<std::string>()};
  if (v.is_object()) return {"object", Dump(v, JsonStyle::kSpaced)};
  return {"array", Dump(v, JsonStyle::kSpaced)};
}

std::optional<ApiError> RenderArguments(const Json& fn, Segments* s) {
  auto it = fn.find("arguments");
  if (it == fn.end() || it->is_null()) return std::nullopt;
  Json object;
  if (it->is_object()) {
    object = *it;
  } else {
    const std::string& text = it->get_ref<const std::string&>();
    if (Trim(text).empty()) return std::nullopt;
    std::string err;
    if (!ParseJson(text, &object, &err)) {
      s->Open("json", {{"type", "object"}});
      s->Text(text);
      s->Close("json");
      return std::nullopt;
    }
    if (!object.is_object()) {
      return BadRequest("tool call arguments must be a JSON object", "messages");
    }
  }
  for (auto a = object.begin(); a != object.end(); ++a) {
    auto [type, text] = ArgumentText(a.value());
    s->Open("argument", {{"key", a.key()}, {"type", type}});
    s->Text(text);
    s->Close("argument");
  }
  return std::nullopt;
}

std::string IdString(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  return Dump(v, JsonStyle::kSpaced);
}

// XTML binds a tool result to its call by position, OpenAI by
// tool_call_id: sort each run of tool messages into call order when every
// one of them matches a call of the preceding assistant message.
void ReorderToolResults(Json* messages) {
  std::map<std::string, std::pair<size_t, std::string>> index;
  size_t i = 0;
  while (i < messages->size()) {
    Json& m = (*messages)[i];
    if (m["role"] == "assistant") {
      index.clear();
      auto calls = m.find("tool_calls");
      if (calls != m.end() && calls->is_array()) {
        size_t pos = 0;
        for (const Json& call : *calls) {
          ++pos;
          auto id = call.find("id");
          if (id == call.end() || id->is_null()) continue;
          const Json& fn = CallFunction(call);
          index.emplace(IdString(*id), std::make_pair(pos, fn.value("name", std::string())));
        }
      }
      ++i;
      continue;
    }
    if (m["role"] != "tool") {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < messages->size() && (*messages)[end]["role"] == "tool") ++end;
    std::vector<std::pair<size_t, Json>> run;
    bool all = true;
    for (size_t k = i; k < end; ++k) {
      const Json& t = (*messages)[k];
      auto id = t.find("tool_call_id");
      if (id == t.end() || id->is_null()) id = t.find("id");
      auto hit = (id == t.end() || id->is_null()) ? index.end() : index.find(IdString(*id));
      if (hit == index.end()) {
        all = false;
        break;
      }
      Json copy = t;
      copy["tool"] = hit->second.second;
      if (copy.contains("name")) copy["name"] = hit->second.second;
      run.emplace_back(hit->second.first, std::move(copy));
    }
    if (all) {
      std::stable_sort(run.begin(), run.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      for (size_t k = i; k < end; ++k) (*messages)[k] = std::move(run[k - i].second);
    }
    i = end;
  }
}

}  // namespace

std::optional<ApiError> RenderXtml(const Json& body, bool default_thinking, RenderedPrompt* out,
                                   const std::vector<std::string>* media_blocks) {
  if (auto e = ValidateMessages(body, media_blocks != nullptr)) return e;
  MediaBlocks media{media_blocks};
  std::string effort;
  if (auto e = ResolveThinking(body, default_thinking, &out->think_channel, &effort)) return e;
  bool thinking = out->think_channel;
  if (auto e = ParseThinkingBudget(body, &out->thinking_budget)) return e;
  if (auto e = ValidateToolOptions(body)) return e;
  bool continue_final = false;
  if (auto e = ParseContinuation(body, &continue_final)) return e;

  auto tools = body.find("tools");
  if (tools != body.end() && !tools->is_null()) {
    if (!tools->is_array()) return BadRequest("'tools' must be an array", "tools");
    out->tools = *tools;
  }
  auto choice = body.find("tool_choice");
  if (choice != body.end() && !choice->is_null()) {
    if (choice->is_string()) {
      out->tool_choice = choice->get<std::string>();
    } else if (choice->is_object()) {
      out->tool_choice = "required";
      auto fn = choice->find("function");
      if (fn != choice->end() && fn->is_object()) {
        if (const std::string* name = NonEmptyString(*fn, "name")) out->forced_tool = *name;
      }
    } else {
      return BadRequest("'tool_choice' must be a string or an object", "tool_choice");
    }
  }
  if (auto parallel = body.find("parallel_tool_calls"); parallel != body.end() && parallel->is_boolean()) {
    out->parallel_tool_calls = parallel->get<bool>();
  }
  auto format = body.find("response_format");
  if (format != body.end() && !format->is_null()) {
    if (!format->is_object()) {
      return BadRequest("'response_format' must be an object", "response_format");
    }
    auto type = format->find("type");
    if (type != format->end() && *type == "json_object") {
      out->response_format = ResponseFormat::kJsonObject;
    } else if (type != format->end() && *type == "json_schema") {
      out->response_format = ResponseFormat::kJsonSchema;
      auto j = format->find("json_schema");
      if (j != format->end()) {
        if (j->is_object() && j->contains("schema")) out->schema = (*j)["schema"];
        else if (j->is_object() && j->contains("json_schema")) out->schema = (*j)["json_schema"];
        else out->schema = *j;
      }
    }
  }

  Json messages = body["messages"];
  for (Json& m : messages) {
    if (m["role"] == "developer") m["role"] = "system";
  }
  ReorderToolResults(&messages);
  if (!out->forced_tool.empty()) {
    messages.push_back({{"role", "system"},
                        {"content", "You must call the tool `" + out->forced_tool +
                                        "` in your next message, and no other."}});
  }

  Segments s(&out->segments);
  if (!out->tools.empty()) s.SystemNote("tool-declare", ToolDeclaration(out->tools, false));
  if (thinking && !effort.empty()) {
    s.SystemNote("thinking-effort",
                 "`thinking_effort` guides on how much to think in your thinking channel (not "
                 "including the response channel), supported values include `low`, `medium`, "
                 "`high`, and `max`.\nNow the system is invoked with `thinking_effort=" +
                     effort + "`.");
  }

  // Continued, the last (assistant) message is written after the notes,
  // open (below).
  Json open_assistant;
  if (continue_final) {
    open_assistant = std::move(messages.back());
    messages.erase(messages.size() - 1);
  }
  const Json* last_assistant = nullptr;
  int tool_k = 0;
  for (const Json& m : messages) {
    const std::string& role = m["role"].get_ref<const std::string&>();
    if (role == "assistant") {
      last_assistant = &m;
      tool_k = 0;
      OpenAssistantResponse(m, thinking, &s, &media);
      s.Close("response");
      auto calls = m.find("tool_calls");
      if (calls != m.end() && calls->is_array() && !calls->empty()) {
        s.Open("tools");
        int j = 0;
        for (const Json& call : *calls) {
          const Json& fn = CallFunction(call);
          s.Open("call", {{"tool", fn["name"].get<std::string>()}, {"index", std::to_string(++j)}});
          if (auto e = RenderArguments(fn, &s)) return e;
          s.Close("call");
        }
        s.Close("tools");
      }
      s.CloseMessage();
    } else if (role == "tool") {
      ++tool_k;
      std::string name;
      if (const std::string* t = NonEmptyString(m, "tool")) name = *t;
      else if (const std::string* n = NonEmptyString(m, "name")) name = *n;
      else if (last_assistant) {
        auto calls = last_assistant->find("tool_calls");
        if (calls != last_assistant->end() && calls->is_array() &&
            calls->size() >= static_cast<size_t>(tool_k)) {
          name = CallFunction((*calls)[static_cast<size_t>(tool_k - 1)]).value("name", "");
        }
      }
      if (name.empty()) {
        return BadRequest(
            "tool messages need a resolvable tool name: carry `tool`/`name`, or match a "
            "preceding assistant tool_call by order",
            "messages");
      }
      s.OpenMessage({{"role", "tool"}, {"tool", name}, {"index", std::to_string(tool_k)}});
      RenderContent(m, &s, &media);
      s.CloseMessage();
    } else {
      auto dyn = m.find("tools");
      if (role == "system" && dyn != m.end() && dyn->is_array() && !dyn->empty()) {
        s.SystemNote("tool-declare", ToolDeclaration(*dyn, true));
        continue;
      }
      Attrs attrs{{"role", role}};
      if (const std::string* name = NonEmptyString(m, "name")) attrs.emplace_back("name", *name);
      s.OpenMessage(attrs);
      RenderContent(m, &s, &media);
      s.CloseMessage();
    }
  }

  if (out->tool_choice == "required") {
    s.SystemNote("tool-choice",
                 "The system is invoked with `tool_choice=required`.\nYou MUST call tools in the "
                 "next message.");
  } else if (out->tool_choice == "none") {
    s.SystemNote("tool-choice",
                 "The system is invoked with `tool_choice=none`.\nYou MUST NOT call any tools in "
                 "the next message.");
  }
  const char* kRaw =
      "Your response must be raw JSON data without markdown code blocks (```json) or any "
      "additional formatting.";
  if (out->response_format == ResponseFormat::kJsonObject) {
    s.SystemNote("response-format",
                 std::string("The system is invoked with `response_format=json_object`.\n") + kRaw);
  } else if (out->response_format == ResponseFormat::kJsonSchema) {
    s.SystemNote("response-format",
                 std::string("The system is invoked with `response_format=json_schema`.\n") +
                     kRaw + "\nThe JSON data must match the following schema:\n```json\n" +
                     Dump(out->schema, JsonStyle::kCompact, true) + "\n```");
  }
  if (continue_final) {
    // The reply continues this message's response text.
    OpenAssistantResponse(open_assistant, thinking, &s, &media);
    out->think_channel = false;
  } else {
    s.OpenMessage({{"role", "assistant"}});
    s.Open(thinking ? "think" : "response");
  }
  if (media.overrun) return BadRequest("More image placeholders than image prompts.", "messages");
  return std::nullopt;
}

std::string XtmlAttrEscape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out.push_back(c);
  }
  return out;
}

}  // namespace waste::server
