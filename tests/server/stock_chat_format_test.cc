// The built-in chat formats (waste/chat.h ChatTemplate::Stock) served: a
// container without chat.json whose tokenizer has DeepSeek's or Kimi's
// markers chats (before: 400 unsupported_chat_format); a reasoning model's
// <think>…</think> becomes reasoning_content, streamed or not, whatever
// the token boundaries; an earlier reply's reasoning is not rendered
// again. The containers are the tiny fixture with its XTML specials
// renamed to the family's markers (same ids), so the format is found the
// way a converted DeepSeek-V3 or Kimi-K2 container's is.
#include <gtest/gtest.h>

#include <httplib.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "chat_turn.h"
#include "follow_on.h"
#include "http_test_util.h"
#include "prepare.h"
#include "render.h"

namespace waste::server {
namespace {

namespace fs = std::filesystem;
using testing::ParseBody;
using testing::PostJson;
using testing::Running;

// The fixture container with specials 307..310 and 315 renamed.
class RenamedContainer {
 public:
  RenamedContainer(const std::string& tag, const std::map<int, std::string>& names)
      : dir_(fs::temp_directory_path() /
             ("waste-stock-" + tag + "-" + std::to_string(getpid()))) {
    fs::remove_all(dir_);
    fs::copy(testing::TinyTokContainer(), dir_, fs::copy_options::recursive);
    std::string err;
    Json specials;
    std::ifstream in(dir_ / "specials.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(ParseJson(text, &specials, &err)) << err;
    for (Json& s : specials) {
      auto it = names.find(s["id"].get<int>());
      if (it != names.end()) s["text"] = it->second;
    }
    fs::remove(dir_ / "chat.json");
    std::ofstream(dir_ / "specials.json") << Dump(specials, JsonStyle::kSpaced);
    Config cfg;
    cfg.rewind_marks = SessionPool::kMarks;
    auto e = Engine::Open(dir_.string(), cfg);
    EXPECT_TRUE(e.has_value()) << e.error().ToString();
    if (e) engine_ = std::move(*e);
  }
  ~RenamedContainer() {
    engine_.reset();
    fs::remove_all(dir_);
  }
  Engine* engine() { return engine_.get(); }

 private:
  fs::path dir_;
  std::unique_ptr<Engine> engine_;
};

const std::map<int, std::string> kDeepSeek = {{307, "<｜end▁of▁sentence｜>"},
                                              {308, "<｜User｜>"},
                                              {309, "<｜Assistant｜>"},
                                              {310, "<｜begin▁of▁sentence｜>"},
                                              {315, "<think>"}};
const std::map<int, std::string> kKimi = {{307, "<|im_end|>"},
                                          {308, "<|im_user|>"},
                                          {309, "<|im_assistant|>"},
                                          {310, "<|im_system|>"},
                                          {315, "<|im_middle|>"}};

// Kimi with its tool-call markers too (ids the chat never uses: BOS, the
// media markers).
std::map<int, std::string> KimiWithTools() {
  std::map<int, std::string> m = kKimi;
  m[305] = "<|tool_call_end|>";
  m[311] = "<|tool_calls_section_begin|>";
  m[312] = "<|tool_calls_section_end|>";
  m[313] = "<|tool_call_begin|>";
  m[314] = "<|tool_call_argument_begin|>";
  return m;
}

class StockFormatServe : public ::testing::Test {
 protected:
  void SetUp() override { WASTE_SKIP_WITHOUT_SERVE_FIXTURES(); }
};

TEST_F(StockFormatServe, DeepSeekContainerChatsWithItsTemplate) {
  RenamedContainer c("deepseek", kDeepSeek);
  ASSERT_NE(c.engine(), nullptr);
  ChatFormat f = ResolveChatFormat(*c.engine(), /*no_thinking=*/false);
  ASSERT_EQ(f.kind, ChatFormat::Kind::kChatJson) << f.none_reason;
  EXPECT_EQ(f.Name(), "deepseek");
  EXPECT_EQ(f.stop_id, 307);
  // ModelInfo (and the C API's waste_model_info) count a built-in format
  // as a chat template; the fixture itself, with neither, has none.
  EXPECT_TRUE(c.engine()->info().has_chat_template);
  EXPECT_FALSE(testing::TinyEngine()->info().has_chat_template);

  ServeOptions o;
  Running server(o, c.engine());
  httplib::Client client = server.Client();
  auto models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(ParseBody(models->body)["data"][0]["waste"]["chat_format"], "deepseek") << models->body;

  // System, a finished exchange whose reply still carries its reasoning,
  // and a new question: what DeepSeek's template writes.
  Json req = {{"messages", Json::array({{{"role", "system"}, {"content", "Be brief."}},
                                        {{"role", "user"}, {"content", "hi"}},
                                        {{"role", "assistant"},
                                         {"content", "<think>greet back</think>\n\nhello"},
                                         {"reasoning_content", "greet back"}},
                                        {{"role", "user"}, {"content", "and?"}}})},
              {"max_tokens", 4},
              {"temperature", 0}};
  auto [status, body] = PostJson(client, "/v1/chat/completions", req);
  ASSERT_EQ(status, 200) << Dump(body, JsonStyle::kSpaced);
  using M = SegmentMode;
  std::vector<PromptSegment> expected = {
      {M::kMarkup, "<｜begin▁of▁sentence｜>"}, {M::kPlain, "Be brief."},
      {M::kMarkup, "<｜User｜>"},              {M::kPlain, "hi"},
      {M::kMarkup, "<｜Assistant｜>"},         {M::kPlain, "\n\nhello"},
      {M::kMarkup, "<｜end▁of▁sentence｜>"},   {M::kMarkup, "<｜User｜>"},
      {M::kPlain, "and?"},                     {M::kMarkup, "<｜Assistant｜>"}};
  auto ids = c.engine()->TokenizeSegments(expected, /*add_bos=*/false);
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(ids->front(), 310);  // the BOS marker is one token
  EXPECT_EQ(body["usage"]["prompt_tokens"].get<size_t>(), ids->size());

  // Asking for thinking is accepted (the model decides); tools are not.
  req["reasoning_effort"] = "high";
  EXPECT_EQ(PostJson(client, "/v1/chat/completions", req).first, 200);
  req.erase("reasoning_effort");
  req["tools"] = ParseBody(R"([{"type": "function", "function": {"name": "f"}}])");
  auto [tools_status, tools_body] = PostJson(client, "/v1/chat/completions", req);
  EXPECT_EQ(tools_status, 400);
  EXPECT_NE(Dump(tools_body, JsonStyle::kSpaced).find("built-in deepseek format"), std::string::npos)
      << Dump(tools_body, JsonStyle::kSpaced);
}

TEST_F(StockFormatServe, KimiContainerChatsWithItsTemplate) {
  RenamedContainer c("kimi", kKimi);
  ASSERT_NE(c.engine(), nullptr);
  ChatFormat f = ResolveChatFormat(*c.engine(), /*no_thinking=*/false);
  ASSERT_EQ(f.kind, ChatFormat::Kind::kChatJson) << f.none_reason;
  EXPECT_EQ(f.Name(), "kimi");
  EXPECT_EQ(f.stop_id, 307);
  PreparedChat prepared;
  ServeLimits limits;
  limits.ctx_max = 4096;
  ASSERT_FALSE(PrepareChat(ParseBody(R"({"messages": [{"role": "system", "content": "S"},
                                                        {"role": "user", "content": "U"}]})"),
                           f, *c.engine(), limits, &prepared));
  using M = SegmentMode;
  EXPECT_EQ(prepared.prompt.segments,
            (std::vector<PromptSegment>{{M::kMarkup, "<|im_system|>system<|im_middle|>"},
                                        {M::kPlain, "S"},
                                        {M::kMarkup, "<|im_end|>"},
                                        {M::kMarkup, "<|im_user|>user<|im_middle|>"},
                                        {M::kPlain, "U"},
                                        {M::kMarkup, "<|im_end|>"},
                                        {M::kMarkup, "<|im_assistant|>assistant<|im_middle|>"}}));
}

TEST_F(StockFormatServe, WithoutTheMarkersThereIsStillNoFormat) {
  // Only some of DeepSeek's markers: neither format, and the reason says
  // what was looked for.
  RenamedContainer c("partial", {{307, "<｜end▁of▁sentence｜>"}, {308, "<｜User｜>"}});
  ASSERT_NE(c.engine(), nullptr);
  ChatFormat f = ResolveChatFormat(*c.engine(), false);
  EXPECT_EQ(f.kind, ChatFormat::Kind::kNone);
  EXPECT_NE(f.none_reason.find("built-in kimi and deepseek formats"), std::string::npos)
      << f.none_reason;
}

TEST_F(StockFormatServe, KimiToolsAreDeclaredAndTheConversationsCallsRendered) {
  RenamedContainer c("kimi-tools", KimiWithTools());
  ASSERT_NE(c.engine(), nullptr);
  ChatFormat f = ResolveChatFormat(*c.engine(), false);
  ASSERT_TRUE(f.kimi_tools.ok());
  EXPECT_EQ(f.kimi_tools.section_begin, 311);
  EXPECT_EQ(f.kimi_tools.call_end, 305);
  ServeLimits limits;
  limits.ctx_max = 4096;
  const Json body = ParseBody(R"({
    "messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "",
       "tool_calls": [{"id": "functions.get_weather:0", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18 C"}],
    "tools": [{"type": "function", "function": {"name": "get_weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]})");
  PreparedChat prepared;
  ASSERT_FALSE(PrepareChat(body, f, *c.engine(), limits, &prepared));
  using M = SegmentMode;
  EXPECT_EQ(prepared.prompt.segments,
            (std::vector<PromptSegment>{
                {M::kMarkup, "<|im_system|>tool_declare<|im_middle|>"},
                {M::kPlain, R"([{"type":"function","function":{"name":"get_weather","parameters":)"
                            R"({"type":"object","properties":{"city":{"type":"string"}}}}}])"},
                {M::kMarkup, "<|im_end|>"},
                {M::kMarkup, "<|im_user|>user<|im_middle|>"},
                {M::kPlain, "Weather in Paris?"},
                {M::kMarkup, "<|im_end|>"},
                {M::kMarkup, "<|im_assistant|>assistant<|im_middle|>"},
                {M::kMarkup, "<|tool_calls_section_begin|>"},
                {M::kMarkup, "<|tool_call_begin|>"},
                {M::kPlain, "functions.get_weather:0"},
                {M::kMarkup, "<|tool_call_argument_begin|>"},
                {M::kPlain, R"({"city":"Paris"})"},
                {M::kMarkup, "<|tool_call_end|>"},
                {M::kMarkup, "<|tool_calls_section_end|>"},
                {M::kMarkup, "<|im_end|>"},
                {M::kMarkup, "<|im_system|>tool<|im_middle|>"},
                {M::kPlain, "## Return of functions.get_weather:0\n18 C"},
                {M::kMarkup, "<|im_end|>"},
                {M::kMarkup, "<|im_assistant|>assistant<|im_middle|>"}}));
  EXPECT_TRUE(prepared.params.logit_bias.empty());

  // With tools, "auto" gets the lazy calls grammar, started by the calls
  // section's marker.
  EXPECT_NE(prepared.grammar, nullptr);
  EXPECT_EQ(prepared.grammar_triggers, (std::vector<int>{311}));
  // tool_choice "none": the calls section's marker is banned, no grammar.
  Json none = body;
  none["tool_choice"] = "none";
  ASSERT_FALSE(PrepareChat(none, f, *c.engine(), limits, &prepared));
  ASSERT_EQ(prepared.params.logit_bias.size(), 1u);
  EXPECT_EQ(prepared.params.logit_bias[0].first, 311);
  EXPECT_TRUE(std::isinf(prepared.params.logit_bias[0].second));
  EXPECT_EQ(prepared.grammar, nullptr);
  // "required": the grammar from the first token.
  Json required = body;
  required["tool_choice"] = "required";
  ASSERT_FALSE(PrepareChat(required, f, *c.engine(), limits, &prepared));
  EXPECT_NE(prepared.grammar, nullptr);
  EXPECT_TRUE(prepared.grammar_triggers.empty());
  std::optional<ApiError> e;

  // Without the markers (plain Kimi turns) tools are still refused.
  RenamedContainer plain("kimi-plain", kKimi);
  ChatFormat g = ResolveChatFormat(*plain.engine(), false);
  EXPECT_FALSE(g.kimi_tools.ok());
  e = PrepareChat(body, g, *plain.engine(), limits, &prepared);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "tools");
}

// Random weights, held to the calls grammar: a forced call (required, a
// named function) and a call the model starts on its own (auto, the
// section's marker pushed up by logit_bias) are valid calls of declared
// tools whose arguments match the schema, and come back as tool_calls.
TEST_F(StockFormatServe, KimiCallsAreValidEvenFromRandomWeights) {
  RenamedContainer c("kimi-grammar", KimiWithTools());
  ASSERT_NE(c.engine(), nullptr);
  ServeOptions o;
  Running server(o, c.engine());
  httplib::Client client = server.Client();
  const Json tools = ParseBody(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string", "maxLength": 8}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
      "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
      "required": ["a", "b"]}}}])");
  struct Case {
    Json tool_choice;
    Json logit_bias;
    const char* only;  // the one tool it must call, or null
  };
  const std::vector<Case> cases = {
      {"required", Json::object(), nullptr},
      {ParseBody(R"({"type": "function", "function": {"name": "add"}})"), Json::object(), "add"},
      {"auto", ParseBody(R"({"311": 100})"), nullptr}};
  for (const Case& k : cases) {
    for (int seed = 1; seed <= 3; ++seed) {
      Json req = {{"messages", Json::array({{{"role", "user"}, {"content", "go"}}})},
                  {"tools", tools},
                  {"tool_choice", k.tool_choice},
                  {"max_tokens", 120},
                  {"temperature", 1.0},
                  {"seed", seed}};
      if (!k.logit_bias.empty()) req["logit_bias"] = k.logit_bias;
      auto [status, body] = PostJson(client, "/v1/chat/completions", req);
      ASSERT_EQ(status, 200) << Dump(body, JsonStyle::kSpaced);
      const Json& choice = body["choices"][0];
      SCOPED_TRACE(Dump(choice, JsonStyle::kSpaced));
      EXPECT_EQ(choice["finish_reason"], "tool_calls");
      const Json& calls = choice["message"]["tool_calls"];
      ASSERT_TRUE(calls.is_array());
      ASSERT_GE(calls.size(), 1u);
      for (const Json& call : calls) {
        const std::string name = call["function"]["name"].get<std::string>();
        const std::string id = call["id"].get<std::string>();
        EXPECT_EQ(id.rfind("functions." + name + ":", 0), 0u) << id;
        if (k.only) EXPECT_EQ(name, k.only);
        Json args;
        std::string err;
        ASSERT_TRUE(ParseJson(call["function"]["arguments"].get<std::string>(), &args, &err)) << err;
        if (name == "get_weather") {
          ASSERT_TRUE(args["city"].is_string());
          EXPECT_LE(args["city"].get<std::string>().size(), 8u * 4);  // 8 characters of UTF-8
        } else {
          ASSERT_EQ(name, "add");
          EXPECT_TRUE(args["a"].is_number_integer());
          EXPECT_TRUE(args["b"].is_number_integer());
        }
      }
    }
  }
}

// The Messages API on the same format: a forced tool_use block whose input
// matches the schema, and its tool_result sent back.
TEST_F(StockFormatServe, KimiToolsThroughTheMessagesApi) {
  RenamedContainer c("kimi-messages", KimiWithTools());
  ASSERT_NE(c.engine(), nullptr);
  ServeOptions o;
  Running server(o, c.engine());
  httplib::Client client = server.Client();
  Json req = ParseBody(R"({"model": "m", "max_tokens": 60,
    "tools": [{"name": "add", "input_schema": {"type": "object",
               "properties": {"a": {"type": "integer"}}, "required": ["a"]}}],
    "tool_choice": {"type": "tool", "name": "add"},
    "messages": [{"role": "user", "content": "add"}]})");
  auto [status, body] = PostJson(client, "/v1/messages", req);
  ASSERT_EQ(status, 200) << Dump(body, JsonStyle::kSpaced);
  EXPECT_EQ(body["stop_reason"], "tool_use") << Dump(body, JsonStyle::kSpaced);
  const Json& use = body["content"].back();
  ASSERT_EQ(use["type"], "tool_use") << Dump(body, JsonStyle::kSpaced);
  EXPECT_EQ(use["name"], "add");
  EXPECT_TRUE(use["input"]["a"].is_number_integer()) << Dump(use, JsonStyle::kSpaced);
  req.erase("tool_choice");
  req["messages"].push_back({{"role", "assistant"}, {"content", body["content"]}});
  req["messages"].push_back(
      {{"role", "user"},
       {"content", Json::array({{{"type", "tool_result"}, {"tool_use_id", use["id"]}, {"content", "3"}}})}});
  req["max_tokens"] = 4;
  auto [status2, body2] = PostJson(client, "/v1/messages", req);
  EXPECT_EQ(status2, 200) << Dump(body2, JsonStyle::kSpaced);
  // (Anthropic's input_tokens leaves out the prefix the slot already held.)
  auto prompt = [](const Json& b) {
    return b["usage"]["input_tokens"].get<int>() + b["usage"]["cache_read_input_tokens"].get<int>();
  };
  EXPECT_GT(prompt(body2), prompt(body));
}

