// Spilled restore points (server/point_store.h): a slot given to another
// conversation stores its point, and the conversation's next request has it
// loaded back, with exactly the logits of a prefill from scratch. Bounded by
// size (least recently used first), kept across restarts, and a damaged,
// foreign or missing file costs a prefill, never a wrong state. Checked on
// the tiny tokenizer container (random weights).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "golden_util.h"
#include "point_store.h"
#include "pool_test_util.h"
#include "session_pool.h"
#include "state_pair.h"
#include "temp_dir.h"

namespace waste::server {
namespace {

using testing::Fresh;
using testing::Ids;
using testing::OpenTiny;
using testing::Resumed;
using testing::SameBits;
using testing::Text;

constexpr int kC = kPrefillChunkTokens;

std::unique_ptr<PointStore> OpenStore(Engine& e, const std::string& dir, uint64_t max_bytes) {
  PointStore::Options o;
  o.dir = dir;
  o.max_bytes = max_bytes;
  o.vocab = e.info().vocab;
  o.ctx = e.info().ctx_tokens;
  auto store = PointStore::Open(o);
  EXPECT_TRUE(store) << store.error().ToString();
  return store ? std::move(*store) : nullptr;
}

// A pool of `slots` slots on `e` storing its points in `dir`.
std::unique_ptr<SessionPool> PoolWithStore(Engine& e, int slots, const std::string& dir) {
  auto pool = SessionPool::Create(e, slots);
  EXPECT_TRUE(pool) << pool.error().ToString();
  if (!pool) return nullptr;
  (*pool)->UseStore(OpenStore(e, dir, 1ull << 30));
  return std::move(*pool);
}

// Files in `dir` whose names start with "point-".
int PointFiles(const std::string& dir) {
  int n = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    n += f.path().filename().string().rfind("point-", 0) == 0;
  }
  return n;
}

struct Conversations {
  std::vector<std::vector<int>> ids;
  std::vector<std::vector<float>> fresh;  // each one's logits from scratch
  std::vector<int> point;                 // each one's restore point
};

Conversations Make(Engine& e, int n) {
  Conversations c;
  auto ref = e.model().NewSession();
  EXPECT_TRUE(ref);
  for (int i = 0; i < n; ++i) {
    c.ids.push_back(Ids(e, Text(static_cast<size_t>((i % 2 ? 1 : 2) * kC + 40 + i), i)));
    c.fresh.push_back(Fresh(**ref, c.ids.back()));
    c.point.push_back(static_cast<int>((c.ids.back().size() - 1) / kC * kC));
  }
  return c;
}

// Two conversations through a one-slot pool storing in `dir`: the second
// takes the slot, so the first's point is stored (one point in `dir`).
Conversations StoreTheFirstOfTwo(Engine& e, const std::string& dir) {
  Conversations c = Make(e, 2);
  auto pool = PoolWithStore(e, 1, dir);
  int cached = -1;
  if (pool) {
    Resumed(*pool, c.ids[0], &cached);
    Resumed(*pool, c.ids[1], &cached);
    EXPECT_EQ(pool->store()->counts().points, 1u);
  }
  return c;
}

TEST(PointStore, AConversationTheSlotGaveUpIsLoadedBackBitIdentically) {
  WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
  waste::testing::TempDir dir;
  Conversations c;
  {
    auto engine = OpenTiny(2, SessionPool::kMarks);
    ASSERT_TRUE(engine);
    c = Make(*engine, 2);
    ASSERT_GT(c.point[0], c.point[1]);
    auto pool = PoolWithStore(*engine, 1, dir.path());
    ASSERT_TRUE(pool);
    int cached = -1;
    EXPECT_TRUE(SameBits(Resumed(*pool, c.ids[0], &cached), c.fresh[0]));
    EXPECT_EQ(cached, 0);
    // The one slot goes to the second conversation: the first's point is stored.
    EXPECT_TRUE(SameBits(Resumed(*pool, c.ids[1], &cached), c.fresh[1]));
    EXPECT_EQ(cached, 0);
    EXPECT_EQ(pool->store()->counts().stored, 1u);
    EXPECT_EQ(pool->store()->counts().points, 1u);
    EXPECT_EQ(PointFiles(dir.path()), 2);  // its state and its token file
    // The first comes back: loaded, not prefilled; the second is stored.
    {
      auto run = pool->Prepare(c.ids[0]);
      ASSERT_TRUE(run) << run.error().ToString();
      EXPECT_TRUE(run->restored);
      EXPECT_EQ(run->cached_tokens, c.point[0]);
      auto logits = run->session->Eval(run->rest);
      ASSERT_TRUE(logits);
      EXPECT_TRUE(SameBits(std::vector<float>(logits->begin(), logits->end()), c.fresh[0]));
    }
    EXPECT_EQ(pool->store()->counts().loaded, 1u);
    EXPECT_EQ(pool->store()->counts().stored, 2u);
    // Its slot point is a prefix of what it holds now: the same prompt
    // again resumes from the slot, nothing loaded or stored.
    EXPECT_TRUE(SameBits(Resumed(*pool, c.ids[0], &cached), c.fresh[0]));
    EXPECT_EQ(cached, c.point[0]);
    EXPECT_EQ(pool->store()->counts().loaded, 1u);
    EXPECT_EQ(pool->store()->counts().stored, 2u);
    // A request that needs a fresh slot (PrepareFresh) stores the point too;
    // the same point already stored is only marked as used.
    {
      auto fresh = pool->PrepareFresh(c.ids[1]);
      ASSERT_TRUE(fresh);
    }
    EXPECT_EQ(pool->store()->counts().points, 2u);
  }
  // A restarted server finds both points and loads them on demand.
  auto engine = OpenTiny(1, SessionPool::kMarks);
  ASSERT_TRUE(engine);
  auto pool = PoolWithStore(*engine, 1, dir.path());
  ASSERT_TRUE(pool);
  EXPECT_EQ(pool->store()->counts().points, 2u);
  int cached = -1;
  EXPECT_TRUE(SameBits(Resumed(*pool, c.ids[1], &cached), c.fresh[1]));
  EXPECT_EQ(cached, c.point[1]);
  EXPECT_TRUE(SameBits(Resumed(*pool, c.ids[0], &cached), c.fresh[0]));
  EXPECT_EQ(cached, c.point[0]);
  EXPECT_EQ(pool->store()->counts().loaded, 2u);
}

// With a store the shared prefix's point is stored as the prefill passes
// it, so a new conversation on the same system prompt loads it on a slot
// that never held it (here: after a restart), bit for bit.
TEST(PointStore, ASharedSystemPromptsPointServesANewConversationAfterARestart) {
  WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
  waste::testing::TempDir dir;
  std::vector<int> system, a, b;
  {
    auto engine = OpenTiny(2, SessionPool::kMarks);
    ASSERT_TRUE(engine);
    system = Ids(*engine, Text(2 * kC + 30, 9));
    a = system;
    for (int id : Ids(*engine, Text(kC + 20, 1))) a.push_back(id);
    b = system;
    for (int id : Ids(*engine, Text(kC + 50, 2))) b.push_back(id);
    auto pool = PoolWithStore(*engine, 1, dir.path());
    ASSERT_TRUE(pool);
    auto run = pool->Prepare(a, {}, system.size());
    ASSERT_TRUE(run) << run.error().ToString();
    EXPECT_EQ(run->cached_tokens, 0);
    EXPECT_EQ(pool->store()->counts().stored, 1u) << "the system prompt's point, on the way";
  }
  auto engine = OpenTiny(2, SessionPool::kMarks);
  ASSERT_TRUE(engine);
  auto ref = engine->model().NewSession();
  ASSERT_TRUE(ref);
  auto pool = PoolWithStore(*engine, 1, dir.path());
  ASSERT_TRUE(pool);
  auto run = pool->Prepare(b, {}, system.size());
  ASSERT_TRUE(run) << run.error().ToString();
  EXPECT_TRUE(run->restored);
  EXPECT_EQ(run->cached_tokens, static_cast<int>(2 * kC));
  auto logits = run->session->Eval(run->rest);
  ASSERT_TRUE(logits);
  EXPECT_TRUE(SameBits(std::vector<float>(logits->begin(), logits->end()), Fresh(**ref, b)));
}

TEST(PointStore, StaysWithinItsSizeDroppingTheLeastRecentlyUsed) {
  WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
  waste::testing::TempDir dir;
  auto engine = OpenTiny(2, SessionPool::kMarks);
  ASSERT_TRUE(engine);
  Conversations c = Make(*engine, 4);
  uint64_t one_point = 0, all = 0;
  {
    auto pool = PoolWithStore(*engine, 1, dir.path());
    ASSERT_TRUE(pool);
    int cached = -1;
    for (int i = 0; i < 4; ++i) Resumed(*pool, c.ids[static_cast<size_t>(i)], &cached);
    // 0, 1 and 2 were stored as the slot moved on.
    EXPECT_EQ(pool->store()->counts().points, 3u);
    one_point = pool->store()->counts().bytes / 3;
    // Conversation 1 is used again (loaded; 3 is stored).
    Resumed(*pool, c.ids[1], &cached);
    EXPECT_EQ(cached, c.point[1]);
    EXPECT_EQ(pool->store()->counts().points, 4u);
    all = pool->store()->counts().bytes;
  }
  // Reopened with a byte less than the four take: the least recently used
  // (conversation 0: 1 was used again) goes, its files with it.
  auto store = OpenStore(*engine, dir.path(), all - 1);
  ASSERT_TRUE(store);
  EXPECT_EQ(store->counts().points, 3u);
  EXPECT_EQ(store->counts().evicted, 1u);
  EXPECT_EQ(store->Longest(c.ids[0], c.ids[0].size() - 1), 0u);
  EXPECT_EQ(store->Longest(c.ids[1], c.ids[1].size() - 1), static_cast<size_t>(c.point[1]));
  EXPECT_EQ(store->Longest(c.ids[3], c.ids[3].size() - 1), static_cast<size_t>(c.point[3]));
  EXPECT_EQ(PointFiles(dir.path()), 6);
  // A point larger than the whole limit is not kept.
  auto tiny = OpenStore(*engine, dir.path() + "/small", one_point / 2);
  ASSERT_TRUE(tiny);
  auto s = engine->model().NewSession();
  ASSERT_TRUE(s);
  std::vector<int> point(c.ids[0].begin(), c.ids[0].begin() + c.point[0]);
  ASSERT_TRUE((*s)->Eval(point));
  Status put = tiny->Put(**s, point);
  EXPECT_FALSE(put.ok());
  EXPECT_NE(put.message().find("does not fit in --prompt-cache-size"), std::string::npos) << put.message();
  EXPECT_EQ(tiny->counts().points, 0u);
  EXPECT_EQ(PointFiles(dir.path() + "/small"), 0);
  // A session that does not stand at the point is refused.
  EXPECT_FALSE(tiny->Put(**s, std::vector<int>(point.begin(), point.begin() + kC)).ok());
}

TEST(PointStore, ADamagedOrForeignPointCostsAPrefillNotAWrongState) {
  WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
  waste::testing::TempDir dir;
  auto engine = OpenTiny(2, SessionPool::kMarks);
  ASSERT_TRUE(engine);
  Conversations c = StoreTheFirstOfTwo(*engine, dir.path());
  std::string state;
  for (const auto& f : std::filesystem::directory_iterator(dir.path())) {
    if (f.path().extension() == ".state") state = f.path().string();
  }
  ASSERT_FALSE(state.empty());
  // Files that are not this model's points: another vocabulary's ids, not
  // JSON, a name that is not a point's. Never indexed, never removed.
  const std::string foreign = dir / "point-0123456789abcdef.tokens.json";
  std::ofstream(foreign) << "{\"tokens\": [999999999], \"state_fnv1a\": \"0\"}";
  std::ofstream(dir / "point-fedcba9876543210.tokens.json") << "not json";
  std::ofstream(dir / "notes.txt") << "mine";
  // The stored state is damaged (cut short): its token file's hash no
  // longer matches, so loading it fails and the prompt is prefilled.
  std::filesystem::resize_file(state, 100);
  auto pool = PoolWithStore(*engine, 1, dir.path());
  ASSERT_TRUE(pool);
  EXPECT_EQ(pool->store()->counts().points, 1u);
  int cached = -1;
  EXPECT_TRUE(SameBits(Resumed(*pool, c.ids[0], &cached), c.fresh[0]));
  EXPECT_EQ(cached, 0);
  EXPECT_EQ(pool->store()->counts().failed, 1u);
  EXPECT_EQ(pool->store()->counts().points, 0u);
  EXPECT_TRUE(std::filesystem::exists(foreign));
  EXPECT_TRUE(std::filesystem::exists(dir / "point-fedcba9876543210.tokens.json"));
  EXPECT_TRUE(std::filesystem::exists(dir / "notes.txt"));
  // The slot still works, and what it held is stored when it moves on.
  EXPECT_TRUE(SameBits(Resumed(*pool, c.ids[1], &cached), c.fresh[1]));
  EXPECT_EQ(pool->store()->counts().stored, 1u);
}

// A prompt too short for a restore point of its own still takes the slot:
// the conversation it displaces is stored first.
TEST(PointStore, AShortPromptStillStoresThePointItDisplaces) {
  WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
  waste::testing::TempDir dir;
  auto engine = OpenTiny(2, SessionPool::kMarks);
  ASSERT_TRUE(engine);
  Conversations c = Make(*engine, 1);
  auto pool = PoolWithStore(*engine, 1, dir.path());
  ASSERT_TRUE(pool);
  int cached = -1;
  Resumed(*pool, c.ids[0], &cached);
  const std::vector<int> short_prompt = Ids(*engine, "hello");
  ASSERT_LT(short_prompt.size(), static_cast<size_t>(kC));
  Resumed(*pool, short_prompt, &cached);
  EXPECT_EQ(pool->store()->counts().stored, 1u);
  EXPECT_TRUE(SameBits(Resumed(*pool, c.ids[0], &cached), c.fresh[0]));
  EXPECT_EQ(cached, c.point[0]);
}

// Room is made by the least recently used, but never from the points the
// request at hand starts with, and a point that does not fit beside those
// is refused without removing anything.
TEST(PointStore, EvictionSparesTheRequestsOwnPointsAndNeverEmptiesForOneTooLarge) {
  WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
  waste::testing::TempDir dir;
  auto engine = OpenTiny(2, SessionPool::kMarks);
  ASSERT_TRUE(engine);
  Conversations c = Make(*engine, 3);  // points of 2, 1 and 2 chunks
  auto s = engine->model().NewSession();
  ASSERT_TRUE(s);
  auto point = [&](size_t i) {
    return std::vector<int>(c.ids[i].begin(), c.ids[i].begin() + c.point[i]);
  };
  auto put = [&](PointStore& store, size_t i, std::span<const int> keep = {}) {
    (*s)->Reset();
    EXPECT_TRUE((*s)->Eval(point(i)));
    return store.Put(**s, point(i), keep);
  };
  uint64_t two = 0;
  {
    auto probe = OpenStore(*engine, dir.path() + "/probe", 1ull << 30);
    ASSERT_TRUE(put(*probe, 0).ok());
    two = probe->counts().bytes;  // a point of two chunks
  }
  // Room for two points of two chunks: 0 and 1 fit; 2 needs room, and the
  // least recently used (0) is spared because the request starts with it.
  auto store = OpenStore(*engine, dir.path(), two * 2 + 1024);  // token files differ by a few bytes
  ASSERT_TRUE(put(*store, 0).ok());
  ASSERT_TRUE(put(*store, 1).ok());
  ASSERT_TRUE(put(*store, 2, c.ids[0]).ok());
  EXPECT_EQ(store->Longest(c.ids[0], c.ids[0].size() - 1), static_cast<size_t>(c.point[0]));
  EXPECT_EQ(store->Longest(c.ids[1], c.ids[1].size() - 1), 0u);
  EXPECT_EQ(store->counts().evicted, 1u);
  // Reopened with room for one: 2, the most recent, stays. Point 0 would
  // need 2 gone, but the request starts with 2: refused, and nothing is
  // removed for it.
  auto small = OpenStore(*engine, dir.path(), two + two / 2);
  ASSERT_TRUE(small);
  const uint64_t before = small->counts().points;
  Status refused = put(*small, 0, c.ids[2]);
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(small->counts().points, before);
  EXPECT_EQ(small->Longest(c.ids[2], c.ids[2].size() - 1), static_cast<size_t>(c.point[2]));
}

// A state that hashes as its token file says but is not a session file of
// this model: refused by the session-file reader, its files removed; a
// state no token file names (a save cut short) is removed at open.
TEST(PointStore, AStateTheReaderRefusesIsRemovedAndOrphansGoAtOpen) {
  WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
  waste::testing::TempDir dir;
  auto engine = OpenTiny(2, SessionPool::kMarks);
  ASSERT_TRUE(engine);
  Conversations c = StoreTheFirstOfTwo(*engine, dir.path());
  std::string state, tokens;
  for (const auto& f : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = f.path().string();
    if (name.size() > 6 && name.compare(name.size() - 6, 6, ".state") == 0) state = name;
    if (name.size() > 12 && name.compare(name.size() - 12, 12, ".tokens.json") == 0) tokens = name;
  }
  ASSERT_FALSE(state.empty());
  ASSERT_FALSE(tokens.empty());
  std::ofstream(state, std::ios::binary | std::ios::trunc) << std::string(4096, 'x');
  {
    std::ifstream in(tokens);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = text.find("\"state_fnv1a\"");
    ASSERT_NE(at, std::string::npos);
    const size_t q = text.find('"', text.find(':', at));
    text.replace(q + 1, 16, FileHash(state));
    std::ofstream(tokens, std::ios::trunc) << text;
  }
  const std::string orphan = dir / "point-00000000000000aa.state";
  std::ofstream(orphan) << "cut short";
  auto pool = PoolWithStore(*engine, 1, dir.path());
  ASSERT_TRUE(pool);
  EXPECT_FALSE(std::filesystem::exists(orphan));
  EXPECT_EQ(pool->store()->counts().points, 1u);
  int cached = -1;
  EXPECT_TRUE(SameBits(Resumed(*pool, c.ids[0], &cached), c.fresh[0]));
  EXPECT_EQ(cached, 0);
  EXPECT_EQ(pool->store()->counts().failed, 1u);
  EXPECT_FALSE(std::filesystem::exists(state));
  EXPECT_FALSE(std::filesystem::exists(tokens));
}

// Two slots, two threads, three conversations each in turn: slots store
// and load points at once (the store serialises its files), and every
// request still gets the logits of a prefill from scratch.
TEST(PointStore, ConcurrentSlotsStoreAndLoadAndMatchFromScratch) {
  WASTE_SKIP_WITHOUT_SERVE_FIXTURES();
  waste::testing::TempDir dir;
  auto engine = OpenTiny(3, SessionPool::kMarks);
  ASSERT_TRUE(engine);
  Conversations c = Make(*engine, 3);
  auto pool = PoolWithStore(*engine, 2, dir.path());
  ASSERT_TRUE(pool);
  std::atomic<int> mismatches{0}, loads{0};
  auto client = [&](int first) {
    for (int round = 0; round < 6; ++round) {
      const size_t i = static_cast<size_t>((first + round) % 3);
      auto run = pool->Prepare(c.ids[i]);
      if (!run) {
        ++mismatches;
        continue;
      }
      loads += run->restored;
      auto l = run->session->Eval(run->rest);
      if (!l || !SameBits(std::vector<float>(l->begin(), l->end()), c.fresh[i])) ++mismatches;
    }
  };
  std::thread a(client, 0), b(client, 1);
  a.join();
  b.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_GT(loads.load(), 0);
  EXPECT_EQ(pool->store()->counts().failed, 0u);
}

}  // namespace
}  // namespace waste::server
