// Renaming every rule of a GBNF text with a prefix, so that grammars
// compiled apart (one per tool schema) can live side by side in one
// grammar without their rule names (root, s0, ws, string, ...) colliding.
#include <cctype>
#include <string>
#include <vector>

#include "waste/grammar.h"

namespace waste {
namespace {

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

// One lexical piece of GBNF text: a rule name, or anything else copied
// through unchanged (literals, classes, token terminals, comments,
// repetition counts, punctuation, whitespace).
struct Piece {
  std::string text;
  bool name = false;
};

// Splits at the grammar's lexical boundaries; false on an unterminated
// literal, class or token terminal.
bool Lex(std::string_view s, std::vector<Piece>* out) {
  size_t i = 0;
  auto skip_quoted = [&](char close) {
    // s[i] is the opener; stop after the closer, honouring backslashes.
    ++i;
    while (i < s.size() && s[i] != close) i += s[i] == '\\' ? 2 : 1;
    if (i >= s.size()) return false;
    ++i;
    return true;
  };
  while (i < s.size()) {
    size_t start = i;
    char c = s[i];
    bool name = false;
    if (c == '#') {
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (c == '"') {
      if (!skip_quoted('"')) return false;
    } else if (c == '[') {
      if (!skip_quoted(']')) return false;
    } else if (c == '<' && s.substr(i, 2) == "<[") {
      size_t end = s.find("]>", i);
      if (end == std::string_view::npos) return false;
      i = end + 2;
    } else if (c == '{') {
      while (i < s.size() && s[i] != '}') ++i;
      if (i < s.size()) ++i;
    } else if (IsNameChar(c)) {
      while (i < s.size() && IsNameChar(s[i])) ++i;
      name = true;
    } else {
      ++i;
    }
    out->push_back({std::string(s.substr(start, i - start)), name});
  }
  return true;
}

}  // namespace

Result<std::string> Grammar::PrefixRules(std::string_view gbnf, std::string_view prefix) noexcept {
  try {
    std::vector<Piece> pieces;
    if (!Lex(gbnf, &pieces)) return Status(Errc::kFormat, "grammar: unterminated literal or class");
    // Every bare name in GBNF is a rule name (a definition or a reference;
    // literals, classes, comments and counts are separate pieces), so all
    // of them are renamed. Recognising definitions here instead once
    // disagreed with the parser about which blanks may precede "::="
    // ("root\r ::=", found by fuzz.grammar), and an undefined reference
    // would have resolved to a rule of the grammar it was combined into.
    std::string out;
    out.reserve(gbnf.size() + pieces.size() * prefix.size());
    for (const Piece& p : pieces) {
      if (p.name) out += prefix;
      out += p.text;
    }
    return out;
  } catch (...) {
    return OomError("grammar");
  }
}

Result<std::string> Grammar::JsonSchemaToGbnf(std::string_view schema,
                                              std::string_view rule_prefix) noexcept {
  auto text = JsonSchemaToGbnf(schema);
  if (!text) return text.error();
  return PrefixRules(*text, rule_prefix);
}

}  // namespace waste
