#include "chat_request.h"

#include <algorithm>
#include <cmath>

#include "image_input.h"

namespace waste::server {
namespace {

bool IsNumber(const Json& v) { return v.is_number(); }  // nlohmann: bool is not a number
bool IsInteger(const Json& v) { return v.is_number_integer(); }

std::optional<ApiError> NumberIn(const Json& body, const char* name, double lo, double hi,
                                 std::optional<float>* out) {
  const Json* v = Field(body, name);
  if (!v) return std::nullopt;
  std::string q = std::string("'") + name + "'";
  if (!IsNumber(*v)) return BadRequest(q + " must be a number", name);
  double d = v->get<double>();
  if (!(d >= lo && d <= hi)) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s must be between %.1f and %.1f", q.c_str(), lo, hi);
    return BadRequest(buf, name);
  }
  *out = static_cast<float>(d);
  return std::nullopt;
}

// An integer-valued number from 1 to kMaxChoices (1.0 counts, as OpenAI's
// Python validation lets it), else none.
std::optional<int> ChoiceCount(const Json& v) {
  if (!IsNumber(v)) return std::nullopt;
  const double d = v.get<double>();
  if (!(d >= 1 && d <= kMaxChoices) || d != std::floor(d)) return std::nullopt;
  return static_cast<int>(d);
}

ApiError VisionDisabled() {
  return BadRequest(
      "this server was started without the vision tower; restart it with --vision to accept "
      "images",
      std::nullopt, "vision_disabled");
}

}  // namespace

const Json& CallFunction(const Json& call) {
  auto it = call.find("function");
  if (it != call.end() && it->is_object()) return *it;
  return call;
}

std::optional<ApiError> ParseSampling(const Json& body, SamplingRequest* out,
                                      bool allow_zero_max) {
  if (const Json* n = Field(body, "n")) {
    // `true` is 1: the reference compared n == 1 in Python, where True passes.
    std::optional<int> count = n->is_boolean() && n->get<bool>() ? std::optional<int>(1) : ChoiceCount(*n);
    if (!count) {
      return BadRequest("'n' must be an integer from 1 to " + std::to_string(kMaxChoices), "n");
    }
    out->n = *count;
  }
  std::optional<float> temperature;
  if (auto e = NumberIn(body, "temperature", 0.0, 2.0, &temperature)) return e;
  out->temperature = temperature.value_or(0.0f);
  if (auto e = NumberIn(body, "top_p", 0.0, 1.0, &out->top_p)) return e;
  if (const Json* k = Field(body, "top_k")) {
    if (!IsNonNegativeInteger(*k)) {
      return BadRequest("'top_k' must be a non-negative integer", "top_k");
    }
    uint64_t v = k->get<uint64_t>();
    out->top_k = v > 0x7fffffff ? 0x7fffffff : static_cast<int>(v);
  }
  if (const Json* s = Field(body, "seed")) {
    if (!IsInteger(*s)) return BadRequest("'seed' must be an integer", "seed");
    // Reduced mod 2^64, so -1 is 2^64-1.
    out->seed = s->is_number_unsigned() ? s->get<uint64_t>()
                                        : static_cast<uint64_t>(s->get<int64_t>());
  }
  const Json* cap = nullptr;
  const char* cap_name = "max_tokens";
  if (body.contains("max_completion_tokens")) {
    cap = Field(body, "max_completion_tokens");  // null: the default, max_tokens ignored
    cap_name = "max_completion_tokens";
  } else {
    cap = Field(body, "max_tokens");
  }
  if (cap) {
    const int64_t least = allow_zero_max ? 0 : 1;
    bool ok = IsInteger(*cap) && (cap->is_number_unsigned()
                                      ? cap->get<uint64_t>() >= static_cast<uint64_t>(least)
                                      : cap->get<int64_t>() >= least);
    if (!ok) {
      return BadRequest(std::string("'") + cap_name + "' must be a positive integer" +
                            (allow_zero_max ? " (or 0 with echo, to score the prompt)" : ""),
                        cap_name);
    }
    out->max_tokens = cap->get<uint64_t>();
  }
  std::optional<float> pen;
  if (auto e = NumberIn(body, "presence_penalty", -2.0, 2.0, &pen)) return e;
  out->presence_penalty = pen.value_or(0.0f);
  pen.reset();
  if (auto e = NumberIn(body, "frequency_penalty", -2.0, 2.0, &pen)) return e;
  out->frequency_penalty = pen.value_or(0.0f);
  if (const Json* bias = Field(body, "logit_bias")) {
    const char* msg = "'logit_bias' must map token ids (as strings) to numbers from -100 to 100";
    if (!bias->is_object()) return BadRequest(msg, "logit_bias");
    for (auto it = bias->begin(); it != bias->end(); ++it) {
      const std::string& key = it.key();
      bool digits = !key.empty() && key.size() <= 9 &&
                    std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!digits || !IsNumber(it.value())) return BadRequest(msg, "logit_bias");
      double v = it.value().get<double>();
      if (!(v >= -100.0 && v <= 100.0)) return BadRequest(msg, "logit_bias");
      out->logit_bias.emplace_back(std::stoi(key), static_cast<float>(v));
    }
  }
  if (const Json* stop = Field(body, "stop")) {
    const char* msg = "'stop' must be a string or an array of strings";
    if (stop->is_string()) {
      if (!stop->get_ref<const std::string&>().empty()) out->stops.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      for (const Json& s : *stop) {
        if (!s.is_string()) return BadRequest(msg, "stop");
        if (!s.get_ref<const std::string&>().empty()) out->stops.push_back(s.get<std::string>());
      }
    } else {
      return BadRequest(msg, "stop");
    }
  }
  return std::nullopt;
}

