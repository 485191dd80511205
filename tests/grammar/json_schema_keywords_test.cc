// JSON Schema's numeric bounds and `pattern` as grammars
// (src/grammar/json_schema_bounds.h, json_schema_pattern.h), checked by
// brute force: every integer text in a window is accepted exactly when it
// lies in the range; every number text a grid spells that is accepted lies
// in the range (sound), and the values the grammar promises to reach are
// reached; patterns against a table of strings as JSON spells them.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "waste/grammar.h"

namespace waste {
namespace {

bool Accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g, nullptr);
  return m.AcceptText(text) && m.CanEnd();
}

std::shared_ptr<const Grammar> Schema(const std::string& schema) {
  auto g = Grammar::FromJsonSchema(schema);
  EXPECT_TRUE(g.has_value()) << schema << ": " << (g ? "" : g.error().message());
  return g ? *g : nullptr;
}

struct Range {
  std::optional<int> lo, hi;
  bool lo_ex = false, hi_ex = false;
  std::string Json(const char* type) const {
    std::string s = std::string(R"({"type": ")") + type + "\"";
    if (lo) s += std::string(lo_ex ? R"(, "exclusiveMinimum": )" : R"(, "minimum": )") + std::to_string(*lo);
    if (hi) s += std::string(hi_ex ? R"(, "exclusiveMaximum": )" : R"(, "maximum": )") + std::to_string(*hi);
    return s + "}";
  }
  bool Holds(double v) const {
    if (lo && (lo_ex ? v <= *lo : v < *lo)) return false;
    if (hi && (hi_ex ? v >= *hi : v > *hi)) return false;
    return true;
  }
};

std::vector<Range> Ranges() {
  std::vector<Range> out;
  const std::vector<std::optional<int>> ends = {std::nullopt, -120, -100, -10, -9, -1, 0, 1, 7, 9, 10, 99, 100, 101, 119};
  for (auto lo : ends) {
    for (auto hi : ends) {
      if (lo && hi && *lo > *hi) continue;
      for (int ex = 0; ex < 4; ++ex) {
        Range r{lo, hi, (ex & 1) != 0, (ex & 2) != 0};
        if ((!lo && r.lo_ex) || (!hi && r.hi_ex)) continue;
        out.push_back(r);
      }
    }
  }
  return out;
}

TEST(JsonSchemaBounds, IntegersInTheRangeExactly) {
  int checked = 0;
  for (const Range& r : Ranges()) {
    auto g = Schema(r.Json("integer"));
    ASSERT_NE(g, nullptr);
    for (int v = -130; v <= 130; ++v) {
      ASSERT_EQ(Accepts(g, std::to_string(v)), r.Holds(v)) << r.Json("integer") << " value " << v;
      ++checked;
    }
    EXPECT_FALSE(Accepts(g, "007"));
    if (r.lo || r.hi) EXPECT_FALSE(Accepts(g, "-0")) << r.Json("integer");
    EXPECT_FALSE(Accepts(g, "1.5"));
  }
  EXPECT_GT(checked, 100000);
}

TEST(JsonSchemaBounds, LongIntegersAtTheEdges) {
  auto g = Schema(R"({"type": "integer", "minimum": 123456789012345, "maximum": 123456789099999})");
  EXPECT_TRUE(Accepts(g, "123456789012345"));
  EXPECT_TRUE(Accepts(g, "123456789050000"));
  EXPECT_TRUE(Accepts(g, "123456789099999"));
  EXPECT_FALSE(Accepts(g, "123456789012344"));
  EXPECT_FALSE(Accepts(g, "123456789100000"));
  auto big = Schema(R"({"type": "integer", "minimum": 5000000000})");
  EXPECT_TRUE(Accepts(big, "5000000000"));
  EXPECT_TRUE(Accepts(big, "999999999999999999"));  // 18 digits, the rules' limit
  EXPECT_FALSE(Accepts(big, "4999999999"));
  EXPECT_FALSE(Accepts(big, "-5000000000"));
  auto none = Schema(R"({"type": "integer", "minimum": 3, "maximum": 2})");
  EXPECT_FALSE(Accepts(none, "2"));
  EXPECT_FALSE(Accepts(none, "3"));
}

