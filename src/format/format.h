// Container v0 on-disk layout (FORMAT.md): magics, the 48-byte expert record
// header, the 16-byte codebook header, trunk/record geometry, f16 and crc32
// helpers, and the record header checks of §8.2. Layout only: no file I/O.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "waste/status.h"

namespace waste::format {

// Every integer in the container is little-endian; we read structs by memcpy.
static_assert(std::endian::native == std::endian::little,
              "container structs are read by memcpy: little-endian hosts only");

inline constexpr uint32_t kRecordMagic = 0x50584557;    // "WEXP"
inline constexpr uint32_t kCodebookMagic = 0x4B424357;  // "WCBK"
inline constexpr int kFormatVersion = 0;
inline constexpr uint64_t kPageBytes = 4096;            // record size granule (§6.1)
inline constexpr int kIndexBlockRows = 64;              // row blocking of indices (§6.3)
inline constexpr int kMaxManifestDepth = 64;            // JSON nesting cap (§3.1)

// Storage formats: one numbering for the manifest's trunk "fmt" (§4.2) and
// the expert record header's fmt byte (§6.2); the values are the codes on
// disk. Parsed from disk once (manifest, record header) and typed after.
enum class TensorFmt : uint8_t {
  kF32 = 0,
  kF16 = 1,   // reserved: never loadable
  kQ8G = 2,
  kQ4G = 3,
  kVq3r = 4,  // record fmt byte when index_bits = 8
  kVq2r = 5,  // accepted alternative when index_bits = 8
  kQ3G = 7,
  kVq4p = 8,  // record fmt byte when index_bits = 6
};
// The code as stored on disk.
constexpr uint8_t FmtByte(TensorFmt f) { return static_cast<uint8_t>(f); }

// Expert record header (§6.2). Natural alignment already yields the on-disk
// offsets, so no packing pragma is needed; the asserts pin every field.
struct RecordHeader {
  uint32_t magic;
  uint16_t layer;
  uint16_t expert_id;
  uint8_t fmt;
  uint8_t flags;
  uint16_t codebook_id;
  uint16_t lowrank_id;
  uint16_t reserved0;
  uint32_t rec_4k_blocks;
  uint32_t gate_off;
  uint32_t up_off;
  uint32_t down_off;
  uint32_t chan_corr_off;
  uint32_t crc32;
  uint32_t reserved1[2];
};
static_assert(sizeof(RecordHeader) == 48);
static_assert(offsetof(RecordHeader, magic) == 0);
static_assert(offsetof(RecordHeader, layer) == 4);
static_assert(offsetof(RecordHeader, expert_id) == 6);
static_assert(offsetof(RecordHeader, fmt) == 8);
static_assert(offsetof(RecordHeader, flags) == 9);
static_assert(offsetof(RecordHeader, codebook_id) == 10);
static_assert(offsetof(RecordHeader, lowrank_id) == 12);
static_assert(offsetof(RecordHeader, reserved0) == 14);
static_assert(offsetof(RecordHeader, rec_4k_blocks) == 16);
static_assert(offsetof(RecordHeader, gate_off) == 20);
static_assert(offsetof(RecordHeader, up_off) == 24);
static_assert(offsetof(RecordHeader, down_off) == 28);
static_assert(offsetof(RecordHeader, chan_corr_off) == 32);
static_assert(offsetof(RecordHeader, crc32) == 36);
static_assert(offsetof(RecordHeader, reserved1) == 40);
inline constexpr size_t kRecordHeaderBytes = sizeof(RecordHeader);

// Codebook record header (§5). The reference never reads it; we write it
// faithfully and only use the entries positionally.
struct CodebookHeader {
  uint32_t magic;
  uint16_t codebook_id;
  uint8_t fmt;
  uint8_t vec_dim;
  uint32_t n_entries;
  uint32_t reserved;
};
static_assert(sizeof(CodebookHeader) == 16);
static_assert(offsetof(CodebookHeader, codebook_id) == 4);
static_assert(offsetof(CodebookHeader, fmt) == 6);
static_assert(offsetof(CodebookHeader, vec_dim) == 7);
static_assert(offsetof(CodebookHeader, n_entries) == 8);
static_assert(offsetof(CodebookHeader, reserved) == 12);
inline constexpr size_t kCodebookHeaderBytes = sizeof(CodebookHeader);

// Bytes of one codebook record: header + f16 [entries][vec_dim].
inline uint64_t CodebookRecordBytes(const ExpertQuant& q) {
  return kCodebookHeaderBytes + 2ull * static_cast<uint64_t>(q.entries) * q.vec_dim;
}

inline RecordHeader LoadRecordHeader(const uint8_t* p) {
  RecordHeader h;
  std::memcpy(&h, p, sizeof(h));
  return h;
}
inline void StoreRecordHeader(const RecordHeader& h, uint8_t* p) { std::memcpy(p, &h, sizeof(h)); }

inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// ---- f16 ------------------------------------------------------------------

// Exact binary16 -> f32, subnormals included (trunk and record scales, §4.4).
float F16ToF32(uint16_t h);
// Same with subnormals flushed to a signed zero (codebook entries, §5).
float F16ToF32Flush(uint16_t h);
// f32 -> binary16, round to nearest even; overflow gives +-inf, NaN stays NaN.
uint16_t F32ToF16(float f);
inline bool F16IsSubnormal(uint16_t h) { return (h & 0x7C00) == 0 && (h & 0x03FF) != 0; }
inline bool F16IsFinite(uint16_t h) { return (h & 0x7C00) != 0x7C00; }

// ---- crc32 (§7) -------------------------------------------------------------

// zlib's crc32 (CRC-32/ISO-HDLC) of `n` bytes, any length.
uint32_t Crc32(const uint8_t* data, size_t n);

// ---- trunk tensor geometry (§4.3–4.4) ---------------------------------------

inline constexpr int kMaxTensorDims = 4;
inline constexpr int64_t kMaxTensorDim = int64_t{1} << 26;
// Our own cap on one tensor's element count, far above any real model, so
// that every byte count below fits comfortably in 64 bits.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 40;

struct TrunkGeometry {
  int64_t rows = 0;          // product of all dims but the last (1 for 1-D)
  int64_t cols = 0;          // last dim: the row length
  int64_t groups = 0;        // ceil(cols / group); 0 for F32
  uint64_t row_bytes = 0;    // packed bytes of one row
  uint64_t payload_bytes = 0;
  uint64_t scale_bytes = 0;  // f16 [rows][groups]; 0 for F32
};

// Precondition: fmt is F32, Q8G, Q4G or Q3G; shape already bounds-checked (1..4 dims,
// each 1..2^26, elements <= kMaxTensorElements); group >= 8 and % 8 == 0.
TrunkGeometry ComputeTrunkGeometry(TensorFmt fmt, const std::vector<int64_t>& shape, int group);

// Element i of a packed trunk row, before scaling (§4.4).
inline int TrunkCode(TensorFmt fmt, const uint8_t* row, int64_t i) {
  switch (fmt) {
    case TensorFmt::kQ8G:
      return static_cast<int8_t>(row[i]);
    case TensorFmt::kQ4G: {
      uint8_t b = row[i >> 1];
      return ((i & 1) ? (b >> 4) : (b & 0x0F)) - 8;
    }
    case TensorFmt::kQ3G: {
      int64_t t = 3 * i;
      int64_t byte = t >> 3;
      int k = static_cast<int>(t & 7);
      unsigned u = ((static_cast<unsigned>(row[byte]) >> k) |
                    (static_cast<unsigned>(row[byte + 1]) << (8 - k))) & 7u;
      return static_cast<int>(u) - 4;
    }
    default:
      return 0;
  }
}

// ---- expert record geometry (§6.3) ------------------------------------------

enum MatrixKind : int { kGate = 0, kUp = 1, kDown = 2 };

struct MatrixLayout {
  int rows = 0;              // M = out
  int cols = 0;              // N = in
  int nv = 0;                // vector positions per row: cols / vec_dim
  int nb = 0;                // 64-row blocks: ceil(rows / 64)
  uint64_t offset = 0;       // from the record start
  uint64_t bytes = 0;        // nb * nv * 64 * run_bytes
};

struct RecordLayout {
  int stages = 0;
  int vec_dim = 0;
  int entries = 0;
  int index_bits = 8;
  int run_bytes = 0;         // bytes per (row, vector) run: stages, or 3 for VQ4P
  MatrixLayout m[3];         // gate, up, down
  uint64_t scales_off = 0;   // chan_corr_off
  uint64_t payload_end = 0;  // scales_off + 2 * (2 * moe_inter + expert_in)
  uint64_t record_bytes = 0; // payload_end rounded up to 4096
};

// Fails (kFormat) when a matrix width is not a multiple of vec_dim or the
// payload does not fit the header's u32 offsets.
Result<RecordLayout> ComputeRecordLayout(int moe_inter, int expert_in, const ExpertQuant& q);

// Byte offset (from the record start) of the index run of (row r, vector v).
inline uint64_t IndexRunOffset(const RecordLayout& l, int kind, int r, int v) {
  const MatrixLayout& m = l.m[kind];
  uint64_t blk = static_cast<uint64_t>(r / kIndexBlockRows);
  uint64_t rin = static_cast<uint64_t>(r % kIndexBlockRows);
  return m.offset + ((blk * m.nv + v) * kIndexBlockRows + rin) * l.run_bytes;
}

// VQ4P: four 6-bit stage indices in three bytes (§6.3).
inline void PackVq4p(const uint8_t s[4], uint8_t out[3]) {
  out[0] = static_cast<uint8_t>((s[0] | (s[1] << 6)) & 0xFF);
  out[1] = static_cast<uint8_t>(((s[1] >> 2) | (s[2] << 4)) & 0xFF);
  out[2] = static_cast<uint8_t>(((s[2] >> 4) | (s[3] << 2)) & 0xFF);
}
inline void UnpackVq4p(const uint8_t b[3], uint8_t s[4]) {
  s[0] = b[0] & 63;
  s[1] = static_cast<uint8_t>(((b[0] >> 6) | (b[1] << 2)) & 63);
  s[2] = static_cast<uint8_t>(((b[1] >> 4) | (b[2] << 4)) & 63);
  s[3] = static_cast<uint8_t>(b[2] >> 2);
}

// Stage indices of one run (run_bytes bytes) into s[0..stages-1].
inline void DecodeRun(const RecordLayout& l, const uint8_t* run, uint8_t* s) {
  if (l.index_bits == 6) {
    UnpackVq4p(run, s);
  } else {
    for (int i = 0; i < l.stages; ++i) s[i] = run[i];
  }
}

// What a bank index entry promises about each of its records (§8.2).
struct RecordExpectation {
  int layer = 0;
  int expert = 0;
  uint64_t record_bytes = 0;   // manifest bytes / experts
  int codebook_base = 0;       // manifest codebook_base
  int n_books = 0;             // codebook records in codebooks.bin
  const RecordLayout* layout = nullptr;
};

// Every check of FORMAT.md §8.2, plus the exact offset spacing, the
// manifest's codebook_base, and (8-bit indices with fewer than 256 entries)
// every index below `entries`. `record` holds record_bytes bytes. The
// message is the reason alone; callers prefix "expert E of layer L: ".
Status ValidateRecordHeader(const uint8_t* record, const RecordExpectation& want);

// crc32 of the covered range [48, payload_end) compared with the header.
Status VerifyRecordCrc(const uint8_t* record, const RecordLayout& layout);

}  // namespace waste::format
