#include "constraint.h"

#include <cstdio>

namespace waste::server {

BudgetedConstraint::BudgetedConstraint(std::shared_ptr<const Grammar> grammar,
                                       std::shared_ptr<const Vocabulary> vocab, int max_tokens)
    : matcher_(std::move(grammar), std::move(vocab)), max_tokens_(max_tokens) {
  UpdateClosing();
}

void BudgetedConstraint::UpdateClosing() {
  // Each step of closing mode shortens the shortest ending by at least one
  // byte, so the tokens left must cover it (plus one spare).
  matcher_.SetClosing(max_tokens_ - used_ <= matcher_.MinBytesToEnd() + 1);
}

void BudgetedConstraint::Accept(int token) noexcept {
  matcher_.Accept(token);
  ++used_;
  UpdateClosing();
}

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

std::string XtmlEscape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out.push_back(c);
  }
  return out;
}

// The tool a reply must call: tool_choice naming a function, or
// "required" with exactly one declared tool. Null when none.
const Json* ForcedTool(const RenderedPrompt& p, std::string* name) {
  if (!p.tools.is_array()) return nullptr;
  for (const Json& t : p.tools) {
    if (!t.is_object()) continue;
    const Json& fn = t.contains("function") && t["function"].is_object() ? t["function"] : t;
    if (!fn.contains("name") || !fn["name"].is_string()) continue;
    std::string n = fn["name"].get<std::string>();
    bool forced = !p.forced_tool.empty() ? n == p.forced_tool
                                         : p.tool_choice == "required" && p.tools.size() == 1;
    if (forced) {
      *name = n;
      return &fn;
    }
  }
  return nullptr;
}

// A forced tool call: the reply is the think channel (if open), an empty
// response, and one call of the tool whose arguments are a <json> block
// holding one JSON value of the tool's parameter schema. A schema the
// compiler cannot take (pattern, minimum, ...) falls back to any JSON
// object rather than refusing a request the model could still answer.
std::shared_ptr<const Grammar> ToolCallGrammar(const RenderedPrompt& p, const ChatFormat& format) {
  std::string name;
  const Json* fn = ForcedTool(p, &name);
  if (!fn) return nullptr;
  std::string schema = R"({"type": "object"})";
  if (fn->contains("parameters") && (*fn)["parameters"].is_object()) {
    schema = Dump((*fn)["parameters"], JsonStyle::kCompact);
  }
  auto gbnf = Grammar::JsonSchemaToGbnf(schema);
  if (!gbnf) gbnf = Grammar::JsonSchemaToGbnf(R"({"type": "object"})");
  if (!gbnf) return nullptr;
  std::string text = *gbnf;
  text.replace(0, text.find("::="), "json-root ");
  const XtmlMarkers& m = format.markers;
  auto tok = [](int id) { return "<[" + std::to_string(id) + "]>"; };
  auto open = [&](const std::string& header) { return tok(m.open) + " " + Literal(header) + " " + tok(m.sep) + " "; };
  auto close = [&](const char* tag) { return tok(m.close) + " \"" + tag + "\" " + tok(m.sep) + " "; };
  std::string root = "root ::= ";
  if (p.think_channel) root += "[^]* " + close("think") + open("response");
  root += close("response") + open("tools") + open("call tool=\"" + XtmlEscape(name) + "\"") +
          open("json type=\"object\"") + "json-root " + close("json") + close("call") +
          close("tools") + tok(m.end_of_msg) + "\n";
  auto grammar = Grammar::Parse(root + text);
  return grammar ? *grammar : nullptr;
}

}  // namespace

std::optional<ApiError> ReplyGrammar(const PreparedChat& chat, const ChatFormat& format,
                                     std::shared_ptr<const Grammar>* out) {
  out->reset();
  const RenderedPrompt& p = chat.prompt;
  if (format.kind != ChatFormat::Kind::kXtml) return std::nullopt;
  if (p.tool_choice != "none") {
    if (auto g = ToolCallGrammar(p, format)) {
      *out = std::move(g);
      return std::nullopt;
    }
  }
  if (p.response_format == ResponseFormat::kText) return std::nullopt;
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
