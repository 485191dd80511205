// The grammar engine: GBNF parsing, matching text, masking a vocabulary,
// token terminals, the budget ("closing") mode, and the engine hook.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "waste/grammar.h"

namespace waste {
namespace {

std::shared_ptr<const Grammar> G(const char* text) {
  auto g = Grammar::Parse(text);
  EXPECT_TRUE(g.has_value()) << (g ? "" : g.error().message());
  return g ? *g : nullptr;
}

bool Matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  GrammarMatcher m(g, nullptr);
  return m.AcceptText(text) && m.CanEnd();
}

TEST(Grammar, SequencesAlternationRepetitionClasses) {
  auto g = G(R"(root ::= "a" ("b" | "cd")* [0-9]{2,3} x?
x ::= [^a-z]
)");
  EXPECT_TRUE(Matches(g, "a12"));
  EXPECT_TRUE(Matches(g, "abcdb123"));
  EXPECT_TRUE(Matches(g, "a12X"));
  EXPECT_FALSE(Matches(g, "a1"));
  EXPECT_FALSE(Matches(g, "a1234x"));
  EXPECT_FALSE(Matches(g, "ac12"));
  EXPECT_FALSE(Matches(g, "b12"));
}

TEST(Grammar, Utf8AwareClassesAndLiterals) {
  auto g = G("root ::= \"é\" [α-ω]+ [^\\x00-\\x7f]\n");
  EXPECT_TRUE(Matches(g, "éαβ日"));
  EXPECT_FALSE(Matches(g, "eαβ日"));
  EXPECT_FALSE(Matches(g, "éαβx"));
  // A character cut between two inputs is matched once it completes.
  GrammarMatcher m(g, nullptr);
  std::string s = "éαβ日";
  EXPECT_TRUE(m.AcceptText(s.substr(0, 1)));
  EXPECT_FALSE(m.CanEnd());
  EXPECT_TRUE(m.AcceptText(s.substr(1, 4)));
  EXPECT_TRUE(m.AcceptText(s.substr(5)));
  EXPECT_TRUE(m.CanEnd());
}

TEST(Grammar, ErrorsNameTheLineAndTheProblem) {
  auto bad = Grammar::Parse("root ::= x\n");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message().find("'x'"), std::string::npos);
  auto unterminated = Grammar::Parse("root ::= \"abc\n");
  ASSERT_FALSE(unterminated.has_value());
  EXPECT_NE(unterminated.error().message().find("grammar line"), std::string::npos);
  EXPECT_FALSE(Grammar::Parse("other ::= \"a\"\n").has_value());  // no root
}

// A UTF-8 lead byte must be followed by continuation bytes: "\xf7" before
// the class's `]` once swallowed the `]` (found by fuzz.grammar), so the
// grammar meant something else than its text, and PrefixRules disagreed.
TEST(Grammar, InvalidUtf8IsRefusedNotDecodedAcrossACloser) {
  for (const char* text : {"root ::= [a\xf7]]\n", "root ::= \"a\xe8\"\"\n", "root ::= [\xc3]\n"}) {
    auto g = Grammar::Parse(text);
    ASSERT_FALSE(g.has_value()) << text;
    EXPECT_NE(g.error().message().find("invalid UTF-8"), std::string::npos) << g.error().message();
  }
  EXPECT_TRUE(Grammar::Parse("root ::= [\xc3\xa9]\n").has_value());  // a real é
}

// Repetitions compile to helper rules; a rule the grammar names "_1" is
// its own, never a helper's (an undefined "_4" once bound to one; found by
// fuzz.grammar).
TEST(Grammar, RuleNamesNeverBindToRepetitionHelpers) {
  auto undefined = Grammar::Parse("root ::= \"a\"* _1\n");
  ASSERT_FALSE(undefined.has_value());
  EXPECT_NE(undefined.error().message().find("'_1'"), std::string::npos) << undefined.error().message();
  auto own = Grammar::Parse("root ::= \"a\"* _1\n_1 ::= \"b\"\n");
  ASSERT_TRUE(own.has_value()) << own.error().message();
  GrammarMatcher m(*own, nullptr);
  EXPECT_TRUE(m.AcceptText("aab") && m.CanEnd());
}

// A toy vocabulary: single letters, a few words, two control tokens.
std::shared_ptr<const Vocabulary> ToyVocab() {
  std::vector<std::string> pieces = {"<|end|>", "a", "b", "{", "}", "\"", "ab", "abc", "x", "<|sep|>", "\xc3", "\xa9"};
  return Vocabulary::Build(pieces, {0, 9});
}