std::optional<ApiError> RefuseUnsupported(const Json& body, bool chat) {
  auto refuse = [](const std::string& field, const std::string& what) {
    return BadRequest("'" + field + "' is not supported by this server: " + what, field,
                      "unsupported_parameter");
  };
  if (chat) return std::nullopt;
  if (const Json* v = Field(body, "suffix"); v && !(v->is_string() && v->get_ref<const std::string&>().empty())) {
    return refuse("suffix", "insertion (text after the completion) is not supported");
  }
  if (const Json* v = Field(body, "response_format");
      v && !(v->is_object() && v->value("type", std::string()) == "text")) {
    return refuse("response_format", "constrained output is for /v1/chat/completions");
  }
  return std::nullopt;
}

std::optional<ApiError> ParseBestOf(const Json& body, int n, bool stream, int* best_of) {
  *best_of = n;
  const Json* v = Field(body, "best_of");
  if (!v) return std::nullopt;
  std::optional<int> count = ChoiceCount(*v);
  if (!count || *count < n) {
    return BadRequest("'best_of' must be an integer from 'n' (" + std::to_string(n) + ") to " +
                          std::to_string(kMaxChoices),
                      "best_of");
  }
  if (*count > n && stream) {
    return BadRequest("'best_of' greater than 'n' cannot be streamed: the best completions are "
                      "known only once all of them have ended",
                      "best_of");
  }
  *best_of = *count;
  return std::nullopt;
}

std::optional<ApiError> ParseLogprobs(const Json& body, bool chat, LogprobsRequest* out) {
  *out = {};
  auto count = [&](const char* name, int* n) -> std::optional<ApiError> {
    const Json* v = Field(body, name);
    if (!v) return std::nullopt;
    if (!IsNonNegativeInteger(*v) || v->get<uint64_t>() > static_cast<uint64_t>(kMaxTopLogprobs)) {
      return BadRequest(std::string("'") + name + "' must be an integer from 0 to " +
                            std::to_string(kMaxTopLogprobs),
                        name);
    }
    *n = v->get<int>();
    return std::nullopt;
  };
  if (chat) {
    if (const Json* v = Field(body, "logprobs")) {
      if (!v->is_boolean()) return BadRequest("'logprobs' must be a boolean", "logprobs");
      out->on = v->get<bool>();
    }
    if (auto e = count("top_logprobs", &out->top)) return e;
    if (out->top > 0 && !out->on) {
      return BadRequest("'top_logprobs' needs 'logprobs' set to true", "top_logprobs");
    }
    return std::nullopt;
  }
  // Completions: `logprobs` is the number of alternatives (0 = the chosen
  // token's log-probability only); null or absent = none.
  if (Field(body, "logprobs")) {
    if (auto e = count("logprobs", &out->top)) return e;
    out->on = true;
  }
  if (const Json* v = Field(body, "echo")) {
    if (!v->is_boolean()) return BadRequest("'echo' must be a boolean", "echo");
    out->echo = v->get<bool>();
  }
  return std::nullopt;
}

