// Checks run on the raw bytes before stb_image sees them, for corrupt-input
// bugs of the packaged stb_image (Debian's is 2.27; later upstream versions
// fixed them). Each guard is conservative: it may refuse a file stb would
// have refused anyway, never let through one that would reach the bug.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace waste::vision {

// Empty when the bytes are safe to hand to the decoder, else the reason
// ("corrupt JPEG: ...").
std::string GuardDecoderInput(std::span<const uint8_t> bytes);

}  // namespace waste::vision
