// The value of one character of the standard base64 alphabet (RFC 4648),
// -1 for anything else. The decoders around it differ on purpose (the
// tokenizer's rank file allows missing padding, an image data: URL must be
// canonical), the alphabet does not.
#pragma once

namespace waste {

inline int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace waste
