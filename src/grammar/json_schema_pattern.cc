#include "grammar/json_schema_pattern.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "grammar/gbnf_literal.h"

namespace waste::schema {
namespace {

using Ranges = std::vector<std::pair<char32_t, char32_t>>;

constexpr int kMaxCount = 1000;
constexpr int kMaxDepth = 64;

// What `.` and negated classes leave out besides their own ranges: the
// characters JSON only spells escaped.
constexpr const char* kNeedsEscape = "\"\\\\\\x00-\\x1f";

bool NeedsEscape(char32_t c) { return c == '"' || c == '\\' || c < 0x20; }

std::string Utf8(char32_t c) {
  std::string out;
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
  return out;
}

// One character as it stands in a JSON string's text.
std::string JsonChar(char32_t c) {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: break;
  }
  if (c < 0x20) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
    return buf;
  }
  return Utf8(c);
}

// A class endpoint in GBNF: always as a code point escape.
std::string ClassChar(char32_t c) {
  char buf[16];
  if (c < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(c));
  else std::snprintf(buf, sizeof buf, "\\U%08X", static_cast<unsigned>(c));
  return buf;
}

std::string ClassBody(const Ranges& ranges) {
  std::string out;
  for (const auto& [a, b] : ranges) {
    out += ClassChar(a);
    if (a != b) {
      out += '-';
      out += ClassChar(b);
    }
  }
  return out;
}

