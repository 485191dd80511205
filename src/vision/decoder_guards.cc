#include "vision/decoder_guards.h"

#include <fmt/format.h>

namespace waste::vision {
namespace {

// stb_image 2.27 builds a JPEG Huffman table from 16 code counts without
// checking that they sum to at most 256: the symbol arrays (257 and 256
// entries) then overflow (found by tests/fuzz/image_fuzz; fixed upstream
// in 2.28). stb processes a DHT segment only right after an FF C4 byte
// pair, so every such pair in the file is read as stb would read a DHT
// segment (bytes past the end read as 0, as stb's reader returns), and a
// table with more than 256 codes is refused. An FF C4 pair cannot occur
// inside entropy-coded data (FF is always stuffed with 00 there).
std::string CheckJpegHuffmanTables(std::span<const uint8_t> b) {
  auto at = [&](size_t i) -> int { return i < b.size() ? b[i] : 0; };
  for (size_t p = 0; p + 1 < b.size(); ++p) {
    if (b[p] != 0xFF || b[p + 1] != 0xC4) continue;
    size_t i = p + 2;
    long len = (at(i) << 8 | at(i + 1)) - 2;
    i += 2;
    while (len > 0 && i < b.size()) {
      ++i;  // table class and id
      int n = 0;
      for (int k = 0; k < 16; ++k) n += at(i++);
      if (n > 256) {
        return fmt::format("corrupt JPEG: a Huffman table at byte {} declares {} codes (at most 256)",
                           p, n);
      }
      i += static_cast<size_t>(n);
      len -= 17 + n;
    }
  }
  return {};
}

// stb_image 2.27 grows its compressed-data buffer to an IDAT chunk's
// declared length before reading it: an 800-byte file declaring a 1.6 GB
// chunk makes it allocate 1.6 GB (found by the fuzzer). Every chunk must fit
// in the file; stb would fail on such a file anyway (out of data, or no
// IEND), so only the allocation is avoided.
std::string CheckPngChunks(std::span<const uint8_t> b) {
  size_t i = 8;  // after the signature
  while (i + 8 <= b.size()) {
    const uint64_t len = uint64_t{b[i]} << 24 | uint64_t{b[i + 1]} << 16 | uint64_t{b[i + 2]} << 8 | b[i + 3];
    const uint64_t room = b.size() - i - 8;
    if (len > room) {
      return fmt::format("corrupt PNG: the chunk at byte {} declares {} bytes, past the end of the file",
                         i, len);
    }
    const bool end = b[i + 4] == 'I' && b[i + 5] == 'E' && b[i + 6] == 'N' && b[i + 7] == 'D';
    if (end) break;
    i += 8 + static_cast<size_t>(len) + 4;  // length, type, data, crc
  }
  return {};
}

bool IsPng(std::span<const uint8_t> b) {
  static constexpr uint8_t kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (b.size() < 8) return false;
  for (int k = 0; k < 8; ++k) {
    if (b[static_cast<size_t>(k)] != kSig[k]) return false;
  }
  return true;
}

// As stb reads a marker: FF, any number of FF fill bytes, then the code, so
// "FF FF D8" starts a JPEG as well as "FF D8" (a file the fuzzer found
// slipping past a two-byte test).
bool IsJpeg(std::span<const uint8_t> b) {
  if (b.empty() || b[0] != 0xFF) return false;
  size_t i = 1;
  while (i < b.size() && b[i] == 0xFF) ++i;
  return i < b.size() && b[i] == 0xD8;
}

}  // namespace

std::string GuardDecoderInput(std::span<const uint8_t> bytes) {
  if (IsJpeg(bytes)) return CheckJpegHuffmanTables(bytes);
  if (IsPng(bytes)) return CheckPngChunks(bytes);
  return {};
}

}  // namespace waste::vision
