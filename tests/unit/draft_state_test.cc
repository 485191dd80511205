// Drafting's bookkeeping (src/engine/draft_state.h): how many tokens a pass
// guesses, given how the guesses before it fared.
#include "engine/draft_state.h"

#include <gtest/gtest.h>

#include <vector>

namespace waste {
namespace {

// Runs one pass of Count() guesses from `state`, the first `kept` of them
// confirmed and the next (if any) refused. Returns the count guessed (0:
// the state did not guess; the call still emitted a token).
int Pass(DraftState& d, int kept) {
  const int count = d.Count();
  if (count == 0) return 0;
  std::vector<int> guesses(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) guesses[static_cast<size_t>(i)] = 100 + i;
  d.Start(7, guesses);
  for (int i = 0; i < count && i < kept; ++i) {
    EXPECT_TRUE(d.Confirms(100 + i));
    d.Kept();
  }
  if (kept < count) {
    EXPECT_FALSE(d.Confirms(-1));
    d.Refused();
    d.active = false;  // Generate settles the pass
  }
  return count;
}

DraftState Fresh(int max) {
  DraftState d;
  d.max = max;
  d.length = max;
  return d;
}

TEST(DraftState, OffGuessesNothing) {
  DraftState d = Fresh(0);
  EXPECT_EQ(d.Count(), 0);
}

TEST(DraftState, StartsAtTheDraftLengthAndKeepsItWhileGuessesAreKept) {
  DraftState d = Fresh(8);
  for (int pass = 0; pass < 20; ++pass) EXPECT_EQ(Pass(d, 8), 8) << pass;
}

TEST(DraftState, ARefusalShortensThenAWholePassDoubles) {
  DraftState d = Fresh(8);
  EXPECT_EQ(Pass(d, 2), 8);  // refused at the third guess
  EXPECT_EQ(Pass(d, 3), 3);  // one more than was kept; kept whole
  EXPECT_EQ(Pass(d, 6), 6);  // doubled
  EXPECT_EQ(Pass(d, 8), 8);
}

// A pass's first guess kept about half the time (text that repeats its own
// short n-grams): guessing stops being worth it, and only a single guess
// every kProbeGap tokens or more is made.
TEST(DraftState, GuessesKeptHalfTheTimeAreOnlyProbed) {
  DraftState d = Fresh(8);
  int guessed = 0, tokens = 0;
  for (int t = 0; t < 400; ++t) {
    const int n = Pass(d, t % 2 == 0 ? 1 : 0);
    if (t >= 200) guessed += n, ++tokens;
  }
  EXPECT_LT(d.first_odds, DraftState::kWorthOdds);
  EXPECT_LE(guessed, tokens / DraftState::kProbeGap) << guessed << " guesses in " << tokens;
  EXPECT_GT(guessed, 0);  // still probing
}

// A copy with an edit every ~40 tokens: the pass that meets the edit and
// the next guess (quoting the wrong place) are refused, then the reply
// rejoins the passage. Guessing is never paused for long and ramps back to
// the whole draft length.
TEST(DraftState, ACopyWithOccasionalEditsKeepsGuessing) {
  DraftState d = Fresh(8);
  for (int edit = 0; edit < 30; ++edit) {
    Pass(d, 3);  // the edit
    Pass(d, 0);  // the next guess quotes the wrong place
    Pass(d, 0);  // (a one-token pause)
    int last = 0;
    for (int i = 0; i < 6; ++i) {
      last = Pass(d, 8);
      EXPECT_GT(last, 0) << "edit " << edit << " pass " << i;
    }
    EXPECT_EQ(last, 8) << "edit " << edit;
  }
  EXPECT_GT(d.first_odds, DraftState::kWorthOdds);
}

// Probes that start being kept (the reply began copying) open the gate.
TEST(DraftState, KeptProbesBringGuessingBack) {
  DraftState d = Fresh(8);
  for (int t = 0; t < 300; ++t) Pass(d, 0);
  EXPECT_LT(d.first_odds, DraftState::kWorthOdds);
  int t = 0;
  while (d.Count() == 0 || d.first_odds <= DraftState::kWorthOdds) {
    d.wait = 0;
    Pass(d, 8);
    ASSERT_LT(++t, 100);
  }
  EXPECT_GT(Pass(d, 8), 1);
}

}  // namespace
}  // namespace waste
