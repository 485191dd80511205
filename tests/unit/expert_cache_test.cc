// ExpertCache against a fake record source and a fake reader
// (expert_cache_fakes.h): replacement, pins, hints, errors and slot
// geometry, each decided by the cache's rules alone, no model needed.
#include "streaming/expert_cache.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "expert_cache_fakes.h"

namespace waste {
namespace {

using testing::FakeReader;
using testing::Harness;
using testing::kRecordBytes;
using testing::Mode;
using testing::RecordId;

// One use of a record: acquired and released at once.
void Use(ExpertCache& c, int layer, int expert) {
  auto pin = c.Acquire(layer, expert);
  ASSERT_TRUE(pin.has_value()) << pin.error().message();
  EXPECT_EQ(pin->view().codebook_id, layer * 100 + expert);  // the record asked for
}

// --- slot geometry -------------------------------------------------------------

TEST(PlanSlots, PadsRecordsTo16KiB) {
  SlotLayout l = PlanSlots(10000, 1 << 20, 4);
  EXPECT_EQ(l.slot_bytes, 16384u);
  EXPECT_EQ(l.slots, 64u);
  l = PlanSlots(16384, 1 << 20, 4);
  EXPECT_EQ(l.slot_bytes, 16384u);
  l = PlanSlots(16385, 1 << 20, 4);
  EXPECT_EQ(l.slot_bytes, 32768u);
  EXPECT_EQ(l.slots, 32u);
}

TEST(PlanSlots, PadsTo4KiBWhen16KiBWouldStarveAFloorSizedCache) {
  // 16 KiB slots give 2 of the 8 wanted; 4 KiB slots give 8.
  SlotLayout l = PlanSlots(1000, 32768, 8);
  EXPECT_EQ(l.slot_bytes, 4096u);
  EXPECT_EQ(l.slots, 8u);
  // Enough slots at 16 KiB: the 16 KiB padding stays.
  l = PlanSlots(1000, 32768, 2);
  EXPECT_EQ(l.slot_bytes, 16384u);
  EXPECT_EQ(l.slots, 2u);
}

TEST(PlanSlots, EmptyRecordsAndTinyCaches) {
  SlotLayout l = PlanSlots(0, 1 << 20, 4);
  EXPECT_EQ(l.slot_bytes, 0u);
  EXPECT_EQ(l.slots, 0u);
  l = PlanSlots(20000, 16384, 1);  // smaller than one record
  EXPECT_EQ(l.slots, 0u);
}

TEST(ExpertCacheCreate, RefusesSlotsTooSmallOrNone) {
  testing::FakeBank bank;
  ExpertCacheOptions o;
  o.huge_pages = false;
  o.io.backend = IoBackend::kSync;
  auto small = ExpertCache::Create(bank.Source(), SlotLayout{1024, 4}, o);
  ASSERT_FALSE(small.has_value());
  EXPECT_EQ(small.error().code(), Errc::kArg);
  auto none = ExpertCache::Create(bank.Source(), SlotLayout{kRecordBytes, 0}, o);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code(), Errc::kRamBudget);
}

// --- replacement -------------------------------------------------------------------
// Four slots: the sampler's 16 draws cover every slot, so the victim is the
// policy's exact choice.

TEST(ExpertCacheReplacement, LfruEvictsFewestHitsNotOldest) {
  Harness h(4, Replacement::kLfru, Mode::kSync);
  for (int e : {0, 1, 2, 0, 1, 2, 3}) Use(*h.cache, 1, e);  // hits 2,2,2,1; 3 is newest
  Use(*h.cache, 1, 4);
  EXPECT_FALSE(h.cache->Ready(1, 3));
  for (int e : {0, 1, 2, 4}) EXPECT_TRUE(h.cache->Ready(1, e)) << e;
  EXPECT_EQ(h.cache->counters().evictions, 1u);
}

TEST(ExpertCacheReplacement, LfruBreaksTiesByOldestUse) {
  Harness h(4, Replacement::kLfru, Mode::kSync);
  for (int e : {2, 0, 1, 3}) Use(*h.cache, 1, e);
  Use(*h.cache, 2, 0);
  EXPECT_FALSE(h.cache->Ready(1, 2));
  for (int e : {0, 1, 3}) EXPECT_TRUE(h.cache->Ready(1, e)) << e;
}

TEST(ExpertCacheReplacement, LruEvictsOldestUseNotFewestHits) {
  Harness h(4, Replacement::kLru, Mode::kSync);
  for (int e : {0, 1, 2, 0, 1, 2, 3}) Use(*h.cache, 1, e);  // 0 is the oldest use
  Use(*h.cache, 1, 4);
  EXPECT_FALSE(h.cache->Ready(1, 0));
  for (int e : {1, 2, 3, 4}) EXPECT_TRUE(h.cache->Ready(1, e)) << e;
}

// A record used three times, evicted while everything else was pinned, then
// reloaded: LFRU and LRU see a fresh record (one hit, oldest use) and evict
// it next; LfuHistory remembers its uses and evicts the least used instead.
void EvictRecordWithHistory(Harness& h) {
  ExpertCache& c = *h.cache;
  for (int i = 0; i < 3; ++i) Use(c, 1, 7);
  std::vector<ExpertPin> held;
  for (int e = 0; e < 4; ++e) {
    auto pin = c.Acquire(2, e);  // the fourth can only take 1/7's slot
    ASSERT_TRUE(pin.has_value()) << pin.error().message();
    held.push_back(std::move(*pin));
  }
  EXPECT_FALSE(c.Ready(1, 7));
  held.clear();
  Use(c, 1, 7);                          // takes 2/0's slot (all policies)
  for (int e : {1, 2, 3}) Use(c, 2, e);  // two uses each, newer than 1/7
  Use(c, 2, 5);
}

TEST(ExpertCacheReplacement, LfuHistoryRemembersUsesAcrossEvictions) {
  Harness h(4, Replacement::kLfuHistory, Mode::kSync);
  EvictRecordWithHistory(h);
  EXPECT_TRUE(h.cache->Ready(1, 7));
  EXPECT_FALSE(h.cache->Ready(2, 1));  // the least used over the run
}

TEST(ExpertCacheReplacement, LfruAndLruForgetUsesAcrossEvictions) {
  for (Replacement p : {Replacement::kLfru, Replacement::kLru}) {
    Harness h(4, p, Mode::kSync);
    EvictRecordWithHistory(h);
    EXPECT_FALSE(h.cache->Ready(1, 7)) << ReplacementName(p);
    EXPECT_TRUE(h.cache->Ready(2, 1)) << ReplacementName(p);
  }
}

TEST(ExpertCacheReplacement, UnusedGuessIsKeptUntilItsLayerRoutes) {
  Harness h(4, Replacement::kLfru, Mode::kAutoReader);
  for (int i = 0; i < 2; ++i) {
    for (int e : {0, 1, 2}) Use(*h.cache, 1, e);
  }
  h.cache->Prefetch(2, std::vector<int>{5});  // one hit: LFRU's natural victim
  h.cache->Drain();
  Use(*h.cache, 1, 3);
  EXPECT_TRUE(h.cache->Ready(2, 5));
  EXPECT_EQ(h.cache->counters().spec_reads, 1u);
}

TEST(ExpertCacheReplacement, GuessItsLayerRoutedPastGoesFirst) {
  Harness h(4, Replacement::kLru, Mode::kAutoReader);
  for (int e : {0, 1, 2}) Use(*h.cache, 1, e);
  h.cache->Prefetch(2, std::vector<int>{5});  // the newest: LRU would keep it
  h.cache->Drain();
  h.cache->Hint(2, std::vector<int>{});  // layer 2 routed without it
  Use(*h.cache, 1, 3);
  EXPECT_FALSE(h.cache->Ready(2, 5));
  for (int e : {0, 1, 2, 3}) EXPECT_TRUE(h.cache->Ready(1, e)) << e;
  EXPECT_EQ(h.cache->counters().spec_used, 0u);
}

// --- reuse odds (the default policy) --------------------------------------------------
// Decode as the engine runs it: one hint per MoE layer in order, each layer's
// records acquired after its hint; a token ends when the layers come round.

void Step(ExpertCache& c, int layer, std::vector<int> experts) {
  c.Hint(layer, experts);
  for (int e : experts) Use(c, layer, e);
}

// Two records in the same state (one use each, in the same token): the one
// whose layer comes round first is needed first and stays. LRU and LFRU
// evict it (the older use).
void TwoRecordsOneLayerApart(Harness& h) {
  ExpertCache& c = *h.cache;
  Step(c, 1, {0});
  Step(c, 2, {5});
  Step(c, 3, {5});
  c.Hint(1, std::vector<int>{1, 2});  // token 2
  auto a = c.Acquire(1, 0);           // held: only 2/5 and 3/5 can go
  auto b = c.Acquire(1, 1);
  ASSERT_TRUE(a.has_value() && b.has_value());
  Use(c, 1, 2);
}

TEST(ExpertCacheReplacement, ReuseOddsKeepsTheRecordWhoseLayerComesFirst) {
  Harness h(4, Replacement::kReuseOdds, Mode::kSync);
  TwoRecordsOneLayerApart(h);
  EXPECT_TRUE(h.cache->Ready(2, 5));
  EXPECT_FALSE(h.cache->Ready(3, 5));
}

TEST(ExpertCacheReplacement, LfruAndLruEvictTheRecordWhoseLayerComesFirst) {
  for (Replacement p : {Replacement::kLfru, Replacement::kLru}) {
    Harness h(4, p, Mode::kSync);
    TwoRecordsOneLayerApart(h);
    EXPECT_FALSE(h.cache->Ready(2, 5)) << ReplacementName(p);
    EXPECT_TRUE(h.cache->Ready(3, 5)) << ReplacementName(p);
  }
}

// Six tokens in which layer 1 uses expert 0 and a new one-off expert, layer
// 2 expert 0: the odds learn that one-offs never come back and expert 0
// always does. Then a new record must evict one of 1/0, the last one-off
// 1/6 (used after 1/0) and 2/0 (its layer is next).
TEST(ExpertCacheReplacement, ReuseOddsKeepsTheRecordThatKeepsComingBack) {
  for (Replacement p : {Replacement::kReuseOdds, Replacement::kLru}) {
    Harness h(3, p, Mode::kSync);
    ExpertCache& c = *h.cache;
    for (int t = 1; t <= 6; ++t) {
      Step(c, 1, {0, t});
      Step(c, 2, {0});
    }
    for (RecordId id : {RecordId{1, 0}, RecordId{1, 6}, RecordId{2, 0}}) {
      ASSERT_TRUE(c.Ready(id.first, id.second)) << ReplacementName(p);
    }
    c.Hint(1, std::vector<int>{7});
    Use(c, 1, 7);
    const bool odds = p == Replacement::kReuseOdds;
    EXPECT_EQ(c.Ready(1, 0), odds) << ReplacementName(p);   // LRU: the oldest use
    EXPECT_EQ(c.Ready(1, 6), !odds) << ReplacementName(p);  // odds: the one-off
    EXPECT_TRUE(c.Ready(2, 0)) << ReplacementName(p);
  }
}

// A prompt step acquires its records once per table window (and again for
// its decoded tokens). Under reuse-odds a record of the layer that just ran
// looks a whole token away, the first to go, so a small cache evicted what
// the step's next window read again. With step_reuses the step's records go
// last, under every policy; without it reuse-odds takes one of them.
TEST(ExpertCacheReplacement, AStepThatReusesItsRecordsKeepsThem) {
  for (Replacement p : {Replacement::kReuseOdds, Replacement::kLru, Replacement::kLfru}) {
    for (bool reuses : {true, false}) {
      Harness h(4, p, Mode::kSync);
      ExpertCache& c = *h.cache;
      Step(c, 1, {0});
      Step(c, 2, {5});
      c.Hint(1, std::vector<int>{1, 2, 3}, reuses);  // the next token: a prompt step
      Use(c, 1, 1);
      Use(c, 1, 2);
      Use(c, 1, 3);  // the cache is full: 1/0, 2/5, 1/1 or 1/2 goes
      const bool kept = c.Ready(1, 1) && c.Ready(1, 2);
      if (reuses) {
        EXPECT_TRUE(kept) << ReplacementName(p);
      } else if (p == Replacement::kReuseOdds) {
        EXPECT_FALSE(kept) << "the test's premise: reuse-odds evicts a record the step used";
      }
      EXPECT_TRUE(c.Ready(1, 3)) << ReplacementName(p);
    }
  }
}

// The lookahead gate: layer 2's rank-0 guess (expert 0) is always routed,
// its rank-1 guesses never. The first four of a rank are read whatever
// their record; after that rank 1 is no longer read under reuse-odds, rank 0
// still is. LFRU reads every guess.
TEST(ExpertCacheReplacement, ReuseOddsStopsReadingGuessesOfARankThatIsMostlyWrong) {
  for (Replacement p : {Replacement::kReuseOdds, Replacement::kLfru}) {
    Harness h(8, p, Mode::kAutoReader);
    ExpertCache& c = *h.cache;
    for (int round = 0; round < 4; ++round) {
      c.Prefetch(2, std::vector<int>{0, 1 + round});  // 0 resident after round 0
      c.Drain();
      Step(c, 2, {0});
    }
    EXPECT_EQ(c.counters().spec_reads, 5u) << ReplacementName(p);
    c.Prefetch(2, std::vector<int>{5, 6});
    c.Drain();
    const bool gated = p == Replacement::kReuseOdds;
    EXPECT_EQ(c.counters().spec_reads, gated ? 6u : 7u) << ReplacementName(p);
    EXPECT_TRUE(c.Ready(2, 5)) << ReplacementName(p);
    EXPECT_EQ(c.Ready(2, 6), !gated) << ReplacementName(p);
  }
}

TEST(ExpertCacheReplacement, SpecGateZeroReadsEveryGuessUnderReuseOdds) {
  testing::FakeBank bank;
  ExpertCacheOptions o;
  o.policy = Replacement::kReuseOdds;
  o.spec_gate = 0.0f;
  o.huge_pages = false;
  o.make_reader = [](std::span<uint8_t>, uint64_t, ExpertReader::Completion done)
      -> Result<std::unique_ptr<ExpertReader>> {
    return std::unique_ptr<ExpertReader>(std::make_unique<FakeReader>(std::move(done), true));
  };
  auto c = std::move(ExpertCache::Create(bank.Source(), SlotLayout{kRecordBytes, 8}, o).value());
  for (int round = 0; round < 4; ++round) {
    c->Prefetch(2, std::vector<int>{0, 1 + round});
    c->Drain();
    Step(*c, 2, {0});
  }
  c->Prefetch(2, std::vector<int>{5, 6});
  c->Drain();
  EXPECT_EQ(c->counters().spec_reads, 7u);
  EXPECT_TRUE(c->Ready(2, 6));
}

// --- pins --------------------------------------------------------------------------

TEST(ExpertCachePins, PinnedRecordIsNeverEvicted) {
  Harness h(2, Replacement::kLru, Mode::kSync);
  auto pinned = h.cache->Acquire(1, 0);
  ASSERT_TRUE(pinned.has_value());
  for (int e = 1; e < 8; ++e) Use(*h.cache, 1, e);  // all through the other slot
  EXPECT_TRUE(h.cache->Ready(1, 0));
  EXPECT_EQ(h.cache->counters().evictions, 6u);
  pinned->Reset();
  Use(*h.cache, 2, 0);
  Use(*h.cache, 2, 1);
  EXPECT_FALSE(h.cache->Ready(1, 0));  // evictable again once released
}

TEST(ExpertCachePins, PinReleasesOnceWhenItsLastOwnerGoes) {
  Harness h(2, Replacement::kLru, Mode::kSync);
  auto first = h.cache->Acquire(1, 0);
  auto second = h.cache->Acquire(1, 0);  // two pins on one record
  ASSERT_TRUE(first.has_value() && second.has_value());
  EXPECT_EQ(first->view().codebook_id, 100);
  {
    ExpertPin moved = std::move(*first);
    EXPECT_FALSE(first->held());
    EXPECT_TRUE(moved.held());
    EXPECT_EQ(moved.view().codebook_id, 100);
  }  // one release, not two: the moved-from pin holds nothing
  for (int e = 1; e < 4; ++e) Use(*h.cache, 1, e);
  EXPECT_TRUE(h.cache->Ready(1, 0));  // still pinned by `second`
  second->Reset();
  second->Reset();  // a second Reset is a no-op
  EXPECT_FALSE(second->held());
  for (int e = 4; e < 6; ++e) Use(*h.cache, 1, e);
  EXPECT_FALSE(h.cache->Ready(1, 0));
}

void ExpectOutOfSlots(Mode mode) {
  Harness h(2, Replacement::kLfru, mode);
  auto a = h.cache->Acquire(1, 0);
  auto b = h.cache->Acquire(1, 1);
  ASSERT_TRUE(a.has_value() && b.has_value());
  auto c = h.cache->Acquire(2, 3);  // nothing to evict, nothing in flight: no wait
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code(), Errc::kIo);
  EXPECT_EQ(c.failure().layer, 2);
  EXPECT_EQ(c.failure().expert, 3);
  EXPECT_EQ(c.error().message(),
            "expert 3 of layer 2: expert cache could not free a slot to read into");
  a->Reset();
  Use(*h.cache, 2, 3);  // a slot again: the same request works
  b->Reset();
}