Ranges Normalized(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& x : r) {
    if (!out.empty() && x.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, x.second);
    } else {
      out.push_back(x);
    }
  }
  return out;
}

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
// ECMAScript's WhiteSpace and LineTerminator (what \s matches).
const Ranges kSpace = {{'\t', '\r'},     {' ', ' '},         {0xA0, 0xA0},     {0x1680, 0x1680},
                       {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F},
                       {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
// What `.` leaves out besides the characters JSON escapes: the line
// terminators above 0x1f (\n and \r are among those JSON escapes).
const Ranges kDotExcludes = {{0x2028, 0x2029}};

// open + inner + close, built by appending (GCC 12 warns falsely about
// `"literal" + std::string` chains: -Wrestrict).
std::string Bracketed(const char* open, const std::string& inner, const char* close) {
  std::string out(open);
  out += inner;
  out += close;
  return out;
}

// (a | b | ...), or the one alternative alone.
std::string Alternatives(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) {
    if (i > 0) out += " | ";
    out += alts[i];
  }
  out += ')';
  return out;
}

// A positive class: its characters that need no escape as one GBNF
// class, each that does as its escaped spelling.
std::string PositiveClass(const Ranges& in) {
  Ranges plain;
  std::vector<std::string> alts;
  for (auto [a, b] : Normalized(in)) {
    for (char32_t c = a; c <= b && c < 0x20; ++c) {
      if (NeedsEscape(c)) alts.push_back(GbnfLiteral(JsonChar(c)));
    }
    // Split the range around '"' and '\\' and below 0x20.
    char32_t lo = std::max<char32_t>(a, 0x20);
    for (char32_t special : {char32_t('"'), char32_t('\\')}) {
      if (lo > b) break;
      if (special >= lo && special <= b) {
        if (special > lo) plain.emplace_back(lo, special - 1);
        alts.push_back(GbnfLiteral(JsonChar(special)));
        lo = special + 1;
      }
    }
    if (lo <= b) plain.emplace_back(lo, b);
  }
  if (!plain.empty()) alts.insert(alts.begin(), Bracketed("[", ClassBody(plain), "]"));
  if (alts.empty()) return "never";
  return Alternatives(alts);
}

std::string NegatedClass(const Ranges& in) {
  return Bracketed("[^", ClassBody(Normalized(in)) + kNeedsEscape, "]");
}

class Parser {
 public:
  explicit Parser(std::u32string_view p) : p_(p) {}

  Status Run(std::string* out) {
    bool anchored_start = false, anchored_end = false;
    if (!p_.empty() && p_[0] == '^') {
      anchored_start = true;
      p_.erase(0, 1);
    }
    if (!p_.empty() && p_.back() == '$') {
      size_t slashes = 0;
      for (size_t k = p_.size() - 1; k > 0 && p_[k - 1] == '\\'; --k) ++slashes;
      if (slashes % 2 == 0) {
        anchored_end = true;
        p_.pop_back();
      }
    }
    std::string body;
    bool nullable = false;
    WASTE_TRY(Alternation(&body, 0, &nullable));
    if (i_ < p_.size()) return Unsupported("an unmatched ')'");
    *out = "\"\\\"\"";
    if (!anchored_start) *out += " char*";
    if (!body.empty()) *out += " " + body;
    *out += anchored_end ? " \"\\\"\"" : " strtail";
    return Status::Ok();
  }

 private:
  Status Unsupported(const std::string& what) const {
    return UnsupportedError("pattern: " + what + " is not supported (at character " +
                            std::to_string(i_) + ")");
  }
  bool More() const { return i_ < p_.size(); }
  char32_t Peek() const { return p_[i_]; }

  // Each also says whether what it parsed can match the empty string: a
  // repetition of such a part is refused (Quantifier), as the matcher
  // would try exponentially many ways of repeating nothing.
  Status Alternation(std::string* out, int depth, bool* nullable) {
    if (depth > kMaxDepth) return Unsupported("nesting deeper than 64 groups");
    std::vector<std::string> alts;
    *nullable = false;
    while (true) {
      std::string seq;
      bool seq_nullable = true;
      WASTE_TRY(Sequence(&seq, depth, &seq_nullable));
      *nullable = *nullable || seq_nullable;
      alts.push_back(seq.empty() ? "\"\"" : seq);
      if (More() && Peek() == '|') {
        ++i_;
        continue;
      }
      break;
    }
    if (alts.size() == 1) {
      *out = alts[0] == "\"\"" ? "" : alts[0];
      return Status::Ok();
    }
    *out = Alternatives(alts);
    return Status::Ok();
  }

  Status Sequence(std::string* out, int depth, bool* nullable) {
    *nullable = true;
    while (More() && Peek() != '|' && Peek() != ')') {
      std::string atom;
      bool atom_nullable = false;
      WASTE_TRY(Atom(&atom, depth, &atom_nullable));
      WASTE_TRY(Quantifier(&atom, &atom_nullable));
      *nullable = *nullable && atom_nullable;
      if (!atom.empty()) {
        if (!out->empty()) *out += ' ';
        *out += atom;
      }
    }
    return Status::Ok();
  }

  Status Atom(std::string* out, int depth, bool* nullable) {
    *nullable = false;
    char32_t c = p_[i_++];
    switch (c) {
      case '^':
      case '$':
        --i_;
        return Unsupported(std::string("'") + static_cast<char>(c) + "' inside the pattern");
      case '.':
        *out = NegatedClass(kDotExcludes);
        return Status::Ok();
      case '[':
        return Class(out);
      case '(': {
        if (More() && Peek() == '?') {
          if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
            i_ += 2;
          } else if (i_ + 2 < p_.size() && p_[i_ + 1] == '<' && p_[i_ + 2] != '=' && p_[i_ + 2] != '!') {
            while (More() && Peek() != '>') ++i_;
            if (!More()) return Unsupported("an unterminated group name");
            ++i_;
          } else {
            return Unsupported("lookaround (?= (?! (?<= (?<!");
          }
        }
        std::string inner;
        WASTE_TRY(Alternation(&inner, depth + 1, nullable));
        if (!More() || Peek() != ')') return Unsupported("an unterminated group");
        ++i_;
        *out = inner.empty() ? std::string("\"\"") : Bracketed("(", inner, ")");
        return Status::Ok();
      }
      case '\\':
        return Escape(out);
      case '*':
      case '+':
      case '?':
        --i_;
        return Unsupported("a quantifier with nothing before it");
      default:
        *out = GbnfLiteral(JsonChar(c));
        return Status::Ok();
    }
  }

  // After a backslash outside a class.
  Status Escape(std::string* out) {
    if (!More()) return Unsupported("a trailing backslash");
    char32_t e = p_[i_];
    switch (e) {
      case 'd': ++i_; *out = PositiveClass(kDigit); return Status::Ok();
      case 'w': ++i_; *out = PositiveClass(kWord); return Status::Ok();
      case 's': ++i_; *out = PositiveClass(kSpace); return Status::Ok();
      case 'D': ++i_; *out = NegatedClass(kDigit); return Status::Ok();
      case 'W': ++i_; *out = NegatedClass(kWord); return Status::Ok();
      case 'S': ++i_; *out = NegatedClass(kSpace); return Status::Ok();
      default: break;
    }
    char32_t c = 0;
    WASTE_TRY(EscapedChar(&c, /*in_class=*/false));
    *out = GbnfLiteral(JsonChar(c));
    return Status::Ok();
  }

  // A single-character escape (the backslash consumed, i_ at its letter).
  Status EscapedChar(char32_t* c, bool in_class) {
    char32_t e = p_[i_];
    auto hex = [&](size_t n) -> Status {
      char32_t v = 0;
      for (size_t k = 1; k <= n; ++k) {
        if (i_ + k >= p_.size()) return Unsupported("a short \\x or \\u escape");
        char32_t h = p_[i_ + k];
        int d = h >= '0' && h <= '9' ? int(h - '0') : h >= 'a' && h <= 'f' ? int(h - 'a' + 10)
              : h >= 'A' && h <= 'F' ? int(h - 'A' + 10) : -1;
        if (d < 0) return Unsupported("a malformed \\x or \\u escape");
        v = v * 16 + static_cast<char32_t>(d);
      }
      i_ += n + 1;
      *c = v;
      return Status::Ok();
    };
    switch (e) {
      case 'n': *c = '\n'; break;
      case 't': *c = '\t'; break;
      case 'r': *c = '\r'; break;
      case 'f': *c = '\f'; break;
      case 'v': *c = '\v'; break;
      case '0': *c = 0; break;
      case 'x': return hex(2);
      case 'u': return hex(4);
      case 'b':
        if (in_class) {
          *c = '\b';
          break;
        }
        return Unsupported("\\b (a word boundary)");
      case 'B': return Unsupported("\\B (a word boundary)");
      case 'p': case 'P': return Unsupported("\\p{...} (Unicode properties)");
      case 'k': return Unsupported("\\k<name> (a back reference)");
      case 'c': return Unsupported("\\c (a control letter)");
      default:
        if (e >= '1' && e <= '9') return Unsupported("a back reference");
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
          return Unsupported(std::string("the escape \\") + static_cast<char>(e));
        }
        *c = e;  // escaped punctuation stands for itself
    }
    ++i_;
    return Status::Ok();
  }

  Status Class(std::string* out) {
    bool negated = false;
    if (More() && Peek() == '^') {
      negated = true;
      ++i_;
    }
    Ranges ranges;
    while (true) {
      if (!More()) return Unsupported("an unterminated class");
      char32_t c = p_[i_];
      if (c == ']') {
        ++i_;
        break;
      }
      char32_t lo = 0;
      if (c == '\\') {
        ++i_;
        if (!More()) return Unsupported("an unterminated class");
        char32_t e = Peek();
        const Ranges* set = e == 'd' ? &kDigit : e == 'w' ? &kWord : e == 's' ? &kSpace : nullptr;
        if (set) {
          ++i_;
          ranges.insert(ranges.end(), set->begin(), set->end());
          continue;
        }
        if (e == 'D' || e == 'W' || e == 'S') return Unsupported("\\D \\W \\S inside a class");
        WASTE_TRY(EscapedChar(&lo, /*in_class=*/true));
      } else {
        lo = c;
        ++i_;
      }
      char32_t hi = lo;
      if (i_ + 1 < p_.size() && Peek() == '-' && p_[i_ + 1] != ']') {
        ++i_;
        char32_t d = p_[i_];
        if (d == '\\') {
          ++i_;
          if (!More()) return Unsupported("an unterminated class");
          WASTE_TRY(EscapedChar(&hi, /*in_class=*/true));
        } else {
          hi = d;
          ++i_;
        }
        if (hi < lo) return Unsupported("a reversed range in a class");
      }
      ranges.emplace_back(lo, hi);
    }
    if (negated) {
      *out = NegatedClass(ranges);  // [^] is any character
    } else {
      *out = PositiveClass(ranges);  // [] matches nothing
    }
    return Status::Ok();
  }

  // * + ? {n} {n,} {n,m} after an atom, and a lazy `?` after those.
  Status Quantifier(std::string* atom, bool* nullable) {
    if (!More()) return Status::Ok();
    char32_t c = Peek();
    std::string q;
    int lo = 0, hi = -1;
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, static_cast<char>(c));
      lo = c == '+' ? 1 : 0;
      hi = c == '?' ? 1 : -1;
      ++i_;
    } else if (c == '{') {
      size_t j = i_ + 1;
      auto number = [&](int* v) {
        size_t start = j;
        long long n = 0;
        while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9') {
          n = std::min<long long>(n * 10 + (p_[j] - '0'), 1'000'000);
          ++j;
        }
        *v = static_cast<int>(n);
        return j > start;
      };
      if (!number(&lo)) return Status::Ok();  // a literal '{' (as browsers read it)
      if (j < p_.size() && p_[j] == ',') {
        ++j;
        if (!number(&hi)) hi = -1;
      } else {
        hi = lo;
      }
      if (j >= p_.size() || p_[j] != '}') return Status::Ok();
      if (lo > kMaxCount || hi > kMaxCount) {
        return Unsupported("a count above " + std::to_string(kMaxCount));
      }
      if (hi >= 0 && hi < lo) return Unsupported("a count range {n,m} with m < n");
      i_ = j + 1;
      q = std::to_string(lo);
      if (hi != lo) {
        q += ',';
        if (hi >= 0) q += std::to_string(hi);
      }
      q = Bracketed("{", q, "}");
    } else {
      return Status::Ok();
    }
    if (More() && Peek() == '?') ++i_;  // lazy: the same strings
    if (More() && (Peek() == '*' || Peek() == '+' || Peek() == '?' || Peek() == '{')) {
      if (Peek() != '{') return Unsupported("a quantifier after a quantifier");
    }
    if (*atom == "\"\"") return Status::Ok();
    if (*nullable && hi != 0 && hi != 1) {
      return Unsupported("repeating a part that can match nothing (as in (a*)* or (a|b?)+)");
    }
    if (lo == 0) *nullable = true;
    *atom = Bracketed("(", *atom, ")") + q;
    return Status::Ok();
  }

  std::u32string p_;
  size_t i_ = 0;
};

