// Generate's contract with its host (include/waste/model.h, docs/EMBEDDING.md):
// settings that would be ignored or give nonsense are refused naming the
// field, before anything runs; an exception from the host's callbacks is
// reported as the host's error (kArg), not an I/O error or a crash; the
// session stays usable after either.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "waste/model.h"

namespace waste {
namespace {

namespace fs = std::filesystem;

class GenerateContract : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("waste_gencontract_" + std::to_string(::getpid())));
    fs::remove_all(*dir_);
    const std::string gen = std::string(WASTE_GEN_BINARY) + " " + dir_->string() + " --preset tiny --seed 4 -q > /dev/null";
    ASSERT_EQ(std::system(gen.c_str()), 0) << gen;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  void SetUp() override {
    Config cfg;
    cfg.ctx_tokens = 256;
    auto m = Model::Open(dir_->string(), cfg);
    ASSERT_TRUE(m.has_value()) << m.error().ToString();
    model_ = std::move(*m);
    auto s = model_->NewSession();
    ASSERT_TRUE(s.has_value());
    session_ = std::move(*s);
  }
  Result<FinishReason> Run(const GenParams& p, const TokenCallback& cb = nullptr) {
    return session_->Generate(prompt_, p, cb ? cb : [](const TokenEvent&) { return true; });
  }
  static fs::path* dir_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Session> session_;
  std::vector<int> prompt_ = {5, 17, 42, 9};
};
fs::path* GenerateContract::dir_ = nullptr;

TEST_F(GenerateContract, SettingsThatMeanNothingAreRefusedNamingTheField) {
  const int vocab = model_->info().vocab;
  struct Case {
    const char* field;
    void (*set)(GenParams&, int vocab);
  };
  const Case cases[] = {
      {"max_tokens", [](GenParams& p, int) { p.max_tokens = 0; }},
      {"temperature", [](GenParams& p, int) { p.temperature = std::numeric_limits<float>::quiet_NaN(); }},
      {"temperature", [](GenParams& p, int) { p.temperature = -1; }},
      {"top_p", [](GenParams& p, int) { p.top_p = 0; }},
      {"top_p", [](GenParams& p, int) { p.top_p = 1.5f; }},
      {"top_k", [](GenParams& p, int) { p.top_k = -3; }},
      {"min_p", [](GenParams& p, int) { p.min_p = 2; }},
      {"repeat_penalty", [](GenParams& p, int) { p.repeat_penalty = 0; }},
      {"repeat_last_n", [](GenParams& p, int) { p.repeat_last_n = -1; }},
      {"stop_tokens", [](GenParams& p, int v) { p.stop_tokens = {v}; }},
      {"logit_bias", [](GenParams& p, int v) { p.logit_bias = {{v + 5, 1.0f}}; }},
      {"logit_bias", [](GenParams& p, int) { p.logit_bias = {{3, std::numeric_limits<float>::quiet_NaN()}}; }},
  };
  for (const Case& c : cases) {
    GenParams p;
    p.max_tokens = 4;
    c.set(p, vocab);
    auto r = Run(p);
    ASSERT_FALSE(r.has_value()) << c.field;
    EXPECT_EQ(r.error().code(), Errc::kArg) << c.field;
    EXPECT_NE(r.error().message().find(c.field), std::string::npos) << r.error().message();
    EXPECT_EQ(session_->position(), 0) << c.field;  // nothing ran
  }
  GenParams ok;
  ok.max_tokens = 3;
  ok.logit_bias = {{3, -INFINITY}};  // a ban is fine
  EXPECT_TRUE(Run(ok).has_value());
}

// A prompt that does not fit says how many positions it needs and how many
// are left (it used to say "full at position 0").
TEST_F(GenerateContract, APromptThatDoesNotFitSaysByHowMuch) {
  std::vector<int> long_prompt(300, 7);
  GenParams p;
  p.max_tokens = 2;
  auto r = session_->Generate(long_prompt, p, [](const TokenEvent&) { return true; });
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), Errc::kArg);
  EXPECT_NE(r.error().message().find("the prompt needs 301 positions (one for the reply) but the "
                                     "context of 256 tokens has 256 left at position 0"),
            std::string::npos)
      << r.error().message();
  auto e = session_->Eval(long_prompt);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().message().find("needs 300 positions but the context of 256 tokens has 256 "
                                     "left"),
            std::string::npos)
      << e.error().message();
}

TEST_F(GenerateContract, ACallbackThatThrowsIsTheHostsError) {
  GenParams p;
  p.max_tokens = 8;
  auto r = Run(p, [](const TokenEvent& e) -> bool {
    if (e.index == 1) throw std::runtime_error("host gave up");
    return true;
  });
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), Errc::kArg);
  EXPECT_NE(r.error().message().find("the token callback threw: host gave up"), std::string::npos)
      << r.error().message();
  auto odd = Run(p, [](const TokenEvent&) -> bool { throw 42; });
  ASSERT_FALSE(odd.has_value());
  EXPECT_EQ(odd.error().code(), Errc::kArg);
  // The prefill callback too (a prompt of more than one span calls it).
  session_->Reset();
  std::vector<int> long_prompt(200, 7);
  GenParams q;
  q.max_tokens = 2;
  q.on_prefill = [](int, int) -> bool { throw std::runtime_error("progress broke"); };
  auto pre = session_->Generate(long_prompt, q, [](const TokenEvent&) { return true; });
  ASSERT_FALSE(pre.has_value());
  EXPECT_EQ(pre.error().code(), Errc::kArg);
  EXPECT_NE(pre.error().message().find("the prefill callback threw: progress broke"), std::string::npos)
      << pre.error().message();
  // Still usable.
  session_->Reset();
  GenParams fine;
  fine.max_tokens = 2;
  EXPECT_TRUE(Run(fine).has_value());
}

// A callback may drive other sessions, not its own: the calls that would
// change the state under Generate are refused (Reset is ignored), and the
// generation goes on as if they had not been made.
TEST_F(GenerateContract, ACallbackCannotDriveItsOwnSession) {
  GenParams p;
  p.max_tokens = 4;
  std::vector<int> alone;
  ASSERT_TRUE(Run(p, [&](const TokenEvent& e) {
                alone.push_back(e.token);
                return true;
              }).has_value());
  session_->Reset();
  std::vector<int> inside;
  std::vector<Errc> refused;
  auto r = Run(p, [&](const TokenEvent& e) {
    inside.push_back(e.token);
    const int id = 3;
    auto ev = session_->Eval(std::span<const int>(&id, 1));
    refused.push_back(ev.has_value() ? Errc::kOk : ev.error().code());
    auto sc = session_->Score(std::span<const int>(&id, 1));
    refused.push_back(sc.has_value() ? Errc::kOk : sc.error().code());
    refused.push_back(session_->SaveState("/nonexistent/x").code());
    session_->Reset();
    return true;
  });
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(inside, alone);
  for (Errc c : refused) EXPECT_EQ(c, Errc::kArg);
  // Outside the callback the session works again.
  const int id = 3;
  EXPECT_TRUE(session_->Eval(std::span<const int>(&id, 1)).has_value());
}

}  // namespace
}  // namespace waste
