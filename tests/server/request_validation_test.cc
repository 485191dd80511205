// Request validation that needs no HTTP: the OpenAI fields a request may
// get wrong (tools, tool_choice, response_format, messages, unsupported
// parameters) are 400 invalid_request_error naming the field; fields that
// ask for nothing are accepted on a chat.json container too; sampling
// fields reach GenParams (seed, penalties, logit_bias). And a tool call cut
// by the length limit is reported as "length", not as a complete call.
#include <gtest/gtest.h>

#include <algorithm>

#include <set>

#include "chat_turn.h"
#include "golden_util.h"
#include "prepare.h"

namespace waste::server {
namespace {

using testing::TinyEngine;

Json Parse(const std::string& text) {
  Json j;
  std::string err;
  EXPECT_TRUE(ParseJson(text, &j, &err)) << err << ": " << text;
  return j;
}

// Objects are ordered (each insertion scans the members before it), so a
// body may not make one wider than kMaxJsonMembers; nesting counts each
// object on its own.
TEST(JsonText, ObjectsWiderThanTheLimitAreRefused) {
  auto object = [](size_t n) {
    std::string s = "{";
    for (size_t i = 0; i < n; ++i) s += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
    return s + "}";
  };
  Json j;
  std::string err;
  EXPECT_TRUE(ParseJson(object(kMaxJsonMembers), &j, &err)) << err;
  EXPECT_EQ(j.size(), kMaxJsonMembers);
  EXPECT_FALSE(ParseJson(object(kMaxJsonMembers + 1), &j, &err));
  EXPECT_EQ(err, "an object has more than " + std::to_string(kMaxJsonMembers) + " members");
  err.clear();
  const std::string nested = "{\"a\":" + object(kMaxJsonMembers) + ",\"b\":" + object(3) + "}";
  EXPECT_TRUE(ParseJson(nested, &j, &err)) << err;
  EXPECT_EQ(j["a"].size(), kMaxJsonMembers);
  EXPECT_EQ(j["b"]["k2"], 1);
  bool too_wide = false;
  EXPECT_FALSE(ParseJson("[" + object(kMaxJsonMembers + 5) + "]", &j, &err, &too_wide));
  EXPECT_TRUE(too_wide);
  EXPECT_EQ(err, TooManyMembersError());
  // Wide arrays are not limited, and parse as fast as before (nlohmann's
  // callback parser, the first way this was counted, took 15 s for this).
  std::string many = "[";
  for (int i = 0; i < 160000; ++i) many += i ? ",{}" : "{}";
  ASSERT_TRUE(ParseJson(many + "]", &j, &err, &too_wide)) << err;
  EXPECT_FALSE(too_wide);
  EXPECT_EQ(j.size(), 160000u);
  // Malformed text still says where, and is not "too wide".
  EXPECT_FALSE(ParseJson("{\"a\":", &j, &err, &too_wide));
  EXPECT_FALSE(too_wide);
  EXPECT_NE(err.find("parse error"), std::string::npos) << err;
}

ChatFormat Xtml() { return ResolveChatFormat(*TinyEngine(), false); }

// Kimi-Linear's chat.json, as the render goldens serve it.
ChatFormat ChatJson() {
  ChatFormat f;
  f.kind = ChatFormat::Kind::kChatJson;
  auto t = ChatTemplate::Parse(
      R"({"system": ["<|im_system|>system<|im_middle|>", "<|im_end|>"],
          "user": ["<|im_user|>user<|im_middle|>", "<|im_end|>"],
          "assistant": ["<|im_assistant|>assistant<|im_middle|>", "<|im_end|>"],
          "open": "<|im_assistant|>assistant<|im_middle|>"})",
      "chat.json");
  EXPECT_TRUE(t.has_value());
  if (t) f.tmpl = *t;
  f.default_thinking = false;
  f.stop_id = 15;
  return f;
}

std::optional<ApiError> Chat(const ChatFormat& f, const std::string& body, PreparedChat* out = nullptr) {
  PreparedChat local;
  ServeLimits limits;
  limits.ctx_max = 4096;
  return PrepareChat(Parse(body), f, *TinyEngine(), limits, out ? out : &local);
}