std::vector<int> Allowed(GrammarMatcher& m, size_t n) {
  std::vector<float> logits(n, 0.0f);
  m.Mask(logits);
  std::vector<int> out;
  for (size_t i = 0; i < n; ++i) if (std::isfinite(logits[i])) out.push_back(static_cast<int>(i));
  return out;
}

TEST(Grammar, MaskAllowsExactlyTheTokensThatContinue) {
  auto g = G("root ::= \"a\" \"b\"* \"c\"? <[0]>\n");
  GrammarMatcher m(g, ToyVocab());
  EXPECT_EQ(Allowed(m, 12), (std::vector<int>{1, 6, 7}));  // a, ab, abc
  EXPECT_TRUE(m.Allows(6));
  EXPECT_FALSE(m.Allows(2));
  m.Accept(6);  // "ab"
  EXPECT_EQ(Allowed(m, 12), (std::vector<int>{0, 2}));  // <|end|>, b ("c" has no token)
  m.Accept(0);
  EXPECT_TRUE(m.CanEnd());
  EXPECT_TRUE(m.MustEnd());
}

TEST(Grammar, ControlTokensNeverMatchAsText) {
  // The grammar spells the marker as text; only a text token may match it,
  // never the control token whose piece has those bytes.
  std::vector<std::string> pieces = {"<|sep|>", "<", "|", "s", "e", "p", ">"};
  auto vocab = Vocabulary::Build(pieces, {0});
  auto g = G("root ::= \"<|sep|>\"\n");
  GrammarMatcher m(g, vocab);
  EXPECT_FALSE(m.Allows(0));
  EXPECT_TRUE(m.Allows(1));
}

TEST(Grammar, CharactersSplitAcrossTokens) {
  auto g = G("root ::= \"é\"\n");
  GrammarMatcher m(g, ToyVocab());
  EXPECT_TRUE(m.Allows(10));   // first byte of é
  EXPECT_FALSE(m.Allows(11));  // a lone continuation byte
  m.Accept(10);
  EXPECT_TRUE(m.Allows(11));
  m.Accept(11);
  EXPECT_TRUE(m.CanEnd());
}

TEST(Grammar, ClosingModeOnlyAllowsProgressTowardTheEnd) {
  auto g = G("root ::= \"a\"* \"b\"\n");
  GrammarMatcher m(g, ToyVocab());
  EXPECT_EQ(m.MinBytesToEnd(), 1);
  m.SetClosing(true);
  EXPECT_EQ(Allowed(m, 12), (std::vector<int>{2, 6}));  // "b" and "ab" end it; "a" does not
  m.SetClosing(false);
  EXPECT_EQ(Allowed(m, 12), (std::vector<int>{1, 2, 6}));
}

TEST(Grammar, MaxBytesToEndForbidsWhatCannotBeFinished) {
  // After "a": end with "}" (1 byte) or open another "{...}" (2+ bytes).
  auto g = G("root ::= \"a\" (\"{\" \"x\"* \"}\")* \"b\"\n");
  GrammarMatcher m(g, ToyVocab());
  m.Accept(1);
  EXPECT_EQ(Allowed(m, 12), (std::vector<int>{2, 3}));  // "b" ends, "{" opens
  m.SetMaxBytesToEnd(2);
  EXPECT_EQ(Allowed(m, 12), (std::vector<int>{2, 3}));  // after "{": "}b", 2 bytes
  m.SetMaxBytesToEnd(1);
  EXPECT_EQ(Allowed(m, 12), (std::vector<int>{2}));
  EXPECT_FALSE(m.Allows(3));
  m.Accept(2);
  EXPECT_TRUE(m.CanEnd());
}

TEST(Grammar, MaxBytesToEndOutOfReachStillLetsTheEndComeCloser) {
  auto g = G("root ::= \"a\" \"b\" \"b\" \"b\"\n");
  GrammarMatcher m(g, ToyVocab());
  m.SetMaxBytesToEnd(0);  // 4 bytes needed: each step may still bring the end closer
  EXPECT_EQ(Allowed(m, 12), (std::vector<int>{1, 6}));  // "a", "ab"
  m.Accept(6);
  EXPECT_EQ(Allowed(m, 12), (std::vector<int>{2}));
}

TEST(Grammar, DeadGrammarLeavesLogitsAlone) {
  auto g = G("root ::= \"zzz\"\n");
  GrammarMatcher m(g, ToyVocab());
  std::vector<float> logits(12, 1.0f);
  m.Mask(logits);  // nothing continues: no token is forced out
  for (float l : logits) EXPECT_EQ(l, 1.0f);
}

}  // namespace
}  // namespace waste
