#include "text/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "text/utf8.h"

namespace waste {
namespace {

// PCRE2 before 10.40 reads a bare \p{Han} as the Script property, later
// releases as Script_Extensions; upstream (Rust's regex crate) means Script.
#if PCRE2_MAJOR > 10 || (PCRE2_MAJOR == 10 && PCRE2_MINOR >= 40)
constexpr const char* kHan = R"(\p{sc=Han})";
#else
constexpr const char* kHan = R"(\p{Han})";
#endif

// Unicode White_Space, what \s means upstream. PCRE2's own \s adds U+180E.
constexpr const char* kSpace =
    R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029})"
    R"(\x{202F}\x{205F}\x{3000})";

pcre2_code* Code(void* p) { return static_cast<pcre2_code*>(p); }

// Per-thread match data: PCRE2 match data is not shareable between threads.
struct MatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  MatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    // The pattern has no nested quantifiers, so matching is linear; a long
    // run (a 10 MB line of capitals) still counts one step per byte, which
    // the default limit of 10 million would refuse.
    if (context != nullptr) pcre2_set_match_limit(context, UINT32_MAX);
  }
  ~MatchState() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
  }
  MatchState(const MatchState&) = delete;
  MatchState& operator=(const MatchState&) = delete;
};

// A Split rule's pattern as PCRE2 should read it: \s and \S become Unicode
// White_Space, what they mean to Hugging Face's regex engine (PCRE2's own
// \s leaves out U+0085). Escaped backslashes and \Q...\E stay verbatim.
std::string TranslateRulePattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] != '\\' || i + 1 >= p.size()) {
      out += p[i];
      continue;
    }
    const char next = p[i + 1];
    if (next == 'Q') {  // quoted: copy through \E (or the end)
      const size_t end = p.find("\\E", i + 2);
      const size_t stop = end == std::string_view::npos ? p.size() : end + 2;
      out.append(p.substr(i, stop - i));
      i = stop - 1;
      continue;
    }
#if PCRE2_MAJOR > 10 || (PCRE2_MAJOR == 10 && PCRE2_MINOR >= 40)
    if (next == 's' || next == 'S') {
      out += next == 's' ? "\\p{White_Space}" : "\\P{White_Space}";
      ++i;
      continue;
    }
#endif
    out += p[i];
    out += next;
    ++i;
  }
  return out;
}

// PCRE2's default match limit (10 million steps) refuses a linear pattern
// on a multi-megabyte piece; this grows with the piece while still bounding
// a pattern that backtracks catastrophically.
uint32_t MatchLimitFor(size_t bytes) {
  const uint64_t limit = 10'000'000ULL + 64ULL * bytes;
  return static_cast<uint32_t>(std::min<uint64_t>(limit, UINT32_MAX));
}

}  // namespace

Result<std::shared_ptr<const PreTokenizer>> PreTokenizer::FromRules(const std::vector<SplitRule>& rules,
                                                                    std::string_view name) {
  std::shared_ptr<PreTokenizer> self(new PreTokenizer(), [](PreTokenizer* p) { delete p; });
  self->by_rules_ = true;
  for (size_t i = 0; i < rules.size(); ++i) {
    const std::string where = std::string(name) + " split " + std::to_string(i) + " pattern '" +
                              rules[i].pattern + "'";
    const std::string pattern = TranslateRulePattern(rules[i].pattern);
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR text[256];
      pcre2_get_error_message(error, text, sizeof(text));
      return FormatError(where + " does not compile (offset " + std::to_string(offset) +
                         "): " + reinterpret_cast<const char*>(text));
    }
    CompiledRule r;
    r.code = code;
    r.behavior = rules[i].behavior;
    r.invert = rules[i].invert;
    self->rules_.push_back(r);  // owned from here: freed by the destructor
    uint32_t min_length = 0;
    if (pcre2_pattern_info(code, PCRE2_INFO_MINLENGTH, &min_length) != 0 || min_length == 0) {
      return FormatError(where + " can match the empty string (refused: such splits are ambiguous)");
    }
    self->rules_.back().jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  }
  return std::shared_ptr<const PreTokenizer>(std::move(self));
}

