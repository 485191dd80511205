#include "format/format.h"

#include <zlib.h>

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace waste::format {

float F16ToF32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t man = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {
      // Subnormal: value = man * 2^-24, exact in f32.
      float v = static_cast<float>(man) * 5.9604644775390625e-08f;
      return (h & 0x8000) ? -v : v;
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  return std::bit_cast<float>(bits);
}

float F16ToF32Flush(uint16_t h) {
  if (F16IsSubnormal(h)) return (h & 0x8000) ? -0.0f : 0.0f;
  return F16ToF32(h);
}

uint16_t F32ToF16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  uint32_t exp = (x >> 23) & 0xFF;
  uint32_t man = x & 0x7FFFFF;
  if (exp == 0xFF) {  // inf / NaN (keep NaN quiet and non-zero)
    return static_cast<uint16_t>(sign | 0x7C00 | (man ? 0x200 : 0));
  }
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7C00);
  if (e <= 0) {
    // Subnormal (or zero) result: shift the full mantissa into place with
    // round-to-nearest-even on the dropped bits.
    if (e < -10) return sign;
    uint32_t m = man | 0x800000;
    int shift = 14 - e;  // 1 - e + 13
    uint32_t half = 1u << (shift - 1);
    uint32_t rest = m & ((1u << shift) - 1);
    uint32_t q = m >> shift;
    if (rest > half || (rest == half && (q & 1))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t q = (static_cast<uint32_t>(e) << 10) | (man >> 13);
  uint32_t rest = man & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (q & 1))) ++q;  // may carry into inf: correct
  return static_cast<uint16_t>(sign | q);
}

uint32_t Crc32(const uint8_t* data, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes uInt lengths: feed huge buffers in slices.
  constexpr size_t kSlice = size_t{1} << 30;
  while (n > 0) {
    size_t take = std::min(n, kSlice);
    crc = crc32(crc, data, static_cast<uInt>(take));
    data += take;
    n -= take;
  }
  return static_cast<uint32_t>(crc);
}

TrunkGeometry ComputeTrunkGeometry(TensorFmt fmt, const std::vector<int64_t>& shape, int group) {
  TrunkGeometry g;
  g.cols = shape.empty() ? 0 : shape.back();
  g.rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) g.rows *= shape[i];
  uint64_t rows = static_cast<uint64_t>(g.rows);
  if (fmt == TensorFmt::kF32) {
    g.row_bytes = 4 * static_cast<uint64_t>(g.cols);
    g.payload_bytes = rows * g.row_bytes;
    return g;
  }
  g.groups = (g.cols + group - 1) / group;
  uint64_t padded = static_cast<uint64_t>(g.groups) * static_cast<uint64_t>(group);
  switch (fmt) {
    case TensorFmt::kQ8G: g.row_bytes = padded; break;
    case TensorFmt::kQ4G: g.row_bytes = padded / 2; break;
    case TensorFmt::kQ3G: g.row_bytes = padded * 3 / 8 + 1; break;  // +1 guard byte
    default: g.row_bytes = padded; break;
  }
  g.payload_bytes = rows * g.row_bytes;
  g.scale_bytes = 2 * rows * static_cast<uint64_t>(g.groups);
  return g;
}

Result<RecordLayout> ComputeRecordLayout(int moe_inter, int expert_in, const ExpertQuant& q) {
  RecordLayout l;
  l.stages = q.stages;
  l.vec_dim = q.vec_dim;
  l.entries = q.entries;
  l.index_bits = q.index_bits;
  l.run_bytes = q.index_bits == 6 ? 3 : q.stages;
  if (moe_inter <= 0 || expert_in <= 0 || q.vec_dim <= 0 || l.run_bytes <= 0) {
    return FormatError(fmt::format("expert geometry is empty (moe_intermediate_size {}, expert "
                                   "input width {}, vec_dim {})",
                                   moe_inter, expert_in, q.vec_dim));
  }
  const int shapes[3][2] = {{moe_inter, expert_in}, {moe_inter, expert_in}, {expert_in, moe_inter}};
  static const char* const kNames[3] = {"gate", "up", "down"};
  uint64_t off = kRecordHeaderBytes;
  for (int k = 0; k < 3; ++k) {
    MatrixLayout& m = l.m[k];
    m.rows = shapes[k][0];
    m.cols = shapes[k][1];
    if (m.cols % q.vec_dim != 0) {
      return FormatError(fmt::format("expert {} matrix [{}, {}]: row length {} is not a multiple "
                                     "of expert_quant.vec_dim {}",
                                     kNames[k], m.rows, m.cols, m.cols, q.vec_dim));
    }
    m.nv = m.cols / q.vec_dim;
    m.nb = (m.rows + kIndexBlockRows - 1) / kIndexBlockRows;
    m.offset = off;
    m.bytes = static_cast<uint64_t>(m.nb) * m.nv * kIndexBlockRows * l.run_bytes;
    off += m.bytes;
  }
  l.scales_off = off;
  l.payload_end = off + 2ull * (2ull * moe_inter + expert_in);
  l.record_bytes = (l.payload_end + kPageBytes - 1) / kPageBytes * kPageBytes;
  if (l.payload_end > std::numeric_limits<uint32_t>::max()) {
    return FormatError(fmt::format("one expert record would need {} bytes; record offsets are "
                                   "32-bit",
                                   l.payload_end));
  }
  return l;
}