// The follow-on prefill's guess (follow_on.h) on a think-tag format: the
// reply goes back without its reasoning, as the next request will render it.
TEST_F(StockFormatServe, FollowOnGuessDropsTheReasoning) {
  RenamedContainer c("deepseek-follow-on", kDeepSeek);
  ASSERT_NE(c.engine(), nullptr);
  ChatFormat f = ResolveChatFormat(*c.engine(), false);
  const Json body = ParseBody(R"({"messages": [{"role": "user", "content": "hi"}]})");
  const Json reply = ParseBody(R"({"role": "assistant", "content": "hello",
                                   "reasoning_content": "greet back"})");
  using M = SegmentMode;
  const std::vector<PromptSegment> expected = {
      {M::kMarkup, "<｜begin▁of▁sentence｜>"}, {M::kMarkup, "<｜User｜>"}, {M::kPlain, "hi"},
      {M::kMarkup, "<｜Assistant｜>"}, {M::kPlain, "hello"}, {M::kMarkup, "<｜end▁of▁sentence｜>"},
      {M::kMarkup, "<｜User｜>"}};
  auto ids = c.engine()->TokenizeSegments(expected, /*add_bos=*/false);
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(NextTurnPrefix(*c.engine(), f, body, reply), *ids);
}

// Kimi markers with made-up ids for the parser: 20..24 as KimiToolMarkers
// lists them, the stop 7.
constexpr KimiToolMarkers kKimiIds{20, 21, 22, 23, 24};

