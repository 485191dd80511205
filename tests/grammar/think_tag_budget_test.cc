// waste::ThinkTagBudget (waste/grammar.h): the reasoning cap for models that
// think in text tags, with made-up token pieces; through the server in
// tests/server/stock_chat_format_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "grammar/forced_generation.h"
#include "waste/grammar.h"

namespace waste {
namespace {

// Made-up pieces: 10 "<think>", 11 "\n", 12 "a", 13 "</think>", 14 "\n\n",
// 15 "answer", 16 "<th", 17 "ink>"; the cap forces {13, 14}.
std::string Piece(int id) {
  static const std::map<int, std::string> pieces = {{10, "<think>"}, {11, "\n"},  {12, "a"},
                                                    {13, "</think>"}, {14, "\n\n"}, {15, "answer"},
                                                    {16, "<th"},      {17, "ink>"}};
  auto it = pieces.find(id);
  return it == pieces.end() ? std::string() : it->second;
}

std::vector<int> Generate(TokenConstraint& c, const std::vector<int>& tokens) {
  return ::waste::testing::ForcedGeneration(c, tokens);
}

ThinkTagBudget Budget(int n, TokenConstraint* inner = nullptr) {
  return ThinkTagBudget(n, "<think>", "</think>", {13, 14}, Piece, inner);
}

TEST(ThinkTagBudget, ClosesTheReasoningWhenSpent) {
  ThinkTagBudget b = Budget(3);
  EXPECT_EQ(Generate(b, {11, 10, 12, 12, 12, 12, 12, 15, 12}),
            (std::vector<int>{11, 10, 12, 12, 12, 13, 14, 15, 12}));
  EXPECT_TRUE(b.closed_early());
  EXPECT_TRUE(b.done());
  // At once with 0; the open tag split over two tokens counts.
  ThinkTagBudget zero = Budget(0);
  EXPECT_EQ(Generate(zero, {16, 17, 12, 12, 15}), (std::vector<int>{16, 17, 13, 14, 15}));
}

TEST(ThinkTagBudget, NeverTouchesAReplyThatClosesFirstOrDoesNotThink) {
  ThinkTagBudget closes = Budget(3);
  const std::vector<int> a = {10, 12, 13, 15, 12, 12, 12, 12};
  EXPECT_EQ(Generate(closes, a), a);
  EXPECT_FALSE(closes.closed_early());
  ThinkTagBudget plain = Budget(1);
  const std::vector<int> b = {15, 12, 12, 12, 10, 12, 12, 12};  // a tag later is content
  EXPECT_EQ(Generate(plain, b), b);
  EXPECT_FALSE(plain.closed_early());
  // No close tokens (the tokenizer could not spell the tag): no cap.
  ThinkTagBudget none(1, "<think>", "</think>", {}, Piece, nullptr);
  const std::vector<int> c = {10, 12, 12, 12};
  EXPECT_EQ(Generate(none, c), c);
}

// The generation's other constraint (say a tool-call grammar) sees every
// token; where it forbids the forced one, the cap wins.
class Forbids : public TokenConstraint {
 public:
  explicit Forbids(int token) : token_(token) {}
  bool Allows(int token) noexcept override { return token != token_; }
  void Mask(std::span<float> logits) noexcept override {
    logits[static_cast<size_t>(token_)] = -INFINITY;
  }
  void Accept(int token) noexcept override { seen.push_back(token); }
  std::vector<int> seen;

 private:
  int token_;
};

TEST(ThinkTagBudget, ComposesWithTheOtherConstraint) {
  Forbids inner(13);
  ThinkTagBudget b = Budget(1, &inner);
  EXPECT_FALSE(b.Allows(13));  // the other constraint still rules while free
  const std::vector<int> out = Generate(b, {10, 12, 12, 12, 15});
  EXPECT_EQ(out, (std::vector<int>{10, 12, 13, 14, 15}));
  EXPECT_EQ(inner.seen, out);
}

}  // namespace
}  // namespace waste
