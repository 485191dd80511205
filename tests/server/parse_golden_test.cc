// parse.json: scripted (id, piece) streams -> the same message,
// finish_reason, usage and SSE delta sequence as the reference, except
// where we fix its defects on purpose (docs/SERVER.md, "Differences"):
//  - tool-call ids are unique (call_<hex>), not call_<index>;
//  - `arguments` is always valid JSON (a NaN argument stays a string, an
//    unparsable <json> block is not passed on);
//  - a tag header still pending when <|end_of_msg|> arrives is discarded
//    in the blocking reply too (the reference streamed it nowhere but put
//    it in the blocking message);
//  - a tool call cut by max_tokens finishes with "length", not
//    "tool_calls" (the reference claimed a complete call);
//  - the stream ends as OpenAI's does: the `waste` object rides on the
//    finish chunk instead of a trailing chunk with `choices: []` (which
//    broke clients reading chunk.choices[0]), and with include_usage every
//    chunk but the usage chunk carries "usage": null (OurStreamEnding).
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>

#include "chat_request.h"
#include "chat_turn.h"
#include "golden_util.h"
#include "openai_shapes.h"

namespace waste::server {
namespace {

using testing::LoadServeFixture;

struct Replayed {
  Json message;
  std::string finish_reason;
  int completion_tokens = 0;
  std::vector<Json> stream;  // chunks as sent, "[DONE]" last
};

Replayed Replay(const Json& c) {
  SamplingRequest s;
  EXPECT_FALSE(ParseSampling(c["request"], &s));
  bool stream = false, usage = false;
  EXPECT_FALSE(ParseStream(c["request"], &stream, &usage));
  ReplyParser parser = c["format"] == "xtml"
                           ? ReplyParser(XtmlMarkers{307, 308, 309, 310}, c["channel"] == "think")
                           : ReplyParser(15);
  ChatTurn turn(std::move(parser), s.stops, -1);
  ReplyHeader h{"chatcmpl-x", 0, "k3"};
  Replayed r;
  int max_tokens = s.max_tokens ? static_cast<int>(*s.max_tokens) : 4096;
  std::vector<Json> deltas;
  int delivered = 0;
  bool stopped = false;
  for (const Json& t : c["tokens"]) {
    if (delivered == max_tokens) break;
    ++delivered;
    bool more = turn.OnToken(t[0].get<int>(), t[1].get<std::string>(), &deltas);
    if (!more) {
      stopped = true;
      break;
    }
  }
  turn.Finish(&deltas);
  auto pending = [&](Json chunk) { return usage ? WithNullUsage(std::move(chunk)) : chunk; };
  for (Json& d : deltas) r.stream.push_back(pending(DeltaChunk(h, d, nullptr)));
  bool ran_to_max = !stopped && delivered == max_tokens;
  r.finish_reason = turn.FinishReason(ran_to_max);
  r.stream.push_back(pending(FinishChunk(h, r.finish_reason, Json::object())));
  r.completion_tokens = turn.completion_tokens();
  if (usage) r.stream.push_back(UsageChunk(h, Usage(32, r.completion_tokens)));
  r.stream.push_back("[DONE]");
  r.message = turn.Message();
  return r;
}

// Our ids are call_<24 hex> unless the model wrote one; map the
// reference's call_<index> onto ours position by position.
void NormalizeIds(Json* expected, const Json& ours, std::map<std::string, std::string>* seen) {
  if (!expected->contains("tool_calls")) return;
  for (size_t i = 0; i < (*expected)["tool_calls"].size(); ++i) {
    Json& e = (*expected)["tool_calls"][i];
    const std::string ref_id = e["id"];
    const std::string our_id = ours["tool_calls"][i]["id"];
    if (!std::regex_match(ref_id, std::regex("call_[0-9]+"))) continue;  // model-written id
    EXPECT_TRUE(std::regex_match(our_id, std::regex("call_[0-9a-f]{24}"))) << our_id;
    e["id"] = our_id;
    (*seen)[our_id] = ref_id;
  }
}

// The reference's stream ending rewritten to ours: its trailing
// `choices: []` chunk carrying `waste` is gone, the object moves onto the
// finish chunk, and with include_usage the other chunks say "usage": null.
Json OurStreamEnding(Json stream, bool include_usage) {
  Json out = Json::array();
  Json waste;
  for (Json& ev : stream) {
    if (ev.is_object() && ev["choices"].empty() && ev.contains("waste")) {
      waste = ev["waste"];
      continue;
    }
    out.push_back(ev);
  }
  for (Json& ev : out) {
    if (!ev.is_object() || ev["choices"].empty()) continue;
    if (!ev["choices"][0]["finish_reason"].is_null()) ev["waste"] = waste;
    if (include_usage) ev["usage"] = nullptr;
  }
  return out;
}

TEST(ParseGolden, EveryCaseMatchesTheReferenceOrADocumentedFix) {
  WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
  Json fixture = LoadServeFixture("parse.json");
  const std::set<std::string> kArgumentsFixed = {"argument_nan_number", "tool_call_json_block"};
  int checked = 0;
  for (const Json& c : fixture["cases"]) {
    std::string name = c["name"];
    SCOPED_TRACE(name);
    Replayed r = Replay(c);
    Json expect_msg = c["expect"]["message"];
    std::map<std::string, std::string> ids;
    NormalizeIds(&expect_msg, r.message, &ids);
    if (name == "header_pending_at_end_of_msg") {
      EXPECT_EQ(expect_msg["content"], "hi<|open|>abc");  // the reference's divergence
      expect_msg["content"] = "hi";
    }
    if (kArgumentsFixed.count(name)) {
      // Valid JSON where the reference produced `{"x": NaN}` / a broken block.
      std::string args = r.message["tool_calls"][0]["function"]["arguments"];
      Json parsed;
      std::string err;
      EXPECT_TRUE(ParseJson(args, &parsed, &err)) << args;
      expect_msg["tool_calls"][0]["function"]["arguments"] = args;
    }
    EXPECT_EQ(Dump(r.message, JsonStyle::kSpaced), Dump(expect_msg, JsonStyle::kSpaced));
    std::string expect_finish = c["expect"]["finish_reason"].get<std::string>();
    if (name == "truncated_mid_tool_argument") {
      EXPECT_EQ(expect_finish, "tool_calls");  // the reference's divergence
      expect_finish = "length";
    }
    EXPECT_EQ(r.finish_reason, expect_finish);
    EXPECT_EQ(r.completion_tokens, c["expect"]["usage"]["completion_tokens"].get<int>());

    // The stream: same chunks in order, ignoring id/created/waste values.
    bool include_usage = false, stream_flag = false;
    ParseStream(c["request"], &stream_flag, &include_usage);
    Json es = OurStreamEnding(c["expect"]["stream"], include_usage);
    for (Json& ev : es) {
      if (ev.is_object() && !ev["choices"].empty() && !ev["choices"][0]["finish_reason"].is_null()) {
        ev["choices"][0]["finish_reason"] = expect_finish;
      }
    }
    ASSERT_EQ(r.stream.size(), es.size());
    for (size_t i = 0; i < es.size(); ++i) {
      if (es[i].is_string()) {
        EXPECT_EQ(r.stream[i], es[i]);
        continue;
      }
      Json e = es[i];
      Json o = r.stream[i];
      for (Json* j : {&e, &o}) {
        j->erase("id");
        j->erase("created");
        j->erase("model");
        if (j->contains("waste")) (*j)["waste"] = 0;
      }
      if (!e["choices"].empty() && e["choices"][0]["delta"].contains("tool_calls")) {
        Json& tc = e["choices"][0]["delta"]["tool_calls"][0];
        Json& otc = o["choices"][0]["delta"]["tool_calls"][0];
        if (tc.contains("id") && otc.contains("id") && ids.count(otc["id"])) tc["id"] = otc["id"];
        if (kArgumentsFixed.count(name) && tc["function"].contains("arguments") &&
            tc["function"]["arguments"] != "") {
          tc["function"]["arguments"] = otc["function"]["arguments"];
        }
      }
      EXPECT_EQ(Dump(o, JsonStyle::kSpaced), Dump(e, JsonStyle::kSpaced)) << "event " << i;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 40);
}

// Deltas concatenate to the blocking message for every split of a reply
// into pieces, including characters cut across tokens (which never reach
// the client as U+FFFD).
TEST(ParseGolden, SplitCharactersArriveWhole) {
  std::string text = "h\xc3\xa9 \xf0\x9f\x8e\x89!";  // "hé 🎉!"
  for (size_t cut1 = 1; cut1 < text.size(); ++cut1) {
    for (size_t cut2 = cut1 + 1; cut2 < text.size(); ++cut2) {
      ChatTurn turn(ReplyParser(XtmlMarkers{307, 308, 309, 310}, false), {}, -1);
      std::vector<Json> deltas;
      turn.OnToken(1, text.substr(0, cut1), &deltas);
      turn.OnToken(2, text.substr(cut1, cut2 - cut1), &deltas);
      turn.OnToken(3, text.substr(cut2), &deltas);
      turn.OnToken(307, "<|end_of_msg|>", &deltas);
      turn.Finish(&deltas);
      std::string streamed;
      for (const Json& d : deltas) {
        if (d.contains("content")) {
          std::string piece = d["content"];
          EXPECT_EQ(piece.find("\xef\xbf\xbd"), std::string::npos);
          streamed += piece;
        }
      }
      EXPECT_EQ(streamed, text);
      EXPECT_EQ(turn.Message()["content"], text);
    }
  }
}

// The tokens ChatTurn counts as the message's text (the Responses API's
// output_text logprobs) spell the message's content: in every scripted
// reply — reasoning, tool calls, markers, stop strings — their pieces
// joined are the content, or, where a stop string cut a token, begin with it.
TEST(ParseGolden, ContentTokensSpellTheContent) {
  WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
  Json fixture = LoadServeFixture("parse.json");
  int with_content = 0, with_other = 0;
  for (const Json& c : fixture["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    SamplingRequest s;
    ASSERT_FALSE(ParseSampling(c["request"], &s));
    ReplyParser parser = c["format"] == "xtml"
                             ? ReplyParser(XtmlMarkers{307, 308, 309, 310}, c["channel"] == "think")
                             : ReplyParser(15);
    ChatTurn turn(std::move(parser), s.stops, -1);
    std::vector<Json> deltas;
    std::string spelled;
    int tokens = 0, content_tokens = 0;
    const int max_tokens = s.max_tokens ? static_cast<int>(*s.max_tokens) : 4096;
    for (const Json& t : c["tokens"]) {
      if (tokens++ == max_tokens) break;
      const bool more = turn.OnToken(t[0].get<int>(), t[1].get<std::string>(), &deltas);
      if (turn.last_token_in_content()) {
        spelled += t[1].get<std::string>();
        ++content_tokens;
      }
      if (!more) break;
    }
    turn.Finish(&deltas);
    const Json content = turn.Message()["content"];
    const std::string text = content.is_string() ? content.get<std::string>() : "";
    if (c["name"] == "truncated_mid_tag_header") {
      // A tag header still pending when max_tokens cut the reply becomes
      // text at the end, with no token to carry it: the entries spell the
      // text before it (docs/SERVER.md, "The Responses API").
      EXPECT_EQ(text.rfind(SanitizeUtf8(spelled), 0), 0u);
      EXPECT_LT(spelled.size(), text.size());
    } else if (s.stops.empty()) {
      EXPECT_EQ(SanitizeUtf8(spelled), text);
    } else {
      EXPECT_EQ(SanitizeUtf8(spelled).rfind(text, 0), 0u) << spelled;
    }
    with_content += !text.empty();
    with_other += content_tokens < tokens && !text.empty();
  }
  // The fixture has replies with text, and replies with text beside
  // reasoning, markers or calls (whose tokens are left out).
  EXPECT_GT(with_content, 5);
  EXPECT_GT(with_other, 3);
}

TEST(ParseGolden, ToolCallIdsAreUnique) {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) ids.insert(NewCallId());
  EXPECT_EQ(ids.size(), 1000u);
}

}  // namespace
}  // namespace waste::server
