// Model/Session (include/waste/model.h): sessions of one model never see
// each other — interleaved token by token they give the logits each gives
// alone, bit for bit, also when one runs inside the other's token
// callback; an in-RAM snapshot restores to bit-identical logits; the
// budget's session reserve admits max_sessions sessions and refuses more;
// memory_used counts every open session's state.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
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
  std::unique_ptr<Model> Open(uint32_t sessions, uint32_t ctx = 256, int rewind_marks = 0,
                              int threads = 0) {
    Config cfg;
    cfg.threads = threads;
    cfg.ctx_tokens = ctx;
    cfg.max_sessions = sessions;
    cfg.rewind_marks = rewind_marks;
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
  // The tokens Generate(prompt, p) delivers; `finish` (optional) gets why it stopped.
  static std::vector<int> Reply(Session& s, const std::vector<int>& prompt, const GenParams& p,
                                FinishReason* finish = nullptr) {
    std::vector<int> tokens;
    auto r = s.Generate(prompt, p, [&](const TokenEvent& e) {
      tokens.push_back(e.token);
      return true;
    });
    EXPECT_TRUE(r.has_value()) << r.error().ToString();
    if (r && finish != nullptr) *finish = *r;
    return tokens;
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

// Two threads generate at once on two sessions of one model: the run lock
// is handed over in turn (include/waste/model.h), so B's whole prompt and
// first token run while A is between two of its tokens (A's callback waits
// for B's first token: without the hand-over it would time out), both
// replies are each one's reply alone, and each session's stats carry its
// own expert traffic: together, exactly the model's hits and misses.
TEST_F(SessionTest, ConcurrentGenerateTakesTurnsAndMatchesEachAlone) {
  GenParams p;
  p.max_tokens = 24;
  std::vector<int> alone_a, alone_b;
  {
    auto m = Open(1);
    ASSERT_TRUE(m);
    alone_a = Reply(*New(*m), prompt_a_, p);
  }
  {
    auto m = Open(1);
    ASSERT_TRUE(m);
    alone_b = Reply(*New(*m), prompt_b_, p);
  }
  auto m = Open(2);
  ASSERT_TRUE(m);
  auto a = New(*m);
  auto b = New(*m);
  ASSERT_TRUE(a && b);
  const Stats model_before = m->stats();
  std::mutex mu;
  std::condition_variable cv;
  bool b_ok = false, b_first = false, a_waited_ok = false;
  std::vector<int> got_a, got_b;
  std::thread tb;
  auto ra = a->Generate(prompt_a_, p, [&](const TokenEvent& e) {
    got_a.push_back(e.token);
    if (e.index == 0) {
      tb = std::thread([&] {
        auto rb = b->Generate(prompt_b_, p, [&](const TokenEvent& eb) {
          got_b.push_back(eb.token);
          if (eb.index == 0) {
            std::lock_guard<std::mutex> lock(mu);
            b_first = true;
            cv.notify_all();
          }
          return true;
        });
        b_ok = rb.has_value();
      });
      // B prefills and samples while A is in its callback (the lock is free).
      std::unique_lock<std::mutex> lock(mu);
      a_waited_ok = cv.wait_for(lock, std::chrono::seconds(30), [&] { return b_first; });
    }
    return true;
  });
  if (tb.joinable()) tb.join();
  ASSERT_TRUE(ra.has_value()) << ra.error().ToString();
  ASSERT_TRUE(b_ok);
  EXPECT_TRUE(a_waited_ok) << "B did not run while A was between two tokens";
  EXPECT_EQ(got_a, alone_a);
  EXPECT_EQ(got_b, alone_b);
  const Stats model_after = m->stats();
  const Stats sa = a->stats(), sb = b->stats();
  EXPECT_EQ(sa.experts_hit + sb.experts_hit, model_after.experts_hit - model_before.experts_hit);
  EXPECT_EQ(sa.experts_missed + sb.experts_missed,
            model_after.experts_missed - model_before.experts_missed);
  // Bytes are counted as reads complete: a read-ahead that lands between two
  // calls is in the model's figure only.
  EXPECT_LE(sa.bytes_read + sb.bytes_read, model_after.bytes_read - model_before.bytes_read);
  EXPECT_GT(sa.experts_hit + sa.experts_missed, 0u);
  EXPECT_GT(sb.experts_hit + sb.experts_missed, 0u);
  EXPECT_EQ(sa.tokens_generated, 24u);
  EXPECT_EQ(sb.tokens_generated, 24u);
}

// Two threads generating at once with callbacks that return at once: the
// run lock goes to the waiting session each time the other releases it, so
// the streams alternate token by token. (With a plain mutex the thread that
// releases it usually takes it straight back and one stream runs ahead for
// many tokens.) What a thread does while it is off the CPU is up to the
// scheduler: on a loaded 2-core machine (this suite runs two tests at once)
// a thread can miss its turns for a whole time slice, dozens of this tiny
// model's steps. So ctest runs this test alone (RUN_SERIAL,
// tests/CMakeLists.txt), the count is loose and the best of up to twenty
// rounds is taken: measured with 64 tokens each, the fair lock gave 17–64
// alternations a round while a TSan suite ran beside it (3 and 4 once each
// beside the rest of the suite, before it ran alone), a plain std::mutex
// 0–3 in every round. (Twenty since 2026-12-04: it failed once in five rounds
// with a second ctest loading the box.)
TEST_F(SessionTest, ConcurrentStreamsAlternateTokenByToken) {
  // One engine thread: the pool's workers would compete with the two
  // callers for this machine's cores and preempt them.
  auto m = Open(2, 256, false, 1);
  ASSERT_TRUE(m);
  auto a = New(*m);
  auto b = New(*m);
  ASSERT_TRUE(a && b);
  GenParams p;
  p.max_tokens = 64;
  p.ignore_eos = true;
  int best = 0;
  std::string rounds;
  for (int round = 0; round < 20 && best < 10; ++round) {
    a->Reset();
    b->Reset();
    std::mutex mu;
    std::vector<char> order;
    auto run = [&](Session& s, const std::vector<int>& prompt, char label) {
      auto r = s.Generate(prompt, p, [&](const TokenEvent&) {
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(label);
        return true;
      });
      EXPECT_TRUE(r.has_value());
    };
    std::thread ta([&] { run(*a, prompt_a_, 'a'); });
    std::thread tb([&] { run(*b, prompt_b_, 'b'); });
    ta.join();
    tb.join();
    ASSERT_EQ(order.size(), 128u);
    // Alternations while both were generating (up to the first one's end).
    size_t first_end = std::min(std::find(order.rbegin(), order.rend(), 'a').base(),
                                std::find(order.rbegin(), order.rend(), 'b').base()) -
                       order.begin();
    int switches = 0;
    for (size_t i = 1; i < first_end; ++i) switches += order[i] != order[i - 1];
    best = std::max(best, switches);
    rounds += std::string(order.begin(), order.end()) + "\n";
  }
  EXPECT_GE(best, 10) << rounds;
}

// A prompt fed with a progress callback lets other sessions run between its
// 512-token spans: B, generating on another thread, delivers tokens while A
// is between its first and last span.
TEST_F(SessionTest, ALongPromptYieldsBetweenItsSpans) {
  auto m = Open(2, 2048);
  ASSERT_TRUE(m);
  auto a = New(*m);
  auto b = New(*m);
  ASSERT_TRUE(a && b);
  std::vector<int> long_prompt;
  while (long_prompt.size() < 3 * kPrefillSpanTokens + 10) {
    long_prompt.insert(long_prompt.end(), prompt_a_.begin(), prompt_a_.end());
  }
  std::atomic<int> spans_done{0};
  std::atomic<bool> a_done{false};
  std::atomic<int> b_between{0};  // B's tokens while A had fed some spans but not all
  std::atomic<bool> b_started{false};
  std::thread tb([&] {
    GenParams p;
    p.max_tokens = 1000;
    p.ignore_eos = true;
    auto r = b->Generate(prompt_b_, p, [&](const TokenEvent&) {
      b_started = true;
      const int done = spans_done.load();
      if (done >= 1 && done < 3) ++b_between;
      return !a_done.load();
    });
    EXPECT_TRUE(r.has_value());
  });
  while (!b_started.load()) std::this_thread::yield();
  GenParams p;
  p.max_tokens = 1;
  p.on_prefill = [&](int done, int total) {
    EXPECT_LE(done, total);
    ++spans_done;
    return true;
  };
  auto r = a->Generate(long_prompt, p, [](const TokenEvent&) { return true; });
  a_done = true;
  tb.join();
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_GE(spans_done.load(), 4);
  EXPECT_GT(b_between.load(), 0) << "B ran only before A's first or after A's last span";
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
  EXPECT_EQ(Reply(*a, prompt_a_, p).size(), 4u);
  auto snap = a->Snapshot();
  ASSERT_TRUE(snap.has_value());
  EXPECT_EQ(snap->position(), static_cast<int>(prompt_a_.size() + 4));
  std::vector<int> next = {5, 6};
  const std::vector<int> first = Reply(*a, next, p);
  ASSERT_TRUE(a->Restore(*snap).ok());
  EXPECT_EQ(Reply(*a, next, p), first);
}

// A rewind mark takes a session back to where it was, bit for bit: set
// after a Generate (its last token not yet fed), then a prompt of three
// spans stopped after the first, a rewind, and the session answers the
// next prompt exactly as one that never saw the stopped prompt; the mark
// stays for another rewind after a call that completed.
TEST_F(SessionTest, RewindToMarkIsAsIfTheCallsSinceNeverHappened) {
  constexpr uint32_t kCtx = 2048;
  auto m = Open(2, kCtx, /*rewind_marks=*/true);
  ASSERT_TRUE(m);
  auto a = New(*m);
  auto b = New(*m);
  ASSERT_TRUE(a && b);
  GenParams p;
  p.max_tokens = 4;
  EXPECT_EQ(Reply(*a, prompt_a_, p), Reply(*b, prompt_a_, p));
  const int mark = a->position();
  ASSERT_TRUE(a->SetMark().ok());

  std::vector<int> long_prompt;
  while (long_prompt.size() < 2 * kPrefillSpanTokens + 100) {
    long_prompt.insert(long_prompt.end(), prompt_b_.begin(), prompt_b_.end());
  }
  GenParams stop = p;
  stop.on_prefill = [](int, int) { return false; };  // stop after the first span
  const uint64_t prefilled = a->stats().prefill_tokens;
  FinishReason stopped = FinishReason::kLength;
  EXPECT_TRUE(Reply(*a, long_prompt, stop, &stopped).empty());
  EXPECT_EQ(stopped, FinishReason::kCancelled);
  // Only the span fed counts as prefilled (the pending token rode in it).
  EXPECT_EQ(a->stats().prefill_tokens - prefilled, kPrefillSpanTokens - 1);
  EXPECT_GT(a->position(), mark);
  ASSERT_TRUE(a->RewindToMark().ok());
  EXPECT_EQ(a->position(), mark);

  const std::vector<int> expected = Reply(*b, prompt_b_, p);
  EXPECT_EQ(Reply(*a, prompt_b_, p), expected);
  const std::vector<int> probe = {3, 1, 4, 1, 5};
  auto from_a = Steps(*a, probe), from_b = Steps(*b, probe);
  ASSERT_EQ(from_a.size(), probe.size());
  for (size_t t = 0; t < probe.size(); ++t) {
    EXPECT_TRUE(SameBits(from_a[t], from_b[t])) << "step " << t;
  }
  // The mark stays: back again after calls that completed.
  ASSERT_TRUE(a->RewindToMark().ok());
  EXPECT_EQ(a->position(), mark);
  EXPECT_EQ(Reply(*a, prompt_b_, p), expected);

  // The plan counted a mark per session; a marked session uses its share.
  auto plain = PlanMemory(FixtureDir(kSet) + "/container", kCtx, 2);
  ASSERT_TRUE(plain.has_value());
  EXPECT_TRUE(m->plan().marks_included);
  EXPECT_GT(plain->mark_bytes, 0u);
  EXPECT_EQ(m->plan().state_bytes, plain->state_bytes + 2 * plain->mark_bytes);
  EXPECT_EQ(m->plan().floor_bytes, plain->floor_bytes + 2 * plain->mark_bytes);
  EXPECT_LE(m->memory_used().state_bytes, m->plan().state_bytes);
  EXPECT_EQ(m->memory_used().state_bytes,
            m->plan().state_bytes - plain->mark_bytes);  // b never set one

  // Reset moves the session elsewhere: the mark is gone, nothing changes.
  a->Reset();
  EXPECT_EQ(a->RewindToMark().code(), Errc::kArg);
  EXPECT_EQ(a->position(), 0);
  EXPECT_EQ(b->RewindToMark().code(), Errc::kArg);  // never set
}

// Several marks per session (Config::rewind_marks = 2, as `waste serve`
// keeps a request's restore point and its follow-on's): each goes back to
// its own point; going back to an earlier one drops the later one (its
// rows are written again), never the earlier; the plan counts each copy.
TEST_F(SessionTest, MarksByIndexAndWhatGoingBackDrops) {
  constexpr uint32_t kCtx = 512;
  auto m = Open(2, kCtx, /*rewind_marks=*/2);
  ASSERT_TRUE(m);
  auto a = New(*m);
  auto b = New(*m);
  ASSERT_TRUE(a && b);
  const std::vector<int> more = {7, 3, 9, 2, 8, 6};
  ASSERT_TRUE(a->Eval(prompt_a_));
  ASSERT_TRUE(a->SetMark(0).ok());
  const int first = a->position();
  ASSERT_TRUE(a->Eval(more));
  ASSERT_TRUE(a->SetMark(1).ok());
  const int second = a->position();
  EXPECT_EQ(a->MarkPosition(0), first);
  EXPECT_EQ(a->MarkPosition(1), second);
  EXPECT_EQ(a->SetMark(2).code(), Errc::kArg);
  EXPECT_EQ(a->RewindToMark(-1).code(), Errc::kArg);

  // To the later mark and on: the earlier one stays.
  ASSERT_TRUE(a->Eval(prompt_b_));
  ASSERT_TRUE(a->RewindToMark(1).ok());
  EXPECT_EQ(a->position(), second);
  EXPECT_EQ(a->MarkPosition(0), first);
  // `b` fed the same calls (a call's chunking decides the bits).
  auto from_a = Steps(*a, prompt_b_);
  ASSERT_TRUE(b->Eval(prompt_a_));
  ASSERT_TRUE(b->Eval(more));
  auto from_b = Steps(*b, prompt_b_);
  ASSERT_EQ(from_a.size(), prompt_b_.size());
  for (size_t t = 0; t < from_a.size(); ++t) EXPECT_TRUE(SameBits(from_a[t], from_b[t])) << t;

  // Back to the earlier mark: the later one is dropped.
  ASSERT_TRUE(a->RewindToMark(0).ok());
  EXPECT_EQ(a->position(), first);
  EXPECT_EQ(a->MarkPosition(1), -1);
  EXPECT_EQ(a->RewindToMark(1).code(), Errc::kArg);
  b->Reset();
  ASSERT_TRUE(b->Eval(prompt_a_));
  from_a = Steps(*a, more);
  from_b = Steps(*b, more);
  ASSERT_EQ(from_a.size(), more.size());
  for (size_t t = 0; t < from_a.size(); ++t) EXPECT_TRUE(SameBits(from_a[t], from_b[t])) << t;

  // Reset drops every mark.
  a->Reset();
  EXPECT_EQ(a->MarkPosition(0), -1);

  // Two copies per session in the plan; both set on `a`, none on `b`.
  auto plain = PlanMemory(FixtureDir(kSet) + "/container", kCtx, 2);
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(m->plan().marks_per_session, 2u);
  EXPECT_EQ(m->plan().state_bytes, plain->state_bytes + 4 * plain->mark_bytes);
  EXPECT_EQ(m->memory_used().state_bytes, m->plan().state_bytes - 2 * plain->mark_bytes);
}

// CopyMark: the copy holds the same point (going back to it gives the
// bits going back to the original gives), outlives the original being set
// further on, and is dropped like any mark by going back before it.
TEST_F(SessionTest, ACopiedMarkIsTheSamePoint) {
  constexpr uint32_t kCtx = 512;
  auto m = Open(2, kCtx, /*rewind_marks=*/3);
  ASSERT_TRUE(m);
  auto a = New(*m);
  auto b = New(*m);
  ASSERT_TRUE(a && b);
  const std::vector<int> more = {7, 3, 9, 2, 8, 6};
  EXPECT_EQ(a->CopyMark(0, 1).code(), Errc::kArg);  // nothing to copy yet
  ASSERT_TRUE(a->Eval(prompt_a_));
  ASSERT_TRUE(a->SetMark(0).ok());
  const int first = a->position();
  ASSERT_TRUE(a->CopyMark(0, 2).ok());
  EXPECT_EQ(a->MarkPosition(2), first);
  EXPECT_EQ(a->CopyMark(0, 3).code(), Errc::kArg);
  // The original moves on; the copy stays where it was.
  ASSERT_TRUE(a->Eval(more));
  ASSERT_TRUE(a->SetMark(0).ok());
  EXPECT_EQ(a->MarkPosition(0), first + static_cast<int>(more.size()));
  EXPECT_EQ(a->MarkPosition(2), first);
  ASSERT_TRUE(a->RewindToMark(2).ok());
  EXPECT_EQ(a->position(), first);
  EXPECT_EQ(a->MarkPosition(0), -1);  // lay past the copy
  ASSERT_TRUE(b->Eval(prompt_a_));
  auto from_a = Steps(*a, prompt_b_);
  auto from_b = Steps(*b, prompt_b_);
  ASSERT_EQ(from_a.size(), prompt_b_.size());
  for (size_t t = 0; t < from_a.size(); ++t) EXPECT_TRUE(SameBits(from_a[t], from_b[t])) << t;
  a->Reset();
  EXPECT_EQ(a->MarkPosition(2), -1);
}

TEST_F(SessionTest, RewindMarksNeedTheConfigFlag) {
  auto m = Open(1);
  ASSERT_TRUE(m);
  auto a = New(*m);
  EXPECT_EQ(a->SetMark().code(), Errc::kUnsupported);
  EXPECT_FALSE(m->plan().marks_included);
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

// Config::max_snapshots keeps room for snapshots a host holds: one
// session's state each (what a snapshot holds at most), no scratch, in the
// state and the floor, outside the session reserve.
TEST_F(SessionTest, SnapshotRoomIsOneStateEachOutsideTheSessionReserve) {
  Config cfg;
  cfg.ctx_tokens = 256;
  auto plain = PlanMemoryForOpen(FixtureDir(kSet) + "/container", cfg);
  cfg.max_snapshots = 2;
  auto room = PlanMemoryForOpen(FixtureDir(kSet) + "/container", cfg);
  ASSERT_TRUE(plain.has_value() && room.has_value());
  EXPECT_EQ(room->snapshots, 2u);
  EXPECT_EQ(room->snapshot_bytes, 2 * plain->state_bytes);
  EXPECT_EQ(room->state_bytes, 3 * plain->state_bytes);
  EXPECT_EQ(room->scratch_bytes, plain->scratch_bytes);
  EXPECT_EQ(room->floor_bytes, plain->floor_bytes + 2 * plain->state_bytes);
  auto m = Open(1, 256);  // max_snapshots 0
  cfg.max_sessions = 1;
  auto with_room = Model::Open(FixtureDir(kSet) + "/container", cfg);
  ASSERT_TRUE(m && with_room.has_value());
  EXPECT_EQ((*with_room)->memory_used().session_reserve_bytes,
            m->memory_used().session_reserve_bytes);
}

// Generate says why it stopped: stop token, stop string (also across two
// pieces), length, full context (with its detail), cancellation.
TEST_F(SessionTest, GenerateReportsWhyItStopped) {
  // The tokenizer set: stop strings match decoded pieces.
  const std::string set = "warp-tiny-tok";
  if (!FixturesPresent(set)) GTEST_SKIP() << "fixture set " << set << " not found";
  std::vector<int> greedy = Ids(ReadJson(FixtureDir(set) + "/greedy16.json")["greedy16"]);
  Config cfg;
  cfg.ctx_tokens = 256;
  auto opened = Model::Open(FixtureDir(set) + "/container", cfg);
  ASSERT_TRUE(opened.has_value());
  auto& m = *opened;
  auto s = New(*m);
  auto run = [&](const GenParams& p, std::vector<int>* got, int cancel_at = -1) {
    s->Reset();
    got->clear();
    return s->Generate(prompt_a_, p, [&](const TokenEvent& e) {
      got->push_back(e.token);
      return e.index != cancel_at;
    });
  };
  std::vector<int> got;
  GenParams p;
  p.max_tokens = 16;
  auto r = run(p, &got);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, FinishReason::kLength);
  EXPECT_EQ(got, greedy);

  p.stop_tokens = {greedy[2]};
  r = run(p, &got);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, FinishReason::kStopToken);
  EXPECT_EQ(got.size(), 3u);
  p.stop_tokens.clear();

  p.stop_strings = {m->TokenPiece(greedy[1]) + m->TokenPiece(greedy[2])};
  r = run(p, &got);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, FinishReason::kStopString);
  EXPECT_LE(got.size(), 3u);
  p.stop_strings.clear();

  r = run(p, &got, /*cancel_at=*/1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, FinishReason::kCancelled);
  EXPECT_EQ(got.size(), 2u);

  // 16 prompt tokens in a 20-token context: 4 generated, then full.
  auto small = Open(1, 20);
  auto t = New(*small);
  got.clear();
  r = t->Generate(prompt_a_, p, [&](const TokenEvent& e) {
    got.push_back(e.token);
    return true;
  });
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, FinishReason::kContextFull);
  EXPECT_EQ(got.size(), 4u);
  EXPECT_EQ(t->position(), 20);
  EXPECT_NE(t->error_detail().find("is full"), std::string::npos) << t->error_detail();
  EXPECT_STREQ(FinishReasonName(FinishReason::kContextFull), "context_full");
  // A prompt that does not fit is an error, and nothing is evaluated.
  auto err = t->Generate(prompt_a_, p, nullptr);
  ASSERT_FALSE(err.has_value());
  EXPECT_EQ(err.error().code(), Errc::kArg);
}

TEST_F(SessionTest, TheLogSinkGetsTheBudgetWarning) {
  Config cfg;
  cfg.ctx_tokens = 256;
  auto plan = PlanMemory(FixtureDir(kSet) + "/container", 256);
  ASSERT_TRUE(plan.has_value());
  if (plan->usable_ram_bytes == 0) GTEST_SKIP() << "usable RAM unknown on this host";
  cfg.ram_budget_bytes = plan->usable_ram_bytes;  // more than three quarters of it
  std::vector<std::string> warnings;
  cfg.log = [&](LogLevel level, std::string_view message) {
    if (level == LogLevel::kWarning) warnings.emplace_back(message);
  };
  auto m = Model::Open(FixtureDir(kSet) + "/container", cfg);
  ASSERT_TRUE(m.has_value()) << m.error().ToString();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("usable RAM"), std::string::npos) << warnings[0];
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