std::optional<ApiError> ParseStream(const Json& body, bool* stream, bool* include_usage) {
  *stream = false;
  *include_usage = false;
  if (const Json* s = Field(body, "stream")) {
    if (!s->is_boolean()) return BadRequest("'stream' must be a boolean", "stream");
    *stream = s->get<bool>();
  }
  if (const Json* so = Field(body, "stream_options"); so && so->is_object()) {
    auto it = so->find("include_usage");
    if (it != so->end()) {
      const Json& u = *it;
      *include_usage = (u.is_boolean() && u.get<bool>()) ||
                       (u.is_number() && u.get<double>() != 0) ||
                       (u.is_string() && !u.get_ref<const std::string&>().empty()) ||
                       ((u.is_array() || u.is_object()) && !u.empty());
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ValidateMessages(const Json& body, bool vision) {
  auto it = body.find("messages");
  if (it == body.end()) return BadRequest("'messages' is a required property", "messages");
  if (!it->is_array() || it->empty()) {
    return BadRequest("'messages' must be a non-empty array", "messages");
  }
  size_t i = 0;
  for (const Json& m : *it) {
    std::string at = "messages[" + std::to_string(i++) + "]";
    if (!m.is_object()) return BadRequest(at + " must be an object", at);
    auto role = m.find("role");
    static const char* kRoles[] = {"system", "user", "assistant", "tool", "developer"};
    bool known = false;
    if (role != m.end() && role->is_string()) {
      for (const char* r : kRoles) known = known || *role == r;
    }
    if (!known) {
      return BadRequest(at + ".role must be one of ['assistant', 'developer', 'system', 'tool', 'user']",
                        at + ".role");
    }
    auto content = m.find("content");
    bool has_content = content != m.end() && !content->is_null();
    // An assistant turn may be empty (null content, as the reference
    // accepted, or only tool_calls); every other role says something.
    if (!has_content && *role != "assistant") {
      return BadRequest(at + ".content is required for a '" + role->get<std::string>() +
                            "' message",
                        at + ".content");
    }
    if (has_content) {
      if (content->is_array()) {
        size_t j = 0;
        for (const Json& part : *content) {
          std::string pat = at + ".content[" + std::to_string(j++) + "]";
          if (!part.is_object()) return BadRequest(pat + " must be an object", pat);
          auto type = part.find("type");
          if (type == part.end() || !type->is_string() || type->get_ref<const std::string&>().empty()) {
            return BadRequest(pat + ".type must be a non-empty string", pat + ".type");
          }
          if (IsImagePart(type->get<std::string>())) {
            if (!vision) return VisionDisabled();
            continue;  // its reference is checked by CollectImages
          }
          auto text = part.find("text");
          if (text == part.end() || !text->is_string()) {
            return BadRequest(pat + ".text must be a string", pat + ".text");
          }
        }
      } else if (!content->is_string()) {
        return BadRequest(at + ".content must be a string, an array, or null", at + ".content");
      }
    }
    auto calls = m.find("tool_calls");
    if (calls != m.end() && !calls->is_null()) {
      if (*role != "assistant") {
        return BadRequest(at + ".tool_calls is only valid for assistant messages", at + ".tool_calls");
      }
      if (!calls->is_array()) return BadRequest(at + ".tool_calls must be an array", at + ".tool_calls");
      size_t j = 0;
      for (const Json& call : *calls) {
        std::string cat = at + ".tool_calls[" + std::to_string(j++) + "]";
        if (!call.is_object()) return BadRequest(cat + " must be an object", cat);
        const Json& fn = CallFunction(call);
        std::string fat = &fn == &call ? cat : cat + ".function";
        auto name = fn.find("name");
        if (name == fn.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
          return BadRequest(fat + ".name must be a non-empty string", fat + ".name");
        }
        auto args = fn.find("arguments");
        if (args != fn.end() && !args->is_null() && !args->is_object() && !args->is_string()) {
          return BadRequest(fat + ".arguments must be an object or a JSON string", fat + ".arguments");
        }
      }
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ParseContinuation(const Json& body, bool* continue_final) {
  *continue_final = false;
  const Json* v = Field(body, "continue_final_message");
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_boolean()) return BadRequest("'continue_final_message' must be a boolean", "continue_final_message");
  if (!v->get<bool>()) return std::nullopt;
  const Json& messages = body["messages"];
  const Json& last = messages.back();
  auto calls = last.find("tool_calls");
  if (last["role"] != "assistant" || (calls != last.end() && calls->is_array() && !calls->empty())) {
    return BadRequest("'continue_final_message' needs the last message to be an assistant's, without "
                      "tool calls (its text is what the reply continues)",
                      "continue_final_message");
  }
  auto choice = body.find("tool_choice");
  if (choice != body.end() && (choice->is_object() || *choice == "required")) {
    return BadRequest("'continue_final_message' continues text; it cannot also force a tool call",
                      "tool_choice");
  }
  auto format = body.find("response_format");
  if (format != body.end() && format->is_object() && format->value("type", std::string("text")) != "text") {
    return BadRequest("'continue_final_message' continues text; response_format cannot constrain "
                      "a reply that starts mid-text",
                      "response_format");
  }
  *continue_final = true;
  return std::nullopt;
}

std::optional<ApiError> ValidateToolOptions(const Json& body) {
  std::vector<std::string> names;
  if (const Json* tools = Field(body, "tools")) {
    if (!tools->is_array()) return BadRequest("'tools' must be an array", "tools");
    for (size_t i = 0; i < tools->size(); ++i) {
      const Json& t = (*tools)[i];
      std::string at = "tools[" + std::to_string(i) + "]";
      if (!t.is_object()) return BadRequest(at + " must be an object", at);
      if (const Json* type = Field(t, "type"); type && *type != "function") {
        return BadRequest(at + ".type must be 'function' (the only tool type supported)",
                          at + ".type");
      }
      const Json* fn = Field(t, "function");
      if (!fn || !fn->is_object()) {
        return BadRequest(at + ".function must be an object with a 'name'", at + ".function");
      }
      const Json* name = Field(*fn, "name");
      if (!name || !name->is_string() || name->get_ref<const std::string&>().empty()) {
        return BadRequest(at + ".function.name must be a non-empty string", at + ".function.name");
      }
      if (const Json* params = Field(*fn, "parameters"); params && !params->is_object()) {
        return BadRequest(at + ".function.parameters must be an object (a JSON Schema)",
                          at + ".function.parameters");
      }
      names.push_back(name->get<std::string>());
    }
  }
  if (const Json* choice = Field(body, "tool_choice")) {
    if (choice->is_string()) {
      const std::string& c = choice->get_ref<const std::string&>();
      if (c != "none" && c != "auto" && c != "required") {
        return BadRequest("tool_choice '" + c +
                              "' is not one of 'none', 'auto', 'required' or an object naming a "
                              "function",
                          "tool_choice");
      }
      if (c == "required" && names.empty()) {
        return BadRequest("tool_choice 'required' needs at least one tool in 'tools'",
                          "tool_choice");
      }
    } else if (choice->is_object()) {
      const Json* type = Field(*choice, "type");
      if (type && *type != "function") {
        return BadRequest("tool_choice.type must be 'function'", "tool_choice");
      }
      const Json* fn = Field(*choice, "function");
      const Json* name = fn && fn->is_object() ? Field(*fn, "name") : nullptr;
      if (!name || !name->is_string() || name->get_ref<const std::string&>().empty()) {
        return BadRequest("tool_choice must be {\"type\": \"function\", \"function\": {\"name\": ...}}",
                          "tool_choice");
      }
      const std::string& n = name->get_ref<const std::string&>();
      if (std::find(names.begin(), names.end(), n) == names.end()) {
        return BadRequest("tool_choice names the function '" + n + "', which is not in 'tools'",
                          "tool_choice");
      }
    } else {
      return BadRequest("'tool_choice' must be a string or an object", "tool_choice");
    }
  }
  if (const Json* parallel = Field(body, "parallel_tool_calls"); parallel && !parallel->is_boolean()) {
    return BadRequest("'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
  }
  if (const Json* rf = Field(body, "response_format")) {
    if (!rf->is_object()) {
      return BadRequest("'response_format' must be an object", "response_format");
    }
    const Json* type = Field(*rf, "type");
    if (!type || (*type != "text" && *type != "json_object" && *type != "json_schema")) {
      return BadRequest("response_format.type must be 'text', 'json_object' or 'json_schema'",
                        "response_format.type");
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ResolveThinking(const Json& body, bool default_on, bool* thinking,
                                        std::string* effort) {
  effort->clear();
  const Json* b = Field(body, "thinking");
  if (b && !b->is_boolean()) return BadRequest("'thinking' must be a boolean", "thinking");
  const Json* e = Field(body, "reasoning_effort");
  if (!e) e = Field(body, "thinking_effort");
  if (!e) {
    if (const Json* r = Field(body, "reasoning"); r && r->is_object()) e = Field(*r, "effort");
  }
  if (!e) {
    *thinking = b ? b->get<bool>() : default_on;
    return std::nullopt;
  }
  if (!e->is_string()) return BadRequest("'reasoning_effort' must be a string", "reasoning_effort");
  std::string lower = e->get<std::string>();
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "none" || lower == "minimal" || lower == "off") {
    *thinking = false;
    return std::nullopt;
  }
  // "medium" is OpenAI's default effort, which agents send unasked; K3's
  // encoder has no note for it, so it is thinking with the model's own
  // default effort: the prompt of a request that names no effort
  // (docs/SERVER.md, "Differences from the reference server").
  if (lower == "low" || lower == "high" || lower == "max" || lower == "medium") {
    if (b && !b->get<bool>()) {
      return BadRequest("'thinking' is false but 'reasoning_effort' asks for reasoning - pick one",
                        "reasoning_effort");
    }
    *thinking = true;
    if (lower != "medium") *effort = lower;
    return std::nullopt;
  }
  return BadRequest("reasoning_effort='" + e->get<std::string>() +
                        "' is not supported by this model: use 'low', 'medium' (the model's "
                        "default), 'high' or 'max', or 'none', 'minimal' or 'off' to answer "
                        "without reasoning",
                    "reasoning_effort");
}

std::optional<ApiError> ParseThinkingBudget(const Json& body, int* budget) {
  *budget = -1;
  const Json* r = Field(body, "reasoning");
  const Json* m = r && r->is_object() ? Field(*r, "max_tokens") : nullptr;
  if (!m) return std::nullopt;
  if (!IsNonNegativeInteger(*m)) {
    return BadRequest("'reasoning.max_tokens' must be a non-negative integer",
                      "reasoning.max_tokens");
  }
  *budget = static_cast<int>(std::min<uint64_t>(m->get<uint64_t>(), 0x7fffffff));
  return std::nullopt;
}

std::optional<ApiError> ParsePrediction(const Json& body, std::string* text) {
  text->clear();
  const Json* p = Field(body, "prediction");
  if (!p || p->is_null()) return std::nullopt;
  const auto bad = [](const std::string& why) {
    return BadRequest("'prediction' " + why, "prediction");
  };
  if (!p->is_object()) return bad("must be an object {\"type\": \"content\", \"content\": ...}");
  const Json* type = Field(*p, "type");
  if (!type || *type != "content") return bad("must have \"type\": \"content\"");
  const Json* content = Field(*p, "content");
  if (content && content->is_string()) {
    *text = content->get<std::string>();
    return std::nullopt;
  }
  if (!content || !content->is_array()) {
    return bad("content must be a string or an array of text parts");
  }
  for (const Json& part : *content) {
    const Json* t = part.is_object() ? Field(part, "text") : nullptr;
    if (!t || !t->is_string() || part.value("type", std::string()) != "text") {
      return bad("content parts must be {\"type\": \"text\", \"text\": string}");
    }
    *text += t->get_ref<const std::string&>();
  }
  return std::nullopt;
}

}  // namespace waste::server
