// GBNF text -> GrammarData. Repetitions become helper rules (right
// recursive, so the matcher's stacks stay bounded); literals become one
// character element per character.
#include <algorithm>
#include <climits>
#include <map>

#include "grammar/grammar_data.h"
#include "base/exception_status.h"

namespace waste {
namespace {

struct Item;
using Seq = std::vector<Item>;
using Alts = std::vector<Seq>;

// A parsed element before layout.
struct Item {
  ElemType type = ElemType::kChars;
  bool negated = false;
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  std::string rule;      // kRuleRef by name
  uint32_t rule_id = 0;  // kRuleRef to a helper rule
  bool by_id = false;
  uint32_t token = 0;
};

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Status Run(GrammarData* out) {
    SkipSpace(true);
    while (pos_ < s_.size()) {
      std::string name = Name();
      if (name.empty()) return Error("expected a rule name");
      SkipSpace(false);
      if (s_.substr(pos_, 3) != "::=") return Error("expected ::= after " + name);
      pos_ += 3;
      Alts alts;
      WASTE_TRY(Alternatives(&alts, false));
      uint32_t id = RuleId(name);
      if (defined_[id]) return Error("rule " + name + " defined twice");
      defined_[id] = true;
      rules_[id] = std::move(alts);
      SkipSpace(true);
    }
    for (size_t i = 0; i < names_.size(); ++i) {
      if (!defined_[i] && !helper_[i]) {
        return FormatError("grammar: rule '" + names_[i] + "' is used but never defined");
      }
    }
    auto root = ids_.find("root");
    if (root == ids_.end()) return FormatError("grammar: no rule named 'root'");
    Layout(out);
    out->root = root->second;
    return Status::Ok();
  }

 private:
  Status Error(const std::string& what) const {
    int line = 1 + static_cast<int>(std::count(s_.begin(), s_.begin() + static_cast<long>(pos_), '\n'));
    return FormatError("grammar line " + std::to_string(line) + ": " + what);
  }

  void SkipSpace(bool newlines) {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else if (c == '\n' && !newlines) {
        // A newline continues a rule only when the next line is indented
        // or starts with '|'.
        size_t p = pos_ + 1;
        while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t')) ++p;
        if (p < s_.size() && (p > pos_ + 1 || s_[p] == '|') && s_[p] != '\n') {
          pos_ = p;
        } else {
          return;
        }
      } else {
        return;
      }
    }
  }