std::string PreTokenizer::PatternForPcre2() {
  const std::string han = kHan;
  const std::string space = kSpace;
  // (Lu|Lt|Lm|Lo|M) minus Han, and (Ll|Lm|Lo|M) minus Han, written as the
  // complement of the other general categories: the categories partition
  // the code space, so this is the upstream `&&[^\p{Han}]` intersection.
  const std::string upper = R"([^\p{Ll}\p{N}\p{P}\p{S}\p{Z}\p{C})" + han + "]";
  const std::string lower = R"([^\p{Lu}\p{Lt}\p{N}\p{P}\p{S}\p{Z}\p{C})" + han + "]";
  const std::string prefix = R"([^\r\n\p{L}\p{N}]?)";
  const std::string suffix = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)?)";
  return "[" + han + "]+" +                                   // 1
         "|" + prefix + upper + "*" + lower + "+" + suffix +  // 2
         "|" + prefix + upper + "+" + lower + "*" + suffix +  // 3
         R"(|\p{N}{1,3})" +                                   // 4
         "| ?[^" + space + R"(\p{L}\p{N}]+[\r\n]*)" +         // 5
         "|[" + space + R"(]*[\r\n]+)" +                      // 6
         "|[" + space + "]+(?![^" + space + "])" +            // 7
         "|[" + space + "]+";                                 // 8
}

Result<const PreTokenizer*> PreTokenizer::Get() {
  static const Result<const PreTokenizer*> instance = []() -> Result<const PreTokenizer*> {
    const std::string pattern = PatternForPcre2();
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR text[256];
      pcre2_get_error_message(error, text, sizeof(text));
      return UnsupportedError("tokenizer: PCRE2 rejected the pre-tokenization pattern at offset " +
                              std::to_string(offset) + ": " + reinterpret_cast<const char*>(text) +
                              " (PCRE2 needs Unicode support)");
    }
    // Never freed: one per process, used until exit by any thread.
    auto* self = new PreTokenizer();
    self->code_ = code;
    self->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    return static_cast<const PreTokenizer*>(self);
  }();
  return instance;
}

PreTokenizer::~PreTokenizer() {
  pcre2_code_free(Code(code_));
  for (CompiledRule& r : rules_) pcre2_code_free(Code(r.code));
}

void PreTokenizer::SplitImpl(std::string_view text, void* ctx, SinkFn sink) const {
  while (!text.empty()) {
    const size_t valid = utf8::ValidPrefixLength(text);
    if (valid > 0) {
      if (!by_rules_) {
        SplitValid(text.substr(0, valid), ctx, sink);
      } else {
        SplitByRules(text.substr(0, valid), ctx, sink);
      }
      text.remove_prefix(valid);
    }
    size_t bad = 0;
    while (bad < text.size() && utf8::ValidCharLength(text, bad) == 0) ++bad;
    if (bad > 0) {
      sink(ctx, text.substr(0, bad));
      text.remove_prefix(bad);
    }
  }
}

void PreTokenizer::SplitValid(std::string_view run, void* ctx, SinkFn sink) const {
  thread_local MatchState state;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(run.data());
  size_t pos = 0;
  while (pos < run.size()) {
    int rc = PCRE2_ERROR_NOMATCH;
    if (state.data != nullptr) {
      if (jit_) {
        rc = pcre2_jit_match(Code(code_), subject, run.size(), pos, 0, state.data, state.context);
      }
      if (!jit_ || rc == PCRE2_ERROR_JIT_STACKLIMIT) {
        rc = pcre2_match(Code(code_), subject, run.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                         state.data, state.context);
      }
    }
    if (rc < 0) {
      // Unreachable in practice (every character matches some branch, and
      // the limits are lifted): keep every byte as one last piece.
      sink(ctx, run.substr(pos));
      return;
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    const size_t start = ovector[0];
    size_t end = ovector[1];
    if (start > pos) sink(ctx, run.substr(pos, start - pos));
    if (end <= start) {  // An empty match cannot happen; step a character.
      const int len = utf8::ValidCharLength(run, start);
      end = start + static_cast<size_t>(len > 0 ? len : 1);
    }
    sink(ctx, run.substr(start, end - start));
    pos = end;
  }
}

}  // namespace waste