Json KimiReply(const std::vector<std::pair<int, std::string>>& tokens, int max_calls = -1,
               std::string* finish = nullptr) {
  ReplyParser parser(7, "<think>", "</think>");
  parser.EnableKimiTools(kKimiIds, max_calls);
  ChatTurn turn(std::move(parser), {}, 7);
  std::vector<Json> deltas;
  for (const auto& [id, piece] : tokens) {
    if (!turn.OnToken(id, piece, &deltas)) break;
  }
  turn.Finish(&deltas);
  if (finish) *finish = turn.FinishReason(tokens.empty() || tokens.back().first != 7);
  return turn.Message();
}

TEST(KimiToolCalls, ParsedFromTheMarkers) {
  std::string finish;
  Json m = KimiReply({{1, "<think>need the weather</think>"}, {2, "Checking."},
                      {20, ""}, {22, ""}, {3, "functions.get_weather"}, {4, ":0"}, {23, ""},
                      {5, "{\"city\": "}, {6, "\"Paris\"}"}, {24, ""},
                      {22, ""}, {3, "functions.get_time:1"}, {23, ""}, {5, "{}"}, {24, ""},
                      {21, ""}, {7, ""}},
                     -1, &finish);
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(m["reasoning_content"], "need the weather");
  EXPECT_EQ(m["content"], "Checking.");
  ASSERT_EQ(m["tool_calls"].size(), 2u) << Dump(m, JsonStyle::kSpaced);
  EXPECT_EQ(m["tool_calls"][0]["id"], "functions.get_weather:0");
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Paris\"}");
  EXPECT_EQ(m["tool_calls"][1]["function"]["name"], "get_time");
  EXPECT_EQ(m["tool_calls"][1]["function"]["arguments"], "{}");

  // parallel_tool_calls false: the first call only.
  m = KimiReply({{20, ""}, {22, ""}, {3, "functions.a:0"}, {23, ""}, {5, "{}"}, {24, ""},
                 {22, ""}, {3, "functions.b:1"}, {23, ""}, {5, "{}"}, {24, ""}, {21, ""}, {7, ""}},
                1);
  ASSERT_EQ(m["tool_calls"].size(), 1u);
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "a");
  // ... also when the model writes its calls without the section marker.
  m = KimiReply({{2, "ok"}, {22, ""}, {3, "functions.a:0"}, {23, ""}, {5, "{}"}, {24, ""},
                 {22, ""}, {3, "functions.b:1"}, {23, ""}, {5, "{\"x\": 1}"}, {24, ""}, {7, ""}},
                1);
  ASSERT_EQ(m["tool_calls"].size(), 1u);
  EXPECT_EQ(m["content"], "ok");

  // Cut by max_tokens inside the arguments: the text so far, and "length".
  m = KimiReply({{20, ""}, {22, ""}, {3, "functions.a:0"}, {23, ""}, {5, "{\"x\": 1"}}, -1, &finish);
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], "{\"x\": 1");
}