TEST(ExpertCachePins, RunningOutOfUnpinnedSlotsIsAnErrorSync) { ExpectOutOfSlots(Mode::kSync); }
TEST(ExpertCachePins, RunningOutOfUnpinnedSlotsIsAnErrorAsync) {
  ExpectOutOfSlots(Mode::kAutoReader);
}

// --- hints -------------------------------------------------------------------------

TEST(ExpertCacheHints, HintIssuesEveryReadAtOnceAsDemand) {
  Harness h(8, Replacement::kLfru, Mode::kHeldReader);
  h.cache->Hint(1, std::vector<int>{4, 2});
  auto log = h.reader->log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].id, (RecordId{1, 4}));
  EXPECT_EQ(log[1].id, (RecordId{1, 2}));
  EXPECT_EQ(log[0].cls, ReadClass::kDemand);
  EXPECT_EQ(log[1].cls, ReadClass::kDemand);
  EXPECT_FALSE(h.cache->Ready(1, 4));
  EXPECT_EQ(h.reader->CompleteAll(), 2);
  EXPECT_TRUE(h.cache->Ready(1, 4));
  EXPECT_TRUE(h.cache->Ready(1, 2));
}

TEST(ExpertCacheHints, HintedRecordsStayPinnedUntilAcquired) {
  Harness h(4, Replacement::kLru, Mode::kAutoReader);
  h.cache->Hint(1, std::vector<int>{4, 2});
  h.cache->Drain();
  for (int e = 0; e < 8; ++e) Use(*h.cache, 2, e);  // all through the two other slots
  EXPECT_TRUE(h.cache->Ready(1, 4));
  EXPECT_TRUE(h.cache->Ready(1, 2));
  auto a = h.cache->Acquire(1, 4);
  auto b = h.cache->Acquire(1, 2);
  ASSERT_TRUE(a.has_value() && b.has_value());
  ExpertCacheCounters c = h.cache->counters();
  EXPECT_EQ(c.misses, 10u);  // the hinted two counted when the hint issued them
  EXPECT_EQ(c.prefetched, 2u);
  EXPECT_EQ(c.hits, 0u);
  a->Reset();
  b->Reset();
  h.cache->Hint(2, std::vector<int>{});  // the next layer: the hint's pins are gone too
  for (int e = 0; e < 4; ++e) Use(*h.cache, 1, e);
  EXPECT_FALSE(h.cache->Ready(1, 4));
}

