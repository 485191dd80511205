// Several completions of one request (`n`, completions' `best_of`) over a
// real loopback socket on the tiny tokenizer container (random weights):
// each choice is what a request of its own would give (the first, with the
// request's seed, is the n = 1 reply bit for bit), the stream carries each
// choice under its index and concatenates to the blocking choices, and
// best_of returns the candidates with the highest mean log-probability; a
// completions prompt list gets each prompt's choices in turn.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "http_test_util.h"

namespace waste::server {
namespace {

using testing::ParseBody;
using testing::ParseSse;
using testing::Running;
using testing::TinyEngine;

class ChoicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
    ASSERT_NE(TinyEngine(), nullptr);
  }
};

Json Post(httplib::Client& c, const char* path, const Json& req, int want_status = 200) {
  auto r = c.Post(path, Dump(req, JsonStyle::kSpaced), "application/json");
  EXPECT_TRUE(r);
  if (!r) return Json();
  EXPECT_EQ(r->status, want_status) << r->body;
  return req.value("stream", false) && r->status == 200 ? Json(r->body) : ParseBody(r->body);
}

Json ChatRequest(const std::string& content, int n, Json sampling) {
  Json req = {{"messages", Json::array({{{"role", "user"}, {"content", content}}})},
              {"max_tokens", 12},
              {"thinking", false},
              {"n", n}};
  for (auto it = sampling.begin(); it != sampling.end(); ++it) req[it.key()] = it.value();
  return req;
}

std::vector<std::string> Contents(const Json& reply) {
  std::vector<std::string> out;
  for (size_t i = 0; i < reply["choices"].size(); ++i) {
    const Json& c = reply["choices"][i];
    EXPECT_EQ(c["index"], i);
    out.push_back(c["message"]["content"].is_string() ? c["message"]["content"].get<std::string>()
                                                      : std::string());
  }
  return out;
}

// n = 2 greedy with logprobs on `c`: both choices (message, logprobs and
// finish) are the n = 1 reply `alone` gives.
void ExpectGreedyChoicesAreTheReplyAlone(httplib::Client& c, httplib::Client& alone,
                                         const std::string& content) {
  const Json greedy = {{"logprobs", true}, {"top_logprobs", 2}};
  Json one = Post(alone, "/v1/chat/completions", ChatRequest(content, 1, greedy));
  Json two = Post(c, "/v1/chat/completions", ChatRequest(content, 2, greedy));
  ASSERT_EQ(one["choices"].size(), 1u);
  ASSERT_EQ(two["choices"].size(), 2u);
  ASSERT_FALSE(one["choices"][0]["logprobs"]["content"].empty());
  EXPECT_EQ(two["choices"][0], one["choices"][0]);
  Json second = two["choices"][1];
  second["index"] = 0;
  EXPECT_EQ(second, one["choices"][0]);
}

TEST_F(ChoicesTest, EachChatChoiceIsARequestOfItsOwn) {
  Running s{ServeOptions{}};
  httplib::Client c = s.Client();
  const Json sampled = {{"temperature", 1.0}, {"seed", 7}};
  Json one = Post(c, "/v1/chat/completions", ChatRequest("Tell me a story", 1, sampled));
  Json three = Post(c, "/v1/chat/completions", ChatRequest("Tell me a story", 3, sampled));
  std::vector<std::string> texts = Contents(three);
  ASSERT_EQ(texts.size(), 3u) << three.dump();
  // The first choice is the n = 1 reply; the others are drawn with seeds of
  // their own, so they differ (12 tokens at temperature 1 from a random model).
  EXPECT_EQ(texts[0], Contents(one)[0]);
  EXPECT_EQ(std::set<std::string>(texts.begin(), texts.end()).size(), 3u) << three.dump();
  // The same request again (its prompt now resumed from the slot's point)
  // gives the same three.
  EXPECT_EQ(Contents(Post(c, "/v1/chat/completions", ChatRequest("Tell me a story", 3, sampled))), texts);
  // Usage: the prompt once, every choice's tokens; `waste` counts them all.
  int all_length = 0;
  for (const Json& ch : three["choices"]) all_length += ch["finish_reason"] == "length";
  EXPECT_EQ(three["usage"]["prompt_tokens"], one["usage"]["prompt_tokens"]);
  if (all_length == 3) EXPECT_EQ(three["usage"]["completion_tokens"], 36);
  EXPECT_EQ(three["waste"]["tokens_generated"], three["usage"]["completion_tokens"]);
  // Greedy: every choice is the greedy reply, to the bit (the tokens'
  // log-probabilities, which any other context would change).
  ExpectGreedyChoicesAreTheReplyAlone(c, c, "Tell me a story");
}