TEST(KimiToolCalls, NamesFromIds) {
  EXPECT_EQ(KimiCallName("functions.get_weather:0"), "get_weather");
  EXPECT_EQ(KimiCallName("get_weather:12"), "get_weather");
  EXPECT_EQ(KimiCallName(" functions.f "), "f");
  EXPECT_EQ(KimiCallName("plain"), "plain");
}

// The reply of a reasoning model in the text convention, as tokens: each
// (id, piece), the stop id 7 last.
struct Reply {
  std::string reasoning, content, streamed_reasoning, streamed_content;
};

Reply ParseReply(const std::vector<std::pair<int, std::string>>& tokens) {
  ChatTurn turn(ReplyParser(/*stop_id=*/7, "<think>", "</think>"), {}, /*eos_id=*/7);
  std::vector<Json> deltas;
  for (const auto& [id, piece] : tokens) {
    if (!turn.OnToken(id, piece, &deltas)) break;
  }
  turn.Finish(&deltas);
  Reply r;
  Json m = turn.Message();
  if (m.contains("reasoning_content")) r.reasoning = m["reasoning_content"].get<std::string>();
  if (m["content"].is_string()) r.content = m["content"].get<std::string>();
  for (const Json& d : deltas) {
    if (d.contains("reasoning_content")) r.streamed_reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content")) r.streamed_content += d["content"].get<std::string>();
  }
  return r;
}

