// libFuzzer target: usage.waste. ParseHotlist takes any bytes; what it
// accepts serialises back to the same entries.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "streaming/hotlist.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto h = waste::ParseHotlist(bytes);
  if (h) {
    auto again = waste::ParseHotlist(waste::SerializeHotlist(*h));
    if (!again || again->entries.size() != h->entries.size() ||
        again->total_tokens != h->total_tokens) {
      __builtin_trap();
    }
  }
  return 0;
}
