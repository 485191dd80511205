// libFuzzer target: pretokenizer.json (the Split rules a container converted
// from a Hugging Face tokenizer.json carries). ParsePreTokenizerFile returns
// 0..64 rules or an error (no rules: each text is one piece, commit
// 483d080); rules that parse are compiled (a pattern PCRE2 rejects, or one
// that can match nothing, is an error) and run over a few texts, whose
// pieces must cover the text in order unless a rule removes spans.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "text/tokenizer_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto file = waste::ParsePreTokenizerFile(text, "pretokenizer.json");
  if (!file) return 0;
  if (file->splits.size() > 64) __builtin_trap();
  auto pre = waste::PreTokenizer::FromRules(file->splits, "pretokenizer.json");
  if (!pre) return 0;
  bool removes = false;
  for (const auto& r : file->splits) removes |= r.behavior == waste::SplitBehavior::kRemoved;
  for (std::string_view sample : {std::string_view("Hello, world! 1234567 \xe6\xb7\xb1\xe5\xba\xa6 \xf0\x9f\x98\x80\n\n  x"),
                                  std::string_view("a\xff\xfe b\tc\r\n")}) {
    std::string joined;
    (*pre)->Split(sample, [&](std::string_view piece) {
      if (piece.empty()) __builtin_trap();
      joined.append(piece);
    });
    if (!removes && joined != sample) __builtin_trap();
  }
  return 0;
}
