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

}  // namespace
}  // namespace waste
