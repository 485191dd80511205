// Prefix reuse must not change a single bit: a prompt resumed from a slot's
// rewind mark gives exactly the logits (and so the tokens) of a fresh prefill
// of the whole prompt. Checked on the tiny tokenizer container (random
// weights; byte-level pieces, so prompts of a few hundred tokens are easy).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "golden_util.h"
#include "json_text.h"
#include "pool_test_util.h"
#include "session_pool.h"
#include "temp_dir.h"

namespace waste::server {
namespace {

using testing::Fresh;
using testing::Greedy;
using testing::Ids;
using testing::Resumed;
using testing::SameBits;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(PrefixReuse, ResumedPrefillIsBitIdenticalToAFreshOne) {
  WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
  Config cfg;
  cfg.max_sessions = 5;
  cfg.rewind_marks = true;
  auto engine = Engine::Open(testing::TinyTokContainer(), cfg);
  ASSERT_TRUE(engine) << engine.error().ToString();
  auto pool = SessionPool::Create(**engine, 2);
  ASSERT_TRUE(pool) << pool.error().ToString();
  auto ref_session = (*engine)->model().NewSession();
  ASSERT_TRUE(ref_session);
  Session& ref = **ref_session;

  constexpr int kC = kPrefillChunkTokens;
  std::string turn1(static_cast<size_t>(kC + kC / 2 + 22), 'a');
  for (size_t i = 0; i < turn1.size(); ++i) turn1[i] = static_cast<char>('a' + (i * 7) % 26);
  const std::vector<int> a = Ids(**engine, turn1);
  ASSERT_GT(a.size(), static_cast<size_t>(kC + 2));
  std::vector<int> b = a;  // the follow-up: the first prompt plus more than one chunk
  while (b.size() < a.size() + static_cast<size_t>(kC) + 10) {
    for (int id : Ids(**engine, " and then the next turn, longer than one chunk of prompt "
                                "tokens, so that a second restore point exists."))
      b.push_back(id);
  }
  const std::vector<int> other = Ids(**engine, std::string(100, 'z'));
  const auto restore_point = [&](const std::vector<int>& ids) {
    return static_cast<int>((ids.size() - 1) / kC * kC);
  };
  ASSERT_GT(restore_point(b), restore_point(a));
  ASSERT_GT(restore_point(a), 0);

  int cached = -1;
  EXPECT_TRUE(SameBits(Resumed(**pool, a, &cached), Fresh(ref, a)));
  EXPECT_EQ(cached, 0);
  // The same prompt again: restored at the last multiple of the chunk before its end.
  EXPECT_TRUE(SameBits(Resumed(**pool, a, &cached), Fresh(ref, a)));
  EXPECT_EQ(cached, restore_point(a));
  // Another conversation takes the second slot; the first stays.
  EXPECT_TRUE(SameBits(Resumed(**pool, other, &cached), Fresh(ref, other)));
  EXPECT_EQ(cached, 0);
  // The follow-up resumes from the first conversation's mark (its session
  // moved past it: the first turn's last tokens were fed after the mark).
  EXPECT_TRUE(SameBits(Resumed(**pool, b, &cached), Fresh(ref, b)));
  EXPECT_EQ(cached, restore_point(a));
  EXPECT_TRUE(SameBits(Resumed(**pool, b, &cached), Fresh(ref, b)));
  EXPECT_EQ(cached, restore_point(b));
  EXPECT_EQ((*pool)->kept_tokens(), static_cast<uint64_t>(restore_point(b) + restore_point(other)));

  // And the sampled tokens after a resumed prompt equal the fresh ones.
  auto run = (*pool)->Prepare(b);
  ASSERT_TRUE(run);
  const std::vector<int> resumed = Greedy(*run->session, run->rest, 12);
  ref.Reset();
  EXPECT_EQ(resumed, Greedy(ref, b, 12));
  EXPECT_EQ(resumed.size(), 12u);
}

// Earlier points (`serve --earlier-points`): each request that moves the
// slot's point on keeps the one it leaves (the last two here); a request
// that changes an earlier turn, as an edited message does, resumes from the
// last kept point before the change, bit for bit, and the points past it
// are gone. Without earlier points the same edit starts over.
TEST(PrefixReuse, AnEditedEarlierTurnResumesFromAnEarlierPoint) {
  WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
  std::unique_ptr<Engine> engine = testing::OpenTiny(3, SessionPool::kMarks + 2);
  ASSERT_NE(engine, nullptr);
  auto pool = SessionPool::Create(*engine, 1, /*follow_on=*/true, /*earlier_points=*/2);
  ASSERT_TRUE(pool) << pool.error().ToString();
  auto ref_session = engine->model().NewSession();
  ASSERT_TRUE(ref_session);
  Session& ref = **ref_session;
  constexpr size_t kC = kPrefillChunkTokens;
  // A conversation: each prompt is the one before and a turn of 1.5 chunks.
  const auto next = [&](std::vector<int> ids, int salt) {
    for (int id : Ids(*engine, testing::Text(kC + kC / 2, salt))) ids.push_back(id);
    return ids;
  };
  const auto point = [&](const std::vector<int>& ids) { return static_cast<int>((ids.size() - 1) / kC * kC); };
  const std::vector<int> t1 = Ids(*engine, testing::Text(kC + 40, 1));
  const std::vector<int> t2 = next(t1, 2), t3 = next(t2, 3), t4 = next(t3, 4);
  int cached = -1;
  bool earlier = false;
  EXPECT_TRUE(SameBits(Resumed(**pool, t1, &cached), Fresh(ref, t1)));
  for (const auto* turn : {&t2, &t3, &t4}) {
    const std::vector<int>& before = turn == &t2 ? t1 : turn == &t3 ? t2 : t3;
    EXPECT_TRUE(SameBits(Resumed(**pool, *turn, &cached, nullptr, &earlier), Fresh(ref, *turn)));
    EXPECT_EQ(cached, point(before));
    EXPECT_FALSE(earlier);
  }
  // The third turn's message edited: t4's points past t2 do not start it;
  // the point kept at t2's is the last before the change (t3's lies past
  // t2's end, t1's was given up for the newer two).
  const std::vector<int> t3_edited = next(t2, 30);
  ASSERT_NE(t3_edited[t2.size()], t3[t2.size()]);
  ASSERT_GT(point(t3), static_cast<int>(t2.size()));
  EXPECT_TRUE(SameBits(Resumed(**pool, t3_edited, &cached, nullptr, &earlier), Fresh(ref, t3_edited)));
  EXPECT_EQ(cached, point(t2));
  EXPECT_TRUE(earlier);
  // Back to the unedited conversation: t3's and t4's points went with the
  // edit (rewinding to t2's point dropped them); t2's is still there.
  EXPECT_TRUE(SameBits(Resumed(**pool, t4, &cached, nullptr, &earlier), Fresh(ref, t4)));
  EXPECT_EQ(cached, point(t2));
  EXPECT_TRUE(earlier);
  // The tokens generated after a resumed edit equal a fresh prefill's.
  auto run = (*pool)->Prepare(t3_edited);
  ASSERT_TRUE(run);
  EXPECT_TRUE(run->resumed_earlier);
  const std::vector<int> edited = Greedy(*run->session, run->rest, 8);
  ref.Reset();
  EXPECT_EQ(edited, Greedy(ref, t3_edited, 8));

  // A prefill stopped right after going back to an earlier point leaves the
  // slot that point: the next try resumes there, not from position 0.
  { SessionPool::Run done = std::move(*run); }  // gives the slot back
  auto stopped = (*pool)->Prepare(t4, [] { return true; });
  ASSERT_FALSE(stopped);
  EXPECT_EQ(stopped.error().code(), Errc::kCancelled);
  EXPECT_TRUE(SameBits(Resumed(**pool, t4, &cached, nullptr, &earlier), Fresh(ref, t4)));
  EXPECT_EQ(cached, point(t2));

  // Without earlier points (the same engine, marks to spare): starts over.
  auto plain = SessionPool::Create(*engine, 1, /*follow_on=*/true, /*earlier_points=*/0);
  ASSERT_TRUE(plain);
  for (const auto* turn : {&t1, &t2, &t3}) Resumed(**plain, *turn, &cached);
  EXPECT_TRUE(SameBits(Resumed(**plain, t3_edited, &cached), Fresh(ref, t3_edited)));
  EXPECT_EQ(cached, 0);
}

// Shared-prefix points (docs/SERVER.md, "Shared-prefix points"): a new
// conversation that starts with the same system prompt as one the slot
// holds resumes from the point at the system prompt's last chunk boundary,
// kept as an earlier point that the first conversation's later turns did
// not push out, bit for bit. Without the hint the same slot has no such
// point and the new conversation starts over.
TEST(PrefixReuse, ANewConversationResumesFromTheSharedSystemPrompt) {
  WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
  std::unique_ptr<Engine> engine = testing::OpenTiny(3, SessionPool::kMarks + 2);
  ASSERT_NE(engine, nullptr);
  auto ref_session = engine->model().NewSession();
  ASSERT_TRUE(ref_session);
  Session& ref = **ref_session;
  constexpr size_t kC = kPrefillChunkTokens;
  const std::vector<int> system = Ids(*engine, testing::Text(2 * kC + 30, 9));
  const auto with = [&](std::vector<int> ids, int salt, size_t n) {
    for (int id : Ids(*engine, testing::Text(n, salt))) ids.push_back(id);
    return ids;
  };
  // Conversation A: three turns of 1.5 chunks after the system prompt.
  const std::vector<int> a1 = with(system, 1, kC + 20);
  const std::vector<int> a2 = with(a1, 2, kC + kC / 2), a3 = with(a2, 3, kC + kC / 2),
                         a4 = with(a3, 4, kC + kC / 2);
  // Conversation B: the same system prompt, another first message.
  const std::vector<int> b1 = with(system, 5, kC + 60);
  const int shared_point = static_cast<int>(system.size() / kC * kC);
  ASSERT_EQ(shared_point, static_cast<int>(2 * kC));
  for (const bool hinted : {true, false}) {
    SCOPED_TRACE(hinted ? "with the shared prefix" : "without it");
    auto pool = SessionPool::Create(*engine, 1, /*follow_on=*/true, /*earlier_points=*/2);
    ASSERT_TRUE(pool) << pool.error().ToString();
    const size_t shared = hinted ? system.size() : 0;
    for (const auto* turn : {&a1, &a2, &a3, &a4}) {
      auto run = (*pool)->Prepare(*turn, {}, shared);
      ASSERT_TRUE(run) << run.error().ToString();
    }
    auto run = (*pool)->Prepare(b1, {}, shared);
    ASSERT_TRUE(run) << run.error().ToString();
    EXPECT_EQ(run->cached_tokens, hinted ? shared_point : 0);
    EXPECT_EQ(run->resumed_earlier, hinted);
    auto logits = run->session->Eval(run->rest);
    ASSERT_TRUE(logits);
    EXPECT_TRUE(SameBits(std::vector<float>(logits->begin(), logits->end()), Fresh(ref, b1)));
  }
  // The edit of an earlier turn still finds the rotating earlier point next
  // to the pinned one: A again, its third turn changed.
  auto pool = SessionPool::Create(*engine, 1, /*follow_on=*/true, /*earlier_points=*/2);
  ASSERT_TRUE(pool);
  for (const auto* turn : {&a1, &a2, &a3}) ASSERT_TRUE((*pool)->Prepare(*turn, {}, system.size()));
  const std::vector<int> a3_edited = with(a2, 30, kC + kC / 2);
  auto prepared = (*pool)->Prepare(a3_edited, {}, system.size());
  ASSERT_TRUE(prepared);
  EXPECT_EQ(prepared->cached_tokens, static_cast<int>((a2.size() - 1) / kC * kC));
  EXPECT_TRUE(prepared->resumed_earlier);
  auto edited = prepared->session->Eval(prepared->rest);
  ASSERT_TRUE(edited);
  EXPECT_TRUE(SameBits(std::vector<float>(edited->begin(), edited->end()), Fresh(ref, a3_edited)));
}

// A client that leaves during a long prefill stops it within a span (the
// restored part is fed span by span), and the slot keeps what it had
// (nothing half-fed is ever rewound to).
TEST(PrefixReuse, CancelledPrefillStopsWithinASpan) {
  WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
  std::unique_ptr<Engine> engine = testing::OpenTiny(2, 1);
  ASSERT_TRUE(engine);
  auto pool = SessionPool::Create(*engine, 1);
  ASSERT_TRUE(pool);
  const std::vector<int> ids =
      Ids(*engine, std::string(static_cast<size_t>(3 * kPrefillSpanTokens + 40), 'p'));
  ASSERT_GT(ids.size(), static_cast<size_t>(3 * kPrefillSpanTokens + 1));  // three whole spans
  int asked = 0;
  auto run = (*pool)->Prepare(ids, [&] { return ++asked > 2; });
  ASSERT_FALSE(run);
  EXPECT_EQ(run.error().code(), Errc::kCancelled);
  EXPECT_EQ(asked, 3);  // two spans fed, then stopped
  EXPECT_EQ((*pool)->kept_tokens(), 0u);
  auto again = (*pool)->Prepare(ids);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->cached_tokens, 0);
}

// A slot is one request's while its Run lives: with every slot held the
// pool answers kBusy (the server maps it to 503), and a slot given back is
// taken again.
TEST(PrefixReuse, HeldSlotsAreNotHandedOutTwice) {
  WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
  std::unique_ptr<Engine> engine = testing::OpenTiny(2, 1);
  ASSERT_TRUE(engine);
  auto pool = SessionPool::Create(*engine, 2);
  ASSERT_TRUE(pool);
  const std::vector<int> ids = Ids(*engine, "held slots");
  auto first = (*pool)->PrepareFresh(ids);
  auto second = (*pool)->Prepare(ids);
  ASSERT_TRUE(first && second);
  EXPECT_NE(first->session, second->session);
  auto third = (*pool)->PrepareFresh(ids);
  ASSERT_FALSE(third);
  EXPECT_EQ(third.error().code(), Errc::kBusy);
  Session* given_back = first->session;
  first = Status(Errc::kCancelled, "done");  // the Run goes, and its slot with it
  auto again = (*pool)->PrepareFresh(ids);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->session, given_back);
}