TEST(ExpertCacheHints, HintReadsSlideInAWindowOfHalfTheSlots) {
  Harness h(4, Replacement::kLfru, Mode::kHeldReader);
  h.cache->Hint(1, std::vector<int>{0, 1, 2, 3});
  EXPECT_EQ(h.reader->log().size(), 2u);  // min(64, slots / 2)
  h.reader->CompleteAll();
  auto first = h.cache->Acquire(1, 0);  // consumes one: the next is issued
  ASSERT_TRUE(first.has_value());
  auto log = h.reader->log();
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[2].id, (RecordId{1, 2}));
  h.reader->CompleteAll();
  first->Reset();
}

TEST(ExpertCacheHints, HintOfAQueuedGuessPromotesItsRead) {
  Harness h(8, Replacement::kLfru, Mode::kHeldReader);
  h.cache->Prefetch(2, std::vector<int>{5, 6});
  h.cache->Hint(2, std::vector<int>{6});
  EXPECT_EQ(h.reader->promoted(), (std::vector<RecordId>{{2, 6}}));
  h.reader->CompleteAll();
  Use(*h.cache, 2, 6);
  ExpertCacheCounters c = h.cache->counters();
  EXPECT_EQ(c.hits, 1u);
  EXPECT_EQ(c.misses, 0u);
  EXPECT_EQ(c.spec_reads, 2u);
  EXPECT_EQ(c.spec_used, 1u);
}

