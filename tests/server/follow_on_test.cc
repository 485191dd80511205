// The follow-on prefill (server/session_pool.h): after a reply a slot
// prefills the conversation's likely next turn and marks a second restore
// point there. A request that starts with that guess resumes past the
// reply; one that does not resumes from the request's own point; both give
// exactly the logits of a fresh prefill. Checked on the tiny tokenizer
// container (random weights).
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <vector>

#include "follow_on.h"
#include "golden_util.h"
#include "json_text.h"
#include "pool_test_util.h"
#include "prepare.h"
#include "session_pool.h"
#include "temp_dir.h"

namespace waste::server {
namespace {

using testing::Fresh;
using testing::Ids;
using testing::Resumed;
using testing::SameBits;
using testing::Text;

constexpr int kC = kPrefillChunkTokens;

std::vector<int> Concat(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

int RestorePoint(size_t prompt_tokens) { return static_cast<int>((prompt_tokens - 1) / kC * kC); }

class FollowOnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
    engine_ = testing::OpenTiny(3, SessionPool::kMarks);  // as `waste serve` opens it
    ASSERT_TRUE(engine_);
    auto ref = engine_->model().NewSession();
    ASSERT_TRUE(ref);
    ref_ = std::move(*ref);
  }

  // A request on the pool: prepared, `reply_tokens` generated greedily
  // (returned in *reply), and its slot reserved for the follow-on.
  std::shared_ptr<SessionPool::FollowOn> Answer(SessionPool& pool, const std::vector<int>& prompt,
                                                std::vector<int>* reply) {
    auto run = pool.Prepare(prompt);
    EXPECT_TRUE(run) << run.error().ToString();
    if (!run) return nullptr;
    GenParams p;
    p.temperature = 0;
    p.max_tokens = 24;
    reply->clear();
    EXPECT_TRUE(run->session->Generate(run->rest, p, [&](const TokenEvent& ev) {
      reply->push_back(ev.token);
      return true;
    }));
    return pool.ReserveFollowOn(*run);
  }

  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Session> ref_;
};

TEST_F(FollowOnTest, TheNextTurnResumesPastTheReplyBitIdentically) {
  auto pool = SessionPool::Create(*engine_, 1);
  ASSERT_TRUE(pool) << pool.error().ToString();
  const std::vector<int> a = Ids(*engine_, Text(static_cast<size_t>(kC + kC / 2), 1));
  std::vector<int> reply;
  auto reserved = Answer(**pool, a, &reply);
  ASSERT_NE(reserved, nullptr);
  ASSERT_FALSE(reply.empty());
  // The guess: the prompt, the reply, and the next turn's header, past the
  // next chunk boundary.
  const std::vector<int> guess = Concat(Concat(a, reply), Ids(*engine_, Text(kC, 2)));
  const int ahead_point = static_cast<int>(guess.size()) / kC * kC;
  ASSERT_GT(ahead_point, RestorePoint(a.size()));
  EXPECT_EQ((*pool)->RunFollowOn(std::move(reserved), guess, {}),
            ahead_point - RestorePoint(a.size()));
  EXPECT_EQ((*pool)->kept_tokens(), static_cast<uint64_t>(ahead_point));

  const std::vector<int> next = Concat(guess, Ids(*engine_, " and the user's next message"));
  int cached = -1;
  bool ahead = false;
  EXPECT_TRUE(SameBits(Resumed(**pool, next, &cached, &ahead), Fresh(*ref_, next)));
  EXPECT_EQ(cached, ahead_point);
  EXPECT_TRUE(ahead);

  // And the tokens generated after it equal those after a fresh prefill.
  std::vector<int> resumed_reply, fresh_reply;
  auto reserved2 = Answer(**pool, next, &resumed_reply);
  ref_->Reset();
  GenParams p;
  p.temperature = 0;
  p.max_tokens = 24;
  ASSERT_TRUE(ref_->Generate(next, p, [&](const TokenEvent& ev) {
    fresh_reply.push_back(ev.token);
    return true;
  }));
  EXPECT_EQ(resumed_reply, fresh_reply);
}

// The prompt cache saves a slot's furthest point, the follow-on's, and a
// restarted server resumes the next turn there.
TEST_F(FollowOnTest, ThePromptCacheKeepsTheFollowOnsPoint) {
  waste::testing::TempDir dir;
  const std::vector<int> a = Ids(*engine_, Text(static_cast<size_t>(kC + kC / 2), 11));
  std::vector<int> guess;
  int ahead_point = 0;
  {
    auto pool = SessionPool::Create(*engine_, 1);
    ASSERT_TRUE(pool);
    std::vector<int> reply;
    auto reserved = Answer(**pool, a, &reply);
    ASSERT_NE(reserved, nullptr);
    guess = Concat(Concat(a, reply), Ids(*engine_, Text(kC, 12)));
    ahead_point = static_cast<int>(guess.size()) / kC * kC;
    ASSERT_GT((*pool)->RunFollowOn(std::move(reserved), guess, {}), 0);
    EXPECT_EQ((*pool)->SaveMarks(dir.path()).tokens, static_cast<uint64_t>(ahead_point));
  }
  auto restarted = SessionPool::Create(*engine_, 1);
  ASSERT_TRUE(restarted);
  EXPECT_EQ((*restarted)->LoadMarks(dir.path()).tokens, static_cast<uint64_t>(ahead_point));
  const std::vector<int> next = Concat(guess, Ids(*engine_, "next"));
  int cached = -1;
  EXPECT_TRUE(SameBits(Resumed(**restarted, next, &cached), Fresh(*ref_, next)));
  EXPECT_EQ(cached, ahead_point);
}

TEST_F(FollowOnTest, AWrongGuessFallsBackToTheRequestsOwnPoint) {
  auto pool = SessionPool::Create(*engine_, 1);
  ASSERT_TRUE(pool);
  const std::vector<int> a = Ids(*engine_, Text(static_cast<size_t>(kC + kC / 2), 3));
  std::vector<int> reply;
  auto reserved = Answer(**pool, a, &reply);
  ASSERT_NE(reserved, nullptr);
  const std::vector<int> guess = Concat(Concat(a, reply), Ids(*engine_, Text(kC, 4)));
  ASSERT_GT((*pool)->RunFollowOn(std::move(reserved), guess, {}), 0);
  // The client sent the reply back changed: only the request's point fits.
  const std::vector<int> edited =
      Concat(Concat(a, Ids(*engine_, "an edited reply")), Ids(*engine_, Text(kC, 5)));
  int cached = -1;
  bool ahead = true;
  EXPECT_TRUE(SameBits(Resumed(**pool, edited, &cached, &ahead), Fresh(*ref_, edited)));
  EXPECT_EQ(cached, RestorePoint(a.size()));
  EXPECT_FALSE(ahead);
  // A guess that does not start with the slot's point (the prompt ended in
  // a system note the next turn puts later) is prefilled from the start.
  std::vector<int> reply2;
  auto reserved2 = Answer(**pool, edited, &reply2);
  ASSERT_NE(reserved2, nullptr);
  const std::vector<int> guess2 = Concat(Ids(*engine_, "zz"), edited);
  const int point2 = static_cast<int>(guess2.size()) / kC * kC;
  EXPECT_EQ((*pool)->RunFollowOn(std::move(reserved2), guess2, {}), point2);
  const std::vector<int> next2 = Concat(guess2, Ids(*engine_, "then"));
  EXPECT_TRUE(SameBits(Resumed(**pool, next2, &cached, &ahead), Fresh(*ref_, next2)));
  EXPECT_EQ(cached, point2);
  EXPECT_TRUE(ahead);
}

TEST_F(FollowOnTest, GivesWayAtASpanBoundaryAndKeepsWhatItReached) {
  auto pool = SessionPool::Create(*engine_, 1);
  ASSERT_TRUE(pool);
  const std::vector<int> a = Ids(*engine_, Text(static_cast<size_t>(kC + 20), 6));
  std::vector<int> reply;
  auto reserved = Answer(**pool, a, &reply);
  ASSERT_NE(reserved, nullptr);
  const std::vector<int> guess =
      Concat(Concat(a, reply), Ids(*engine_, Text(2 * kPrefillSpanTokens + 10, 7)));
  int asked = 0;
  // Asked before the first span and after it: gives way there.
  EXPECT_EQ((*pool)->RunFollowOn(std::move(reserved), guess, [&] { return ++asked > 1; }),
            static_cast<int>(kPrefillSpanTokens));
  EXPECT_EQ(asked, 2);
  const std::vector<int> next = Concat(guess, Ids(*engine_, "next"));
  int cached = -1;
  bool ahead = false;
  EXPECT_TRUE(SameBits(Resumed(**pool, next, &cached, &ahead), Fresh(*ref_, next)));
  EXPECT_EQ(cached, RestorePoint(a.size()) + static_cast<int>(kPrefillSpanTokens));
  EXPECT_TRUE(ahead);
}

// While a slot is reserved for its follow-on, a request of its
// conversation (its prompt starts with the slot's point) waits for it, and
// resumes there once the slot is free; another conversation takes a free
// slot at once, and waits only when no slot is free.
TEST_F(FollowOnTest, ARequestWaitsForAReservedSlotOnlyWhenItIsItsOwn) {
  auto pool = SessionPool::Create(*engine_, 2);
  ASSERT_TRUE(pool);
  const std::vector<int> a = Ids(*engine_, Text(static_cast<size_t>(kC + 40), 8));
  std::vector<int> reply;
  auto reserved = Answer(**pool, a, &reply);
  ASSERT_NE(reserved, nullptr);
  {
    // Another conversation: the other slot, at once.
    auto other = (*pool)->Prepare(Ids(*engine_, Text(60, 9)));
    ASSERT_TRUE(other);
    EXPECT_EQ(other->cached_tokens, 0);
    // And with that slot held too, a third waits for the reserved one.
    auto third = std::async(std::launch::async, [&] {
      return (*pool)->Prepare(Ids(*engine_, Text(50, 10))).has_value();
    });
    EXPECT_EQ(third.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
    reserved.reset();  // given up without running: the slot is free again
    ASSERT_EQ(third.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    EXPECT_TRUE(third.get());
  }
  // The same conversation's next turn waits for its slot while another is free.
  auto again = Answer(**pool, a, &reply);
  ASSERT_NE(again, nullptr);
  const std::vector<int> next = Concat(a, Ids(*engine_, "more"));
  auto own = std::async(std::launch::async, [&] {
    auto run = (*pool)->Prepare(next);
    return run ? run->cached_tokens : -1;
  });
  EXPECT_EQ(own.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  again.reset();
  ASSERT_EQ(own.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(own.get(), RestorePoint(a.size()));
}

TEST_F(FollowOnTest, OneMarkPerSessionMeansNoFollowOn) {
  Config cfg;
  cfg.rewind_marks = 1;
  auto e = Engine::Open(testing::TinyTokContainer(), cfg);
  ASSERT_TRUE(e);
  auto pool = SessionPool::Create(**e, 1);
  ASSERT_TRUE(pool);
  auto run = (*pool)->Prepare(Ids(**e, "hello"));
  ASSERT_TRUE(run);
  EXPECT_EQ((*pool)->ReserveFollowOn(*run), nullptr);
  auto off = SessionPool::Create(*engine_, 1, /*follow_on=*/false);
  ASSERT_TRUE(off);
  auto run2 = (*off)->Prepare(Ids(*engine_, "hello"));
  ASSERT_TRUE(run2);
  EXPECT_EQ((*off)->ReserveFollowOn(*run2), nullptr);
}

// The guess (follow_on.h) against the prompts clients really send next.
class NextTurnPrefixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
    engine_ = testing::TinyEngine();
    ASSERT_NE(engine_, nullptr);
    format_ = ResolveChatFormat(*engine_, false);
    ASSERT_EQ(format_.kind, ChatFormat::Kind::kXtml);
  }
  std::vector<int> PromptOf(const Json& messages, const Json& extra = Json::object()) {
    Json body = extra;
    body["messages"] = messages;
    PreparedChat chat;
    ServeLimits limits{4096, 4096};
    auto e = PrepareChat(body, format_, *engine_, limits, &chat);
    EXPECT_FALSE(e) << (e ? e->message : "");
    return chat.ids;
  }
  static bool Starts(const std::vector<int>& ids, const std::vector<int>& prefix) {
    return prefix.size() <= ids.size() && std::equal(prefix.begin(), prefix.end(), ids.begin());
  }
  Engine* engine_ = nullptr;
  ChatFormat format_;
};

TEST_F(NextTurnPrefixTest, IsWhereTheNextRequestDivergesAtTheEarliest) {
  const Json history = Json::array({{{"role", "system"}, {"content", "be brief"}},
                                    {{"role", "user"}, {"content", "What is a prefix?"}}});
  const Json reply = {{"role", "assistant"},
                      {"content", "The start of something."},
                      {"reasoning_content", "They ask about prefixes."}};
  const std::vector<int> guess = NextTurnPrefix(*engine_, format_, {{"messages", history}}, reply);
  ASSERT_FALSE(guess.empty());
  // The client sends the reply back without its reasoning (no earlier
  // assistant message says otherwise): the next prompt starts with the
  // guess, whatever the user writes, and the guess covers the reply.
  Json next = history;
  next.push_back({{"role", "assistant"}, {"content", "The start of something."}});
  next.push_back({{"role", "user"}, {"content", "And a suffix?"}});
  const std::vector<int> sent = PromptOf(next);
  EXPECT_TRUE(Starts(sent, guess));
  EXPECT_GT(guess.size(), PromptOf(history).size());
  next.back()["content"] = "Something else entirely";
  EXPECT_TRUE(Starts(PromptOf(next), guess));

  // A client that echoes reasoning (its history shows it) gets that guess.
  Json echoing = history;
  echoing.push_back({{"role", "assistant"}, {"content", "Hi."}, {"reasoning_content", "greet"}});
  echoing.push_back({{"role", "user"}, {"content", "What is a prefix?"}});
  const std::vector<int> guess2 = NextTurnPrefix(*engine_, format_, {{"messages", echoing}}, reply);
  Json next2 = echoing;
  next2.push_back(reply);
  next2.push_back({{"role", "user"}, {"content", "And a suffix?"}});
  EXPECT_TRUE(Starts(PromptOf(next2), guess2));
  next2[next2.size() - 2].erase("reasoning_content");
  EXPECT_FALSE(Starts(PromptOf(next2), guess2));

  // One whose latest assistant message came back without it does not.
  Json dropping = echoing;
  dropping[dropping.size() - 2].erase("reasoning_content");
  const std::vector<int> guess3 = NextTurnPrefix(*engine_, format_, {{"messages", dropping}}, reply);
  Json next3 = dropping;
  next3.push_back({{"role", "assistant"}, {"content", "The start of something."}});
  next3.push_back({{"role", "user"}, {"content", "And a suffix?"}});
  EXPECT_TRUE(Starts(PromptOf(next3), guess3));
}

TEST_F(NextTurnPrefixTest, AfterToolCallsTheToolResultsFollow) {
  const Json tools = Json::array(
      {{{"type", "function"},
        {"function",
         {{"name", "get_weather"},
          {"parameters",
           {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}}});
  const Json history = Json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}});
  const Json reply = {
      {"role", "assistant"},
      {"content", nullptr},
      {"tool_calls",
       Json::array({{{"id", "call_1"},
                     {"type", "function"},
                     {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}})}};
  const Json body = {{"messages", history}, {"tools", tools}};
  const std::vector<int> guess = NextTurnPrefix(*engine_, format_, body, reply);
  ASSERT_FALSE(guess.empty());
  Json next = history;
  next.push_back(reply);
  next.push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny, 21 C"}});
  EXPECT_TRUE(Starts(PromptOf(next, {{"tools", tools}}), guess));
  EXPECT_GT(guess.size(), PromptOf(history, {{"tools", tools}}).size());
}

}  // namespace
}  // namespace waste::server
