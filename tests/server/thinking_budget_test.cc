// The think channel's cap (server/thinking_budget.h, docs/SERVER.md
// "Reasoning budget"): the constraint on its own with made-up marker ids,
// then through the server: a capped reply's reasoning is the uncapped
// reply's first tokens and the reply goes on in the response channel; the
// Messages API's thinking.budget_tokens, the Responses API's
// reasoning.max_tokens and `serve --reasoning-budget` give the same reply;
// bad values are 400s naming the field.
#include <gtest/gtest.h>

#include <httplib.h>

#include <cmath>
#include <string>
#include <vector>

#include "grammar/forced_generation.h"
#include "http_test_util.h"
#include "thinking_budget.h"

namespace waste::server {
namespace {

using testing::ParseBody;
using testing::PostJson;
using testing::Running;

// Made-up ids: markers 1-4, "think" 10, "response" 11, text 20+.
constexpr XtmlMarkers kMarkers{/*end_of_msg=*/1, /*open=*/2, /*close=*/3, /*sep=*/4};
const std::vector<int> kClose = {3, 10, 4, 2, 11, 4};

std::vector<int> Generate(TokenConstraint& c, const std::vector<int>& tokens) {
  return ::waste::testing::ForcedGeneration(c, tokens);
}

TEST(ThinkingBudget, ClosesTheChannelWhenSpent) {
  ThinkingBudget b(3, kClose, kMarkers, nullptr);
  std::vector<int> got = Generate(b, {20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30});
  EXPECT_EQ(got, (std::vector<int>{20, 21, 22, 3, 10, 4, 2, 11, 4, 29, 30}));
  EXPECT_TRUE(b.closed_early());
  EXPECT_TRUE(b.done());
}

TEST(ThinkingBudget, ZeroClosesAtOnce) {
  ThinkingBudget b(0, kClose, kMarkers, nullptr);
  EXPECT_EQ(Generate(b, {20, 21, 22, 23, 24, 25, 26}), (std::vector<int>{3, 10, 4, 2, 11, 4, 26}));
}

TEST(ThinkingBudget, AModelThatClosesFirstIsNeverTouched) {
  ThinkingBudget b(4, kClose, kMarkers, nullptr);
  std::vector<int> own = {20, 3, 10, 4, 2, 11, 4, 21, 22, 23, 24, 25};
  EXPECT_EQ(Generate(b, own), own);
  EXPECT_FALSE(b.closed_early());
  EXPECT_TRUE(b.done());
}

TEST(ThinkingBudget, WaitsForTheEndOfAnElementOpenedInside) {
  ThinkingBudget b(2, kClose, kMarkers, nullptr);
  // <|open|>x<|sep|> y <|close|>x<|sep|> inside the think channel: spent
  // after two tokens, but the element closes first.
  std::vector<int> got = Generate(b, {2, 20, 4, 21, 3, 20, 4, 22, 23, 24, 25, 26, 27});
  EXPECT_EQ(got, (std::vector<int>{2, 20, 4, 21, 3, 20, 4, 3, 10, 4, 2, 11, 4}));
}

// The other constraint sees every token and still masks what it forbids.
class OnlyEven : public TokenConstraint {
 public:
  bool Allows(int token) noexcept override { return token % 2 == 0; }
  void Mask(std::span<float> logits) noexcept override {
    for (size_t i = 1; i < logits.size(); i += 2) logits[i] = -INFINITY;
  }
  void Accept(int token) noexcept override { accepted.push_back(token); }
  std::vector<int> accepted;
};

TEST(ThinkingBudget, ComposesWithTheReplyGrammar) {
  OnlyEven inner;
  ThinkingBudget b(1, kClose, kMarkers, &inner);
  EXPECT_FALSE(b.Allows(21));  // the inner constraint forbids it
  EXPECT_TRUE(b.Allows(20));
  b.Accept(20);
  EXPECT_FALSE(b.Allows(22));  // spent: only the close marker
  EXPECT_FALSE(b.Allows(4));
  // The close marker is odd: the inner constraint forbids it, the budget wins.
  std::vector<float> logits(32, 0.0f);
  b.Mask(logits);
  EXPECT_TRUE(std::isfinite(logits[3]));
  b.Accept(3);
  EXPECT_EQ(inner.accepted, (std::vector<int>{20, 3}));
}

class ThinkingBudgetServe : public ::testing::Test {
 protected:
  void SetUp() override {
    WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
    ASSERT_NE(testing::TinyEngine(), nullptr);
  }
  static Json Chat(Json extra) {
    Json req = {{"messages", Json::array({{{"role", "user"}, {"content", "Tell me a story."}}})},
                {"max_tokens", 24}, {"thinking", true}};
    for (auto& [k, v] : extra.items()) req[k] = v;
    return req;
  }
  static std::string Reasoning(const Json& chat) {
    const Json& m = chat["choices"][0]["message"];
    return m.contains("reasoning_content") && m["reasoning_content"].is_string()
               ? m["reasoning_content"].get<std::string>()
               : "";
  }
  static int ReasoningTokens(const Json& chat) {
    return chat["usage"]["completion_tokens_details"]["reasoning_tokens"].get<int>();
  }
};

TEST_F(ThinkingBudgetServe, ACappedReplyKeepsTheFirstThoughtsAndAnswers) {
  Running s{ServeOptions{}};
  httplib::Client c = s.Client();
  auto [fs, free] = PostJson(c, "/v1/chat/completions", Chat(Json::object()));
  ASSERT_EQ(fs, 200) << free.dump();
  // The tiny model thinks for longer than the cap below.
  ASSERT_GT(ReasoningTokens(free), 4) << free.dump();
  auto [cs, capped] = PostJson(c, "/v1/chat/completions", Chat({{"reasoning", {{"max_tokens", 4}}}}));
  ASSERT_EQ(cs, 200) << capped.dump();
  EXPECT_LE(ReasoningTokens(capped), 4);
  EXPECT_GT(ReasoningTokens(capped), 0);
  const std::string thought = Reasoning(capped);
  EXPECT_FALSE(thought.empty());
  EXPECT_EQ(Reasoning(free).rfind(thought, 0), 0u) << "'" << thought << "' does not start '"
                                                    << Reasoning(free) << "'";
  // The rest of the tokens went to the response.
  EXPECT_EQ(capped["usage"]["completion_tokens"], 24);
  EXPECT_TRUE(capped["choices"][0]["message"]["content"].is_string()) << capped.dump();

  auto [zs, zero] = PostJson(c, "/v1/chat/completions", Chat({{"reasoning", {{"max_tokens", 0}}}}));
  ASSERT_EQ(zs, 200) << zero.dump();
  EXPECT_EQ(ReasoningTokens(zero), 0);
  EXPECT_EQ(Reasoning(zero), "");
  EXPECT_TRUE(zero["choices"][0]["message"]["content"].is_string()) << zero.dump();

  // A cap the model never reaches changes nothing.
  auto [ls, loose] = PostJson(c, "/v1/chat/completions", Chat({{"reasoning", {{"max_tokens", 1000}}}}));
  ASSERT_EQ(ls, 200);
  EXPECT_EQ(loose["choices"][0]["message"], free["choices"][0]["message"]);

  // The Messages API's budget_tokens and the Responses API's
  // reasoning.max_tokens are the same cap.
  auto [ms, msg] = PostJson(c, "/v1/messages",
                            {{"model", "tiny"}, {"max_tokens", 24},
                             {"messages", Json::array({{{"role", "user"}, {"content", "Tell me a story."}}})},
                             {"thinking", {{"type", "enabled"}, {"budget_tokens", 4}}}});
  ASSERT_EQ(ms, 200) << msg.dump();
  ASSERT_EQ(msg["content"][0]["type"], "thinking") << msg.dump();
  EXPECT_EQ(msg["content"][0]["thinking"], thought);
  auto [rs, resp] = PostJson(c, "/v1/responses",
                             {{"model", "tiny"}, {"max_output_tokens", 24}, {"input", "Tell me a story."},
                              {"reasoning", {{"effort", "medium"}, {"max_tokens", 4}}}});
  ASSERT_EQ(rs, 200) << resp.dump();
  ASSERT_EQ(resp["output"][0]["type"], "reasoning") << resp.dump();
  EXPECT_EQ(resp["output"][0]["content"][0]["text"], thought);

  // Bad caps name the field, in each API's shape.
  auto [b1, e1] = PostJson(c, "/v1/chat/completions", Chat({{"reasoning", {{"max_tokens", -1}}}}));
  EXPECT_EQ(b1, 400);
  EXPECT_EQ(e1["error"]["param"], "reasoning.max_tokens");
  auto [b2, e2] = PostJson(c, "/v1/messages",
                           {{"model", "tiny"}, {"max_tokens", 24},
                            {"messages", Json::array({{{"role", "user"}, {"content", "Hi"}}})},
                            {"thinking", {{"type", "enabled"}, {"budget_tokens", "many"}}}});
  EXPECT_EQ(b2, 400);
  EXPECT_EQ(e2["type"], "error");
  EXPECT_NE(e2["error"]["message"].get<std::string>().find("thinking.budget_tokens"), std::string::npos);
  auto [b3, e3] = PostJson(c, "/v1/responses",
                           {{"model", "tiny"}, {"input", "Hi"}, {"reasoning", {{"max_tokens", 1.5}}}});
  EXPECT_EQ(b3, 400);
  EXPECT_EQ(e3["error"]["param"], "reasoning.max_tokens");
}

// With response_format the reply grammar and the cap both hold: the
// reasoning ends at the cap and the answer is the JSON the grammar asks for.
TEST_F(ThinkingBudgetServe, ComposesWithAResponseFormat) {
  Running s{ServeOptions{}};
  httplib::Client c = s.Client();
  for (int cap : {0, 3}) {
    auto [st, reply] = PostJson(c, "/v1/chat/completions",
                                Chat({{"reasoning", {{"max_tokens", cap}}}, {"max_tokens", 60},
                                      {"response_format", {{"type", "json_object"}}}}));
    ASSERT_EQ(st, 200) << reply.dump();
    EXPECT_LE(ReasoningTokens(reply), cap);
    const Json& content = reply["choices"][0]["message"]["content"];
    ASSERT_TRUE(content.is_string()) << reply.dump();
    EXPECT_TRUE(ParseBody(content.get<std::string>()).is_object()) << content;
  }
}

TEST_F(ThinkingBudgetServe, TheServersDefaultCapsRequestsThatNameNone) {
  std::string capped_thought, own_cap_thought;
  {
    Running plain{ServeOptions{}};
    httplib::Client c = plain.Client();
    auto [st, capped] = PostJson(c, "/v1/chat/completions", Chat({{"reasoning", {{"max_tokens", 4}}}}));
    ASSERT_EQ(st, 200);
    capped_thought = Reasoning(capped);
    auto [st2, own] = PostJson(c, "/v1/chat/completions", Chat({{"reasoning", {{"max_tokens", 6}}}}));
    ASSERT_EQ(st2, 200);
    own_cap_thought = Reasoning(own);
  }
  ServeOptions o;
  o.reasoning_budget = 4;
  Running s{o};
  httplib::Client c = s.Client();
  auto [st, reply] = PostJson(c, "/v1/chat/completions", Chat(Json::object()));
  ASSERT_EQ(st, 200);
  EXPECT_EQ(Reasoning(reply), capped_thought);
  // A request's own cap wins over the server's.
  auto [st2, own] = PostJson(c, "/v1/chat/completions", Chat({{"reasoning", {{"max_tokens", 6}}}}));
  ASSERT_EQ(st2, 200);
  EXPECT_EQ(Reasoning(own), own_cap_thought);
}

}  // namespace
}  // namespace waste::server
