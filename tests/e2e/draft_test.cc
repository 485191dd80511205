// Prompt-lookup drafting in Session::Generate (Config::draft_tokens,
// docs/DRAFTING.md): the tokens are those of plain decoding, and every way a
// call ends leaves the session where plain decoding would have left it.
//
// On the random fixture models the output is held to a three-token alphabet
// by a constraint, so the history repeats itself in short n-grams: guesses
// are made often, and some are kept and some refused (both paths run, which
// each test checks through the drafting counters). A pass of several tokens
// rounds like a short prompt, so the logits are compared within float noise;
// the tokens must be the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "e2e/fixture_util.h"
#include "waste/grammar.h"
#include "waste/memplan.h"
#include "waste/model.h"

namespace waste {
namespace {

namespace fs = std::filesystem;

constexpr int kDraft = 6;

// Only `allowed` may be sampled (what a grammar does, with a tiny language).
class OneOf : public TokenConstraint {
 public:
  explicit OneOf(std::vector<int> allowed) : allowed_(std::move(allowed)) {}
  bool Allows(int token) noexcept override {
    return std::find(allowed_.begin(), allowed_.end(), token) != allowed_.end();
  }
  void Mask(std::span<float> logits) noexcept override {
    for (size_t i = 0; i < logits.size(); ++i) {
      if (!Allows(static_cast<int>(i))) logits[i] = -INFINITY;
    }
  }
  void Accept(int) noexcept override {}

