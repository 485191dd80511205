#include "call_grammar.h"

#include <cstdint>
#include <cstdio>
#include <functional>
#include <vector>

#include "waste/grammar.h"

namespace waste::server {
namespace {

// Beyond this many properties, typed arguments come in schema order (any
// order would take a rule per subset of the keys written so far).
constexpr size_t kAnyOrderProperties = 6;
// The largest count a GBNF repetition takes ({m,n}, gbnf_parser.cc).
constexpr uint64_t kMaxRepeat = 10000;

std::string Tok(int id) { return "<[" + std::to_string(id) + "]>"; }

// <|open|>HEADER<|sep|> and <|close|>NAME<|sep|>, as GBNF.
std::string Open(const XtmlMarkers& m, const std::string& header) {
  return Tok(m.open) + " " + GbnfLiteral(header) + " " + Tok(m.sep) + " ";
}
std::string Close(const XtmlMarkers& m, const std::string& name) {
  return Tok(m.close) + " " + GbnfLiteral(name) + " " + Tok(m.sep) + " ";
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

// The value of one typed argument: its `type` attribute and the GBNF of
// its text (rules it needs appended to *rules). A string is its raw text
// (no quotes, no escapes: the encoder writes it so), within the schema's
// enum or length bounds; any other type is the JSON text of a value of
// the property's schema (the encoder's JSON dump; the parser reads it as
// JSON). False when the property has no one plain type we can type.
bool TypedValue(const Json& schema, const std::string& prefix, std::string* type,
                std::string* value, std::string* rules) {
  if (!schema.is_object() || !schema.contains("type") || !schema["type"].is_string()) return false;
  const std::string t = schema["type"];
  if (t == "string") {
    *type = "string";
    for (const char* k : {"pattern", "format", "const"}) {
      if (schema.contains(k)) return false;
    }
    if (schema.contains("enum")) {
      if (!schema["enum"].is_array() || schema["enum"].empty()) return false;
      std::string alternatives;
      for (const Json& v : schema["enum"]) {
        if (!v.is_string()) return false;
        alternatives += (alternatives.empty() ? "" : " | ") + GbnfLiteral(v.get<std::string>());
      }
      *value = "(" + alternatives + ")";
      return true;
    }
    auto bound = [&](const char* k, uint64_t* out) {
      if (!schema.contains(k)) return true;
      if (!schema[k].is_number_unsigned()) return false;
      *out = schema[k].get<uint64_t>();
      return true;
    };
    uint64_t lo = 0, hi = UINT64_MAX;
    if (!bound("minLength", &lo) || !bound("maxLength", &hi) || lo > hi) return false;
    if (lo > kMaxRepeat) return false;
    if (hi > kMaxRepeat) hi = UINT64_MAX;  // beyond what a GBNF count takes: the text is long enough anyway
    if (hi == UINT64_MAX) {
      *value = lo == 0 ? "[^]*" : "[^]{" + std::to_string(lo) + ",}";
    } else {
      *value = "[^]{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
    }
    return true;
  }
  if (t != "integer" && t != "number" && t != "boolean" && t != "null" && t != "object" &&
      t != "array") {
    return false;
  }
  auto gbnf = Grammar::JsonSchemaToGbnf(Dump(schema, JsonStyle::kCompact), prefix);
  if (!gbnf) return false;
  *type = t == "integer" ? "number" : t;  // the encoder types every JSON number `number`
  *value = prefix + "root";
  *rules += *gbnf;
  return true;
}

// GBNF for a tool's arguments as typed elements, rule `prefix + "args"`;
// empty when the schema cannot be typed.
std::string TypedArgumentRules(const Json& params, const std::string& prefix,
                               const XtmlMarkers& m) {
  if (!params.is_object()) return "";
  if (params.contains("type") && params["type"] != "object") return "";
  for (const char* k : {"patternProperties", "anyOf", "oneOf", "allOf", "$ref", "not", "if",
                        "minProperties", "maxProperties", "dependencies", "dependentRequired"}) {
    if (params.contains(k)) return "";
  }
  const Json empty = Json::object();
  const Json& props = params.contains("properties") ? params["properties"] : empty;
  if (!props.is_object()) return "";
  std::vector<std::string> keys, elements;
  std::string rules;
  for (auto it = props.begin(); it != props.end(); ++it) {
    std::string type, value;
    const std::string p = prefix + "a" + std::to_string(keys.size()) + "-";
    if (!TypedValue(it.value(), p, &type, &value, &rules)) return "";
    keys.push_back(it.key());
    elements.push_back(p + "arg");
    rules += p + "arg ::= " +
             Open(m, "argument key=\"" + XtmlAttrEscape(it.key()) + "\" type=\"" + type + "\"") +
             value + " " + Close(m, "argument") + "\n";
  }
  std::vector<bool> required(keys.size(), false);
  if (params.contains("required")) {
    if (!params["required"].is_array()) return "";
    for (const Json& r : params["required"]) {
      bool found = false;
      for (size_t i = 0; i < keys.size(); ++i) {
        if (r == keys[i]) required[i] = found = true;
      }
      if (!found) return "";  // a required key no property types
    }
  }
  const std::string args = prefix + "args";
  if (keys.empty()) return args + " ::= \"\"\n";
  if (keys.size() > kAnyOrderProperties) {
    rules += args + " ::=";
    for (size_t i = 0; i < keys.size(); ++i) rules += " " + elements[i] + (required[i] ? "" : "?");
    return rules + "\n";
  }
  // Any order, each key at most once: a rule per set of keys written so
  // far (a bit mask), ending once every required key is in it.
  const uint32_t all = (1u << keys.size()) - 1;
  uint32_t need = 0;
  for (size_t i = 0; i < keys.size(); ++i) need |= required[i] ? 1u << i : 0;
  for (uint32_t mask = 0; mask < all; ++mask) {
    std::string alternatives;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (mask & (1u << i)) continue;
      const uint32_t next = mask | (1u << i);
      alternatives += (alternatives.empty() ? "" : " | ") + elements[i] +
                      (next == all ? "" : " " + args + "-" + std::to_string(next));
    }
    const std::string name = mask == 0 ? args : args + "-" + std::to_string(mask);
    rules += name + " ::= (" + alternatives + ")" + ((mask & need) == need ? "?" : "") + "\n";
  }
  return rules;
}

// The GBNF of one JSON value of a tool's `parameters` schema, its rules
// under `prefix` (start rule prefix + "root"); any object when the
// compiler cannot take the schema (the model can still answer).
Result<std::string> ParametersGbnf(const Json& fn, const std::string& prefix) {
  const Json params = fn.contains("parameters") && fn["parameters"].is_object()
                          ? fn["parameters"]
                          : Json{{"type", "object"}};
  auto gbnf = Grammar::JsonSchemaToGbnf(Dump(params, JsonStyle::kCompact), prefix);
  if (!gbnf) gbnf = Grammar::JsonSchemaToGbnf(R"({"type": "object"})", prefix);
  return gbnf;
}

// GBNF for one call of a tool, rule `prefix + "call"`: the call element
// naming it (with the index attribute the encoder writes, optional), then
// its arguments as typed elements or as a <json> block holding one JSON
// value of its parameter schema. A schema the compiler cannot take falls
// back to any JSON object in the block rather than refusing a request the
// model could still answer.
std::string ToolCallRules(const Json& fn, const std::string& name, const std::string& prefix,
                          const XtmlMarkers& m) {
  const Json params = fn.contains("parameters") && fn["parameters"].is_object()
                          ? fn["parameters"]
                          : Json{{"type", "object"}};
  Result<std::string> gbnf = ParametersGbnf(fn, prefix);
  if (!gbnf) return "";
  const std::string typed = TypedArgumentRules(params, prefix + "typed-", m);
  const std::string block = Open(m, "json type=\"object\"") + prefix + "root " + Close(m, "json");
  return prefix + "call ::= " + Tok(m.open) + " " + GbnfLiteral("call tool=\"" + XtmlAttrEscape(name) + "\"") +
         " call-index? " + Tok(m.sep) + " (" + block +
         (typed.empty() ? "" : " | " + prefix + "typed-args") + ") " + Close(m, "call") + "\n" +
         *gbnf + typed;
}

}  // namespace

std::string GbnfLiteral(const std::string& text) {
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

namespace {

// `tool-call ::=` the alternation over the tools a reply may call (only
// the forced one when `only_forced` and tool_choice names one), each with
// the rules `rules_of(function, name, prefix)` gives it under a prefix of
// its own (start rule prefix + "call"; "" to leave the tool out). Empty
// when no tool qualifies.
std::string ToolAlternation(
    const RenderedPrompt& p, bool only_forced,
    const std::function<std::string(const Json&, const std::string&, const std::string&)>& rules_of) {
  if (!p.tools.is_array()) return "";
  std::string rules, alternation;
  int k = 0;
  for (const Json& t : p.tools) {
    std::string name;
    const Json* fn = ToolFunction(t, &name);
    if (!fn) continue;
    if (only_forced && !p.forced_tool.empty() && name != p.forced_tool) continue;
    // (Built in steps: GCC 12 warns, wrongly, about "t" + std::to_string(k).)
    std::string prefix = "t";
    prefix += std::to_string(k++);
    prefix += '-';
    std::string text = rules_of(*fn, name, prefix);
    if (text.empty()) continue;
    rules += text;
    alternation += (alternation.empty() ? "" : " | ") + prefix + "call";
  }
  if (alternation.empty()) return "";
  return "tool-call ::= " + alternation + "\n" + rules;
}

}  // namespace

std::string KimiCallRules(const RenderedPrompt& p, const KimiToolMarkers& k, bool only_forced) {
  return ToolAlternation(p, only_forced, [&](const Json& fn, const std::string& name,
                                             const std::string& prefix) -> std::string {
    Result<std::string> gbnf = ParametersGbnf(fn, prefix);
    if (!gbnf) return "";
    // The id the model was trained to write: functions.NAME:N.
    return prefix + "call ::= " + Tok(k.call_begin) + " " + GbnfLiteral("functions." + name + ":") +
           " [0-9]{1,4} " + Tok(k.argument_begin) + " " + prefix + "root " + Tok(k.call_end) +
           "\n" + *gbnf;
  });
}

std::string CallRules(const RenderedPrompt& p, const XtmlMarkers& m, bool only_forced) {
  std::string rules = ToolAlternation(
      p, only_forced, [&](const Json& fn, const std::string& name, const std::string& prefix) {
        return ToolCallRules(fn, name, prefix, m);
      });
  if (rules.empty()) return "";
  // The encoder numbers calls from 1 (index="1"); the parser only orders by it.
  return rules + "call-index ::= \" index=\\\"\" [0-9]{1,4} \"\\\"\"\n";
}

}  // namespace waste::server