std::optional<ApiError> Completion(const std::string& body, PreparedCompletion* out = nullptr) {
  PreparedCompletion local;
  ServeLimits limits;
  limits.ctx_max = 4096;
  return PrepareCompletion(Parse(body), Xtml(), *TinyEngine(), limits, out ? out : &local);
}

class RequestValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
    ASSERT_NE(TinyEngine(), nullptr);
  }
};

const char* kTools = R"([{"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])";

std::string WithTools(const std::string& extra) {
  return std::string(R"({"messages": [{"role": "user", "content": "hi"}], "tools": )") + kTools +
         (extra.empty() ? "" : ", " + extra) + "}";
}

TEST_F(RequestValidation, BadToolOptionsAre400NamingTheField) {
  const ChatFormat f = Xtml();
  struct Case {
    std::string body;
    std::string param;
  };
  const std::string user = R"("messages": [{"role": "user", "content": "hi"}])";
  const std::vector<Case> cases = {
      {WithTools(R"("tool_choice": {"type": "function", "function": {"name": "nope"}})"), "tool_choice"},
      {WithTools(R"("tool_choice": "bogus")"), "tool_choice"},
      {WithTools(R"("parallel_tool_calls": "no")"), "parallel_tool_calls"},
      {"{" + user + R"(, "tool_choice": "required"})", "tool_choice"},
      {"{" + user + R"(, "tools": [], "tool_choice": "required"})", "tool_choice"},
      {"{" + user + R"(, "tool_choice": {"type": "function", "function": {"name": "x"}}})", "tool_choice"},
      {WithTools(R"("tool_choice": {"type": "function"})"), "tool_choice"},
      {"{" + user + R"(, "tools": [{"type": "function"}]})", "tools[0].function"},
      {"{" + user + R"(, "tools": [{"type": "function", "function": {}}]})", "tools[0].function.name"},
      {"{" + user + R"(, "tools": [{"type": "function", "function": {"name": ""}}]})", "tools[0].function.name"},
      {"{" + user + R"(, "tools": ["get_weather"]})", "tools[0]"},
      {"{" + user + R"(, "tools": [{"type": "retrieval", "function": {"name": "a"}}]})", "tools[0].type"},
      {"{" + user + R"(, "response_format": {"type": "xml"}})", "response_format.type"},
      {"{" + user + R"(, "response_format": {}})", "response_format.type"},
      {R"({"messages": [{"role": "user"}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": null}]})", "messages[0].content"},
      {R"({"messages": [{"role": "system"}, {"role": "user", "content": "x"}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "a"}]})", "messages[1].content"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    auto e = Chat(f, c.body);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->status, 400);
    EXPECT_EQ(e->type, "invalid_request_error");
    EXPECT_EQ(e->param.value_or(""), c.param);
  }
}

TEST_F(RequestValidation, ValidToolOptionsPass) {
  const ChatFormat f = Xtml();
  for (const char* extra :
       {R"("tool_choice": {"type": "function", "function": {"name": "get_weather"}})",
        R"("tool_choice": "required")", R"("tool_choice": "auto")", R"("tool_choice": "none")",
        R"("response_format": {"type": "text"})", R"("response_format": {"type": "json_object"})"}) {
    SCOPED_TRACE(extra);
    auto e = Chat(f, WithTools(extra));
    EXPECT_FALSE(e.has_value()) << e->message;
  }
  // An assistant message that only calls a tool needs no content.
  auto e = Chat(f, R"({"messages": [{"role": "user", "content": "x"},
      {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
       "function": {"name": "get_weather", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]})");
  EXPECT_FALSE(e.has_value()) << e->message;
}