 private:
  std::vector<int> allowed_;
};

struct Reply {
  std::vector<int> tokens;
  FinishReason finish = FinishReason::kLength;
  int position = 0;
  int drafted = 0;  // tokens the callback saw marked as drafted
};

class DraftTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("waste_draft_" + std::string(GetParam()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    const std::string gen = std::string(WASTE_GEN_BINARY) + " " + dir_.string() + " --preset " +
                            GetParam() + " --seed 11 -q > /dev/null";
    ASSERT_EQ(std::system(gen.c_str()), 0) << gen;
    Config cfg;
    cfg.ctx_tokens = 512;
    cfg.max_sessions = 5;  // a reference and two pairs alive at once
    cfg.draft_tokens = kDraft;
    auto m = Model::Open(dir_.string(), cfg);
    ASSERT_TRUE(m.has_value()) << m.error().ToString();
    model_ = std::move(*m);
    const int vocab = model_->info().vocab;
    alphabet_ = {vocab / 7, vocab / 3, vocab / 2};
    for (int i = 0; i < 24; ++i) prompt_.push_back((i * 37 + 11) % vocab);
  }
  void TearDown() override {
    model_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::unique_ptr<Session> New(uint32_t ctx = 0) {
    SessionOptions o;
    o.ctx_tokens = ctx;
    auto s = model_->NewSession(o);
    EXPECT_TRUE(s.has_value()) << s.error().ToString();
    return s ? std::move(*s) : nullptr;
  }

  // Generate on `s` with drafting on or off; `cancel_at` >= 0: the callback
  // stops the call at that token.
  Reply Run(Session& s, bool draft, GenParams p, int cancel_at = -1,
            std::span<const int> prompt = {}) {
    OneOf only(alphabet_);
    p.constraint = &only;
    p.draft_tokens = draft ? -1 : 0;
    Reply r;
    auto finished = s.Generate(prompt.empty() ? std::span<const int>(prompt_) : prompt, p,
                               [&](const TokenEvent& ev) {
                                 r.tokens.push_back(ev.token);
                                 r.drafted += ev.drafted ? 1 : 0;
                                 return ev.index != cancel_at;
                               });
    EXPECT_TRUE(finished.has_value()) << finished.error().ToString();
    if (finished) r.finish = *finished;
    r.position = s.position();
    return r;
  }

  // Feeds `ids` to both sessions: their next logits agree within float
  // noise when their states do.
  void ExpectSameState(Session& a, Session& b, const std::vector<int>& ids) {
    auto la = a.Eval(ids);
    ASSERT_TRUE(la.has_value()) << la.error().ToString();
    const std::vector<float> first(la->begin(), la->end());
    auto lb = b.Eval(ids);
    ASSERT_TRUE(lb.has_value()) << lb.error().ToString();
    ASSERT_EQ(first.size(), lb->size());
    EXPECT_LT(testing::MaxAbsDiff(first, *lb), 1e-3f);
  }

  fs::path dir_;
  std::unique_ptr<Model> model_;
  std::vector<int> alphabet_;
  std::vector<int> prompt_;
};

TEST_P(DraftTest, SameTokensAsPlainDecodingGreedyAndSampled) {
  for (float temperature : {0.0f, 0.9f}) {
    SCOPED_TRACE(temperature);
    GenParams p;
    p.max_tokens = 80;
    p.temperature = temperature;
    p.seed = 7;
    p.ignore_eos = true;
    std::unique_ptr<Session> plain = New(), drafted = New();
    ASSERT_TRUE(plain && drafted);
    const Reply a = Run(*plain, false, p);
    const Stats before = drafted->stats();
    const Reply b = Run(*drafted, true, p);
    const Stats after = drafted->stats();
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.finish, b.finish);
    EXPECT_EQ(a.position, b.position);
    // Both paths ran: guesses kept and guesses refused.
    const uint64_t guessed = after.draft_tokens - before.draft_tokens;
    const uint64_t kept = after.draft_accepted - before.draft_accepted;
    EXPECT_GT(kept, 0u);
    EXPECT_GT(guessed, kept);
    EXPECT_EQ(static_cast<uint64_t>(b.drafted), kept);
    EXPECT_EQ(a.drafted, 0);
    // The states agree: the next logits are the same within float noise.
    ExpectSameState(*plain, *drafted, {5, 6, 7});
  }
}

TEST_P(DraftTest, EveryEndLeavesTheSessionWherePlainDecodingWould) {
  for (int n : {1, 2, 5, 13, 34}) {
    SCOPED_TRACE("max_tokens " + std::to_string(n));
    GenParams p;
    p.max_tokens = n;
    p.ignore_eos = true;
    std::unique_ptr<Session> plain = New(), drafted = New();
    const Reply a = Run(*plain, false, p), b = Run(*drafted, true, p);
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.position, b.position);
    // The emitted-but-unfed last token is fed by the next call on both.
    GenParams more = p;
    more.max_tokens = 12;
    const std::vector<int> turn = {9, 8};
    const Reply c = Run(*plain, false, more, -1, turn), d = Run(*drafted, true, more, -1, turn);
    EXPECT_EQ(c.tokens, d.tokens);
    EXPECT_EQ(c.position, d.position);
  }
  // A stop token and a cancelling callback, at several places in the reply
  // (inside a pass's guesses for most of them).
  GenParams p;
  p.max_tokens = 60;
  p.ignore_eos = true;
  std::unique_ptr<Session> reference = New();
  const Reply whole = Run(*reference, false, p);
  for (int at : {4, 17, 45}) {
    SCOPED_TRACE("stop at token " + std::to_string(at));
    GenParams stop = p;
    stop.stop_tokens = {whole.tokens[static_cast<size_t>(at)]};
    std::unique_ptr<Session> plain = New(), drafted = New();
    Reply a = Run(*plain, false, stop), b = Run(*drafted, true, stop);
    EXPECT_EQ(a.finish, FinishReason::kStopToken);
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.finish, b.finish);
    EXPECT_EQ(a.position, b.position);
    std::unique_ptr<Session> plain2 = New(), drafted2 = New();
    a = Run(*plain2, false, p, at);
    b = Run(*drafted2, true, p, at);
    EXPECT_EQ(a.finish, FinishReason::kCancelled);
    EXPECT_EQ(b.finish, FinishReason::kCancelled);
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.position, b.position);
    ExpectSameState(*plain2, *drafted2, {3});
  }
}

