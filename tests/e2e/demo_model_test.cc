// The demo container (build/demo, converted by `waste convert` from the
// trained checkpoint in demo-model/) against the float model it came from.
// demo-model/eval.json was written by the training script
// (tools/train/export.py) with the checkpoint's own bf16 weights in f32
// arithmetic: the held-out passage's token ids, its perplexity, and greedy
// continuations of a few prompts. Conversion quantises (experts VQ3R,
// embedding and lm_head Q8G), so the figures may move, within the margins
// below; they are printed so the suite's log shows float vs converted.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "waste/waste.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kModelDir = std::string(WASTE_SOURCE_DIR) + "/demo-model";
const std::string kContainer = std::string(WASTE_BINARY_DIR) + "/demo";

// Converted perplexity may exceed the float one by at most this fraction.
constexpr double kPerplexityMargin = 0.05;
// Greedy continuations must agree for this many tokens per prompt.
constexpr int kGreedyAgree = 8;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

int ArgMax(std::span<const float> v) {
  int best = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i] > v[static_cast<size_t>(best)]) best = static_cast<int>(i);
  }
  return best;
}

class DemoModel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kContainer + "/manifest.json")) {
      GTEST_SKIP() << kContainer << " missing: build the waste_demo_container target";
    }
    ASSERT_TRUE(fs::exists(kModelDir + "/eval.json"));
    eval_ = json::parse(ReadAll(kModelDir + "/eval.json"));
    waste::Config cfg;
    cfg.threads = 2;
    auto e = waste::Engine::Open(kContainer, cfg);
    ASSERT_TRUE(e.has_value()) << "cannot open " << kContainer;
    engine_ = std::move(*e);
  }

  std::vector<int> HeldOutIds() const { return eval_["heldout_ids"].get<std::vector<int>>(); }

  json eval_;
  std::unique_ptr<waste::Engine> engine_;
};

// The engine's tokenizer cuts the held-out text exactly as the training
// script's (tools/tokenizer_ref.py) did, so the perplexities are comparable.
TEST_F(DemoModel, TokenizerMatchesTheTrainingTokenizer) {
  const std::string text = ReadAll(kModelDir + "/" + eval_["heldout_file"].get<std::string>());
  auto ids = engine_->Tokenize(text, /*markup=*/false, /*add_bos=*/false);
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(*ids, HeldOutIds());
}

TEST_F(DemoModel, HeldOutPerplexityNearTheFloatModel) {
  const std::vector<int> ids = HeldOutIds();
  ASSERT_GT(ids.size(), 100u);
  double nll = 0;
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    auto logits = engine_->Eval(std::span<const int>(&ids[i], 1));
    ASSERT_TRUE(logits.has_value()) << "eval at position " << i;
    double m = -INFINITY;
    for (float v : *logits) m = std::max(m, double(v));
    double sum = 0;
    for (float v : *logits) sum += std::exp(double(v) - m);
    nll -= double((*logits)[static_cast<size_t>(ids[i + 1])]) - m - std::log(sum);
  }
  const double converted = std::exp(nll / double(ids.size() - 1));
  const double float_ppl = eval_["float_perplexity"].get<double>();
  std::cout << "held-out perplexity over " << ids.size() - 1 << " tokens: float " << float_ppl
            << ", converted " << converted << " (" << (converted / float_ppl - 1) * 100 << "%)"
            << std::endl;
  RecordProperty("float_perplexity", std::to_string(float_ppl));
  RecordProperty("converted_perplexity", std::to_string(converted));
  EXPECT_LE(converted, float_ppl * (1 + kPerplexityMargin));
  // Quantisation does not make a model better by much; a big drop means the
  // comparison is broken (different text or tokens).
  EXPECT_GE(converted, float_ppl * (1 - kPerplexityMargin));
}

// Session::Score gives the same figure from one prompt pass (what `waste
// perplexity` uses): the chunked forward agrees with token-at-a-time to
// float noise, far below what the margin above allows.
TEST_F(DemoModel, ScoringInOnePassAgreesWithTokenAtATime) {
  const std::vector<int> ids = HeldOutIds();
  double steps = 0;
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    auto logits = engine_->Eval(std::span<const int>(&ids[i], 1));
    ASSERT_TRUE(logits.has_value());
    double m = -INFINITY;
    for (float v : *logits) m = std::max(m, double(v));
    double sum = 0;
    for (float v : *logits) sum += std::exp(double(v) - m);
    steps -= double((*logits)[static_cast<size_t>(ids[i + 1])]) - m - std::log(sum);
  }
  engine_->ResetState();
  auto scores = engine_->Score(ids);
  ASSERT_TRUE(scores.has_value()) << scores.error().ToString();
  ASSERT_EQ(scores->size(), ids.size() - 1);
  double pass = 0;
  for (double s : *scores) pass -= s;
  const double n = double(ids.size() - 1);
  std::cout << "perplexity token at a time " << std::exp(steps / n) << ", one pass "
            << std::exp(pass / n) << std::endl;
  EXPECT_NEAR(std::exp(pass / n) / std::exp(steps / n), 1.0, 1e-4);
}

TEST_F(DemoModel, GreedyContinuationsAgreeWithTheFloatModel) {
  for (const json& g : eval_["greedy"]) {
    const std::vector<int> prompt = g["prompt_ids"].get<std::vector<int>>();
    const std::vector<int> want = g["ids"].get<std::vector<int>>();
    ASSERT_GE(want.size(), size_t(kGreedyAgree));
    engine_->ResetState();
    auto logits = engine_->Eval(prompt);
    ASSERT_TRUE(logits.has_value());
    std::vector<int> got;
    for (int t = 0; t < kGreedyAgree; ++t) {
      got.push_back(ArgMax(*logits));
      logits = engine_->Eval(std::span<const int>(&got.back(), 1));
      ASSERT_TRUE(logits.has_value());
    }
    EXPECT_EQ(got, std::vector<int>(want.begin(), want.begin() + kGreedyAgree))
        << "prompt \"" << g["prompt"].get<std::string>() << "\"";
  }
}

// Prompt-lookup drafting (docs/DRAFTING.md) on a model that writes real
// text: the same greedy continuation of held-out text as plain decoding,
// with guesses kept (the demo repeats itself readily).
TEST_F(DemoModel, DraftingGivesThePlainContinuation) {
  waste::Config cfg;
  cfg.threads = 2;
  cfg.draft_tokens = 8;
  auto drafting = waste::Engine::Open(kContainer, cfg);
  ASSERT_TRUE(drafting.has_value());
  const std::vector<int> held = HeldOutIds();
  const std::vector<int> prompt(held.begin(), held.begin() + std::min<size_t>(held.size(), 300));
  waste::GenParams p;
  p.max_tokens = 160;
  p.ignore_eos = true;
  std::vector<int> plain, drafted;
  ASSERT_TRUE(engine_
                  ->Generate(prompt, p,
                             [&](const waste::TokenEvent& e) {
                               plain.push_back(e.token);
                               return true;
                             })
                  .has_value());
  ASSERT_TRUE((*drafting)
                  ->Generate(prompt, p,
                             [&](const waste::TokenEvent& e) {
                               drafted.push_back(e.token);
                               return true;
                             })
                  .has_value());
  EXPECT_EQ(plain, drafted);
  const waste::Stats st = (*drafting)->stats();
  std::cout << "drafts " << st.draft_accepted << " of " << st.draft_tokens << " kept in "
            << st.draft_passes << " passes" << std::endl;
  EXPECT_GT(st.draft_accepted, 0u);
}

}  // namespace
