// Combining schemas (rule prefixes) and the lazy (triggered) matcher.
#include <gtest/gtest.h>

#include <cmath>

#include "waste/grammar.h"

namespace waste {
namespace {

TEST(GrammarPrefix, RenamesRulesButNotLiteralsOrClasses) {
  auto out = Grammar::PrefixRules("root ::= \"ws root\" ws [a-z]{1,2} # root ws\nws ::= [ ]*\n", "p-");
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(*out, "p-root ::= \"ws root\" p-ws [a-z]{1,2} # root ws\np-ws ::= [ ]*\n");
}

// The parser allows a carriage return (and a comment) between a rule's
// name and "::="; PrefixRules once recognised definitions itself, missed
// "root\r ::=", and left it unprefixed (found by fuzz.grammar). Undefined
// names are renamed too, so they cannot bind to the combining grammar.
TEST(GrammarPrefix, RenamesWhateverBlanksPrecedeTheDefinition) {
  auto out = Grammar::PrefixRules("root\r ::= ws other\nws # c\n  ::= \" \"\n", "p-");
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(*out, "p-root\r ::= p-ws p-other\np-ws # c\n  ::= \" \"\n");
  auto g = Grammar::Parse(*Grammar::PrefixRules("root\r ::= \"a\"\n", "p-") + "root ::= p-root\n");
  EXPECT_TRUE(g.has_value()) << g.error().message();
}

TEST(GrammarPrefix, TwoSchemasShareOneGrammar) {
  const char* a = R"({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"],
                      "additionalProperties": false})";
  const char* b = R"({"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"],
                      "additionalProperties": false})";
  auto ga = Grammar::JsonSchemaToGbnf(a, "a-");
  auto gb = Grammar::JsonSchemaToGbnf(b, "b-");
  ASSERT_TRUE(ga && gb);
  auto g = Grammar::Parse("root ::= \"A\" a-root | \"B\" b-root\n" + *ga + *gb);
  ASSERT_TRUE(g.has_value()) << g.error().message();
  auto matches = [&](std::string_view text) {
    GrammarMatcher m(*g, nullptr);
    return m.AcceptText(text) && m.CanEnd();
  };
  EXPECT_TRUE(matches(R"(A{"x": 1})"));
  EXPECT_TRUE(matches(R"(B{"s": "hi"})"));
  EXPECT_FALSE(matches(R"(A{"s": "hi"})"));
  EXPECT_FALSE(matches(R"(B{"x": 1})"));
}

std::shared_ptr<const Vocabulary> Vocab() {
  // 0 end, 1 "{", 2 "}", 3 "x", 4 trigger (a control token)
  return Vocabulary::Build({"<|end|>", "{", "}", "x", "<|open|>"}, {0, 4});
}

std::vector<int> Allowed(TokenConstraint& m) {
  std::vector<float> logits(5, 0.0f);
  m.Mask(logits);
  std::vector<int> out;
  for (int i = 0; i < 5; ++i) if (std::isfinite(logits[static_cast<size_t>(i)])) out.push_back(i);
  return out;
}

TEST(TriggeredGrammar, FreeUntilTheTriggerThenTheGrammarThenFreeAgain) {
  auto g = Grammar::Parse("root ::= \"{\" \"x\"* \"}\"\n");
  ASSERT_TRUE(g.has_value());
  TriggeredGrammarMatcher m(*g, Vocab(), {4});
  EXPECT_FALSE(m.active());
  EXPECT_EQ(Allowed(m), (std::vector<int>{0, 1, 2, 3, 4}));
  m.Accept(3);
  m.Accept(2);  // "}" before any trigger is just text
  EXPECT_FALSE(m.active());
  m.Accept(4);
  EXPECT_TRUE(m.active());
  EXPECT_EQ(m.activations(), 1);
  EXPECT_EQ(Allowed(m), (std::vector<int>{1}));
  m.Accept(1);
  EXPECT_EQ(Allowed(m), (std::vector<int>{2, 3}));
  m.Accept(3);
  m.Accept(2);
  EXPECT_FALSE(m.active());  // complete: free again
  EXPECT_TRUE(m.Allows(3));
  m.Accept(4);
  EXPECT_TRUE(m.active());
  EXPECT_EQ(m.activations(), 2);
  EXPECT_FALSE(m.Allows(3));
}

TEST(TriggeredGrammar, NoTriggersMeansFromTheStartToTheEnd) {
  auto g = Grammar::Parse("root ::= \"{\" \"}\"\n");
  ASSERT_TRUE(g.has_value());
  TriggeredGrammarMatcher m(*g, Vocab(), {});
  EXPECT_TRUE(m.active());
  EXPECT_EQ(Allowed(m), (std::vector<int>{1}));
  m.Accept(1);
  m.Accept(2);
  EXPECT_TRUE(m.active());
  EXPECT_EQ(m.MinBytesToEnd(), 0);
}

// BudgetedGrammar with no triggers (what `waste run --grammar` and the C
// API use): the end token only once the text is complete, complete()
// following the text, and the budget closing: with the tokens left just
// covering the shortest ending, "x" (which does not bring the end closer)
// is refused.
TEST(BudgetedGrammar, EndsCompleteWithinItsBudget) {
  auto g = Grammar::Parse("root ::= \"{\" \"x\"* \"}\"\n");
  ASSERT_TRUE(g.has_value());
  BudgetedGrammar roomy(*g, Vocab(), 20, {}, {0});
  EXPECT_FALSE(roomy.complete());
  EXPECT_EQ(Allowed(roomy), (std::vector<int>{1}));
  roomy.Accept(1);
  EXPECT_EQ(Allowed(roomy), (std::vector<int>{2, 3}));  // "x" is fine with 19 left
  roomy.Accept(2);
  EXPECT_TRUE(roomy.complete());
  EXPECT_EQ(Allowed(roomy), (std::vector<int>{0}));  // complete: only the end token

  BudgetedGrammar tight(*g, Vocab(), 3, {}, {0});  // "{", "}", end
  tight.Accept(1);
  EXPECT_EQ(Allowed(tight), (std::vector<int>{2}));  // no room for an "x"
  tight.Accept(2);
  EXPECT_TRUE(tight.complete());
}

}  // namespace
}  // namespace waste
