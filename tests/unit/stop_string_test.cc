// StopStringFilter (ENGINE.md §7.4): fires across pieces, never prints any
// part of the stop string, prints everything else exactly once.
#include "text/utf8.h"
#include "waste/text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace waste {
namespace {

struct Outcome {
  std::string printed;
  bool stopped = false;
  size_t pushes = 0;  // pieces consumed before it fired
};

Outcome Feed(const std::string& stop, const std::vector<std::string>& pieces) {
  StopStringFilter f(stop);
  Outcome o;
  for (const auto& p : pieces) {
    ++o.pushes;
    o.printed += f.Push(p);
    if (f.stopped()) break;
  }
  if (!f.stopped()) o.printed += f.Finish();
  o.stopped = f.stopped();
  return o;
}

TEST(StopString, MatchInsideOnePiece) {
  const Outcome o = Feed("<|im_end|>", {"Hello", " world<|im_end|>tail", "never"});
  EXPECT_TRUE(o.stopped);
  EXPECT_EQ(o.printed, "Hello world");
  EXPECT_EQ(o.pushes, 2u);
}

TEST(StopString, MatchSpanningPieces) {
  const Outcome o = Feed("END", {"a E", "N", "D b"});
  EXPECT_TRUE(o.stopped);
  EXPECT_EQ(o.printed, "a ");
  EXPECT_EQ(Feed("<|end_of_msg|>", {"x", "<|", "end_", "of_msg", "|>", "y"}).printed, "x");
}

TEST(StopString, SpecialTokenPieceIsItsText) {
  // The model emits the end-of-turn id; its decoded piece is the markup text.
  const Outcome o = Feed("<|im_end|>", {"Sure.", "<|im_end|>"});
  EXPECT_TRUE(o.stopped);
  EXPECT_EQ(o.printed, "Sure.");
}

TEST(StopString, NeverPrintsAPartialStopString) {
  StopStringFilter f("STOP");
  std::string printed;
  for (const char* p : {"ab", "S", "T", "O"}) {
    printed += f.Push(p);
    EXPECT_EQ(printed, "ab") << "after " << p;
  }
  EXPECT_EQ(f.Push("P!"), "");
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(f.Push("more"), "");
  EXPECT_EQ(f.Finish(), "");
}

TEST(StopString, FalseStartsAreReleased) {
  StopStringFilter f("abc");
  EXPECT_EQ(f.Push("xab"), "x");
  EXPECT_EQ(f.Push("d"), "abd");
  EXPECT_EQ(f.Push("aab"), "a");  // "ab" could still become "abc"
  EXPECT_EQ(f.Push("ab"), "ab");
  EXPECT_EQ(f.Finish(), "ab");
  EXPECT_FALSE(f.stopped());
}

TEST(StopString, OverlappingPrefixes) {
  EXPECT_EQ(Feed("aab", {"a", "a", "a", "b", "z"}).printed, "a");
  EXPECT_EQ(Feed("abab", {"ab", "c", "ab", "ab"}).printed, "abc");
  EXPECT_EQ(Feed("abab", {"xab", "aba", "b"}).printed, "x");
}

TEST(StopString, NoMatchPrintsEverything) {
  const Outcome o = Feed("<|im_end|>", {"<|im", "_start|>", " <|", "x"});
  EXPECT_FALSE(o.stopped);
  EXPECT_EQ(o.printed, "<|im_start|> <|x");
}

TEST(StopString, EmptyStopPassesThrough) {
  StopStringFilter f("");
  EXPECT_EQ(f.Push("abc"), "abc");
  EXPECT_EQ(f.Push(""), "");
  EXPECT_EQ(f.Finish(), "");
  EXPECT_FALSE(f.stopped());
}

TEST(StopString, EveryWayOfCuttingGivesTheSameResult) {
  const std::string text = "one two <|end|> three";
  for (size_t a = 1; a < text.size(); ++a) {
    for (size_t b = a + 1; b < text.size(); ++b) {
      const Outcome o = Feed("<|end|>", {text.substr(0, a), text.substr(a, b - a), text.substr(b)});
      EXPECT_TRUE(o.stopped);
      EXPECT_EQ(o.printed, "one two ") << a << "," << b;
    }
  }
}

TEST(StopString, ChainedWithUtf8Stream) {
  // The chain waste/text.h documents: filter, then hold-back.
  StopStringFilter f("<|end|>");
  Utf8Stream u;
  std::string printed;
  for (const char* p : {"\xe6", "\x97\xa5<", "|end", "|>tail"}) {
    const std::string chunk = u.Push(f.Push(p));
    EXPECT_EQ(utf8::IncompleteTailLength(chunk), 0u) << p;
    printed += chunk;
    if (f.stopped()) break;
  }
  printed += u.Push(f.Finish());
  printed += u.Flush();
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(printed, "\xe6\x97\xa5");
  EXPECT_EQ(f.stop(), "<|end|>");
}

}  // namespace
}  // namespace waste