TEST(JsonSchemaBounds, NumbersAreSoundAndReachWholeAndInteriorValues) {
  // Texts: integers, one- and two-digit fractions, trailing zeros.
  std::vector<std::string> texts;
  for (int v = -125; v <= 125; ++v) {
    for (const char* frac : {"", ".0", ".00", ".5", ".05", ".99", ".01", ".10"}) {
      if (v == 0 && frac[0] == 0) {
        texts.push_back("0");
        texts.push_back("-0.5");
        texts.push_back("-0.01");
        continue;
      }
      texts.push_back(std::to_string(v) + frac);
    }
  }
  int accepted = 0;
  for (const Range& r : Ranges()) {
    auto g = Schema(r.Json("number"));
    ASSERT_NE(g, nullptr);
    for (const std::string& t : texts) {
      double v = std::stod(t);
      bool ok = Accepts(g, t);
      if (ok) ++accepted;
      if (ok) ASSERT_TRUE(r.Holds(v)) << r.Json("number") << " accepted " << t;
      // Complete where the bounds are whole numbers: every value in range
      // whose integer part is not beyond a bound's (x.5 below an
      // exclusive maximum of x+1 is reachable; whole values always).
      if (r.Holds(v)) ASSERT_TRUE(ok) << r.Json("number") << " refused " << t;
    }
  }
  EXPECT_GT(accepted, 100000);
}

TEST(JsonSchemaBounds, Draft4BooleanExclusiveAndTheStricterBoundWins) {
  auto d4 = Schema(R"({"type": "integer", "minimum": 0, "exclusiveMinimum": true})");
  EXPECT_FALSE(Accepts(d4, "0"));
  EXPECT_TRUE(Accepts(d4, "1"));
  auto both = Schema(R"({"type": "integer", "minimum": 5, "exclusiveMinimum": 5})");
  EXPECT_FALSE(Accepts(both, "5"));
  EXPECT_TRUE(Accepts(both, "6"));
  auto looser = Schema(R"({"type": "integer", "minimum": 5, "exclusiveMinimum": 2})");
  EXPECT_FALSE(Accepts(looser, "4"));
  EXPECT_TRUE(Accepts(looser, "5"));
  // zod's .positive() on a number.
  auto positive = Schema(R"({"type": "number", "exclusiveMinimum": 0})");
  EXPECT_TRUE(Accepts(positive, "0.25"));
  EXPECT_TRUE(Accepts(positive, "3"));
  EXPECT_FALSE(Accepts(positive, "0"));
  EXPECT_FALSE(Accepts(positive, "0.0"));
  EXPECT_FALSE(Accepts(positive, "-1"));
  // A bound on a type that has none is a format error.
  auto bad = Grammar::FromJsonSchema(R"({"type": "integer", "minimum": "3"})");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), Errc::kFormat);
}

// Values a client checking in double precision would read back as the
// bound itself are not spelled; integer bounds beyond 2^53 stay exact.
TEST(JsonSchemaBounds, NothingReadsBackAsAnExclusiveBound) {
  auto below3 = Schema(R"({"type": "number", "exclusiveMaximum": 3})");
  EXPECT_FALSE(Accepts(below3, "2.9999999999999999"));
  EXPECT_TRUE(Accepts(below3, "2.99999999999999"));
  EXPECT_TRUE(Accepts(below3, "2.5"));
  auto below100k = Schema(R"({"type": "number", "exclusiveMaximum": 100000})");
  EXPECT_FALSE(Accepts(below100k, "99999.999999999999"));
  EXPECT_TRUE(Accepts(below100k, "99999.5"));
  auto above2 = Schema(R"({"type": "number", "exclusiveMinimum": 2})");
  EXPECT_FALSE(Accepts(above2, "2.0000000000000001"));
  EXPECT_TRUE(Accepts(above2, "2.00000000000001"));
  auto between = Schema(R"({"type": "number", "exclusiveMinimum": 2, "exclusiveMaximum": 3})");
  EXPECT_TRUE(Accepts(between, "2.5"));
  EXPECT_TRUE(Accepts(between, "2.50"));
  EXPECT_FALSE(Accepts(between, "2.99999999999999999"));
  if (std::numeric_limits<long double>::digits >= 64) {
    auto huge = Schema(R"({"type": "integer", "minimum": 9007199254740993})");
    EXPECT_FALSE(Accepts(huge, "9007199254740992"));
    EXPECT_TRUE(Accepts(huge, "9007199254740993"));
  }
}

// What a grammar of one alternative cannot say together is refused, not
// half applied.
TEST(JsonSchemaBounds, KeywordsBesideEnumOrAllOfAreRefusedNotDropped) {
  for (const char* schema : {R"({"enum": [1, 2, 3], "minimum": 2})",
                             R"({"allOf": [{"type": "number"}], "minimum": 5})",
                             R"({"allOf": [{"type": "string"}], "pattern": "^x$"})",
                             R"({"anyOf": [{"type": "string"}, {"type": "null"}], "maxLength": 2})"}) {
    auto g = Grammar::FromJsonSchema(schema);
    ASSERT_FALSE(g.has_value()) << schema;
    EXPECT_EQ(g.error().code(), Errc::kUnsupported) << schema;
  }
  // Annotations beside allOf stay fine (what Pydantic writes for a field).
  EXPECT_NE(Schema(R"({"allOf": [{"type": "integer"}], "description": "d", "default": 1})"), nullptr);
}

struct PatternCase {
  const char* pattern;
  const char* json;  // the string's JSON text, quotes included
  bool valid;
};