TEST(ExpertCacheHints, ReadClassesDemandSpeculativeWarm) {
  Harness h(8, Replacement::kLfru, Mode::kHeldReader);
  ExpertCache::WarmEntry warm[] = {{1, 0, 5}};
  EXPECT_EQ(h.cache->Warm(warm), 1);
  // The reader takes speculative reads newest first: the best guess is
  // submitted last.
  h.cache->Prefetch(2, std::vector<int>{3, 4});
  h.cache->Hint(1, std::vector<int>{1});
  auto log = h.reader->log();
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[0].id, (RecordId{1, 0}));
  EXPECT_EQ(log[0].cls, ReadClass::kWarm);
  EXPECT_EQ(log[1].id, (RecordId{2, 4}));
  EXPECT_EQ(log[1].cls, ReadClass::kSpeculative);
  EXPECT_EQ(log[2].id, (RecordId{2, 3}));
  EXPECT_EQ(log[3].cls, ReadClass::kDemand);
  h.reader->CompleteAll();
  EXPECT_EQ(h.cache->counters().warm_reads, 1u);
  EXPECT_EQ(h.cache->counters().bytes_read, 3 * kRecordBytes);  // warm-up not counted
}

TEST(ExpertCacheHints, SynchronousCacheIgnoresHintsAndGuesses) {
  Harness h(4, Replacement::kLfru, Mode::kSync);
  h.cache->Hint(1, std::vector<int>{0});
  h.cache->Prefetch(1, std::vector<int>{1});
  EXPECT_FALSE(h.cache->Ready(1, 0));
  EXPECT_FALSE(h.cache->Ready(1, 1));
  Use(*h.cache, 1, 0);
  EXPECT_EQ(h.cache->counters().misses, 1u);
}