  std::string Name() {
    size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) ||
                                s_[pos_] == '-' || s_[pos_] == '_')) {
      ++pos_;
    }
    return std::string(s_.substr(start, pos_ - start));
  }

  uint32_t RuleId(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    uint32_t id = AddRule(name, false);
    ids_[name] = id;
    return id;
  }

  // Helpers stay out of the name table: a grammar that writes "_4" means
  // its own rule, never a repetition's helper (fuzz.grammar found a
  // reference to an undefined "_4" binding to one).
  uint32_t NewHelper(Alts alts) {
    uint32_t id = AddRule("(repetition " + std::to_string(names_.size()) + ")", true);
    rules_[id] = std::move(alts);
    return id;
  }

  uint32_t AddRule(std::string name, bool helper) {
    uint32_t id = static_cast<uint32_t>(names_.size());
    names_.push_back(std::move(name));
    rules_.emplace_back();
    defined_.push_back(false);
    helper_.push_back(helper);
    return id;
  }

  Item Ref(uint32_t id) {
    Item it;
    it.type = ElemType::kRuleRef;
    it.by_id = true;
    it.rule_id = id;
    return it;
  }

  // One character of a literal or class: UTF-8 or an escape.
  Status Char(uint32_t* cp) {
    if (pos_ >= s_.size()) return Error("unexpected end");
    auto c = static_cast<unsigned char>(s_[pos_]);
    if (c == '\\') {
      if (pos_ + 1 >= s_.size()) return Error("dangling backslash");
      char e = s_[pos_ + 1];
      pos_ += 2;
      int hex = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
      if (hex) {
        if (pos_ + static_cast<size_t>(hex) > s_.size()) return Error("short \\x/\\u escape");
        uint32_t v = 0;
        for (int i = 0; i < hex; ++i) {
          char h = s_[pos_++];
          int d = std::isdigit(static_cast<unsigned char>(h)) ? h - '0'
                  : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                  : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
          if (d < 0) return Error("bad hex digit in escape");
          v = v * 16 + static_cast<uint32_t>(d);
        }
        *cp = v;
        return Status::Ok();
      }
      switch (e) {
        case 'n': *cp = '\n'; break;
        case 't': *cp = '\t'; break;
        case 'r': *cp = '\r'; break;
        case '0': *cp = 0; break;
        default: *cp = static_cast<unsigned char>(e);
      }
      return Status::Ok();
    }
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || pos_ + static_cast<size_t>(n) > s_.size()) return Error("invalid UTF-8");
    uint32_t v = n == 1 ? c : n == 2 ? (c & 0x1fu) : n == 3 ? (c & 0x0fu) : (c & 0x07u);
    for (int i = 1; i < n; ++i) {
      const auto b = static_cast<unsigned char>(s_[pos_ + static_cast<size_t>(i)]);
      // A lead byte must be followed by continuation bytes: otherwise a
      // lead byte before `]` or `"` would swallow the closer, and the
      // grammar would mean something else than its text shows (the fuzzer
      // found PrefixRules and the parser disagreeing about such a class).
      if ((b & 0xc0u) != 0x80u) return Error("invalid UTF-8");
      v = (v << 6) | (b & 0x3fu);
    }
    pos_ += static_cast<size_t>(n);
    *cp = v;
    return Status::Ok();
  }

  Status Alternatives(Alts* alts, bool nested) {
    alts->emplace_back();
    while (true) {
      SkipSpace(nested);
      if (pos_ >= s_.size()) break;
      char c = s_[pos_];
      if (c == '\n') break;
      if (c == ')') {
        if (!nested) return Error("unbalanced )");
        break;
      }
      if (c == '|') {
        ++pos_;
        alts->emplace_back();
        continue;
      }
      Seq& seq = alts->back();
      size_t before = seq.size();
      if (c == '"') {
        ++pos_;
        while (pos_ < s_.size() && s_[pos_] != '"') {
          uint32_t cp;
          WASTE_TRY(Char(&cp));
          Item it;
          it.ranges = {{cp, cp}};
          seq.push_back(it);
        }
        if (pos_ >= s_.size()) return Error("unterminated string");
        ++pos_;
        if (seq.size() - before > 1) {  // a repetition applies to the whole literal
          Seq lit(seq.begin() + static_cast<long>(before), seq.end());
          seq.resize(before);
          seq.push_back(Ref(NewHelper({lit})));
        } else if (seq.size() == before) {
          seq.push_back(Ref(NewHelper({Seq{}})));
        }
      } else if (c == '[') {
        ++pos_;
        Item it;
        if (pos_ < s_.size() && s_[pos_] == '^') {
          it.negated = true;
          ++pos_;
        }
        while (pos_ < s_.size() && s_[pos_] != ']') {
          uint32_t lo, hi;
          WASTE_TRY(Char(&lo));
          hi = lo;
          if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
            ++pos_;
            WASTE_TRY(Char(&hi));
          }
          if (hi < lo) return Error("reversed character range");
          it.ranges.emplace_back(lo, hi);
        }
        if (pos_ >= s_.size()) return Error("unterminated character class");
        ++pos_;
        seq.push_back(it);
      } else if (c == '(') {
        ++pos_;
        Alts inner;
        WASTE_TRY(Alternatives(&inner, true));
        if (pos_ >= s_.size() || s_[pos_] != ')') return Error("expected )");
        ++pos_;
        seq.push_back(Ref(NewHelper(std::move(inner))));
      } else if (c == '<' && s_.substr(pos_, 2) == "<[") {
        size_t end = s_.find("]>", pos_);
        if (end == std::string_view::npos) return Error("unterminated <[id]>");
        std::string digits(s_.substr(pos_ + 2, end - pos_ - 2));
        if (digits.empty() || digits.size() > 9 ||
            !std::all_of(digits.begin(), digits.end(), [](char d) { return std::isdigit(static_cast<unsigned char>(d)); })) {
          return Error("token terminal must be <[decimal id]>");
        }
        Item it;
        it.type = ElemType::kToken;
        it.token = static_cast<uint32_t>(std::stoul(digits));
        seq.push_back(it);
        pos_ = end + 2;
      } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') {
        Item it;
        it.type = ElemType::kRuleRef;
        it.rule = Name();
        RuleId(it.rule);
        SkipSpace(nested);
        if (pos_ + 2 < s_.size() && s_.substr(pos_, 3) == "::=") return Error("missing newline before rule " + it.rule);
        seq.push_back(it);
      } else {
        return Error(std::string("unexpected character '") + c + "'");
      }
      WASTE_TRY(Repetition(&seq));
    }
    return Status::Ok();
  }

  // Applies *, +, ?, {m}, {m,}, {m,n} to the last item of `seq`.
  Status Repetition(Seq* seq) {
    if (pos_ >= s_.size()) return Status::Ok();
    char c = s_[pos_];
    int lo = 0, hi = -1;
    if (c == '*') { lo = 0; hi = -1; ++pos_; }
    else if (c == '+') { lo = 1; hi = -1; ++pos_; }
    else if (c == '?') { lo = 0; hi = 1; ++pos_; }
    else if (c == '{') {
      size_t end = s_.find('}', pos_);
      if (end == std::string_view::npos) return Error("unterminated {m,n}");
      std::string body(s_.substr(pos_ + 1, end - pos_ - 1));
      size_t comma = body.find(',');
      try {
        lo = std::stoi(body.substr(0, comma));
        hi = comma == std::string::npos ? lo
             : comma + 1 == body.size() ? -1 : std::stoi(body.substr(comma + 1));
      } catch (...) {
        return Error("bad repetition {" + body + "}");
      }
      if (lo < 0 || (hi >= 0 && hi < lo) || lo > 10000 || hi > 10000) return Error("bad repetition {" + body + "}");
      pos_ = end + 1;
    } else {
      return Status::Ok();
    }
    Item x = seq->back();
    seq->pop_back();
    for (int i = 0; i < lo; ++i) seq->push_back(x);
    if (hi < 0) {
      // star ::= x star | ε
      uint32_t star = NewHelper({});
      rules_[star] = {Seq{x, Ref(star)}, Seq{}};
      seq->push_back(Ref(star));
    } else if (hi > lo) {
      // opt_k ::= x opt_{k-1} | ε, nested so at most hi - lo more
      uint32_t next = NewHelper({Seq{x}, Seq{}});
      for (int i = 1; i < hi - lo; ++i) next = NewHelper({Seq{x, Ref(next)}, Seq{}});
      seq->push_back(Ref(next));
    }
    return Status::Ok();
  }

  void Layout(GrammarData* out) {
    out->rule_names = names_;
    out->rule_alts.assign(rules_.size(), {});
    for (size_t r = 0; r < rules_.size(); ++r) {
      for (const Seq& seq : rules_[r]) {
        out->rule_alts[r].push_back(static_cast<uint32_t>(out->elems.size()));
        for (const Item& it : seq) {
          GrammarElem e;
          e.type = it.type;
          e.negated = it.negated;
          if (it.type == ElemType::kRuleRef) {
            e.value = it.by_id ? it.rule_id : ids_.at(it.rule);
          } else if (it.type == ElemType::kToken) {
            e.value = it.token;
          } else {
            e.value = static_cast<uint32_t>(out->ranges.size());
            e.count = static_cast<uint32_t>(it.ranges.size());
            out->ranges.insert(out->ranges.end(), it.ranges.begin(), it.ranges.end());
          }
          out->elems.push_back(e);
        }
        out->elems.push_back(GrammarElem{});
      }
    }
    out->ComputeMinBytes();
  }

  std::string_view s_;
  size_t pos_ = 0;
  std::map<std::string, uint32_t> ids_;
  std::vector<std::string> names_;
  std::vector<Alts> rules_;
  std::vector<bool> defined_, helper_;
};

