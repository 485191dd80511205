// Prompt-lookup drafting's guesses (src/engine/prompt_lookup.h): which
// earlier occurrence of the history's tail is quoted, and how much of it.
#include "engine/prompt_lookup.h"

#include <gtest/gtest.h>

#include <vector>

namespace waste {
namespace {

using Ids = std::vector<int>;

TEST(LookupDraft, QuotesWhatFollowedTheTailBefore) {
  //            the tail "3 4" occurred at 2..3, followed by 5 6 7
  const Ids h = {1, 2, 3, 4, 5, 6, 7, 9, 3, 4};
  EXPECT_EQ(LookupDraft(h, 3), (Ids{5, 6, 7}));
  EXPECT_EQ(LookupDraft(h, 2), (Ids{5, 6}));
  EXPECT_EQ(LookupDraft(h, 0), Ids{});
}

TEST(LookupDraft, TheLatestOccurrenceWins) {
  const Ids h = {3, 4, 10, 11, 3, 4, 20, 21, 8, 3, 4};
  EXPECT_EQ(LookupDraft(h, 2), (Ids{20, 21}));
}

TEST(LookupDraft, ALongerMatchIsTriedFirst) {
  // "2 3 4" occurred once (followed by 50); "3 4" more recently (followed by 60).
  const Ids h = {2, 3, 4, 50, 51, 3, 4, 60, 61, 2, 3, 4};
  EXPECT_EQ(LookupDraft(h, 2), (Ids{50, 51}));
  LookupLimits pairs;
  pairs.max_ngram = 2;
  EXPECT_EQ(LookupDraft(h, 2, pairs), (Ids{60, 61}));
}

TEST(LookupDraft, ASingleTokenIsNoWitnessByDefault) {
  const Ids h = {7, 1, 2, 9, 7};
  EXPECT_EQ(LookupDraft(h, 2), Ids{});
  LookupLimits one;
  one.min_ngram = 1;
  EXPECT_EQ(LookupDraft(h, 2, one), (Ids{1, 2}));
}

TEST(LookupDraft, NothingToQuote) {
  EXPECT_EQ(LookupDraft(Ids{}, 4), Ids{});
  EXPECT_EQ(LookupDraft(Ids{5}, 4), Ids{});
  EXPECT_EQ(LookupDraft(Ids{5, 5}, 4), Ids{});  // the tail "5 5" has no earlier occurrence
  EXPECT_EQ(LookupDraft(Ids{1, 2, 3, 4, 5, 6}, 4), Ids{});
}

TEST(LookupDraft, ARepeatingTokenIsQuotedAsFarAsAsked) {
  // The latest "5 5" is followed by one token only (the tail itself); an
  // earlier one by as many as asked.
  const Ids h = {1, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5};
  EXPECT_EQ(LookupDraft(h, 4), (Ids{5, 5, 5, 5}));
  // A short cycle likewise.
  const Ids cycle = {9, 1, 2, 1, 2, 1, 2, 1, 2};
  EXPECT_EQ(LookupDraft(cycle, 3), (Ids{1, 2, 1}));
}

TEST(LookupDraft, AnOccurrenceNearTheEndGivesWhatFollowsIt) {
  // No occurrence has 5 tokens after it: the one with the most.
  const Ids h = {1, 2, 8, 9, 1, 2};
  EXPECT_EQ(LookupDraft(h, 5), (Ids{8, 9, 1, 2}));
}

TEST(LookupDraft, TheWindowBoundsTheSearch) {
  Ids h = {3, 4, 77};
  for (int i = 0; i < 100; ++i) h.push_back(1000 + i);
  h.push_back(3);
  h.push_back(4);
  EXPECT_EQ(LookupDraft(h, 1), Ids{77});
  LookupLimits near;
  near.window = 50;
  EXPECT_EQ(LookupDraft(h, 1, near), Ids{});
}

// A reply copying a passage whose short n-grams recur elsewhere: the
// drafter stays with the passage (the latest occurrence would be wrong).
TEST(LookupDrafter, StaysWithThePassageItIsCopying) {
  // The passage 1..8, then text where "5 6" recurs followed by 90 91.
  Ids h = {1, 2, 3, 4, 5, 6, 7, 8, 0, 5, 6, 90, 91, 0};
  // The reply starts copying the passage.
  h.insert(h.end(), {1, 2});
  LookupDrafter d;
  EXPECT_EQ(d.Guess(h, 2), (Ids{3, 4}));
  // It keeps 3, then an edit: 77 where the passage has 4; nothing to guess
  // from "3 77" or "77 5".
  h.insert(h.end(), {3, 77});
  EXPECT_EQ(d.Guess(h, 2), Ids{});
  h.push_back(5);
  EXPECT_EQ(d.Guess(h, 2), Ids{});
  // Past the edit the reply agrees with the passage again: the latest
  // "5 6" is followed by 90, the passage goes on with 7.
  h.push_back(6);
  EXPECT_EQ(LookupDraft(h, 2), (Ids{90, 91}));
  EXPECT_EQ(d.Guess(h, 2), (Ids{7, 8}));
}

TEST(LookupDrafter, KeepsThePassageAcrossAReplacedToken) {
  Ids h = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 0, 10, 11};
  LookupDrafter d;
  EXPECT_EQ(d.Guess(h, 3), (Ids{12, 13, 14}));
  // The reply replaced 12 by 99 (an edit), then went on: 13 14.
  h.insert(h.end(), {99, 13, 14});
  EXPECT_EQ(d.Guess(h, 3), (Ids{15, 16, 17}));
}

TEST(LookupDrafter, RealignsAfterSkippedText) {
  Ids h = {20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 0, 20, 21};
  LookupDrafter d;
  EXPECT_EQ(d.Guess(h, 2), (Ids{22, 23}));
  // The reply dropped 22..25 and went on at 26 27.
  h.insert(h.end(), {26, 27});
  EXPECT_EQ(d.Guess(h, 2), (Ids{28, 29}));
}

TEST(LookupDrafter, FallsBackToTheLatestOccurrence) {
  Ids h = {1, 2, 3, 4, 0, 7, 8, 9, 0, 1, 2};
  LookupDrafter d;
  EXPECT_EQ(d.Guess(h, 2), (Ids{3, 4}));
  // The reply left the passage; "7 8" occurs elsewhere.
  h.insert(h.end(), {5, 7, 8});
  EXPECT_EQ(d.Guess(h, 1), Ids{9});
  EXPECT_EQ(d.Guess(Ids{1, 2, 3}, 2), Ids{});  // nothing to quote
}

// A prediction of the reply (GenParams::draft_prediction) laid out as
// Generate does: [prompt's last tokens][prediction][prompt][reply].
TEST(LookupDrafter, FollowsAPredictionFromItsFirstToken) {
  // Two turns: the assistant header "8 9" ended an earlier turn, whose
  // reply also began with 50 (then 60), and ends the prompt.
  const Ids prompt = {1, 8, 9, 50, 60, 2, 8, 9};
  const Ids prediction = {50, 51, 52, 53, 54};
  Ids h = {8, 9};
  const size_t source = h.size();
  h.insert(h.end(), prediction.begin(), prediction.end());
  h.insert(h.end(), prompt.begin(), prompt.end());
  const size_t reply_start = h.size();
  h.push_back(50);  // the reply starts as predicted
  // The latest occurrence of "8 9 50" is the earlier turn's.
  EXPECT_EQ(LookupDraft(h, 3), (Ids{60, 2, 8}));
  LookupDrafter d;
  d.Follow(source, reply_start);
  EXPECT_EQ(d.Guess(h, 3), (Ids{51, 52, 53}));
  // A reply that starts otherwise is quoted from elsewhere until it meets
  // the prediction again.
  LookupDrafter e;
  e.Follow(source, reply_start);
  h.back() = 60;
  h.insert(h.end(), {2});
  EXPECT_EQ(e.Guess(h, 2), (Ids{8, 9}));
  h.insert(h.end(), {7, 52, 53});
  EXPECT_EQ(e.Guess(h, 1), (Ids{54}));
}

}  // namespace
}  // namespace waste
