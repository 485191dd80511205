// Generate's drafting bookkeeping (docs/DRAFTING.md): the pass in flight,
// how far to guess next and whether guessing pays at all. Header-only: one
// Session::Generate call owns one; tests drive it with kept and refused
// guesses (tests/unit/draft_state_test.cc).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "engine/prompt_lookup.h"

namespace waste {

// A guess is worth feeding only if it is likely to be kept: one more token
// in a pass costs a share of a decode step (kWorthOdds; ~0.7 on the 2-vCPU
// box the numbers in docs/DRAFTING.md come from, less where the weights a
// pass reads once are the bottleneck), and a refused one buys nothing. So
// the state learns, over the call, the odds that a pass's first guess is
// kept and that a later one is once those before it were, and guesses
// only as far as the odds of the i-th guess (first x later^(i-1)) stay
// above kWorthOdds. Text that only repeats its own short n-grams (kept
// about half the time) then stops being guessed, and is probed with one
// guess every kProbeGap tokens in case it starts copying something.
// Decisions depend on the tokens alone, never on timing, so a call drafts
// the same way every time.
struct DraftState {
  static constexpr double kWorthOdds = 0.6;
  static constexpr double kOddsRate = 1.0 / 16;  // running average's step
  static constexpr int kProbeGap = 8;

  bool active = false;  // a pass's guesses are being confirmed
  // The pass: the token it started from, then the guesses (their logits:
  // Forward::pass_logits).
  std::vector<int> fed;
  size_t used = 0;  // guesses confirmed so far
  int max = 0;      // the call's draft length (0 = off)
  int length = 0;   // how many to guess next (adapts to what was kept)
  int pause = 0;    // tokens to skip guessing after a pass kept nothing (doubles)
  int wait = 0;     // tokens left of the current pause
  // Chance that a pass's first guess is kept, and a later one after the
  // ones before it were (optimistic at first, so the first passes run).
  double first_odds = 1.0, later_odds = 1.0;
  LookupDrafter drafter;  // where the guesses come from

  void Start(int start, const std::vector<int>& guesses) {
    fed.assign(1, start);
    fed.insert(fed.end(), guesses.begin(), guesses.end());
    used = 0;
    active = true;
  }
  // Tokens fed past what was emitted: the guesses not yet confirmed.
  size_t Ahead() const { return active ? fed.size() - 1 - used : 0; }
  // The next guess is `token`.
  bool Confirms(int token) const { return active && token == fed[used + 1]; }
  // It was: one more kept; a pass kept whole tries longer guesses.
  void Kept() {
    Learn(true);
    ++used;
    pause = 0;
    if (used + 1 == fed.size()) {
      active = false;
      length = std::min(max, length * 2);
      if (Worth() == 0) wait = kProbeGap;  // a probe was kept: probe again later
    }
  }
  // Refused: guess about as far as was right next time, and after a pass
  // that kept nothing wait a while (1, 2, 4 .. 16 tokens) before guessing
  // again; while no guess seems worth it, at least kProbeGap.
  void Refused() {
    Learn(false);
    length = static_cast<int>(used) + 1;
    if (used == 0) {
      pause = std::min(16, std::max(1, pause * 2));
      wait = pause;
    }
    if (Worth() == 0) wait = std::max(wait, kProbeGap);
  }
  // How many tokens to guess from this one (0: none; a pause counts down
  // here): as many as are worth it within the adapted length, else one (a
  // probe; pauses space them).
  int Count() {
    if (max <= 0) return 0;
    if (wait > 0) {
      --wait;
      return 0;
    }
    return std::max(1, std::min(length, Worth()));
  }

 private:
  // The guess at position used + 1 of the pass was kept or refused.
  void Learn(bool kept) {
    double& odds = used == 0 ? first_odds : later_odds;
    odds += kOddsRate * ((kept ? 1.0 : 0.0) - odds);
  }
  // How many guesses in a row have odds above kWorthOdds.
  int Worth() const {
    int k = 0;
    for (double odds = first_odds; k < max && odds > kWorthOdds; odds *= later_odds) ++k;
    return k;
  }
};

}  // namespace waste