Status ValidateRecordHeader(const uint8_t* record, const RecordExpectation& want) {
  const RecordLayout& l = *want.layout;
  RecordHeader h = LoadRecordHeader(record);
  auto bad = [](std::string what) {
    return IoError("record header is not what the bank index describes: " + what);
  };
  if (h.magic != kRecordMagic) {
    return bad(fmt::format("magic 0x{:08X} at byte 0, expected 0x{:08X} (\"WEXP\")", h.magic,
                           kRecordMagic));
  }
  if (h.layer != want.layer) {
    return bad(fmt::format("layer {} at byte 4, expected {}", h.layer, want.layer));
  }
  if (h.expert_id != want.expert) {
    return bad(fmt::format("expert_id {} at byte 6, expected {}", h.expert_id, want.expert));
  }
  if (static_cast<uint64_t>(h.rec_4k_blocks) * kPageBytes != want.record_bytes) {
    return bad(fmt::format("rec_4k_blocks {} at byte 16 ({} bytes), expected {} bytes per the "
                           "manifest",
                           h.rec_4k_blocks, static_cast<uint64_t>(h.rec_4k_blocks) * kPageBytes,
                           want.record_bytes));
  }
  if (l.index_bits == 6 ? h.fmt != FmtByte(TensorFmt::kVq4p)
                           : (h.fmt != FmtByte(TensorFmt::kVq3r) && h.fmt != FmtByte(TensorFmt::kVq2r))) {
    return bad(fmt::format("fmt {} at byte 8, expected {} for index_bits {}", h.fmt,
                           l.index_bits == 6 ? "8" : "4 or 5", l.index_bits));
  }
  if (h.lowrank_id != 0) {
    return bad(fmt::format("lowrank_id {} at byte 12, expected 0", h.lowrank_id));
  }
  if (static_cast<int64_t>(h.codebook_id) + 3 * l.stages > want.n_books) {
    return bad(fmt::format("codebook_id {} at byte 10 needs records up to {}, codebooks.bin has {}",
                           h.codebook_id, h.codebook_id + 3 * l.stages, want.n_books));
  }
  if (h.codebook_id != want.codebook_base) {
    return bad(fmt::format("codebook_id {} at byte 10, expected the layer's codebook_base {}",
                           h.codebook_id, want.codebook_base));
  }
  const uint32_t offs[4] = {h.gate_off, h.up_off, h.down_off, h.chan_corr_off};
  const uint64_t want_offs[4] = {l.m[0].offset, l.m[1].offset, l.m[2].offset, l.scales_off};
  static const char* const kField[4] = {"gate_off", "up_off", "down_off", "chan_corr_off"};
  static const int kAt[4] = {20, 24, 28, 32};
  for (int i = 0; i < 4; ++i) {
    if (offs[i] != want_offs[i]) {
      return bad(fmt::format("{} {} at byte {}, expected {}", kField[i], offs[i], kAt[i],
                             want_offs[i]));
    }
  }
  if (l.payload_end > want.record_bytes) {
    return bad(fmt::format("payload ends at {}, past the {}-byte record", l.payload_end,
                           want.record_bytes));
  }
  // With one byte per index and fewer than 256 entries a byte can point past
  // its codebook; refuse that here so no consumer has to bounds-check. (The
  // 6-bit VQ4P form only exists with exactly 64 entries.)
  if (l.index_bits == 8 && l.entries < 256) {
    const uint8_t* first = record + l.m[0].offset;
    const uint8_t* last = record + l.scales_off;
    const uint8_t* bad_at = std::find_if(first, last, [&](uint8_t b) { return b >= l.entries; });
    if (bad_at != last) {
      return IoError(fmt::format("index {} at byte {} is outside the {}-entry codebooks", *bad_at,
                                 bad_at - record, l.entries));
    }
  }
  return Status::Ok();
}

Status VerifyRecordCrc(const uint8_t* record, const RecordLayout& layout) {
  uint32_t stored = LoadRecordHeader(record).crc32;
  uint32_t got = Crc32(record + kRecordHeaderBytes, layout.payload_end - kRecordHeaderBytes);
  if (stored != got) {
    return IoError(fmt::format("checksum mismatch: crc32 of bytes 48..{} is 0x{:08X}, header "
                               "(byte 36) says 0x{:08X}",
                               layout.payload_end, got, stored));
  }
  return Status::Ok();
}

}  // namespace waste::format