TEST(JsonSchemaPattern, MatchesAsJsonSpellsTheString) {
  const PatternCase cases[] = {
      {"^[a-z]+$", R"("abc")", true},
      {"^[a-z]+$", R"("")", false},
      {"^[a-z]+$", R"("abC")", false},
      {"^\\d{3}-\\d{4}$", R"("555-1234")", true},
      {"^\\d{3}-\\d{4}$", R"("5555-1234")", false},
      {"^(?:\\+1)?\\d{10}$", R"("+15551234567")", true},
      {"^(?:\\+1)?\\d{10}$", R"("5551234567")", true},
      {"^(?<year>\\d{4})-(0[1-9]|1[0-2])$", R"("2026-12")", true},
      {"^(?<year>\\d{4})-(0[1-9]|1[0-2])$", R"("2026-13")", false},
      {"^[A-Z]{2,3}$", R"("ABCD")", false},
      {"^[A-Z]{2,}$", R"("ABCDEFG")", true},
      {"^a.c$", R"("a-c")", true},
      {"^a.c$", R"("ac")", false},
      {"^[^0-9]*$", R"("no digits")", true},
      {"^[^0-9]*$", R"("d1git")", false},
      {"^\\w+@\\w+\\.com$", R"("me@example.com")", true},
      {"^\\S+$", R"("a b")", false},
      {"^x|y$", R"("x")", true},
      {"^x|y$", R"("y")", true},
      // Unanchored: a search.
      {"b+", R"("abba")", true},
      {"b+", R"("aaa")", false},
      {"^ab", R"("abzzz")", true},
      {"yz$", R"("xxyz")", true},
      {"yz$", R"("yzx")", false},
      // Characters JSON escapes, written escaped.
      {"^say \"hi\"$", R"("say \"hi\"")", true},
      {"^a\\\\b$", R"("a\\b")", true},
      {"^line\\nbreak$", R"("line\nbreak")", true},
      {"^[\\s]+$", R"(" \t\n")", true},
      {"^\\u00e9t\\u00e9$", "\"\xc3\xa9t\xc3\xa9\"", true},
      {"^[\xc3\xa0-\xc3\xbf]+$", "\"\xc3\xa9\xc3\xa8\"", true},
      {"^a{0}b$", R"("b")", true},
      {"^(ab)*?c$", R"("ababc")", true},
      {"^[]$", R"("")", false},
      // `.` leaves out the line terminators; \s is ECMAScript's whitespace.
      {"^a.b$", "\"a\xe2\x80\xa8" "b\"", false},
      {"^a.b$", "\"a\xc3\xa9" "b\"", true},
      {"^\\S$", "\"\xe3\x80\x80\"", false},
      {"^\\S$", "\"\xe2\x80\x80\"", false},
      {"^\\s$", "\"\xe3\x80\x80\"", true},
  };

  for (const PatternCase& c : cases) {
    const std::string schema = R"({"type": "string", "pattern": )" + nlohmann::json(c.pattern).dump() + "}";
    auto g = Schema(schema);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(Accepts(g, c.json), c.valid) << schema << " on " << c.json;
  }
}

TEST(JsonSchemaPattern, WhatCannotBeAGrammarIsRefusedByName) {
  const std::pair<const char*, const char*> refused[] = {
      {"^(?=a)a$", "lookaround"},      {"^(a)\\1$", "back reference"},
      {"\\bword", "word boundary"},   {"^\\p{L}+$", "Unicode properties"},
      {"^a$b", "'$' inside"},           {"^a{2000}$", "count above"},
      {"^(a", "unterminated group"},    {"^[a-", "unterminated class"},
      {"a**", "quantifier after"},      {"^[\\D]$", "inside a class"},
      // The matcher would try exponentially many ways of repeating nothing.
      {"^([a-z]*|[0-9]*)+$", "match nothing"}, {"^(a*|b*)*$", "match nothing"},
      {"(a|b?|c?)*x", "match nothing"},        {"^((a?)?)*$", "match nothing"},
      {"^(a?){3}$", "match nothing"}};

  for (const auto& [pattern, what] : refused) {
    const std::string schema = R"({"type": "string", "pattern": )" + nlohmann::json(pattern).dump() + "}";
    auto g = Grammar::FromJsonSchema(schema);
    ASSERT_FALSE(g.has_value()) << pattern;
    EXPECT_EQ(g.error().code(), Errc::kUnsupported) << pattern;
    EXPECT_NE(g.error().message().find(what), std::string::npos) << pattern << ": " << g.error().message();
  }
  // With a length or a format it would have to intersect two languages.
  auto both = Grammar::FromJsonSchema(R"({"type": "string", "pattern": "^a+$", "maxLength": 3})");
  ASSERT_FALSE(both.has_value());
  EXPECT_NE(both.error().message().find("maxLength"), std::string::npos);
}

}  // namespace
}  // namespace waste