// GenParams::draft_context: tokens before the prompt that the guesses may
// quote. A reply forced to repeat them is guessed from them; without them
// nothing in the history matches.
TEST_P(DraftTest, GuessesQuoteTheDraftContext) {
  std::vector<int> passage;
  for (int i = 0; i < 30; ++i)
    passage.push_back(alphabet_[static_cast<size_t>((i * i + i / 3) % 3)]);
  // The reply: the passage from its 4th token on, which the prompt lacks.
  class Forced : public TokenConstraint {
   public:
    explicit Forced(std::vector<int> t) : target_(std::move(t)) {}
    bool Allows(int token) noexcept override { return i_ < target_.size() && target_[i_] == token; }
    void Mask(std::span<float> logits) noexcept override {
      for (size_t i = 0; i < logits.size(); ++i) {
        if (!Allows(static_cast<int>(i))) logits[i] = -INFINITY;
      }
    }
    void Accept(int) noexcept override { ++i_; }

   private:
    std::vector<int> target_;
    size_t i_ = 0;
  };
  const std::vector<int> prompt(passage.begin(), passage.begin() + 3);
  const std::vector<int> reply(passage.begin() + 3, passage.end());
  uint64_t kept[2] = {0, 0};
  for (int with_context = 0; with_context < 2; ++with_context) {
    // A session that has seen a context (fed without drafting), then the
    // reply's prompt.
    std::unique_ptr<Session> s = New();
    ASSERT_TRUE(s->Eval(std::vector<int>{1, 2, 3}).has_value());
    Forced forced(reply);
    GenParams p;
    p.max_tokens = static_cast<int>(reply.size());
    p.ignore_eos = true;
    p.constraint = &forced;
    if (with_context) p.draft_context = passage;
    std::vector<int> got;
    const Stats before = s->stats();
    auto done = s->Generate(prompt, p, [&](const TokenEvent& ev) {
      got.push_back(ev.token);
      return true;
    });
    ASSERT_TRUE(done.has_value()) << done.error().ToString();
    EXPECT_EQ(got, reply);
    kept[with_context] = s->stats().draft_accepted - before.draft_accepted;
  }
  EXPECT_GT(kept[1], kept[0] + 5) << kept[0] << " vs " << kept[1];
}

// GenParams::draft_prediction (OpenAI's predicted outputs): a prediction
// that is the reply is guessed from its first token and kept almost whole;
// a wrong one changes nothing but the guesses refused; a token outside the
// vocabulary is refused before anything runs.
TEST_P(DraftTest, APredictionIsQuotedFromItsStartAndNeverChangesTheReply) {
  GenParams p;
  p.max_tokens = 40;
  p.ignore_eos = true;
  auto generate = [&](std::span<const int> prediction, uint64_t* kept) {
    std::unique_ptr<Session> s = New();
    GenParams q = p;
    q.draft_prediction = prediction;
    std::vector<int> got;
    auto done = s->Generate(prompt_, q, [&](const TokenEvent& ev) {
      got.push_back(ev.token);
      return true;
    });
    EXPECT_TRUE(done.has_value()) << done.error().ToString();
    *kept = s->stats().draft_accepted;
    return got;
  };
  uint64_t kept_plain = 0, kept_right = 0, kept_wrong = 0;
  const std::vector<int> reply = generate({}, &kept_plain);
  ASSERT_EQ(reply.size(), 40u);
  EXPECT_EQ(generate(reply, &kept_right), reply);
  // A pass kept whole confirms kDraft guesses; its last row gives the next
  // token, which starts the next pass: at most kDraft kept in kDraft + 1
  // tokens, less the first token (sampled before any guess) and the last (no
  // guess is fed past the end).
  EXPECT_GE(kept_right, (reply.size() - 2) * kDraft / (kDraft + 1) - 1)
      << "without the prediction: " << kept_plain;
  std::vector<int> wrong(reply.rbegin(), reply.rend());
  EXPECT_EQ(generate(wrong, &kept_wrong), reply);
  EXPECT_LT(kept_wrong, kept_right);

  std::unique_ptr<Session> s = New();
  const std::vector<int> bad = {1, model_->info().vocab};
  p.draft_prediction = bad;
  auto refused = s->Generate(prompt_, p, [](const TokenEvent&) { return true; });
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message().find("draft_prediction"), std::string::npos)
      << refused.error().ToString();
  EXPECT_EQ(s->position(), 0);
}