// continue_final_message: the last (assistant) message is left open and the
// reply continues it — in both formats the prompt ends with its text, no
// end of turn, no new turn — and the follow-on has no next turn to guess.
TEST_F(RequestValidation, ContinueFinalMessageLeavesTheTurnOpen) {
  const std::string convo = R"("messages": [{"role": "user", "content": "hi"},
                                             {"role": "assistant", "content": "Sure, the answer"}])";
  for (const ChatFormat& f : {Xtml(), ChatJson()}) {
    SCOPED_TRACE(f.Name());
    PreparedChat open, closed;
    ASSERT_FALSE(Chat(f, "{" + convo + R"(, "thinking": false, "continue_final_message": true})", &open));
    ASSERT_FALSE(Chat(f, "{" + convo + R"(, "thinking": false})", &closed));
    ASSERT_FALSE(open.prompt.segments.empty());
    EXPECT_EQ(open.prompt.segments.back().mode, SegmentMode::kPlain);
    EXPECT_EQ(open.prompt.segments.back().text, "Sure, the answer");
    EXPECT_FALSE(open.prompt.think_channel);
    EXPECT_LT(open.ids.size(), closed.ids.size()) << "no end of turn, no new turn";
    // The open prompt is the closed one up to the assistant's text.
    EXPECT_TRUE(std::equal(open.ids.begin(), open.ids.end(), closed.ids.begin()));
    EXPECT_EQ(open.body, nullptr);
    EXPECT_NE(closed.body, nullptr);
  }
  // With thinking, the message's reasoning is closed as history's is and
  // the response left open.
  PreparedChat thinking;
  ASSERT_FALSE(Chat(Xtml(), "{" + convo + R"(, "thinking": true, "continue_final_message": true})", &thinking));
  EXPECT_FALSE(thinking.prompt.think_channel);
  EXPECT_EQ(thinking.prompt.segments.back().text, "Sure, the answer");

  const std::string user_last = R"("messages": [{"role": "user", "content": "hi"}])";
  const std::string call_last = R"("messages": [{"role": "user", "content": "hi"},
      {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
       "function": {"name": "get_weather", "arguments": "{}"}}]}])";
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"{" + convo + R"(, "continue_final_message": "yes"})", "continue_final_message"},
      {"{" + user_last + R"(, "continue_final_message": true})", "continue_final_message"},
      {"{" + call_last + R"(, "tools": )" + kTools + R"(, "continue_final_message": true})", "continue_final_message"},
      {"{" + convo + R"(, "tools": )" + kTools + R"(, "tool_choice": "required", "continue_final_message": true})",
       "tool_choice"},
      {"{" + convo + R"(, "response_format": {"type": "json_object"}, "continue_final_message": true})",
       "response_format"}};
  for (const auto& [body, param] : refused) {
    SCOPED_TRACE(body);
    auto e = Chat(Xtml(), body);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->param.value_or(""), param);
  }
  EXPECT_FALSE(Chat(Xtml(), "{" + user_last + R"(, "continue_final_message": false})"));
}

// chat.json has no tools: fields that ask for nothing are accepted, the
// rest still refused naming the field.
TEST_F(RequestValidation, ChatJsonAcceptsWhatAsksForNothing) {
  const ChatFormat f = ChatJson();
  const std::string user = R"("messages": [{"role": "user", "content": "hi"}])";
  EXPECT_FALSE(Chat(f, "{" + user + R"(, "tool_choice": "none"})"));
  EXPECT_FALSE(Chat(f, "{" + user + R"(, "response_format": {"type": "text"}})"));
  EXPECT_FALSE(Chat(f, "{" + user + R"(, "tools": [], "tool_choice": "none"})"));
  auto e = Chat(f, "{" + user + R"(, "response_format": {"type": "json_object"}})");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param.value_or(""), "response_format");
  e = Chat(f, "{" + user + R"(, "tool_choice": "auto"})");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param.value_or(""), "tool_choice");
  e = Chat(f, "{" + user + R"(, "response_format": {"type": "yaml"}})");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param.value_or(""), "response_format.type");
}