TEST(ThinkTags, ReasoningThenContentWhateverTheSplit) {
  const std::string text = "\n<think>\nFirst, 2+2.\nIt is 4.\n</think>\n\nThe answer is 4.";
  // Every way of cutting the text in three pieces gives the same message,
  // and the streamed deltas add up to it.
  for (size_t a = 0; a <= text.size(); ++a) {
    for (size_t b = a; b <= text.size(); b += 3) {
      Reply r = ParseReply({{1, text.substr(0, a)}, {2, text.substr(a, b - a)}, {3, text.substr(b)}, {7, ""}});
      ASSERT_EQ(r.reasoning, "First, 2+2.\nIt is 4.\n") << a << " " << b;
      ASSERT_EQ(r.content, "The answer is 4.") << a << " " << b;
      ASSERT_EQ(r.streamed_reasoning, r.reasoning);
      ASSERT_EQ(r.streamed_content, r.content);
    }
  }
}

TEST(ThinkTags, OnlyAtTheStartAndOnlyWhole) {
  // No tag: all content, a tag later in the reply included.
  Reply r = ParseReply({{1, "Hello "}, {2, "<think>"}, {3, "x"}, {7, ""}});
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "Hello <think>x");
  // Something that begins like the tag but is not it.
  r = ParseReply({{1, "<thi"}, {2, "s is html>"}, {7, ""}});
  EXPECT_EQ(r.content, "<this is html>");
  EXPECT_EQ(r.streamed_content, r.content);
  // Cut by max_tokens inside the reasoning: the reasoning so far, a
  // partial close tag included, and no content.
  r = ParseReply({{1, "<think>"}, {2, "still going</th"}});
  EXPECT_EQ(r.reasoning, "still going</th");
  EXPECT_EQ(r.content, "");
  EXPECT_EQ(r.streamed_reasoning, r.reasoning);
  // Ended right after the open tag's first bytes: that text is content.
  r = ParseReply({{1, "<th"}, {7, ""}});
  EXPECT_EQ(r.content, "<th");
  // An empty reasoning (K2-Thinking's <think></think> when it skips it).
  r = ParseReply({{1, "<think></think>"}, {2, "ok"}, {7, ""}});
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "ok");
}

