// The compiled form of a grammar: every alternative of every rule laid out
// in one array of elements, each alternative ended by kEnd. A position in
// that array is the unit the matcher's stacks are made of.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "waste/grammar.h"

namespace waste {

enum class ElemType : uint8_t {
  kEnd,      // end of an alternative
  kRuleRef,  // value = rule id
  kChars,    // one character in ranges [first, first + count) of `ranges`
  kToken,    // value = token id
};

struct GrammarElem {
  ElemType type = ElemType::kEnd;
  bool negated = false;     // kChars: matches characters outside the ranges
  uint32_t value = 0;       // rule id, token id, or first range index
  uint32_t count = 0;       // kChars: number of ranges
};

struct GrammarData {
  std::vector<GrammarElem> elems;
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive code point ranges
  std::vector<std::vector<uint32_t>> rule_alts;       // rule -> first position of each alternative
  std::vector<std::string> rule_names;
  uint32_t root = 0;
  // Fewest bytes that finish the alternative from each position.
  std::vector<int> min_bytes_from;

  bool CharMatches(const GrammarElem& e, uint32_t cp) const {
    bool in = false;
    for (uint32_t i = 0; i < e.count && !in; ++i) {
      const auto& r = ranges[e.value + i];
      in = cp >= r.first && cp <= r.second;
    }
    return in != e.negated;
  }
  // Whether some character in [lo, hi] matches (for a partial UTF-8 character).
  bool CharRangeMayMatch(const GrammarElem& e, uint32_t lo, uint32_t hi) const {
    for (uint32_t i = 0; i < e.count; ++i) {
      const auto& r = ranges[e.value + i];
      bool overlaps = r.first <= hi && lo <= r.second;
      bool covers = r.first <= lo && hi <= r.second;
      if (!e.negated && overlaps) return true;
      if (e.negated && covers) return false;
    }
    return e.negated;
  }
  // Fills min_bytes_from (fixpoint over the rules).
  void ComputeMinBytes();
};

// GBNF text -> data; also used by the JSON Schema compiler.
Result<std::shared_ptr<const GrammarData>> ParseGbnf(std::string_view text) noexcept;

}  // namespace waste