// A prompt longer than the prefill chunk: choices after the first go back to
// the slot's restore point (a rewind mark), not to position 0, and still give
// what a server that never saw the prompt gives.
TEST_F(ChoicesTest, ALongPromptRewindsToItsRestorePoint) {
  std::string long_prompt;
  for (int i = 0; i < 60; ++i) long_prompt += "one two three four ";
  const Json req = ChatRequest(long_prompt, 2, {{"temperature", 1.0}, {"seed", 11}});
  std::vector<std::string> first, again;
  {
    Running s{ServeOptions{}};
    httplib::Client c = s.Client();
    Json reply = Post(c, "/v1/chat/completions", req);
    ASSERT_GT(reply["usage"]["prompt_tokens"].get<int>(), 2 * SessionPool::kChunk);
    first = Contents(reply);
    Json resent = Post(c, "/v1/chat/completions", req);
    EXPECT_GT(resent["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
    again = Contents(resent);
  }
  ASSERT_EQ(first.size(), 2u);
  EXPECT_NE(first[0], first[1]);
  EXPECT_EQ(again, first);
  // Greedy: both choices are the reply of a server that never saw the prompt.
  Running fresh{ServeOptions{}}, alone{ServeOptions{}};
  httplib::Client c = fresh.Client(), a = alone.Client();
  ExpectGreedyChoicesAreTheReplyAlone(c, a, long_prompt);
}

// The stream: each choice's deltas under its index, in turn; a finish chunk
// per choice (only the last carries `waste`); the texts are the blocking
// reply's choices.
TEST_F(ChoicesTest, ChatStreamCarriesEachChoiceUnderItsIndex) {
  Running s{ServeOptions{}};
  httplib::Client c = s.Client();
  const Json sampled = {{"temperature", 1.0}, {"seed", 5}};
  std::vector<std::string> blocking = Contents(Post(c, "/v1/chat/completions", ChatRequest("Hello", 2, sampled)));
  Json req = ChatRequest("Hello", 2, sampled);
  req["stream"] = true;
  req["stream_options"] = {{"include_usage", true}};
  std::vector<Json> events = ParseSse(Post(c, "/v1/chat/completions", req).get<std::string>());
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::map<int, std::string> text;
  std::map<int, int> finishes;
  int last_index = 0;
  for (size_t i = 0; i + 2 < events.size(); ++i) {  // the usage chunk and [DONE] last
    ASSERT_EQ(events[i]["choices"].size(), 1u) << events[i].dump();
    const Json& ch = events[i]["choices"][0];
    const int index = ch["index"].get<int>();
    EXPECT_GE(index, last_index) << "choices are streamed in turn";
    last_index = index;
    if (ch["delta"].contains("content")) text[index] += ch["delta"]["content"].get<std::string>();
    if (!ch["finish_reason"].is_null()) {
      ++finishes[index];
      EXPECT_EQ(events[i].contains("waste"), index == 1) << events[i].dump();
    }
  }
  EXPECT_EQ(finishes, (std::map<int, int>{{0, 1}, {1, 1}}));
  EXPECT_EQ(text[0], blocking[0]);
  EXPECT_EQ(text[1], blocking[1]);
  const Json& usage = events[events.size() - 2];
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_GT(usage["usage"]["completion_tokens"].get<int>(), 0);
}

std::vector<std::string> Texts(const Json& reply) {
  std::vector<std::string> out;
  for (size_t i = 0; i < reply["choices"].size(); ++i) {
    EXPECT_EQ(reply["choices"][i]["index"], i);
    out.push_back(reply["choices"][i]["text"].get<std::string>());
  }
  return out;
}

TEST_F(ChoicesTest, CompletionsChoicesStreamedAndEchoed) {
  Running s{ServeOptions{}};
  httplib::Client c = s.Client();
  Json req = {{"prompt", "Once upon"}, {"max_tokens", 10}, {"temperature", 1.0}, {"seed", 9}};
  const std::string one = Texts(Post(c, "/v1/completions", req))[0];
  req["n"] = 3;
  std::vector<std::string> three = Texts(Post(c, "/v1/completions", req));
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(three[0], one);
  req["stream"] = true;
  std::map<int, std::string> streamed;
  for (const Json& ev : ParseSse(Post(c, "/v1/completions", req).get<std::string>())) {
    if (ev == "[DONE]") continue;
    const Json& ch = ev["choices"][0];
    streamed[ch["index"].get<int>()] += ch["text"].get<std::string>();
  }
  EXPECT_EQ(streamed, (std::map<int, std::string>{{0, three[0]}, {1, three[1]}, {2, three[2]}}));
  // Echo with scored prompt: every choice starts with the prompt and carries
  // its logprobs (the prompt scored once, on a fresh slot; the choices after
  // the first feed it again).
  Json echo = {{"prompt", "Once upon"}, {"max_tokens", 6}, {"temperature", 1.0},
               {"seed", 9},         {"echo", true},      {"logprobs", 1},
               {"n", 2}};
  Json both = Post(c, "/v1/completions", echo);
  ASSERT_EQ(both["choices"].size(), 2u);
  echo["n"] = 1;
  Json alone = Post(c, "/v1/completions", echo);
  EXPECT_EQ(both["choices"][0], alone["choices"][0]);
  const Json& lp0 = both["choices"][0]["logprobs"];
  const Json& lp1 = both["choices"][1]["logprobs"];
  EXPECT_EQ(both["choices"][1]["text"].get<std::string>().rfind("Once upon", 0), 0u);
  // The prompt's entries (the echoed tokens) are the same in both choices.
  const size_t prompt_len = alone["usage"]["prompt_tokens"].get<size_t>();
  for (size_t i = 0; i < prompt_len; ++i) {
    EXPECT_EQ(lp0["tokens"][i], lp1["tokens"][i]);
    EXPECT_EQ(lp0["token_logprobs"][i], lp1["token_logprobs"][i]);
  }
}

// best_of: the candidates are the n = best_of choices; the ones returned are
// those with the highest mean log-probability of their tokens, best first.
TEST_F(ChoicesTest, BestOfReturnsTheMostLikelyCandidates) {
  Running s{ServeOptions{}};
  httplib::Client c = s.Client();
  Json req = {{"prompt", "The weather"}, {"max_tokens", 8}, {"temperature", 1.0},
              {"seed", 3},            {"n", 4},          {"logprobs", 0}};
  Json all = Post(c, "/v1/completions", req);
  ASSERT_EQ(all["choices"].size(), 4u);
  std::vector<std::pair<double, std::string>> ranked;
  for (const Json& ch : all["choices"]) {
    double sum = 0;
    const Json& lps = ch["logprobs"]["token_logprobs"];
    for (const Json& v : lps) sum += v.get<double>();
    ranked.emplace_back(-sum / static_cast<double>(lps.size()), ch["text"].get<std::string>());
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  Json best = {{"prompt", "The weather"}, {"max_tokens", 8}, {"temperature", 1.0},
               {"seed", 3},            {"n", 2},          {"best_of", 4}};
  Json reply = Post(c, "/v1/completions", best);
  EXPECT_EQ(Texts(reply), (std::vector<std::string>{ranked[0].second, ranked[1].second}));
  EXPECT_TRUE(reply["choices"][0]["logprobs"].is_null());  // not asked for
  EXPECT_EQ(reply["usage"]["completion_tokens"], all["usage"]["completion_tokens"]);  // all 4 made
}

// A list of prompts: each prompt's choices, in order (index = prompt × n +
// j), each what the prompt alone gives; usage adds the prompts up.
TEST_F(ChoicesTest, APromptListGetsEachPromptsChoicesInOrder) {
  Running s{ServeOptions{}};
  httplib::Client c = s.Client();
  Json req = {{"max_tokens", 8}, {"temperature", 1.0}, {"seed", 9}, {"n", 2}};
  std::vector<std::string> expected;
  int prompt_tokens = 0;
  for (const char* prompt : {"Once upon", "The weather"}) {
    req["prompt"] = prompt;
    Json alone = Post(c, "/v1/completions", req);
    for (const std::string& t : Texts(alone)) expected.push_back(t);
    prompt_tokens += alone["usage"]["prompt_tokens"].get<int>();
  }
  req["prompt"] = Json::array({"Once upon", "The weather"});
  Json both = Post(c, "/v1/completions", req);
  EXPECT_EQ(Texts(both), expected);
  EXPECT_EQ(both["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(both["waste"]["tokens_generated"], both["usage"]["completion_tokens"]);
  req["stream"] = true;
  std::map<int, std::string> streamed;
  int with_waste = 0;
  for (const Json& ev : ParseSse(Post(c, "/v1/completions", req).get<std::string>())) {
    if (ev == "[DONE]") continue;
    streamed[ev["choices"][0]["index"].get<int>()] += ev["choices"][0]["text"].get<std::string>();
    with_waste += ev.contains("waste");
  }
  EXPECT_EQ(streamed, (std::map<int, std::string>{{0, expected[0]}, {1, expected[1]},
                                                  {2, expected[2]}, {3, expected[3]}}));
  EXPECT_EQ(with_waste, 1);
  // As an evaluation harness scores a batch: token-id prompts, echoed and
  // scored, nothing generated; each prompt's logprobs are its own request's.
  auto tok = c.Post("/tokenize", R"({"content": "The weather is fine"})", "application/json");
  ASSERT_TRUE(tok);
  Json ids = ParseBody(tok->body)["tokens"];
  Json shorter = ids;
  shorter.erase(shorter.size() - 1);
  Json score = {{"prompt", Json::array({ids, shorter})}, {"max_tokens", 0}, {"echo", true},
                {"logprobs", 1}};
  Json batch = Post(c, "/v1/completions", score);
  ASSERT_EQ(batch["choices"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    score["prompt"] = i == 0 ? ids : shorter;
    Json one = Post(c, "/v1/completions", score);
    Json got = batch["choices"][i];
    EXPECT_EQ(got["index"], i);
    got["index"] = 0;
    EXPECT_EQ(got, one["choices"][0]) << i;
  }
  // best_of per prompt: n of each prompt's candidates, numbered on.
  Json best = {{"prompt", Json::array({"Once upon", "The weather"})}, {"max_tokens", 6},
               {"temperature", 1.0}, {"seed", 1}, {"best_of", 3}};
  Json ranked = Post(c, "/v1/completions", best);
  ASSERT_EQ(ranked["choices"].size(), 2u);
  EXPECT_EQ(ranked["choices"][1]["index"], 1);
}

TEST_F(ChoicesTest, BadCountsAreRefusedNamingTheField) {
  Running s{ServeOptions{}};
  httplib::Client c = s.Client();
  const Json chat = ChatRequest("Hi", 1, Json::object());
  for (Json n : {Json(0), Json(129), Json(1.5), Json("2"), Json(false), Json(-1)}) {
    Json req = chat;
    req["n"] = n;
    Json e = Post(c, "/v1/chat/completions", req, 400);
    EXPECT_EQ(e["error"]["param"], "n") << n.dump();
  }
  Json req = chat;
  req["n"] = true;  // the reference's Python let True through as 1
  EXPECT_EQ(Post(c, "/v1/chat/completions", req)["choices"].size(), 1u);
  req["n"] = 2.0;
  EXPECT_EQ(Post(c, "/v1/chat/completions", req)["choices"].size(), 2u);
  Json comp = {{"prompt", "Hi"}, {"max_tokens", 2}, {"n", 2}};
  for (Json best_of : {Json(1), Json(129), Json("3")}) {
    comp["best_of"] = best_of;
    EXPECT_EQ(Post(c, "/v1/completions", comp, 400)["error"]["param"], "best_of") << best_of.dump();
  }
  comp["best_of"] = 3;
  comp["stream"] = true;
  EXPECT_EQ(Post(c, "/v1/completions", comp, 400)["error"]["param"], "best_of");
  comp["best_of"] = 2;  // equal to n: streamable, the same as n alone
  Json streamed = Post(c, "/v1/completions", comp);
  EXPECT_NE(streamed.get<std::string>().find("[DONE]"), std::string::npos);
}

}  // namespace
}  // namespace waste::server
