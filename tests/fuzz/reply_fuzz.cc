// libFuzzer target: what a model writes, through the server's reply
// parsing (server/reply_parser.h, chat_turn.h). The input is a token
// stream: per token one byte picks an id (a marker of the format, or
// text) and, for text, a length byte and that many bytes of its piece. It
// runs through the three parsers a reply can meet: K3's XTML (think
// channel open), a chat template with <think> tags and Kimi's tool-call
// markers, and a plain chat template; each with a stop string.
//
// Invariants beyond "no crash, no sanitizer report":
// - the streamed deltas add up to the blocking message, reasoning and
//   content alike (what the server promises a client that streams);
// - every delta and the message are valid UTF-8 (the JSON they go out in);
// - a tool call that was not cut has arguments that are valid JSON.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat_turn.h"
#include "json_text.h"
#include "reply_parser.h"

namespace {

using waste::server::ChatTurn;
using waste::server::Json;
using waste::server::ReplyParser;

// Ids 1-4 XTML markers, 7 the chat templates' stop, 20-24 Kimi's tool
// markers; anything else is text.
constexpr waste::server::XtmlMarkers kXtml{1, 2, 3, 4};
constexpr waste::server::KimiToolMarkers kKimi{20, 21, 22, 23, 24};
constexpr int kMarkerIds[] = {1, 2, 3, 4, 7, 20, 21, 22, 23, 24};

bool ValidUtf8(const std::string& s) { return waste::server::SanitizeUtf8(s) == s; }

void Check(ReplyParser parser, const std::vector<std::pair<int, std::string>>& tokens) {
  ChatTurn turn(std::move(parser), {"STOP", "</th"}, /*eos_id=*/7);
  std::vector<Json> deltas;
  for (const auto& [id, piece] : tokens) {
    if (!turn.OnToken(id, piece, &deltas)) break;
  }
  turn.Finish(&deltas);
  std::string reasoning, content;
  for (const Json& d : deltas) {
    if (auto r = d.find("reasoning_content"); r != d.end()) {
      if (!ValidUtf8(r->get<std::string>())) __builtin_trap();
      reasoning += r->get<std::string>();
    }
    if (auto c = d.find("content"); c != d.end() && c->is_string()) {
      if (!ValidUtf8(c->get<std::string>())) __builtin_trap();
      content += c->get<std::string>();
    }
  }
  const Json m = turn.Message();
  const std::string want_content = m["content"].is_string() ? m["content"].get<std::string>() : "";
  const std::string want_reasoning =
      m.contains("reasoning_content") ? m["reasoning_content"].get<std::string>() : "";
  // The deltas are sanitized piece by piece and the message at once: equal
  // as long as each is valid UTF-8, which the first check holds them to.
  if (content != want_content || reasoning != want_reasoning) __builtin_trap();
  if (!ValidUtf8(want_content) || !ValidUtf8(want_reasoning)) __builtin_trap();
  if (m.contains("tool_calls")) {
    for (const Json& call : m["tool_calls"]) {
      const std::string args = call["function"]["arguments"].get<std::string>();
      Json v;
      std::string err;
      // A cut call keeps its partial text (finish_reason "length"); a
      // finished one is JSON.
      if (turn.FinishReason(true) != "length" && !waste::server::ParseJson(args, &v, &err)) {
        __builtin_trap();
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::pair<int, std::string>> tokens;
  size_t i = 0;
  while (i < size && tokens.size() < 4096) {
    const uint8_t pick = data[i++];
    if (pick < 2 * sizeof kMarkerIds / sizeof kMarkerIds[0]) {
      tokens.emplace_back(kMarkerIds[pick / 2], "");
      continue;
    }
    size_t n = i < size ? data[i++] % 16 : 0;
    n = std::min(n, size - i);
    tokens.emplace_back(100, std::string(reinterpret_cast<const char*>(data + i), n));
    i += n;
  }
  Check(ReplyParser(kXtml, /*think_channel=*/true), tokens);
  ReplyParser kimi(7, "<think>", "</think>");
  kimi.EnableKimiTools(kKimi);
  Check(std::move(kimi), tokens);
  ReplyParser kimi_one(7, "<think>", "</think>");
  kimi_one.EnableKimiTools(kKimi, /*max_calls=*/1);
  Check(std::move(kimi_one), tokens);
  Check(ReplyParser(7), tokens);
  return 0;
}