// --- errors ------------------------------------------------------------------------

void ExpectNamedFailureThenReuse(Mode mode, bool damage) {
  Harness h(1, Replacement::kLfru, mode);
  if (damage) {
    h.bank.Damage({2, 3});
  } else {
    h.bank.Truncate({2, 3});
  }
  auto bad = h.cache->Acquire(2, 3);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), Errc::kIo);
  EXPECT_EQ(bad.failure().layer, 2);  // as data, for callers that act on it
  EXPECT_EQ(bad.failure().expert, 3);
  EXPECT_EQ(bad.failure().reason.message().find("expert 3"), std::string::npos)
      << "the reason alone: " << bad.failure().reason.message();
  const std::string m = bad.error().message();
  EXPECT_EQ(m.rfind("expert 3 of layer 2: ", 0), 0u) << m;
  EXPECT_EQ(m.find("expert 3 of layer 2: ", 1), std::string::npos) << "named twice: " << m;
  if (damage) {
    EXPECT_EQ(m,
              "expert 3 of layer 2: record header is not what the bank index describes: "
              "test damage");
  }
  EXPECT_FALSE(h.cache->Ready(2, 3));
  Use(*h.cache, 1, 0);  // the only slot is free again
  h.bank.Repair();
  Use(*h.cache, 2, 3);  // and the record reads once repaired
}