// A chat.json reply ends at any turn header too (ChatTemplate::ReplyStops):
// after the request's own stops, never duplicated; the suffix stays the
// stop token. An XTML reply holds <|open|> tags and gets none of this.
TEST_F(RequestValidation, ChatJsonRepliesStopAtTurnHeaders) {
  PreparedChat p;
  ASSERT_FALSE(Chat(ChatJson(),
                    R"({"messages": [{"role": "user", "content": "hi"}],
                        "stop": ["Amen", "<|im_user|>user<|im_middle|>"]})",
                    &p));
  EXPECT_EQ(p.stops, (std::vector<std::string>{"Amen", "<|im_user|>user<|im_middle|>",
                                               "<|im_system|>system<|im_middle|>"}));
  EXPECT_EQ(p.params.stop_tokens, std::vector<int>{15});
  PreparedChat x;
  ASSERT_FALSE(Chat(Xtml(), R"({"messages": [{"role": "user", "content": "hi"}]})", &x));
  EXPECT_TRUE(x.stops.empty());
}

TEST_F(RequestValidation, UnsupportedParametersAreNamed) {
  for (const char* field : {R"("suffix": "end")", R"("response_format": {"type": "json_object"})"}) {
    auto e = Completion(std::string(R"({"prompt": "x", )") + field + "}");
    ASSERT_TRUE(e) << field;
    EXPECT_EQ(e->code.value_or(""), "unsupported_parameter");
    EXPECT_NE(std::string(field).find(e->param.value_or("?")), std::string::npos);
  }
  EXPECT_FALSE(Completion(R"({"prompt": "x", "echo": false, "best_of": 1, "logprobs": null,
                              "response_format": {"type": "text"}})"));
  // best_of (docs/SERVER.md, "Several completions"): at least n, and more
  // than n cannot be streamed.
  PreparedCompletion best;
  ASSERT_FALSE(Completion(R"({"prompt": "x", "n": 2, "best_of": 3})", &best));
  EXPECT_EQ(best.choices, 2);
  EXPECT_EQ(best.best_of, 3);
  for (const char* field : {R"("n": 2, "best_of": 1)", R"("best_of": 3, "stream": true)",
                            R"("best_of": 0)", R"("best_of": 129)"}) {
    auto e = Completion(std::string(R"({"prompt": "x", )") + field + "}");
    ASSERT_TRUE(e) << field;
    EXPECT_EQ(e->param.value_or(""), "best_of") << field;
  }
}

// logprobs (docs/SERVER.md, "Log probabilities"): chat takes a boolean and
// top_logprobs 0..20 (only with logprobs), completions a count 0..20 and
// echo; what they ask reaches the engine's parameters.
TEST_F(RequestValidation, LogprobsAreCheckedAndReachTheEngine) {
  const ChatFormat f = Xtml();
  const std::string user = R"("messages": [{"role": "user", "content": "hi"}])";
  PreparedChat chat;
  ASSERT_FALSE(Chat(f, "{" + user + R"(, "logprobs": true, "top_logprobs": 4})", &chat));
  EXPECT_TRUE(chat.params.logprobs);
  EXPECT_EQ(chat.params.top_logprobs, 4);
  PreparedChat off;
  ASSERT_FALSE(Chat(f, "{" + user + R"(, "logprobs": false, "top_logprobs": null})", &off));
  EXPECT_FALSE(off.params.logprobs);
  for (const char* field : {R"("top_logprobs": 3)", R"("logprobs": true, "top_logprobs": 21)",
                            R"("logprobs": "yes")", R"("logprobs": true, "top_logprobs": -1)",
                            R"("logprobs": true, "top_logprobs": 2.5)"}) {
    auto e = Chat(f, "{" + user + ", " + field + "}");
    ASSERT_TRUE(e) << field;
    EXPECT_EQ(e->status, 400) << field;
    EXPECT_TRUE(e->param == "logprobs" || e->param == "top_logprobs") << field;
  }
  PreparedCompletion c;
  ASSERT_FALSE(Completion(R"({"prompt": "x", "logprobs": 2, "echo": true})", &c));
  EXPECT_TRUE(c.params.logprobs);
  EXPECT_EQ(c.params.top_logprobs, 2);
  EXPECT_TRUE(c.logprobs.echo);
  EXPECT_EQ(c.prompts.at(0).echo_text, "x");
  EXPECT_FALSE(c.score_only);
  PreparedCompletion zero;
  ASSERT_FALSE(Completion(R"({"prompt": "x", "logprobs": 0})", &zero));
  EXPECT_TRUE(zero.params.logprobs);
  EXPECT_EQ(zero.params.top_logprobs, 0);
  for (const char* field : {R"("logprobs": 21)", R"("logprobs": true)", R"("echo": 1)"}) {
    auto e = Completion(std::string(R"({"prompt": "x", )") + field + "}");
    ASSERT_TRUE(e) << field;
    EXPECT_EQ(e->status, 400) << field;
  }
  // max_tokens 0 only with echo: the prompt is scored, nothing generated.
  PreparedCompletion score;
  ASSERT_FALSE(Completion(R"({"prompt": "x", "echo": true, "logprobs": 1, "max_tokens": 0})", &score));
  EXPECT_TRUE(score.score_only);
  auto e = Completion(R"({"prompt": "x", "max_tokens": 0})");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param.value_or(""), "max_tokens");
}