// UTF-8 -> code points; false on a malformed sequence.
bool Decode(std::string_view s, std::u32string* out) {
  for (size_t i = 0; i < s.size();) {
    unsigned char b = static_cast<unsigned char>(s[i]);
    int n = b < 0x80 ? 0 : (b & 0xE0) == 0xC0 ? 1 : (b & 0xF0) == 0xE0 ? 2 : (b & 0xF8) == 0xF0 ? 3 : -1;
    if (n < 0 || i + static_cast<size_t>(n) >= s.size()) return false;
    char32_t c = n == 0 ? b : n == 1 ? (b & 0x1F) : n == 2 ? (b & 0x0F) : (b & 0x07);
    for (int k = 1; k <= n; ++k) {
      unsigned char x = static_cast<unsigned char>(s[i + k]);
      if ((x & 0xC0) != 0x80) return false;
      c = (c << 6) | (x & 0x3F);
    }
    out->push_back(c);
    i += static_cast<size_t>(n) + 1;
  }
  return true;
}

}  // namespace

Result<std::string> PatternString(std::string_view pattern) {
  std::u32string cps;
  if (!Decode(pattern, &cps)) return FormatError("pattern is not valid UTF-8");
  std::string out;
  Parser parser(cps);
  WASTE_TRY(parser.Run(&out));
  return out;
}

}  // namespace waste::schema
