#include "writer/expert_record_builder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace waste {

ExpertRecordBuilder::ExpertRecordBuilder(const format::RecordLayout& layout)
    : layout_(layout), buf_(static_cast<size_t>(layout.record_bytes), 0) {}

void ExpertRecordBuilder::Clear() { std::fill(buf_.begin(), buf_.end(), 0); }

uint16_t* ExpertRecordBuilder::scales(int kind) {
  size_t first = 0;
  for (int k = 0; k < kind; ++k) first += static_cast<size_t>(layout_.m[k].rows);
  // scales_off is even (index regions are multiples of 64 bytes past 48).
  return reinterpret_cast<uint16_t*>(buf_.data() + layout_.scales_off) + first;
}

void ExpertRecordBuilder::SetRun(int kind, int row, int v, const uint8_t* s) {
  uint8_t* run = buf_.data() + format::IndexRunOffset(layout_, kind, row, v);
  if (layout_.index_bits == 6) {
    format::PackVq4p(s, run);
  } else {
    std::memcpy(run, s, static_cast<size_t>(layout_.stages));
  }
}

void ExpertRecordBuilder::GetRun(int kind, int row, int v, uint8_t* s) const {
  format::DecodeRun(layout_, buf_.data() + format::IndexRunOffset(layout_, kind, row, v), s);
}

void ExpertRecordBuilder::EncodeMatrix(int kind, const float* w, const float* books) {
  const format::MatrixLayout& m = layout_.m[kind];
  const int vd = layout_.vec_dim, ne = layout_.entries, stages = layout_.stages;
  uint16_t* sc = scales(kind);
  std::vector<float> residual(static_cast<size_t>(vd));
  uint8_t idx[8];
  for (int r = 0; r < m.rows; ++r) {
    const float* row = w + static_cast<size_t>(r) * m.cols;
    float amax = 1e-8f;
    for (int i = 0; i < m.cols; ++i) amax = std::max(amax, std::fabs(row[i]));
    sc[r] = format::F32ToF16(amax);
    const float scale = format::F16ToF32(sc[r]);
    const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
    for (int v = 0; v < m.nv; ++v) {
      for (int j = 0; j < vd; ++j) residual[j] = row[v * vd + j] * inv;
      for (int s = 0; s < stages; ++s) {
        const float* book = books + static_cast<size_t>(s) * ne * vd;
        int best = 0;
        float best_d = std::numeric_limits<float>::infinity();
        for (int e = 0; e < ne; ++e) {
          float d = 0.0f;
          for (int j = 0; j < vd; ++j) {
            float diff = residual[j] - book[e * vd + j];
            d += diff * diff;
          }
          if (d < best_d) {
            best_d = d;
            best = e;
          }
        }
        idx[s] = static_cast<uint8_t>(best);
        for (int j = 0; j < vd; ++j) residual[j] -= book[best * vd + j];
      }
      SetRun(kind, r, v, idx);
    }
  }
}

const uint8_t* ExpertRecordBuilder::Finish(int layer, int expert, int codebook_id) {
  // Rows past M in the last block are padding and must be zero (§6.3).
  for (int k = 0; k < 3; ++k) {
    const format::MatrixLayout& m = layout_.m[k];
    const int live = m.rows - (m.nb - 1) * format::kIndexBlockRows;
    if (live == format::kIndexBlockRows) continue;
    for (int v = 0; v < m.nv; ++v) {
      uint8_t* run = buf_.data() +
                     format::IndexRunOffset(layout_, k, (m.nb - 1) * format::kIndexBlockRows + live, v);
      std::memset(run, 0,
                  static_cast<size_t>(format::kIndexBlockRows - live) * layout_.run_bytes);
    }
  }
  std::memset(buf_.data() + layout_.payload_end, 0, buf_.size() - layout_.payload_end);
  format::RecordHeader h{};
  h.magic = format::kRecordMagic;
  h.layer = static_cast<uint16_t>(layer);
  h.expert_id = static_cast<uint16_t>(expert);
  h.fmt = format::FmtByte(layout_.index_bits == 6 ? format::TensorFmt::kVq4p : format::TensorFmt::kVq3r);
  h.codebook_id = static_cast<uint16_t>(codebook_id);
  h.rec_4k_blocks = static_cast<uint32_t>(layout_.record_bytes / format::kPageBytes);
  h.gate_off = static_cast<uint32_t>(layout_.m[0].offset);
  h.up_off = static_cast<uint32_t>(layout_.m[1].offset);
  h.down_off = static_cast<uint32_t>(layout_.m[2].offset);
  h.chan_corr_off = static_cast<uint32_t>(layout_.scales_off);
  h.crc32 = format::Crc32(buf_.data() + format::kRecordHeaderBytes,
                          layout_.payload_end - format::kRecordHeaderBytes);
  format::StoreRecordHeader(h, buf_.data());
  return buf_.data();
}

}  // namespace waste
