// Builds one expert record (FORMAT.md §6) in memory: indices in the 64-row
// blocked layout (VQ4P packing when index_bits = 6), per-row f16 scales,
// header, crc32 and zero padding. Used by the container writer and tests.
#pragma once

#include <cstdint>
#include <vector>

#include "format/format.h"

namespace waste {

class ExpertRecordBuilder {
 public:
  explicit ExpertRecordBuilder(const format::RecordLayout& layout);

  const format::RecordLayout& layout() const { return layout_; }
  size_t size() const { return buf_.size(); }
  const uint8_t* data() const { return buf_.data(); }

  // Zeroes the whole record (indices, scales, padding).
  void Clear();

  // The index region of matrix `kind` in its on-disk layout
  // (layout().m[kind].bytes bytes): for bulk fills. Padding rows are zeroed
  // again by Finish(), and with index_bits 6 every byte value is valid.
  uint8_t* indices(int kind) { return buf_.data() + layout_.m[kind].offset; }
  // f16 scales of matrix `kind`, one per output row.
  uint16_t* scales(int kind);

  // Stage indices s[0..stages-1] of (row, vector position v).
  void SetRun(int kind, int row, int v, const uint8_t* s);
  void GetRun(int kind, int row, int v, uint8_t* s) const;

  // Greedy residual encoding (FORMAT.md §6.4, informative) of `w`, f32
  // [rows][cols] row-major: per row scale = max|w| (>= 1e-8, stored as f16),
  // then per stage the nearest entry to what earlier stages left.
  // `books`: f32 [stages][entries][vec_dim] for this kind.
  void EncodeMatrix(int kind, const float* w, const float* books);

  // Zeroes padding rows, fills the header and the crc32; returns data().
  const uint8_t* Finish(int layer, int expert, int codebook_id);

 private:
  format::RecordLayout layout_;
  std::vector<uint8_t> buf_;
};

}  // namespace waste
