// libFuzzer target: the tokenizer rank file (tokenizer.model /
// tiktoken.model: "<base64> <rank>" lines). Whatever the bytes, ParseRankFile
// returns tokens or an error; it never crashes, hangs or trips a sanitizer.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "text/tokenizer_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto ranks = waste::ParseRankFile(text, "tokenizer.model");
  if (ranks) {
    for (const auto& r : *ranks) {
      if (r.rank < 0) __builtin_trap();  // a parsed rank is never negative
    }
  }
  return 0;
}
