// PreTokenizer: splits text into the pieces BPE encodes, with the Kimi
// family's upstream pattern (ENGINE.md §9.2) run by PCRE2 in Unicode mode
// (JIT when the library has it, the interpreter otherwise). That pattern is
// fixed, so there is one compiled instance per process. A container with
// pretokenizer.json (converted from a Hugging Face tokenizer.json) gets its
// own instance instead: an ordered list of Split rules with Hugging Face's
// semantics (docs/TOKENIZER.md "Split rules"). Split() is safe for
// concurrent use. docs/TOKENIZER.md shows the PCRE2 spelling of the Kimi
// pattern and why it is equivalent to the upstream one.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "waste/status.h"

namespace waste {

// What a Split rule does with the spans its regex matches (Hugging Face's
// SplitDelimiterBehavior): drop them, keep them as pieces of their own,
// glue each to the piece before / after it, or join runs of them.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct SplitRule {
  std::string pattern;  // PCRE2 syntax, UTF + UCP; \s / \S mean Unicode White_Space
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;  // the spans between matches play the matches' part
};

class PreTokenizer {
 public:
  // The process-wide instance, compiled on first use; an error only if PCRE2
  // rejects the pattern (a library built without Unicode support).
  static Result<const PreTokenizer*> Get();

  // An instance that applies `rules` in order, each to every piece the
  // previous one produced. kFormat naming `name` and the rule when a
  // pattern does not compile or can match the empty string.
  static Result<std::shared_ptr<const PreTokenizer>> FromRules(const std::vector<SplitRule>& rules,
                                                               std::string_view name);

  // Calls sink(piece) for each pre-token of `text`, in order; the pieces
  // cover every byte of `text` exactly once. Invalid UTF-8 never reaches the
  // regex: the text is cut into maximal valid runs, each split on its own as
  // if it were a whole text, and each maximal run of bytes that cannot start
  // a valid character is one piece of its own.
  template <typename Sink>
  void Split(std::string_view text, Sink&& sink) const {
    SplitImpl(text, &sink, [](void* ctx, std::string_view piece) {
      (*static_cast<std::remove_reference_t<Sink>*>(ctx))(piece);
    });
  }

  // The pattern handed to PCRE2.
  static std::string PatternForPcre2();
  // Whether the JIT compiler is in use.
  bool jit() const { return jit_; }

  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

 private:
  using SinkFn = void (*)(void*, std::string_view);
  PreTokenizer() = default;
  ~PreTokenizer();
  void SplitImpl(std::string_view text, void* ctx, SinkFn sink) const;
  void SplitValid(std::string_view run, void* ctx, SinkFn sink) const;
  void SplitByRules(std::string_view run, void* ctx, SinkFn sink) const;

  struct CompiledRule {
    void* code = nullptr;  // pcre2_code_8*
    bool jit = false;
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
  };
  void ApplyRule(const CompiledRule& rule, std::string_view piece,
                 std::vector<std::string_view>* out) const;

  void* code_ = nullptr;  // pcre2_code_8*; null when rules_ is used
  bool jit_ = false;
  bool by_rules_ = false;  // FromRules: rules_ (possibly none) replace code_
  std::vector<CompiledRule> rules_;
};

}  // namespace waste