TEST(ExpertCacheErrors, FailingReadNamesLayerAndExpertSync) {
  ExpectNamedFailureThenReuse(Mode::kSync, false);
}
TEST(ExpertCacheErrors, FailingReadNamesLayerAndExpertAsync) {
  ExpectNamedFailureThenReuse(Mode::kAutoReader, false);
}
TEST(ExpertCacheErrors, FailingValidationNamesLayerAndExpertSync) {
  ExpectNamedFailureThenReuse(Mode::kSync, true);
}
TEST(ExpertCacheErrors, FailingValidationNamesLayerAndExpertAsync) {
  ExpectNamedFailureThenReuse(Mode::kAutoReader, true);
}

TEST(ExpertCacheErrors, HintedReadThatFailsIsReportedAtAcquire) {
  Harness h(2, Replacement::kLfru, Mode::kHeldReader);
  h.reader->FailReads({1, 6});
  h.cache->Hint(1, std::vector<int>{6});
  h.reader->CompleteAll();
  EXPECT_FALSE(h.cache->Ready(1, 6));
  auto bad = h.cache->Acquire(1, 6);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message(), "expert 6 of layer 1: read failed: injected device error");
  EXPECT_EQ(bad.failure().layer, 1);
  EXPECT_EQ(bad.failure().expert, 6);
  EXPECT_EQ(bad.failure().reason.message(), "read failed: injected device error");
  // Both slots usable again (the failed one was dropped with its pin).
  h.cache->Prefetch(2, std::vector<int>{0, 1});
  EXPECT_EQ(h.reader->CompleteAll(), 2);
  EXPECT_TRUE(h.cache->Ready(2, 0));
  EXPECT_TRUE(h.cache->Ready(2, 1));
}

