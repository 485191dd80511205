#include "constraint.h"

#include <algorithm>
#include <cstdio>
#include <list>
#include <mutex>
#include <utility>

#include "call_grammar.h"
#include "render.h"

namespace waste::server {

namespace {

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
  bool single = !p.forced_tool.empty() || p.tools.size() == 1 || !p.parallel_tool_calls;
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
  std::string root = "root ::= \"tools\" " + tok(m.sep) +
                     (p.parallel_tool_calls ? " tool-call+ " : " tool-call ") + tok(m.close) +
                     " \"tools\" " + tok(m.sep) + " " + tok(m.end_of_msg) + " | other-header\n" +
                     "other-header ::= ([^tc \\t\\n\\r] [^]* | \"t\" ([^o] [^]*)? | \"c\" ([^a] [^]*)?)? " +
                     tok(m.sep) + "\n";
  auto grammar = Grammar::Parse(root + calls);
  return grammar ? *grammar : nullptr;
}

// Kimi's tool calls (chat.json / built-in kimi turns with the tool-call
// markers). A forced call: the reply is the calls section and then the end
// of the message. Otherwise, with tools declared, a lazy grammar that
// starts after <|tool_calls_section_begin|>: one or more calls of declared
// tools with valid arguments, the section's end, the end of the message.
// (A forced call leaves no room for <think>: the reply is the call.)
std::optional<ApiError> BuildKimiGrammar(const RenderedPrompt& p, const ChatFormat& format,
                                         std::shared_ptr<const Grammar>* out,
                                         std::vector<int>* triggers) {
  if (p.tool_choice == "none") return std::nullopt;
  const KimiToolMarkers& k = format.kimi_tools;
  auto tok = [](int id) { return "<[" + std::to_string(id) + "]>"; };
  const bool forced = ForcesCall(p);
  const bool single = !p.parallel_tool_calls || (forced && (!p.forced_tool.empty() || p.tools.size() == 1));
  std::string calls = KimiCallRules(p, k, forced);
  if (calls.empty()) return std::nullopt;
  std::string root = "root ::= " + (forced ? tok(k.section_begin) + " " : std::string()) +
                     (single ? "tool-call " : "tool-call+ ") + tok(k.section_end) + " " +
                     tok(format.stop_id) + "\n";
  auto grammar = Grammar::Parse(root + calls);
  if (!grammar) {
    return ApiError{500, "server_error", "tool call grammar: " + grammar.error().message(),
                    std::nullopt, std::nullopt};
  }
  *out = *grammar;
  if (!forced) *triggers = {k.section_begin};
  return std::nullopt;
}

std::optional<ApiError> BuildReplyGrammar(const RenderedPrompt& p, const ChatFormat& format,
                                          std::shared_ptr<const Grammar>* out,
                                          std::vector<int>* triggers) {
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

// Grammars by what decides them. Agents send the same tools (and
// response_format) every turn, and compiling a few dozen tools' schemas
// into the call grammar takes a tenth of a second or more; a Grammar is
// immutable, so requests share one.
class GrammarCache {
 public:
  struct Entry {
    std::shared_ptr<const Grammar> grammar;
    std::vector<int> triggers;
  };
  bool Find(const std::string& key, Entry* out) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->first != key) continue;
      entries_.splice(entries_.begin(), entries_, it);  // most recently used first
      *out = it->second;
      return true;
    }
    return false;
  }
  void Put(std::string key, Entry entry) {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.emplace_front(std::move(key), std::move(entry));
    if (entries_.size() > kEntries) entries_.pop_back();
  }

 private:
  static constexpr size_t kEntries = 16;
  std::mutex mu_;
  std::list<std::pair<std::string, Entry>> entries_;
};

}  // namespace

std::optional<ApiError> ReplyGrammar(const PreparedChat& chat, const ChatFormat& format,
                                     std::shared_ptr<const Grammar>* out,
                                     std::vector<int>* triggers) {
  out->reset();
  triggers->clear();
  const RenderedPrompt& p = chat.prompt;
  const bool kimi = format.kind == ChatFormat::Kind::kChatJson && format.kimi_tools.ok();
  if (format.kind != ChatFormat::Kind::kXtml && !kimi) return std::nullopt;
  if (kimi && (!p.tools.is_array() || p.tools.empty())) return std::nullopt;
  const XtmlMarkers& m = format.markers;
  std::string key = std::to_string(m.open) + "," + std::to_string(m.close) + "," +
                    std::to_string(m.sep) + "," + std::to_string(m.end_of_msg) + "," +
                    (p.think_channel ? "t" : "f") + (p.parallel_tool_calls ? "p" : "1") +
                    std::to_string(static_cast<int>(p.response_format)) +
                    "\n" + p.tool_choice + "\n" + p.forced_tool + "\n" +
                    Dump(p.schema, JsonStyle::kCompact) + "\n" + Dump(p.tools, JsonStyle::kCompact);
  if (kimi) {
    const KimiToolMarkers& k = format.kimi_tools;
    key = "kimi," + std::to_string(k.section_begin) + "," + std::to_string(k.section_end) + "," +
          std::to_string(k.call_begin) + "," + std::to_string(k.argument_begin) + "," +
          std::to_string(k.call_end) + "," + std::to_string(format.stop_id) + "\n" + key;
  }
  static GrammarCache cache;
  GrammarCache::Entry hit;
  if (cache.Find(key, &hit)) {
    *out = std::move(hit.grammar);
    *triggers = std::move(hit.triggers);
    return std::nullopt;
  }
  // Errors are not kept.
  if (auto e = kimi ? BuildKimiGrammar(p, format, out, triggers)
                    : BuildReplyGrammar(p, format, out, triggers)) {
    return e;
  }
  cache.Put(std::move(key), {*out, *triggers});
  return std::nullopt;
}

}  // namespace waste::server