// A completion's prompt may be token ids, as OpenAI's API takes them, and
// a request may list several prompts (strings, or arrays of ids); ids
// outside the vocabulary, empty prompts and mixed lists are refused.
TEST_F(RequestValidation, CompletionPromptsMayBeTokenIdsOrLists) {
  PreparedCompletion flat, nested, texts;
  ASSERT_FALSE(Completion(R"({"prompt": [120, 121, 122], "echo": true})", &flat));
  ASSERT_EQ(flat.prompts.size(), 1u);
  EXPECT_EQ(flat.prompts[0].ids, (std::vector<int>{120, 121, 122}));
  EXPECT_EQ(flat.prompts[0].echo_text, "xyz");
  ASSERT_FALSE(Completion(R"({"prompt": [[120, 121], [122]], "echo": true, "max_tokens": 7})", &nested));
  ASSERT_EQ(nested.prompts.size(), 2u);
  EXPECT_EQ(nested.prompts[0].ids, (std::vector<int>{120, 121}));
  EXPECT_EQ(nested.prompts[1].ids, (std::vector<int>{122}));
  EXPECT_EQ(nested.prompts[1].echo_text, "z");
  EXPECT_EQ(nested.prompts[1].max_tokens, 7);
  ASSERT_FALSE(Completion(R"({"prompt": ["x", "yz"]})", &texts));
  ASSERT_EQ(texts.prompts.size(), 2u);
  EXPECT_TRUE(texts.prompts[1].echo_text.empty());  // no echo asked
  std::string too_many = "[";
  for (size_t i = 0; i <= kMaxPrompts; ++i) too_many += i ? ", \"x\"" : "\"x\"";
  too_many += "]";
  for (std::string prompt : {"[]", "[-1]", "[1, 1000000]", "[[1], []]", R"(["a", ""])", "[1.5]",
                             "[[]]", R"(["a", [1]])", R"([[1], "a"])", R"([1, "a"])", "{}", "7",
                             too_many.c_str()}) {
    auto e = Completion(std::string(R"({"prompt": )") + prompt + "}");
    ASSERT_TRUE(e) << prompt;
    EXPECT_EQ(e->param.value_or(""), "prompt") << prompt;
  }
}

TEST_F(RequestValidation, MaxCompletionTokensIsNamedAsSent) {
  auto e = Chat(Xtml(), R"({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 0})");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param.value_or(""), "max_completion_tokens");
  e = Chat(Xtml(), R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": -1})");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param.value_or(""), "max_tokens");
}

