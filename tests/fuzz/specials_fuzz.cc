// libFuzzer target: specials.json ([{"id": N, "text": "..."}]). ParseSpecials
// returns specials with valid ids and non-empty texts, or an error.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "text/tokenizer_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto specials = waste::ParseSpecials(text, "specials.json");
  if (specials) {
    for (const auto& s : *specials) {
      if (s.id < 0 || s.text.empty()) __builtin_trap();
    }
  }
  return 0;
}
