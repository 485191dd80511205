#include "text/utf8.h"

#include <cstdint>
#include <cstring>

namespace waste::utf8 {
namespace {

// Lead byte → sequence length (0 = cannot start a character).
int LeadLength(uint8_t b) noexcept {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// Whether `b` may follow `lead` as the second byte (Table 3-7 narrows the
// range after E0, ED, F0 and F4; every other continuation is 80..BF).
bool SecondByteOk(uint8_t lead, uint8_t b) noexcept {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return b >= 0x80 && b <= 0xBF;
  }
}

bool IsContinuation(uint8_t b) noexcept { return (b & 0xC0) == 0x80; }

// How many bytes from text[pos] agree with a valid sequence so far (stops at
// the first disagreeing byte or the end); also returns the needed length.
size_t AgreeingBytes(std::string_view text, size_t pos, int* need) noexcept {
  const auto lead = static_cast<uint8_t>(text[pos]);
  *need = LeadLength(lead);
  if (*need == 0) return 0;
  size_t n = 1;
  while (n < static_cast<size_t>(*need) && pos + n < text.size()) {
    const auto b = static_cast<uint8_t>(text[pos + n]);
    if (n == 1 ? !SecondByteOk(lead, b) : !IsContinuation(b)) break;
    ++n;
  }
  return n;
}

}  // namespace

int ValidCharLength(std::string_view text, size_t pos) noexcept {
  if (pos >= text.size()) return 0;
  int need = 0;
  const size_t n = AgreeingBytes(text, pos, &need);
  return (need > 0 && n == static_cast<size_t>(need)) ? need : 0;
}

size_t ValidPrefixLength(std::string_view text) noexcept {
  size_t pos = 0;
  while (pos < text.size()) {
    // ASCII fast path: eight bytes at a time.
    while (pos + 8 <= text.size()) {
      uint64_t w;
      std::memcpy(&w, text.data() + pos, sizeof(w));
      if (w & 0x8080808080808080ull) break;
      pos += 8;
    }
    if (pos >= text.size()) break;
    const int len = ValidCharLength(text, pos);
    if (len == 0) break;
    pos += static_cast<size_t>(len);
  }
  return pos;
}

size_t IncompleteTailLength(std::string_view text) noexcept {
  // The cut character's lead byte is at most three bytes from the end.
  const size_t n = text.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t pos = n - back;
    const auto b = static_cast<uint8_t>(text[pos]);
    if (IsContinuation(b)) continue;
    int need = 0;
    const size_t agree = AgreeingBytes(text, pos, &need);
    return (need > 0 && agree == back && back < static_cast<size_t>(need)) ? back : 0;
  }
  return 0;
}

}  // namespace waste::utf8