TEST_F(RequestValidation, PenaltiesAndLogitBiasReachTheEngine) {
  PreparedChat out;
  ASSERT_FALSE(Chat(Xtml(), R"({"messages": [{"role": "user", "content": "hi"}],
      "presence_penalty": 0.5, "frequency_penalty": -1, "logit_bias": {"42": -100, "7": 2.5}})", &out));
  EXPECT_FLOAT_EQ(out.params.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(out.params.frequency_penalty, -1.0f);
  ASSERT_EQ(out.params.logit_bias.size(), 2u);
  EXPECT_EQ(out.params.logit_bias[0].first, 42);
  EXPECT_FLOAT_EQ(out.params.logit_bias[0].second, -100.0f);
  EXPECT_EQ(out.params.logit_bias[1].first, 7);
  for (const char* bad : {R"("presence_penalty": 3)", R"("frequency_penalty": "x")",
                          R"("logit_bias": {"a": 1})", R"("logit_bias": {"1": 101})",
                          R"("logit_bias": [1])", R"("logit_bias": {"99999999": 1})"}) {
    SCOPED_TRACE(bad);
    auto e = Chat(Xtml(), std::string(R"({"messages": [{"role": "user", "content": "hi"}], )") + bad + "}");
    ASSERT_TRUE(e);
    std::string field = std::string(bad).substr(1, std::string(bad).find('"', 1) - 1);
    EXPECT_EQ(e->param.value_or(""), field);
  }
}

// temperature > 0 without a seed: a fresh seed per request; a given seed
// is used as is; greedy (the default) keeps the engine's fixed seed.
TEST_F(RequestValidation, SeedIsRandomOnlyWhenSamplingWithoutOne) {
  std::set<uint64_t> seeds;
  for (int i = 0; i < 8; ++i) {
    PreparedChat out;
    ASSERT_FALSE(Chat(Xtml(), R"({"messages": [{"role": "user", "content": "hi"}], "temperature": 0.8})", &out));
    EXPECT_NE(out.params.seed, 0u);
    seeds.insert(out.params.seed);
  }
  EXPECT_EQ(seeds.size(), 8u);
  PreparedChat seeded;
  ASSERT_FALSE(Chat(Xtml(), R"({"messages": [{"role": "user", "content": "hi"}], "temperature": 0.8, "seed": 77})", &seeded));
  EXPECT_EQ(seeded.params.seed, 77u);
  PreparedChat greedy;
  ASSERT_FALSE(Chat(Xtml(), R"({"messages": [{"role": "user", "content": "hi"}]})", &greedy));
  EXPECT_EQ(greedy.params.temperature, 0.0f);
  EXPECT_EQ(greedy.params.seed, 0u);
}

// A tool call cut by max_tokens inside its <json> block: finish_reason
// "length" (not "tool_calls"), and the arguments are the text generated so
// far, not a made-up "{}".
TEST(CutToolCall, IsReportedAsLengthWithTheGeneratedText) {
  const XtmlMarkers m{307, 308, 309, 310};  // end_of_msg, open, close, sep
  auto run = [&](bool finished) {
    ChatTurn turn(ReplyParser(m, false), {}, -1);
    std::vector<Json> deltas;
    std::vector<std::pair<int, std::string>> tokens = {
        {309, ""}, {1, "response"}, {310, ""},                    // </response>
        {308, ""}, {1, "tools"}, {310, ""},                       // <tools>
        {308, ""}, {1, "call tool=\"get_weather\""}, {310, ""},  // <call>
        {308, ""}, {1, "json type=\"object\""}, {310, ""},        // <json>
        {1, "{\"city\": \"Par"}};
    if (finished) {
      tokens.push_back({1, "is\"}"});
      for (const char* tag : {"json", "call", "tools"}) {
        tokens.push_back({309, ""});
        tokens.push_back({1, tag});
        tokens.push_back({310, ""});
      }
      tokens.push_back({307, ""});
    }
    for (const auto& [id, piece] : tokens) turn.OnToken(id, piece, &deltas);
    turn.Finish(&deltas);
    return std::make_pair(turn.FinishReason(/*ran_to_max=*/!finished), turn.Message());
  };
  auto [cut_reason, cut] = run(false);
  EXPECT_EQ(cut_reason, "length");
  ASSERT_EQ(cut["tool_calls"].size(), 1u);
  EXPECT_EQ(cut["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(cut["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Par");
  auto [done_reason, done] = run(true);
  EXPECT_EQ(done_reason, "tool_calls");
  EXPECT_EQ(done["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Paris\"}");
}

}  // namespace
}  // namespace waste::server
