// Session::Score and ScoreTop (include/waste/model.h): the log-probability
// of every next token from one prompt pass, and Generate's logprobs. Pinned against Eval: where a call ending at
// position p would be chunked exactly as the scoring call's first p rows
// (p a multiple of the 128-token chunk), the score at p-1 equals the
// log-softmax of Eval's logits bit for bit; every family, AttnRes (K3)
// included, since each row must be finished on its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "waste/model.h"

namespace waste {
namespace {

namespace fs = std::filesystem;

// The same arithmetic as Forward::ScoreRow (max, then the sum in double in
// index order), so equal logits give equal scores.
double LogSoftmaxAt(std::span<const float> logits, int target) {
  double max = -INFINITY;
  for (float v : logits) max = std::max(max, double(v));
  double sum = 0;
  for (float v : logits) sum += std::exp(double(v) - max);
  return double(logits[static_cast<size_t>(target)]) - max - std::log(sum);
}

class ScoreTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("waste_score_" + std::string(GetParam()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    const std::string gen = std::string(WASTE_GEN_BINARY) + " " + dir_.string() + " --preset " +
                            GetParam() + " --seed 5 -q > /dev/null";
    ASSERT_EQ(std::system(gen.c_str()), 0) << gen;
    Config cfg;
    cfg.ctx_tokens = 1024;
    cfg.max_sessions = 3;
    auto m = Model::Open(dir_.string(), cfg);
    ASSERT_TRUE(m.has_value()) << m.error().ToString();
    model_ = std::move(*m);
    std::mt19937 rng(3);
    std::uniform_int_distribution<int> id(0, model_->info().vocab - 1);
    for (int i = 0; i < 600; ++i) ids_.push_back(id(rng));
  }
  void TearDown() override {
    model_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  std::unique_ptr<Session> New() {
    auto s = model_->NewSession();
    EXPECT_TRUE(s.has_value()) << s.error().ToString();
    return s ? std::move(*s) : nullptr;
  }

  fs::path dir_;
  std::unique_ptr<Model> model_;
  std::vector<int> ids_;
};

TEST_P(ScoreTest, EqualsEvalWhereTheChunksAgree) {
  std::unique_ptr<Session> scorer = New();
  ASSERT_TRUE(scorer);
  auto scores = scorer->Score(ids_);
  ASSERT_TRUE(scores.has_value()) << scores.error().ToString();
  ASSERT_EQ(scores->size(), ids_.size() - 1);
  EXPECT_EQ(scorer->position(), static_cast<int>(ids_.size()));
  for (double s : *scores) {
    ASSERT_TRUE(std::isfinite(s));
    ASSERT_LE(s, 0.0);
  }
  // 128, 256: inside the first 512-token span; 512: the whole span.
  for (size_t p : {size_t{128}, size_t{256}, size_t{512}}) {
    std::unique_ptr<Session> s = New();
    ASSERT_TRUE(s);
    auto logits = s->Eval(std::span<const int>(ids_.data(), p));
    ASSERT_TRUE(logits.has_value()) << logits.error().ToString();
    EXPECT_EQ((*scores)[p - 1], LogSoftmaxAt(*logits, ids_[p])) << "position " << p - 1;
  }
  // Elsewhere the chunks differ (a call ending at 100 is one 100-token
  // chunk): within prompt-processing tolerance.
  std::unique_ptr<Session> s = New();
  auto logits = s->Eval(std::span<const int>(ids_.data(), 100));
  ASSERT_TRUE(logits.has_value());
  EXPECT_NEAR((*scores)[99], LogSoftmaxAt(*logits, ids_[100]), 1e-3);
}

TEST_P(ScoreTest, CallsSplitAtSpansScoreAsOneCall) {
  std::unique_ptr<Session> one = New(), split = New();
  ASSERT_TRUE(one && split);
  auto whole = one->Score(ids_);
  ASSERT_TRUE(whole.has_value()) << whole.error().ToString();
  auto first = split->Score(std::span<const int>(ids_.data(), 512), ids_[512]);
  ASSERT_TRUE(first.has_value()) << first.error().ToString();
  EXPECT_EQ(first->size(), 512u);  // the last one scores ids_[512], not fed
  EXPECT_EQ(split->position(), 512);
  auto rest = split->Score(std::span<const int>(ids_.data() + 512, ids_.size() - 512));
  ASSERT_TRUE(rest.has_value()) << rest.error().ToString();
  first->insert(first->end(), rest->begin(), rest->end());
  EXPECT_EQ(*first, *whole);
}

TEST_P(ScoreTest, AfterGenerateThePendingTokenIsFedNotScored) {
  std::unique_ptr<Session> s = New();
  ASSERT_TRUE(s);
  GenParams p;
  p.max_tokens = 3;
  auto r = s->Generate(std::span<const int>(ids_.data(), 8), p, [](const TokenEvent&) { return true; });
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  const int before = s->position();  // counts the last token emitted, not fed yet
  auto scores = s->Score(std::span<const int>(ids_.data() + 8, 20));
  ASSERT_TRUE(scores.has_value()) << scores.error().ToString();
  EXPECT_EQ(scores->size(), 19u);
  EXPECT_EQ(s->position(), before + 20);
}

TEST_P(ScoreTest, RefusesWhatEvalRefuses) {
  std::unique_ptr<Session> s = New();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->Score({}).error().code(), Errc::kArg);
  const std::vector<int> bad = {1, model_->info().vocab};
  EXPECT_EQ(s->Score(bad).error().code(), Errc::kArg);
  std::vector<int> too_long(1025, 1);
  EXPECT_EQ(s->Score(too_long).error().code(), Errc::kArg);
  EXPECT_EQ(s->position(), 0);
}

// ScoreTop: the same scores as Score, plus each position's most likely
// tokens, which are the log-softmax's largest entries of the logits Eval
// gives at a chunk boundary (bit for bit), most likely first.
TEST_P(ScoreTest, ScoreTopRanksTheAlternativesOfEvalsLogits) {
  std::unique_ptr<Session> plain = New(), top = New(), eval = New();
  ASSERT_TRUE(plain && top && eval);
  const std::span<const int> ids(ids_.data(), 200);
  auto scores = plain->Score(ids);
  auto scored = top->ScoreTop(ids, 5);
  ASSERT_TRUE(scores.has_value() && scored.has_value());
  ASSERT_EQ(scored->size(), scores->size());
  for (size_t i = 0; i < scored->size(); ++i) {
    ASSERT_EQ((*scored)[i].logprob, (*scores)[i]) << "position " << i;
    ASSERT_EQ((*scored)[i].top.size(), 5u);
    for (size_t k = 1; k < 5; ++k) {
      ASSERT_GE((*scored)[i].top[k - 1].logprob, (*scored)[i].top[k].logprob);
    }
    ASSERT_GE((*scored)[i].top[0].logprob, (*scored)[i].logprob);
  }
  auto logits = eval->Eval(ids.first(128));
  ASSERT_TRUE(logits.has_value());
  std::vector<std::pair<double, int>> all;
  for (int id = 0; id < static_cast<int>(logits->size()); ++id) {
    all.push_back({-LogSoftmaxAt(*logits, id), id});
  }
  std::sort(all.begin(), all.end());
  for (size_t k = 0; k < 5; ++k) {
    EXPECT_EQ((*scored)[127].top[k].token, all[k].second) << "rank " << k;
    EXPECT_EQ((*scored)[127].top[k].logprob, -all[k].first) << "rank " << k;
  }
  EXPECT_EQ(top->ScoreTop(ids, -1).error().code(), Errc::kArg);
  // Many alternatives (selected, then sorted): the same leading entries.
  plain->Reset();
  const size_t want = std::min<size_t>(300, static_cast<size_t>(model_->info().vocab));
  auto wide = plain->ScoreTop(ids.first(130), static_cast<int>(want));
  ASSERT_TRUE(wide.has_value());
  ASSERT_EQ((*wide)[127].top.size(), want);
  for (size_t k = 0; k < 5; ++k) EXPECT_EQ((*wide)[127].top[k].token, all[k].second) << "rank " << k;
  for (size_t k = 1; k < want; ++k) ASSERT_GE((*wide)[127].top[k - 1].logprob, (*wide)[127].top[k].logprob);
}

// Generate's logprobs (GenParams::logprobs, prompt_scores) are the raw
// distribution's: the log-softmax of the very logits Eval gives on the same
// feeds (bit for bit), whatever the temperature picked; the prompt's scores
// are ScoreTop's.
TEST_P(ScoreTest, GenerateReportsTheLogprobsOfTheLogitsItSampledFrom) {
  const std::vector<int> prompt(ids_.begin(), ids_.begin() + 12);
  for (float temperature : {0.0f, 1.0f}) {
    std::unique_ptr<Session> gen = New();
    ASSERT_TRUE(gen);
    GenParams p;
    p.max_tokens = 6;
    p.temperature = temperature;
    p.seed = 9;
    p.ignore_eos = true;
    p.logprobs = true;
    p.top_logprobs = 3;
    std::vector<TokenScore> prompt_scores;
    p.prompt_scores = &prompt_scores;
    std::vector<int> tokens;
    std::vector<TokenScore> events;
    auto r = gen->Generate(prompt, p, [&](const TokenEvent& ev) {
      tokens.push_back(ev.token);
      events.push_back({ev.logprob, {ev.top_logprobs.begin(), ev.top_logprobs.end()}});
      return true;
    });
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    ASSERT_EQ(tokens.size(), 6u);

    std::unique_ptr<Session> scorer = New();
    ASSERT_TRUE(scorer);
    auto expected_prompt = scorer->ScoreTop(prompt, 3);
    ASSERT_TRUE(expected_prompt.has_value());
    ASSERT_EQ(prompt_scores.size(), prompt.size() - 1);
    for (size_t i = 0; i < prompt_scores.size(); ++i) {
      EXPECT_EQ(prompt_scores[i].logprob, (*expected_prompt)[i].logprob) << i;
      ASSERT_EQ(prompt_scores[i].top.size(), 3u);
      EXPECT_EQ(prompt_scores[i].top[0].token, (*expected_prompt)[i].top[0].token) << i;
    }

    scorer.reset();
    std::unique_ptr<Session> replay = New();
    ASSERT_TRUE(replay);
    auto logits = replay->Eval(prompt);
    for (size_t t = 0; t < tokens.size(); ++t) {
      ASSERT_TRUE(logits.has_value()) << logits.error().ToString();
      EXPECT_EQ(events[t].logprob, LogSoftmaxAt(*logits, tokens[t]))
          << "token " << t << " at temperature " << temperature;
      ASSERT_EQ(events[t].top.size(), 3u);
      EXPECT_GE(events[t].top[0].logprob, events[t].logprob);
      if (temperature == 0.0f) EXPECT_EQ(events[t].top[0].token, tokens[t]);
      logits = replay->Eval(std::span<const int>(&tokens[t], 1));
    }
  }
  // Off: nothing computed, nothing reported.
  std::unique_ptr<Session> s = New();
  GenParams p;
  p.max_tokens = 2;
  auto r = s->Generate(prompt, p, [](const TokenEvent& ev) {
    EXPECT_EQ(ev.logprob, 0.0);
    EXPECT_TRUE(ev.top_logprobs.empty());
    return true;
  });
  ASSERT_TRUE(r.has_value());
  p.logprobs = true;
  p.top_logprobs = -1;
  EXPECT_EQ(s->Generate(prompt, p, [](const TokenEvent&) { return true; }).error().code(), Errc::kArg);
}

INSTANTIATE_TEST_SUITE_P(Families, ScoreTest,
                         ::testing::Values("tiny", "k3-tiny", "deepseek-v3-tiny"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = (c == '-') ? '_' : c;
                           return n;
                         });

}  // namespace
}  // namespace waste
