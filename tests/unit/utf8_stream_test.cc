// Utf8Stream: streamed pieces never end inside a character, and the output
// is byte-for-byte the input.
#include "waste/text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "text/utf8.h"

namespace waste {
namespace {

TEST(Utf8, ValidPrefixAndIncompleteTail) {
  EXPECT_EQ(utf8::ValidPrefixLength("abc"), 3u);
  EXPECT_EQ(utf8::ValidPrefixLength("ab\xc3\xa9z\xff"), 5u);
  EXPECT_EQ(utf8::ValidPrefixLength("\xed\xa0\x80"), 0u);      // surrogate
  EXPECT_EQ(utf8::ValidPrefixLength("\xc1\xbf"), 0u);          // overlong
  EXPECT_EQ(utf8::ValidPrefixLength("\xf4\x90\x80\x80"), 0u);  // > U+10FFFF
  EXPECT_EQ(utf8::ValidPrefixLength("\xf0\x9f\x99\x82"), 4u);
  EXPECT_EQ(utf8::IncompleteTailLength("a\xf0\x9f\x99"), 3u);
  EXPECT_EQ(utf8::IncompleteTailLength("a\xf0\x9f"), 2u);
  EXPECT_EQ(utf8::IncompleteTailLength("a\xe6"), 1u);
  EXPECT_EQ(utf8::IncompleteTailLength("a\xe6\x97\xa5"), 0u);  // complete
  EXPECT_EQ(utf8::IncompleteTailLength("a\x97"), 0u);          // stray continuation
  EXPECT_EQ(utf8::IncompleteTailLength("a\xe0\x80"), 0u);      // can never be valid
  EXPECT_EQ(utf8::IncompleteTailLength("a\xff"), 0u);
  EXPECT_EQ(utf8::IncompleteTailLength(""), 0u);
}

TEST(Utf8Stream, HoldsBackASplitCharacter) {
  Utf8Stream s;
  EXPECT_EQ(s.Push("caf\xc3"), "caf");
  EXPECT_EQ(s.pending(), 1u);
  EXPECT_EQ(s.Push("\xa9 \xf0\x9f"), "\xc3\xa9 ");
  EXPECT_EQ(s.Push("\x99"), "");
  EXPECT_EQ(s.Push("\x82!"), "\xf0\x9f\x99\x82!");
  EXPECT_EQ(s.Flush(), "");
}

TEST(Utf8Stream, InvalidBytesPassAtOnceAndFlushReturnsTheRest) {
  Utf8Stream s;
  EXPECT_EQ(s.Push("a\xff"), "a\xff");
  EXPECT_EQ(s.Push("\xe6\x97"), "");
  EXPECT_EQ(s.Push("x"), "\xe6\x97x");  // the cut character can no longer complete
  EXPECT_EQ(s.Push("\xe6"), "");
  EXPECT_EQ(s.Flush(), "\xe6");
  EXPECT_EQ(s.pending(), 0u);
}

TEST(Utf8Stream, EveryChunkEndsOnABoundaryAndNothingIsLost) {
  const std::string text = "naïve café 日本語 🙂 👨‍👩‍👧 ok \xff\xfe end\xe6\x97";
  for (size_t step = 1; step <= 5; ++step) {
    Utf8Stream s;
    std::string out;
    for (size_t i = 0; i < text.size(); i += step) {
      const std::string chunk = s.Push(std::string_view(text).substr(i, step));
      EXPECT_EQ(utf8::IncompleteTailLength(chunk), 0u);
      out += chunk;
    }
    out += s.Flush();
    EXPECT_EQ(out, text) << step;
  }
}

}  // namespace
}  // namespace waste