TEST(ThinkTags, WithoutTagsEverythingIsContent) {
  ChatTurn turn(ReplyParser(7), {}, 7);
  std::vector<Json> deltas;
  turn.OnToken(1, "<think>a</think>b", &deltas);
  turn.OnToken(7, "", &deltas);
  turn.Finish(&deltas);
  EXPECT_EQ(turn.Message()["content"], "<think>a</think>b");
}

TEST(StopMarker, AsciiAndFullwidthBars) {
  ChatTemplate t;
  t.assistant_suffix = "<|im_end|>";
  EXPECT_EQ(ChatJsonStopMarker(t), "<|im_end|>");
  t.assistant_suffix = "\n<｜end▁of▁sentence｜>";
  EXPECT_EQ(ChatJsonStopMarker(t), "<｜end▁of▁sentence｜>");
  t.assistant_suffix = "<|x\n<|eot|>";
  EXPECT_EQ(ChatJsonStopMarker(t), "<|eot|>");
  t.assistant_suffix = "</s>";
  EXPECT_EQ(ChatJsonStopMarker(t), "");
  t.assistant_suffix = "<｜unclosed";
  EXPECT_EQ(ChatJsonStopMarker(t), "");
}

// The reasoning cap in text tags (waste::ThinkTagBudget; its unit tests are
// tests/grammar/think_tag_budget_test.cc).