TEST(ExpertCacheErrors, FailedGuessIsDroppedAndReadAgainOnDemand) {
  Harness h(2, Replacement::kLfru, Mode::kHeldReader);
  h.bank.Damage({1, 6});
  h.cache->Prefetch(1, std::vector<int>{6});
  h.reader->CompleteAll();
  EXPECT_FALSE(h.cache->Ready(1, 6));
  h.bank.Repair();
  std::thread completer([&] {
    while (h.reader->queued() == 0) std::this_thread::yield();
    h.reader->CompleteAll();
  });
  auto pin = h.cache->Acquire(1, 6);
  completer.join();
  ASSERT_TRUE(pin.has_value()) << pin.error().message();
  EXPECT_EQ(pin->view().codebook_id, 106);
  EXPECT_EQ(h.bank.validations(), 2);
}

TEST(ExpertCacheErrors, NoSuchRecord) {
  Harness h(2, Replacement::kLfru, Mode::kSync);
  for (RecordId id : {RecordId{0, 1}, RecordId{testing::kLayers, 0}, RecordId{1, 8}, RecordId{1, -1}}) {
    auto r = h.cache->Acquire(id.first, id.second);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), Errc::kArg);
    EXPECT_EQ(r.failure().layer, id.first);
    EXPECT_EQ(r.failure().expert, id.second);
    EXPECT_EQ(r.error().message(), "expert " + std::to_string(id.second) + " of layer " +
                                       std::to_string(id.first) + ": no such expert record");
  }
  EXPECT_EQ(h.cache->counters().misses, 0u);
}

}  // namespace
}  // namespace waste