namespace waste {

void PreTokenizer::SplitByRules(std::string_view run, void* ctx, SinkFn sink) const {
  std::vector<std::string_view> pieces{run};
  std::vector<std::string_view> next;
  for (const CompiledRule& rule : rules_) {
    next.clear();
    for (std::string_view piece : pieces) ApplyRule(rule, piece, &next);
    pieces.swap(next);
  }
  for (std::string_view piece : pieces) sink(ctx, piece);
}

// Hugging Face's Split on one piece: the piece is cut into alternating
// matched / unmatched spans (the regex sees only this piece), `invert`
// swaps the two kinds, the behaviour decides what becomes a piece, and
// empty pieces are dropped.
void PreTokenizer::ApplyRule(const CompiledRule& rule, std::string_view piece,
                             std::vector<std::string_view>* out) const {
  struct Span {
    size_t start, end;
    bool match;
  };
  thread_local MatchState state;
  thread_local std::vector<Span> spans;
  spans.clear();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  if (state.context != nullptr) pcre2_set_match_limit(state.context, MatchLimitFor(piece.size()));
  size_t pos = 0;
  while (pos < piece.size() && state.data != nullptr) {
    int rc = PCRE2_ERROR_NOMATCH;
    if (rule.jit) {
      rc = pcre2_jit_match(Code(rule.code), subject, piece.size(), pos, 0, state.data, state.context);
    }
    if (!rule.jit || rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(Code(rule.code), subject, piece.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                       state.data, state.context);
    }
    // No match, or a limit hit: the rest is one unmatched span.
    if (rc < 0) break;
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    const size_t start = ovector[0];
    const size_t end = ovector[1];
    if (end <= start || start < pos) break;  // cannot happen: empty matches are refused at open
    if (start > pos) spans.push_back({pos, start, false});
    spans.push_back({start, end, true});
    pos = end;
  }
  if (pos < piece.size()) spans.push_back({pos, piece.size(), false});
  if (rule.invert) {
    for (Span& s : spans) s.match = !s.match;
  }
  // The fold of Hugging Face's NormalizedString::split, span by span.
  thread_local std::vector<std::pair<Span, bool>> kept;  // span, remove
  kept.clear();
  bool previous_match = false;
  switch (rule.behavior) {
    case SplitBehavior::kIsolated:
      for (const Span& s : spans) kept.push_back({s, false});
      break;
    case SplitBehavior::kRemoved:
      for (const Span& s : spans) kept.push_back({s, s.match});
      break;
    case SplitBehavior::kContiguous:
      for (const Span& s : spans) {
        if (s.match == previous_match && !kept.empty()) {
          kept.back().first.end = s.end;
        } else {
          kept.push_back({s, false});
        }
        previous_match = s.match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.match && !previous_match && !kept.empty()) {
          kept.back().first.end = s.end;
        } else {
          kept.push_back({s, false});
        }
        previous_match = s.match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (size_t i = spans.size(); i-- > 0;) {
        const Span& s = spans[i];
        if (s.match && !previous_match && !kept.empty()) {
          kept.back().first.start = s.start;
        } else {
          kept.push_back({s, false});
        }
        previous_match = s.match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  for (const auto& [s, remove] : kept) {
    if (!remove && s.end > s.start) out->push_back(piece.substr(s.start, s.end - s.start));
  }
}

}  // namespace waste