int Utf8Length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

}  // namespace

void GrammarData::ComputeMinBytes() {
  const int kInf = INT_MAX / 4;
  std::vector<int> rule_min(rule_alts.size(), kInf);
  min_bytes_from.assign(elems.size(), kInf);
  auto elem_min = [&](const GrammarElem& e) {
    switch (e.type) {
      case ElemType::kRuleRef: return rule_min[e.value];
      case ElemType::kToken: return 1;
      case ElemType::kChars: {
        if (e.negated) return 1;
        int best = kInf;
        for (uint32_t i = 0; i < e.count; ++i) best = std::min(best, Utf8Length(ranges[e.value + i].first));
        return best;
      }
      default: return 0;
    }
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rule_alts.size(); ++r) {
      for (uint32_t start : rule_alts[r]) {
        // Walk the alternative back to front.
        size_t end = start;
        while (elems[end].type != ElemType::kEnd) ++end;
        int acc = 0;
        min_bytes_from[end] = 0;
        for (size_t p = end; p-- > start;) {
          acc = std::min(kInf, acc + elem_min(elems[p]));
          min_bytes_from[p] = acc;
        }
        if (acc < rule_min[r]) {
          rule_min[r] = acc;
          changed = true;
        }
      }
    }
  }
}

Result<std::shared_ptr<const GrammarData>> ParseGbnf(std::string_view text) noexcept {
  try {
    auto data = std::make_shared<GrammarData>();
    Parser p(text);
    WASTE_TRY(p.Run(data.get()));
    return std::shared_ptr<const GrammarData>(std::move(data));
  } catch (const std::exception& e) {
    return StatusFromException(e, Errc::kFormat, std::string("grammar: ") + e.what());
  }
}

}  // namespace waste
