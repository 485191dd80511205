// PreTokenizer: splits text into the pieces BPE encodes, with the Kimi
// family's upstream pattern (ENGINE.md §9.2) run by PCRE2 in Unicode mode
// (JIT when the library has it, the interpreter otherwise). The pattern is
// fixed, so there is one compiled instance per process; Split() is safe for
// concurrent use. docs/TOKENIZER.md shows the PCRE2 spelling and why it is
// equivalent to the upstream one.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>

#include "waste/status.h"

namespace waste {

class PreTokenizer {
 public:
  // The process-wide instance, compiled on first use; an error only if PCRE2
  // rejects the pattern (a library built without Unicode support).
  static Result<const PreTokenizer*> Get();

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

  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

}  // namespace waste
