// JSON Schema's `pattern` (an ECMA-262 regular expression) as GBNF over
// the JSON text of the string, quotes included.
//
// Taken: literals, `.`, classes `[...]` / `[^...]` with ranges, the
// escapes \d \w \s (also inside classes) and \D \W \S (outside), \n \t \r
// \f \v \0 \xHH \uHHHH and any escaped punctuation, groups `(...)`,
// `(?:...)`, `(?<name>...)`, alternation, the quantifiers * + ? {n} {n,}
// {n,m} (lazy `?` after one changes nothing here), and `^` / `$` at the
// ends of the whole pattern. A pattern is a search, as JSON Schema says:
// without `^` any text may come before the match, without `$` after it.
// Refused (kUnsupported, naming the construct): lookaround, back
// references, \b \B, \p{...}, anchors elsewhere, counts above 1000.
//
// Also refused: repeating (*, +, {n,m} with m > 1) a part that can match
// the empty string, as in (a*)* or (a|b?)+: the matcher would try
// exponentially many ways of repeating nothing.
//
// The text is JSON: a `"`, `\` or control character the pattern asks for
// is written escaped (\" \\ \n \u000b ...). `.` and negated classes match
// characters that need no escape (sound: the model may not spell a quote
// through `.`, a narrowing no real pattern notices); `.` also leaves out
// U+2028 and U+2029, and \s is ECMAScript's whitespace. Characters are code
// points, as with the `u` flag (without it, `.` would take half of an
// astral character).
#pragma once

#include <string>
#include <string_view>

#include "waste/status.h"

namespace waste::schema {

Result<std::string> PatternString(std::string_view pattern);

}  // namespace waste::schema
