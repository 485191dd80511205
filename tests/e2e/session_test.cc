// Model/Session (include/waste/model.h): sessions of one model never see
// each other — interleaved token by token they give the logits each gives
// alone, bit for bit, also when one runs inside the other's token
// callback; an in-RAM snapshot restores to bit-identical logits; the
// budget's session reserve admits max_sessions sessions and refuses more;
// memory_used counts every open session's state.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "e2e/fixture_util.h"
#include "waste/engine.h"
#include "waste/model.h"

namespace waste {
namespace {

using testing::FixtureDir;
using testing::FixturesPresent;
using testing::Ids;
using testing::ReadJson;

constexpr const char* kSet = "warp-tiny";

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!FixturesPresent(kSet)) GTEST_SKIP() << "fixture set " << kSet << " not found under " << WASTE_FIXTURES_DIR;
    prompt_a_ = Ids(ReadJson(FixtureDir(kSet) + "/prompt_ids.json"));
    prompt_b_.assign(prompt_a_.rbegin(), prompt_a_.rend());
  }
  std::unique_ptr<Model> Open(uint32_t sessions, uint32_t ctx = 256) {
    Config cfg;
    cfg.ctx_tokens = ctx;
    cfg.max_sessions = sessions;
    auto m = Model::Open(FixtureDir(kSet) + "/container", cfg);
    EXPECT_TRUE(m.has_value()) << (m ? "" : m.error().ToString());
    return m ? std::move(*m) : nullptr;
  }
  std::unique_ptr<Session> New(Model& m) {
    auto s = m.NewSession();
    EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().ToString());
    return s ? std::move(*s) : nullptr;
  }
  // Logits after each token of `ids`, fed one at a time.
  static std::vector<std::vector<float>> Steps(Session& s, const std::vector<int>& ids) {
    std::vector<std::vector<float>> out;
    for (int id : ids) {
      auto l = s.Eval(std::span<const int>(&id, 1));
      EXPECT_TRUE(l.has_value()) << l.error().ToString();
      if (!l) break;
      out.emplace_back(l->begin(), l->end());
    }
    return out;
  }
  static bool SameBits(std::span<const float> a, std::span<const float> b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  }
  std::vector<int> prompt_a_, prompt_b_;
};

TEST_F(SessionTest, InterleavedSessionsMatchEachAlone) {
  std::vector<std::vector<float>> alone_a, alone_b;
  {
    auto m = Open(1);
    ASSERT_TRUE(m);
    alone_a = Steps(*New(*m), prompt_a_);
  }
  {
    auto m = Open(1);
    ASSERT_TRUE(m);
    alone_b = Steps(*New(*m), prompt_b_);
  }
  auto m = Open(2);
  ASSERT_TRUE(m);
  auto a = New(*m);
  auto b = New(*m);
  ASSERT_TRUE(a && b);
  for (size_t t = 0; t < prompt_a_.size(); ++t) {
    auto la = a->Eval(std::span<const int>(&prompt_a_[t], 1));
    ASSERT_TRUE(la.has_value());
    std::vector<float> got_a(la->begin(), la->end());
    auto lb = b->Eval(std::span<const int>(&prompt_b_[t], 1));
    ASSERT_TRUE(lb.has_value());
    EXPECT_TRUE(SameBits(got_a, alone_a[t])) << "session A, position " << t;
    EXPECT_TRUE(SameBits(*lb, alone_b[t])) << "session B, position " << t;
  }
  EXPECT_EQ(a->position(), static_cast<int>(prompt_a_.size()));
  EXPECT_EQ(b->position(), static_cast<int>(prompt_b_.size()));
}

TEST_F(SessionTest, ASessionRunsInsideAnotherSessionsTokenCallback) {
  GenParams p;
  p.max_tokens = 12;
  std::vector<int> alone;
  std::vector<std::vector<float>> alone_b;
  {
    auto m = Open(1);
    ASSERT_TRUE(m);
    auto s = New(*m);
    auto r = s->Generate(prompt_a_, p, [&](const TokenEvent& e) {
      alone.push_back(e.token);
      return true;
    });
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    EXPECT_EQ(*r, FinishReason::kLength);
  }
  {
    auto m = Open(1);
    ASSERT_TRUE(m);
    alone_b = Steps(*New(*m), prompt_b_);
  }
  auto m = Open(2);
  ASSERT_TRUE(m);
  auto a = New(*m);
  auto b = New(*m);
  std::vector<int> got;
  size_t t = 0;
  bool b_same = true;
  auto r = a->Generate(prompt_a_, p, [&](const TokenEvent& e) {
    got.push_back(e.token);
    // B runs a token while A is between two of its own.
    if (t < prompt_b_.size()) {
      auto lb = b->Eval(std::span<const int>(&prompt_b_[t], 1));
      b_same = b_same && lb.has_value() && SameBits(*lb, alone_b[t]);
      ++t;
    }
    return true;
  });
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(*r, FinishReason::kLength);
  EXPECT_EQ(got, alone);
  EXPECT_TRUE(b_same);
  EXPECT_EQ(t, 12u);
}

