// UTF-8 validity helpers shared by the pre-tokenizer and the streaming
// hold-back helper. "Valid" is RFC 3629 / Unicode Table 3-7: no overlong
// forms, no surrogates, nothing above U+10FFFF — exactly what PCRE2 accepts.
#pragma once

#include <cstddef>
#include <string_view>

namespace waste::utf8 {

// Length (1..4) of the valid character that starts at text[pos], or 0 when
// the bytes there do not start a complete valid character.
int ValidCharLength(std::string_view text, size_t pos) noexcept;

// Length of the longest prefix of `text` that is valid UTF-8.
size_t ValidPrefixLength(std::string_view text) noexcept;

// Number of trailing bytes (0..3) that are the start of a valid character
// cut short: more bytes could still complete it. Invalid bytes are never
// counted, since nothing can make them valid.
size_t IncompleteTailLength(std::string_view text) noexcept;

}  // namespace waste::utf8