// The prompt cache: the slots' restore points saved by one server and
// loaded by the next resume prompts exactly as before the restart — the
// same cached-token counts and bit-identical logits — and a damaged or
// foreign pair leaves its slot empty, named, without touching the others.
TEST(PrefixReuse, PromptCacheKeepsRestorePointsAcrossRestarts) {
  WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
  Config cfg;
  cfg.max_sessions = 3;
  cfg.rewind_marks = true;
  constexpr int kC = kPrefillChunkTokens;
  waste::testing::TempDir dir;
  std::vector<int> a, other;
  std::vector<float> fresh_a, fresh_other;
  {
    auto engine = Engine::Open(testing::TinyTokContainer(), cfg);
    ASSERT_TRUE(engine) << engine.error().ToString();
    std::string text(static_cast<size_t>(2 * kC + 40), 'a');
    for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>('a' + (i * 5) % 26);
    a = Ids(**engine, text);
    other = Ids(**engine, std::string(static_cast<size_t>(kC + 30), 'q'));
    auto pool = SessionPool::Create(**engine, 2);
    ASSERT_TRUE(pool);
    int cached = -1;
    Resumed(**pool, a, &cached);
    Resumed(**pool, other, &cached);
    auto ref = (*engine)->model().NewSession();
    ASSERT_TRUE(ref);
    fresh_a = Fresh(**ref, a);
    fresh_other = Fresh(**ref, other);
    {
      // A slot a request holds is not saved (its session is not at rest).
      auto held = (*pool)->Prepare(other);  // rewound to its point, which stays
      ASSERT_TRUE(held);
      SessionPool::CacheReport busy = (*pool)->SaveMarks(dir.path());
      ASSERT_EQ(busy.skipped.size(), 1u);
      EXPECT_NE(busy.skipped[0].find("a request still runs on it"), std::string::npos);
    }
    SessionPool::CacheReport saved = (*pool)->SaveMarks(dir.path());
    EXPECT_TRUE(saved.skipped.empty()) << saved.skipped[0];
    EXPECT_EQ(saved.conversations, 2);
    EXPECT_EQ(saved.tokens, (a.size() - 1) / kC * kC + (other.size() - 1) / kC * kC);
  }
  {
    auto engine = Engine::Open(testing::TinyTokContainer(), cfg);
    ASSERT_TRUE(engine);
    auto pool = SessionPool::Create(**engine, 2);
    ASSERT_TRUE(pool);
    SessionPool::CacheReport loaded = (*pool)->LoadMarks(dir.path());
    EXPECT_TRUE(loaded.skipped.empty()) << loaded.skipped[0];
    EXPECT_EQ(loaded.conversations, 2);
    int cached = -1;
    EXPECT_TRUE(SameBits(Resumed(**pool, a, &cached), fresh_a));
    EXPECT_EQ(cached, static_cast<int>((a.size() - 1) / kC * kC));
    EXPECT_TRUE(SameBits(Resumed(**pool, other, &cached), fresh_other));
    EXPECT_EQ(cached, kC);
  }
  // Damage, one kind per slot: slot 0's token file keeps its state's hash
  // but lists 3 tokens (no restore point); slot 1's state is cut short (it
  // is no longer the state its token file names). Both are skipped and
  // named; the pool then works from scratch on those slots.
  const std::string good_state0 = ReadAll(dir / "slot-0.state");
  const std::string good_tokens0 = ReadAll(dir / "slot-0.tokens.json");
  {
    Json t0;
    std::string err;
    ASSERT_TRUE(ParseJson(good_tokens0, &t0, &err)) << err;
    t0["tokens"] = Json::array({1, 2, 3});
    std::ofstream(dir / "slot-0.tokens.json") << Dump(t0, JsonStyle::kCompact);
    std::filesystem::resize_file(dir / "slot-1.state", 100);
    auto engine = Engine::Open(testing::TinyTokContainer(), cfg);
    ASSERT_TRUE(engine);
    auto pool = SessionPool::Create(**engine, 2);
    ASSERT_TRUE(pool);
    SessionPool::CacheReport loaded = (*pool)->LoadMarks(dir.path());
    EXPECT_EQ(loaded.conversations, 0);
    ASSERT_EQ(loaded.skipped.size(), 2u);
    EXPECT_NE(loaded.skipped[0].find("slot-0: "), std::string::npos) << loaded.skipped[0];
    EXPECT_NE(loaded.skipped[0].find("not a restore point"), std::string::npos) << loaded.skipped[0];
    EXPECT_NE(loaded.skipped[1].find("slot-1: "), std::string::npos) << loaded.skipped[1];
    EXPECT_NE(loaded.skipped[1].find("is not the state"), std::string::npos) << loaded.skipped[1];
    EXPECT_EQ((*pool)->kept_tokens(), 0u);
    int cached = -1;
    EXPECT_TRUE(SameBits(Resumed(**pool, a, &cached), fresh_a));
    EXPECT_EQ(cached, 0);
    // Slot 0 now has its own point and is saved over the damaged pair;
    // slot 1, still empty, keeps the pair it could not load.
    SessionPool::CacheReport saved = (*pool)->SaveMarks(dir.path());
    EXPECT_EQ(saved.conversations, 1);
    EXPECT_EQ(std::filesystem::file_size(dir / "slot-1.state"), 100u);
  }
  // A state swapped in from another slot (a mixed-up pair), ids outside
  // the vocabulary, a token file without its tokens: each named.
  {
    std::ofstream(dir / "slot-0.state", std::ios::binary | std::ios::trunc) << good_state0;
    std::ofstream(dir / "slot-0.tokens.json") << good_tokens0;
    auto engine = Engine::Open(testing::TinyTokContainer(), cfg);
    ASSERT_TRUE(engine);
    auto pool = SessionPool::Create(**engine, 2);
    ASSERT_TRUE(pool);
    SessionPool::CacheReport loaded = (*pool)->LoadMarks(dir.path());
    // The first save's pair for slot 0, put back, loads again; slot 1's
    // damaged pair is still skipped.
    EXPECT_EQ(loaded.conversations, 1);
    EXPECT_EQ(loaded.skipped.size(), 1u);
  }
  {
    std::filesystem::copy_file(dir / "slot-0.state", dir / "slot-1.state",
                               std::filesystem::copy_options::overwrite_existing);
    Json t1 = {{"tokens", Json::array()}, {"state_fnv1a", "0000000000000000"}};
    for (int i = 0; i < 2 * kC; ++i) t1["tokens"].push_back(7);
    std::ofstream(dir / "slot-1.tokens.json") << Dump(t1, JsonStyle::kCompact);
    auto engine = Engine::Open(testing::TinyTokContainer(), cfg);
    ASSERT_TRUE(engine);
    auto pool = SessionPool::Create(**engine, 2);
    ASSERT_TRUE(pool);
    SessionPool::CacheReport loaded = (*pool)->LoadMarks(dir.path());
    ASSERT_EQ(loaded.skipped.size(), 1u);
    EXPECT_NE(loaded.skipped[0].find("slot-1: "), std::string::npos) << loaded.skipped[0];
    EXPECT_NE(loaded.skipped[0].find("is not the state"), std::string::npos) << loaded.skipped[0];
  }
  {
    std::ofstream(dir / "slot-0.tokens.json") << "{\"tokens\": [-1], \"state_fnv1a\": \"0\"}";
    std::ofstream(dir / "slot-1.tokens.json") << "[1, 2]";
    auto engine = Engine::Open(testing::TinyTokContainer(), cfg);
    ASSERT_TRUE(engine);
    auto pool = SessionPool::Create(**engine, 2);
    ASSERT_TRUE(pool);
    SessionPool::CacheReport loaded = (*pool)->LoadMarks(dir.path());
    ASSERT_EQ(loaded.skipped.size(), 2u);
    EXPECT_NE(loaded.skipped[0].find("vocabulary"), std::string::npos) << loaded.skipped[0];
    EXPECT_NE(loaded.skipped[1].find("no \"tokens\" array"), std::string::npos) << loaded.skipped[1];
  }
}

TEST(PrefixReuse, TooManySlotsForThePlanIsAnError) {
  WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
  Config cfg;
  cfg.max_sessions = 2;
  cfg.rewind_marks = true;
  auto engine = Engine::Open(testing::TinyTokContainer(), cfg);
  ASSERT_TRUE(engine);
  EXPECT_TRUE(SessionPool::Create(**engine, 2));
  auto too_many = SessionPool::Create(**engine, 4);
  ASSERT_FALSE(too_many);
  EXPECT_EQ(too_many.error().code(), Errc::kRamBudget);
  // The slots keep their restore points as rewind marks: an engine opened
  // without room for them is refused, not run without reuse.
  cfg.rewind_marks = false;
  engine->reset();
  auto unmarked = Engine::Open(testing::TinyTokContainer(), cfg);
  ASSERT_TRUE(unmarked);
  auto refused = SessionPool::Create(**unmarked, 1);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), Errc::kUnsupported);
}

}  // namespace
}  // namespace waste::server
