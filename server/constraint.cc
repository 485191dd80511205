#include "constraint.h"

#include <algorithm>
#include <cstdio>

#include "render.h"

namespace waste::server {

namespace {

// A GBNF string literal holding `text` byte for byte.
std::string Literal(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}


// The function object of a declared tool ({"type":"function","function":
// {...}} or the function itself), null when it has no string name.
const Json* ToolFunction(const Json& t, std::string* name) {
  if (!t.is_object()) return nullptr;
  const Json& fn = t.contains("function") && t["function"].is_object() ? t["function"] : t;
  if (!fn.contains("name") || !fn["name"].is_string()) return nullptr;
  *name = fn["name"].get<std::string>();
  return &fn;
}

// GBNF for one call of a tool: the call element naming it, holding a
// <json> block with one JSON value of its parameter schema. Every rule of
// the schema is renamed with `prefix` so that calls of several tools can
// share one grammar. A schema the compiler cannot take (pattern, minimum,
// ...) falls back to any JSON object rather than refusing a request the
// model could still answer. Returns the call's rule text; `*rule` its name.
std::string ToolCallRules(const Json& fn, const std::string& name, const std::string& prefix,
                          const XtmlMarkers& m, std::string* rule) {
  std::string schema = R"({"type": "object"})";
  if (fn.contains("parameters") && fn["parameters"].is_object()) {
    schema = Dump(fn["parameters"], JsonStyle::kCompact);
  }
  auto gbnf = Grammar::JsonSchemaToGbnf(schema, prefix);
  if (!gbnf) gbnf = Grammar::JsonSchemaToGbnf(R"({"type": "object"})", prefix);
  if (!gbnf) return "";
  auto tok = [](int id) { return "<[" + std::to_string(id) + "]>"; };
  auto open = [&](const std::string& header) { return tok(m.open) + " " + Literal(header) + " " + tok(m.sep) + " "; };
  auto close = [&](const char* tag) { return tok(m.close) + " \"" + tag + "\" " + tok(m.sep) + " "; };
  *rule = prefix + "call";
  return *rule + " ::= " + open("call tool=\"" + XtmlAttrEscape(name) + "\"") +
         open("json type=\"object\"") + prefix + "root " + close("json") + close("call") + "\n" +
         *gbnf;
}

// The alternation over the calls a reply may make: only the forced tool
// when tool_choice names one (or required with one tool), else every
// declared tool. Empty when no tool qualifies.
std::string CallRules(const RenderedPrompt& p, const XtmlMarkers& m, bool only_forced) {
  if (!p.tools.is_array()) return "";
  std::string rules, alternation;
  int k = 0;
  for (const Json& t : p.tools) {
    std::string name, rule;
    const Json* fn = ToolFunction(t, &name);
    if (!fn) continue;
    if (only_forced && !p.forced_tool.empty() && name != p.forced_tool) continue;
    std::string text = ToolCallRules(*fn, name, "t" + std::to_string(k++) + "-", m, &rule);
    if (text.empty()) continue;
    rules += text;
    alternation += (alternation.empty() ? "" : " | ") + rule;
  }
  if (alternation.empty()) return "";
  return "tool-call ::= " + alternation + "\n" + rules;
}

// tool_choice naming a function, or "required" with exactly one tool: the
// reply is one call of that tool. "required" with several tools: one or
// more calls, each of a declared tool with that tool's arguments.
bool ForcesCall(const RenderedPrompt& p) {
  if (!p.tools.is_array() || p.tools.empty()) return false;
  return !p.forced_tool.empty() || p.tool_choice == "required";
}

// A forced call: the reply is the think channel (if open), an empty
// response, and the tools element, then the end of the message.
std::shared_ptr<const Grammar> ForcedCallGrammar(const RenderedPrompt& p, const ChatFormat& format) {
  bool single = !p.forced_tool.empty() || p.tools.size() == 1;
  std::string calls = CallRules(p, format.markers, true);
  if (calls.empty()) return nullptr;
  const XtmlMarkers& m = format.markers;
  auto tok = [](int id) { return "<[" + std::to_string(id) + "]>"; };
  auto open = [&](const char* tag) { return tok(m.open) + " \"" + tag + "\" " + tok(m.sep) + " "; };
  auto close = [&](const char* tag) { return tok(m.close) + " \"" + tag + "\" " + tok(m.sep) + " "; };
  std::string root = "root ::= ";
  if (p.think_channel) root += "[^]* " + close("think") + open("response");
  root += close("response") + open("tools") + (single ? "tool-call " : "tool-call+ ") +
          close("tools") + tok(m.end_of_msg) + "\n";
  auto grammar = Grammar::Parse(root + calls);
  return grammar ? *grammar : nullptr;
}

// tool_choice "auto" (or absent) with tools declared: a lazy grammar that
// starts on the token after every <|open|> marker. The element's header
// is then either `tools`, which must go on as one or more calls of
// declared tools with valid arguments, close the tools element and end the
// message, or any header that does not start "to" or "ca" (response,
// think, ...), after whose <|sep|> the output is free again. So a call
// can only be written inside a tools element, and only validly.
std::shared_ptr<const Grammar> LazyCallGrammar(const RenderedPrompt& p, const ChatFormat& format) {
  std::string calls = CallRules(p, format.markers, false);
  if (calls.empty()) return nullptr;
  const XtmlMarkers& m = format.markers;
  auto tok = [](int id) { return "<[" + std::to_string(id) + "]>"; };
  std::string root = "root ::= \"tools\" " + tok(m.sep) + " tool-call+ " + tok(m.close) +
                     " \"tools\" " + tok(m.sep) + " " + tok(m.end_of_msg) + " | other-header\n" +
                     "other-header ::= ([^tc \\t\\n\\r] [^]* | \"t\" ([^o] [^]*)? | \"c\" ([^a] [^]*)?)? " +
                     tok(m.sep) + "\n";
  auto grammar = Grammar::Parse(root + calls);
  return grammar ? *grammar : nullptr;
}

}  // namespace

std::optional<ApiError> ReplyGrammar(const PreparedChat& chat, const ChatFormat& format,
                                     std::shared_ptr<const Grammar>* out,
                                     std::vector<int>* triggers) {
  out->reset();
  triggers->clear();
  const RenderedPrompt& p = chat.prompt;
  if (format.kind != ChatFormat::Kind::kXtml) return std::nullopt;
  if (p.tool_choice != "none" && ForcesCall(p)) {
    if (auto g = ForcedCallGrammar(p, format)) {
      *out = std::move(g);
      return std::nullopt;
    }
  }
  if (p.response_format == ResponseFormat::kText) {
    // Tools the model may call: each call it opens is constrained.
    if (p.tool_choice == "none" || ForcesCall(p)) return std::nullopt;
    if (auto g = LazyCallGrammar(p, format)) {
      *out = std::move(g);
      *triggers = {format.markers.open};
    }
    return std::nullopt;
  }
  std::string schema = p.response_format == ResponseFormat::kJsonObject || p.schema.is_null()
                           ? std::string(R"({"type": "object"})")
                           : Dump(p.schema, JsonStyle::kCompact);
  auto gbnf = Grammar::JsonSchemaToGbnf(schema);
  if (!gbnf) {
    return BadRequest("response_format.json_schema: " + gbnf.error().message(), "response_format");
  }
  // The schema's grammar becomes the response body of the XTML reply.
  std::string text = *gbnf;
  text.replace(0, text.find("::="), "json-root ");
  const XtmlMarkers& m = format.markers;
  auto tok = [](int id) { return "<[" + std::to_string(id) + "]>"; };
  std::string root = "root ::= ";
  if (p.think_channel) {
    root += "[^]* " + tok(m.close) + " \"think\" " + tok(m.sep) + " " + tok(m.open) +
            " \"response\" " + tok(m.sep) + " ";
  }
  root += "json-root " + tok(m.end_of_msg) + "\n";
  auto grammar = Grammar::Parse(root + text);
  if (!grammar) {
    return ApiError{500, "server_error", "reply grammar: " + grammar.error().message(),
                    std::nullopt, std::nullopt};
  }
  *out = *grammar;
  return std::nullopt;
}

}  // namespace waste::server
