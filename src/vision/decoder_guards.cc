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

// stb_image 2.27 decodes a scan with whichever Huffman tables the scan
// header names, defined or not: its decoder state is malloc'ed, so a table
// no DHT segment defined is whatever the heap held, and the symbol index
// computed from it reads far outside the table (an out-of-bounds index of
// 998 into a 257-entry array; found by tests/fuzz/image_fuzz, depending on
// the heap's leftovers). So the marker segments are walked in file order as
// stb walks them, the tables each DHT defines are noted, and a scan that
// would decode with a table not yet defined is refused: a sequential scan
// uses its components' DC and AC tables, a progressive DC scan the DC table
// (first pass only), a progressive AC scan the AC table.
std::string CheckJpegScanTables(std::span<const uint8_t> b) {
  auto at = [&](size_t i) -> int { return i < b.size() ? b[i] : 0; };
  bool defined[2][4] = {};
  bool progressive = false, frame_seen = false;
  size_t p = 0;
  while (p < b.size()) {
    // The next marker: FF, fill FFs, a code (stb skips other bytes between
    // segments).
    if (b[p] != 0xFF) {
      ++p;
      continue;
    }
    size_t q = p + 1;
    while (q < b.size() && b[q] == 0xFF) ++q;
    if (q >= b.size()) break;
    const int code = b[q];
    const size_t seg = q + 1;  // the segment's length field
    if (code == 0xD9) break;   // EOI
    if (code == 0x00 || code == 0x01 || code == 0xD8 || (code >= 0xD0 && code <= 0xD7)) {
      p = seg;  // no length: stuffing, TEM, SOI, RSTn
      continue;
    }
    const size_t len = static_cast<size_t>(at(seg) << 8 | at(seg + 1));
    // The frame type: the first SOF, as stb reads it (its header ends there).
    if ((code == 0xC0 || code == 0xC1 || code == 0xC2) && !frame_seen) {
      progressive = code == 0xC2;
      frame_seen = true;
    }
    if (code == 0xC4) {  // DHT: class/id byte, 16 counts, the symbols; repeated
      size_t i = seg + 2;
      const size_t end = seg + len;
      while (i < end && i < b.size()) {
        const int tc = at(i) >> 4, th = at(i) & 15;
        int n = 0;
        for (int k = 0; k < 16; ++k) n += at(i + 1 + static_cast<size_t>(k));
        if (tc <= 1 && th <= 3 && n <= 256) defined[tc][th] = true;
        i += 17 + static_cast<size_t>(n);
      }
    }
    if (code == 0xDA) {  // SOS: components (id, DC table << 4 | AC table), Ss, Se, Ah/Al
      const int ns = at(seg + 2);
      const size_t after = seg + 3 + 2 * static_cast<size_t>(ns);
      const int ss = at(after), ah = at(after + 2) >> 4;
      for (int c = 0; c < ns; ++c) {
        const int t = at(seg + 4 + 2 * static_cast<size_t>(c));
        const int td = t >> 4, ta = t & 15;
        if (td > 3 || ta > 3) continue;  // stb refuses these itself
        const bool dc = progressive ? (ss == 0 && ah == 0) : true;
        const bool ac = progressive ? ss > 0 : true;
        if ((dc && !defined[0][td]) || (ac && !defined[1][ta])) {
          return fmt::format(
              "corrupt JPEG: the scan at byte {} decodes with a Huffman table no DHT segment "
              "defined",
              p);
        }
      }
      // The entropy-coded data: up to the next marker (FF followed by
      // neither a stuffed 00 nor a restart marker).
      size_t i = seg + len;
      while (i + 1 < b.size() &&
             !(b[i] == 0xFF && b[i + 1] != 0x00 && !(b[i + 1] >= 0xD0 && b[i + 1] <= 0xD7))) {
        ++i;
      }
      p = i;
      continue;
    }
    p = seg + len;
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
  if (IsJpeg(bytes)) {
    std::string tables = CheckJpegHuffmanTables(bytes);
    return tables.empty() ? CheckJpegScanTables(bytes) : tables;
  }
  if (IsPng(bytes)) return CheckPngChunks(bytes);
  return {};
}

}  // namespace waste::vision