TEST_F(SessionTest, SnapshotRestoreGivesIdenticalLogits) {
  auto m = Open(2);
  ASSERT_TRUE(m);
  auto a = New(*m);
  const size_t half = prompt_a_.size() / 2;
  std::vector<int> head(prompt_a_.begin(), prompt_a_.begin() + static_cast<std::ptrdiff_t>(half));
  std::vector<int> tail(prompt_a_.begin() + static_cast<std::ptrdiff_t>(half), prompt_a_.end());
  ASSERT_TRUE(a->Eval(head).has_value());
  auto snap = a->Snapshot();
  ASSERT_TRUE(snap.has_value()) << snap.error().ToString();
  EXPECT_EQ(snap->position(), static_cast<int>(half));
  EXPECT_GT(snap->bytes(), 0u);
  auto first = Steps(*a, tail);

  // The same session, rolled back.
  ASSERT_TRUE(a->Restore(*snap).ok());
  EXPECT_EQ(a->position(), static_cast<int>(half));
  auto again = Steps(*a, tail);
  // Another session of the same model.
  auto b = New(*m);
  ASSERT_TRUE(b->Restore(*snap).ok());
  auto other = Steps(*b, tail);
  ASSERT_EQ(first.size(), tail.size());
  for (size_t t = 0; t < tail.size(); ++t) {
    EXPECT_TRUE(SameBits(first[t], again[t])) << "restored into the same session, step " << t;
    EXPECT_TRUE(SameBits(first[t], other[t])) << "restored into another session, step " << t;
  }

  // A snapshot belongs to its model; a session too short for it refuses it.
  auto m2 = Open(1, 256);
  auto c = New(*m2);
  Status st = c->Restore(*snap);
  EXPECT_EQ(st.code(), Errc::kArg);
  EXPECT_TRUE(c->Restore(SessionSnapshot()).code() == Errc::kArg);
}

TEST_F(SessionTest, SnapshotAfterGenerateFeedsThePendingToken) {
  auto m = Open(1);
  ASSERT_TRUE(m);
  auto a = New(*m);
  GenParams p;
  p.max_tokens = 4;
  std::vector<int> tokens;
  auto collect = [&](const TokenEvent& e) {
    tokens.push_back(e.token);
    return true;
  };
  ASSERT_TRUE(a->Generate(prompt_a_, p, collect).has_value());
  auto snap = a->Snapshot();
  ASSERT_TRUE(snap.has_value());
  EXPECT_EQ(snap->position(), static_cast<int>(prompt_a_.size() + 4));
  std::vector<int> next = {5, 6};
  tokens.clear();
  ASSERT_TRUE(a->Generate(next, p, collect).has_value());
  const std::vector<int> first = tokens;
  ASSERT_TRUE(a->Restore(*snap).ok());
  tokens.clear();
  ASSERT_TRUE(a->Generate(next, p, collect).has_value());
  EXPECT_EQ(tokens, first);
}

TEST_F(SessionTest, TheBudgetReservesMaxSessions) {
  auto m = Open(2);
  ASSERT_TRUE(m);
  auto a = New(*m);
  {
    auto b = New(*m);
    ASSERT_TRUE(b);
    auto c = m->NewSession();
    ASSERT_FALSE(c.has_value());
    EXPECT_EQ(c.error().code(), Errc::kRamBudget);
    EXPECT_NE(c.error().message().find("max_sessions"), std::string::npos) << c.error().message();
    MemoryUsage u = m->memory_used();
    EXPECT_EQ(u.sessions, 2u);
    EXPECT_EQ(u.max_sessions, 2u);
    // Both sessions' state is counted, and equals the plan for two.
    EXPECT_EQ(u.state_bytes, m->plan().state_bytes);
    EXPECT_LE(u.scratch_bytes, m->plan().scratch_bytes);
    EXPECT_EQ(m->plan().state_bytes + m->plan().scratch_bytes, 2 * m->plan().session_bytes);
    EXPECT_LE(u.trunk_bytes + u.state_bytes + u.scratch_bytes + u.expert_cache_bytes,
              u.budget_bytes);
  }
  // Closing a session gives its room back.
  EXPECT_EQ(m->memory_used().sessions, 1u);
  EXPECT_TRUE(m->NewSession().has_value());
  // A longer context than the model's does not fit the reserve.
  SessionOptions big;
  big.ctx_tokens = 1u << 20;
  auto huge = m->NewSession(big);
  ASSERT_FALSE(huge.has_value());
  EXPECT_EQ(huge.error().code(), Errc::kRamBudget);
}

TEST_F(SessionTest, TwoSessionsRaiseTheFloorByOneSession) {
  auto one = PlanMemory(FixtureDir(kSet) + "/container", 256, 1);
  auto two = PlanMemory(FixtureDir(kSet) + "/container", 256, 2);
  ASSERT_TRUE(one.has_value() && two.has_value());
  EXPECT_EQ(two->floor_bytes, one->floor_bytes + one->session_bytes);
  EXPECT_EQ(two->state_bytes, 2 * one->state_bytes);
}

TEST_F(SessionTest, SessionsOutliveTheirModelHandle) {
  auto m = Open(1);
  ASSERT_TRUE(m);
  auto a = New(*m);
  m.reset();
  EXPECT_TRUE(a->Eval(prompt_a_).has_value());
}

}  // namespace
}  // namespace waste