// Through the server: a deepseek container whose <think> is a special
// token (315), pushed up by logit_bias so the model opens its reasoning
// and never closes it; reasoning.max_tokens closes it after that many
// tokens and the reply goes on as content.
TEST_F(StockFormatServe, ReasoningBudgetClosesTheThinkTag) {
  RenamedContainer c("deepseek-budget", kDeepSeek);
  ASSERT_NE(c.engine(), nullptr);
  ServeOptions o;
  Running server(o, c.engine());
  httplib::Client client = server.Client();
  Json req = {{"messages", Json::array({{{"role", "user"}, {"content", "think"}}})},
              {"max_tokens", 24},
              {"temperature", 0},
              {"logit_bias", {{"315", 100}}},
              {"reasoning", {{"max_tokens", 5}}}};
  auto [status, body] = PostJson(client, "/v1/chat/completions", req);
  ASSERT_EQ(status, 200) << Dump(body, JsonStyle::kSpaced);
  const Json& m = body["choices"][0]["message"];
  SCOPED_TRACE(Dump(m, JsonStyle::kSpaced));
  // The first <think> opened it; five more were the reasoning; then the
  // forced close, and the biased model writes <think> as content.
  EXPECT_EQ(m["reasoning_content"], "<think><think><think><think><think>");
  ASSERT_TRUE(m["content"].is_string());
  EXPECT_EQ(m["content"].get<std::string>().rfind("<think>", 0), 0u);
  EXPECT_EQ(body["usage"]["completion_tokens"], 24);
  // Without the cap the reasoning takes the whole reply.
  req.erase("reasoning");
  auto [status2, body2] = PostJson(client, "/v1/chat/completions", req);
  ASSERT_EQ(status2, 200);
  EXPECT_TRUE(body2["choices"][0]["message"]["content"].is_null());
  EXPECT_EQ(body2["choices"][0]["finish_reason"], "length");
}

}  // namespace
}  // namespace waste::server