TEST_P(DraftTest, AFullContextEndsTheReplyAtTheSameToken) {
  GenParams p;
  p.max_tokens = 200;
  p.ignore_eos = true;
  const uint32_t ctx = static_cast<uint32_t>(prompt_.size()) + 37;
  std::unique_ptr<Session> plain = New(ctx), drafted = New(ctx);
  const Reply a = Run(*plain, false, p), b = Run(*drafted, true, p);
  EXPECT_EQ(a.finish, FinishReason::kContextFull);
  EXPECT_EQ(b.finish, FinishReason::kContextFull);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.position, b.position);
}

TEST_P(DraftTest, DraftingNeedsTheModelsRoom) {
  std::unique_ptr<Session> s = New();
  GenParams p;
  p.draft_tokens = kDraft + 1;
  auto r = s->Generate(prompt_, p, nullptr);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), Errc::kArg);
  EXPECT_NE(r.error().message().find("draft_tokens"), std::string::npos) << r.error().message();
  EXPECT_EQ(s->position(), 0);  // nothing was fed

  Config too_many;
  too_many.draft_tokens = kMaxDraftTokens + 1;
  auto m = Model::Open(dir_.string(), too_many);
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.error().code(), Errc::kArg);

  // The plan keeps one mark per session for the state before a pass.
  Config cfg;
  cfg.max_sessions = 2;
  cfg.rewind_marks = 2;
  auto without = PlanMemoryForOpen(dir_.string(), cfg);
  cfg.draft_tokens = 4;
  auto with = PlanMemoryForOpen(dir_.string(), cfg);
  ASSERT_TRUE(without && with);
  EXPECT_EQ(without->marks_per_session, 2u);
  EXPECT_EQ(with->marks_per_session, 3u);
  EXPECT_EQ(with->state_bytes - without->state_bytes, 2 * with->mark_bytes);
  // The pass's rows (logits, and the KDA layers' inputs) for 4 guesses + 1.
  EXPECT_EQ(without->draft_record_bytes, 0u);
  EXPECT_GE(with->draft_bytes_per_token,
            static_cast<uint64_t>(model_->info().vocab) * sizeof(float));
  EXPECT_EQ(with->draft_record_bytes, 5 * with->draft_bytes_per_token);
  EXPECT_EQ(with->scratch_bytes - without->scratch_bytes, 2 * with->draft_record_bytes);
  EXPECT_EQ(with->floor_bytes - without->floor_bytes,
            2 * (with->mark_bytes + with->draft_record_bytes));
}

// What drafting adds to a session (its mark, the pass's rows at the
// longest guesses) is within what the plan reserves for it.
TEST_P(DraftTest, WhatDraftingHoldsIsWithinThePlan) {
  std::unique_ptr<Session> s = New();
  GenParams p;
  p.max_tokens = 60;
  p.ignore_eos = true;
  Run(*s, false, p);
  const MemoryUsage plain = model_->memory_used();  // this session's: the only one open
  ASSERT_EQ(plain.sessions, 1u);
  const Reply r = Run(*s, true, p);
  EXPECT_GT(r.drafted, 0);
  const MemoryUsage drafted = model_->memory_used();
  const uint64_t added =
      (drafted.state_bytes + drafted.scratch_bytes) - (plain.state_bytes + plain.scratch_bytes);
  EXPECT_GT(added, 0u);
  EXPECT_LE(added, model_->plan().mark_bytes + model_->plan().draft_record_bytes);
}

INSTANTIATE_TEST_SUITE_P(Families, DraftTest,
                         ::testing::Values("kimi-linear-small", "deepseek-v3-tiny", "k3-tiny"));

}  // namespace
}  // namespace waste
