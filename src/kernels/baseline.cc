// Portable reference kernels (MODEL.md §6). Each loop is written in the exact
// order the spec states, because these results define "correct" for every
// ISA file and for WASTE_BACKEND=cpu. The library builds this file with
// -ffp-contract=off so no compiler fuses a multiply-add behind our back.
#include "kernels/baseline.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/numerics.h"

namespace waste::kernels::baseline {
namespace {

// Element decoders: the value of element i of a row, before scaling.
struct Q8gValue {
  int operator()(const uint8_t* row, size_t i) const { return static_cast<int8_t>(row[i]); }
};
struct Q4gValue {
  int operator()(const uint8_t* row, size_t i) const {
    const unsigned b = row[i >> 1];
    return static_cast<int>((i & 1) ? (b >> 4) : (b & 15u)) - 8;
  }
};
struct Q3gDecoder {
  int operator()(const uint8_t* row, size_t i) const { return Q3gValue(row, i); }
};

// y[r] = sum_k f16(s[r,k]) * (sum_{i in group k, i < cols} q[r,i] * x[i]).
template <typename Decode>
void MatVecGrouped(const MatVecArgs& a, size_t row_begin, size_t row_end, Decode value) {
  for (size_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = a.weights + r * a.row_bytes;
    const uint16_t* sc = a.scales + r * a.groups;
    float acc = 0.0f;
    for (size_t k = 0; k < a.groups; ++k) {
      const size_t begin = k * a.group;
      const size_t end = std::min(begin + a.group, a.cols);
      float inner = 0.0f;
      for (size_t i = begin; i < end; ++i) inner += static_cast<float>(value(row, i)) * a.x[i];
      acc += F16ToF32(sc[k]) * inner;
    }
    a.y[r] = acc;
  }
}

// Batched: dequantise each row to f32 once (q * s), then a plain in-order dot
// with every token row (MODEL.md §6.1 "batched matmul").
template <typename Decode>
void MatMulGrouped(const MatMulArgs& m, size_t row_begin, size_t row_end, Decode value) {
  const MatVecArgs& w = m.w;
  std::vector<float> deq(w.cols);
  for (size_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = w.weights + r * w.row_bytes;
    const uint16_t* sc = w.scales + r * w.groups;
    for (size_t i = 0; i < w.cols; ++i) {
      deq[i] = static_cast<float>(value(row, i)) * F16ToF32(sc[i / w.group]);
    }
    for (size_t t = 0; t < m.tokens; ++t) {
      m.y[t * m.y_stride + r] = DotF32(deq.data(), m.x + t * m.x_stride, w.cols);
    }
  }
}

template <typename Decode>
void DequantGrouped(const DequantArgs& d, size_t row_begin, size_t row_end, Decode value) {
  const MatVecArgs& w = d.w;
  for (size_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = w.weights + r * w.row_bytes;
    const uint16_t* sc = w.scales + r * w.groups;
    float* out = d.out + r * d.out_stride;
    for (size_t i = 0; i < w.cols; ++i) {
      out[i] = static_cast<float>(value(row, i)) * F16ToF32(sc[i / w.group]);
    }
  }
}

}  // namespace

void DequantQ8G(const DequantArgs& d, size_t row_begin, size_t row_end) {
  DequantGrouped(d, row_begin, row_end, Q8gValue{});
}

void DequantQ4G(const DequantArgs& d, size_t row_begin, size_t row_end) {
  DequantGrouped(d, row_begin, row_end, Q4gValue{});
}

void DequantQ3G(const DequantArgs& d, size_t row_begin, size_t row_end) {
  DequantGrouped(d, row_begin, row_end, Q3gDecoder{});
}

float DotF32(const float* a, const float* b, size_t n) {
  float acc = 0.0f;
  for (size_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

void AxpyF32(float a, const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void MatVecF32(const MatVecArgs& a, size_t row_begin, size_t row_end) {
  for (size_t r = row_begin; r < row_end; ++r) {
    const float* row = reinterpret_cast<const float*>(a.weights + r * a.row_bytes);
    a.y[r] = DotF32(row, a.x, a.cols);
  }
}

void MatVecQ8G(const MatVecArgs& a, size_t row_begin, size_t row_end) {
  MatVecGrouped(a, row_begin, row_end, Q8gValue{});
}

void MatVecQ4G(const MatVecArgs& a, size_t row_begin, size_t row_end) {
  MatVecGrouped(a, row_begin, row_end, Q4gValue{});
}

void MatVecQ3G(const MatVecArgs& a, size_t row_begin, size_t row_end) {
  MatVecGrouped(a, row_begin, row_end, Q3gDecoder{});
}

void MatMulF32(const MatMulArgs& m, size_t row_begin, size_t row_end) {
  for (size_t r = row_begin; r < row_end; ++r) {
    const float* row = reinterpret_cast<const float*>(m.w.weights + r * m.w.row_bytes);
    for (size_t t = 0; t < m.tokens; ++t) {
      m.y[t * m.y_stride + r] = DotF32(row, m.x + t * m.x_stride, m.w.cols);
    }
  }
}

void MatMulQ8G(const MatMulArgs& m, size_t row_begin, size_t row_end) {
  MatMulGrouped(m, row_begin, row_end, Q8gValue{});
}

void MatMulQ4G(const MatMulArgs& m, size_t row_begin, size_t row_end) {
  MatMulGrouped(m, row_begin, row_end, Q4gValue{});
}

void MatMulQ3G(const MatMulArgs& m, size_t row_begin, size_t row_end) {
  MatMulGrouped(m, row_begin, row_end, Q3gDecoder{});
}

void LutBuild(const LutBuildArgs& a, size_t v_begin, size_t v_end) {
  const size_t vd = a.vec_dim;
  for (size_t v = v_begin; v < v_end; ++v) {
    const float* xv = a.x + v * vd;
    for (size_t s = 0; s < a.stages; ++s) {
      const float* book = a.books[s];
      float* out = a.planes != nullptr ? nullptr : a.table + (v * a.stages + s) * a.entries;
      uint8_t* planes = a.planes != nullptr ? a.planes + (v * a.stages + s) * 4 * a.entries : nullptr;
      for (size_t c = 0; c < a.entries; ++c) {
        const float* code = book + c * vd;
        float acc = 0.0f;
        for (size_t t = 0; t < vd; ++t) acc += xv[t] * code[t];
        if (planes == nullptr) {
          out[c] = acc;
        } else {
          const uint32_t bits = F32ToBits(acc);
          for (size_t b = 0; b < 4; ++b) planes[b * a.entries + c] = static_cast<uint8_t>(bits >> (8 * b));
        }
      }
    }
  }
}

// Rows of one 64-row index block are interleaved (their runs for one v are
// contiguous), so the per-row accumulator chains are independent; each row
// still sums v in order, ((T0 + T1) + T2) per v. On the CPUs measured this
// plain loop beats AVX2 and AVX-512 gathers (docs/KERNELS.md), so it is also
// what the SIMD tables use.
namespace {

// One input of vq_apply8 from byte planes: the f32 table is rebuilt per
// vector position (exact bytes), then the f32 path runs on it.
void VqApply8FromPlanes(const VqApply8Args& a, size_t row_begin, size_t row_end) {
  const size_t per_v = a.stages * a.entries;
  std::vector<float> table(a.nv * per_v);
  for (size_t v = 0; v < a.nv; ++v) {
    for (size_t s = 0; s < a.stages; ++s) {
      const uint8_t* p = a.planes + (v * a.stages + s) * 4 * a.entries;
      for (size_t c = 0; c < a.entries; ++c) {
        uint32_t bits = 0;
        for (size_t b = 0; b < 4; ++b) bits |= static_cast<uint32_t>(p[b * a.entries + c]) << (8 * b);
        table[v * per_v + s * a.entries + c] = BitsToF32(bits);
      }
    }
  }
  VqApply8Args f = a;
  f.planes = nullptr;
  f.table = table.data();
  VqApply8(f, row_begin, row_end);
}

}  // namespace

void VqApply8(const VqApply8Args& a, size_t row_begin, size_t row_end) {
  if (a.count > 0) {
    for (size_t i = 0; i < a.count; ++i) {
      VqApply8Args one = a;
      one.count = 0;
      one.table = a.tables != nullptr ? a.tables[i] : nullptr;
      one.planes = a.plane_sets != nullptr ? a.plane_sets[i] : nullptr;
      one.y = a.ys[i];
      VqApply8(one, row_begin, row_end);
    }
    return;
  }
  if (a.planes != nullptr) return VqApply8FromPlanes(a, row_begin, row_end);
  const size_t per_v = a.stages * a.entries, run = a.stages;
  for (size_t blk = row_begin / 64; blk * 64 < row_end; ++blk) {
    const size_t lo = std::max(row_begin, blk * 64), hi = std::min(row_end, blk * 64 + 64);
    float acc[64] = {0};
    for (size_t v = 0; v < a.nv; ++v) {
      const uint8_t* runs = a.indices + VqRunOffset(blk * 64, v, a.nv, run);
      const float* tv = a.table + v * per_v;
      if (run == 3) {
        const float* t1 = tv + a.entries;
        const float* t2 = tv + 2 * a.entries;
        for (size_t r = lo; r < hi; ++r) {
          const uint8_t* p = runs + (r - blk * 64) * 3;
          acc[r - blk * 64] += (tv[p[0]] + t1[p[1]]) + t2[p[2]];
        }
        continue;
      }
      for (size_t r = lo; r < hi; ++r) {
        const uint8_t* p = runs + (r - blk * 64) * run;
        float sum = tv[p[0]];
        for (size_t s = 1; s < run; ++s) sum += tv[s * a.entries + p[s]];
        acc[r - blk * 64] += sum;
      }
    }
    for (size_t r = lo; r < hi; ++r) a.y[r] = acc[r - blk * 64] * F16ToF32(a.scales[r]);
  }
}

// Each input's dot product in column order, the weight decoded per use.
void VqMatMul8(const VqMatMul8Args& a, size_t row_begin, size_t row_end) {
  const size_t vd = a.vec_dim, run = a.stages;
  for (size_t r = row_begin; r < row_end; ++r) {
    const float scale = F16ToF32(a.scales[r]);
    for (size_t t = 0; t < a.count; ++t) {
      const float* x = a.xs[t];
      float acc = 0.0f;
      for (size_t v = 0; v < a.nv; ++v) {
        const uint8_t* p = a.indices + VqRunOffset(r, v, a.nv, run);
        for (size_t d = 0; d < vd; ++d) {
          float w = a.books[0][p[0] * vd + d];
          for (size_t s = 1; s < run; ++s) w += a.books[s][p[s] * vd + d];
          acc += w * x[v * vd + d];
        }
      }
      a.ys[t][r] = acc * scale;
    }
  }
}

void VqApply6(const VqApply6Args& a, size_t row_begin, size_t row_end) {
  for (size_t r = row_begin; r < row_end; ++r) {
    float acc = 0.0f;
    for (size_t v0 = 0; v0 < a.nv; v0 += 32) {
      const size_t v1 = std::min(a.nv, v0 + 32);
      int32_t sum = 0;  // exact: at most 128 terms of |127|
      for (size_t v = v0; v < v1; ++v) {
        unsigned idx[4];
        UnpackVq4pRun(a.indices + VqRunOffset(r, v, a.nv, 3), idx);
        const int8_t* tv = a.table + v * 256;
        sum += tv[idx[0]] + tv[64 + idx[1]] + tv[128 + idx[2]] + tv[192 + idx[3]];
      }
      acc += a.tau[v0 / 32] * static_cast<float>(sum);
    }
    a.y[r] = acc * F16ToF32(a.scales[r]);
  }
}

void LutQuantize(const LutQuantizeArgs& a, size_t block_begin, size_t block_end) {
  for (size_t b = block_begin; b < block_end; ++b) {
    const size_t begin = b * 32 * a.per_v;
    const size_t end = std::min(a.nv, (b + 1) * 32) * a.per_v;
    float m = 0.0f;
    for (size_t i = begin; i < end; ++i) m = std::max(m, std::fabs(a.table[i]));
    a.tau[b] = m / 127.0f;
    if (m == 0.0f) {
      for (size_t i = begin; i < end; ++i) a.out[i] = 0;
      continue;
    }
    const float inv = 127.0f / m;
    for (size_t i = begin; i < end; ++i) {
      const float q = std::clamp(RoundHalfEvenSmall(a.table[i] * inv), -127.0f, 127.0f);
      a.out[i] = static_cast<int8_t>(q);
    }
  }
}

void KdaStep(const KdaStepArgs& a, size_t head_begin, size_t head_end) {
  const size_t d = a.dim;
  std::vector<float> delta(d), o(d);
  for (size_t h = head_begin; h < head_end; ++h) {
    float* st = a.state + h * d * d;
    const float* q = a.q + h * d;
    const float* k = a.k + h * d;
    const float* v = a.v + h * d;
    const float* g = a.g + h * d;
    // Decay first, then u = S^T k on the decayed state (MODEL.md §3 step 4).
    std::fill(delta.begin(), delta.end(), 0.0f);
    for (size_t i = 0; i < d; ++i) {
      const float e = std::exp(g[i]);
      float* row = st + i * d;
      for (size_t j = 0; j < d; ++j) {
        row[j] *= e;
        delta[j] += row[j] * k[i];
      }
    }
    const float beta = a.beta[h];
    for (size_t j = 0; j < d; ++j) delta[j] = beta * (v[j] - delta[j]);
    // Rank-1 update, then o = S^T q read after the update.
    std::fill(o.begin(), o.end(), 0.0f);
    for (size_t i = 0; i < d; ++i) {
      float* row = st + i * d;
      for (size_t j = 0; j < d; ++j) {
        row[j] += k[i] * delta[j];
        o[j] += row[j] * q[i];
      }
    }
    std::copy(o.begin(), o.end(), a.out + h * d);
  }
}

void TransposedBooks(const LutBuildArgs& a, float* scratch, const float** out) {
  for (size_t s = 0; s < a.stages; ++s) {
    if (a.books_t != nullptr) {
      out[s] = a.books_t[s];
      continue;
    }
    float* bt = scratch + s * 8 * a.entries;
    for (size_t c = 0; c < a.entries; ++c) {
      for (size_t t = 0; t < 8; ++t) bt[t * a.entries + c] = a.books[s][c * 8 + t];
    }
    out[s] = bt;
  }
}

void LutBuildPlanesVia(LutBuildFn f32_build, const LutBuildArgs& a, size_t v_begin, size_t v_end) {
  float tmp[kLutMaxBookFloats / 8];
  LutBuildArgs one = a;
  one.planes = nullptr;
  one.table = tmp;
  const size_t per_v = a.stages * a.entries;
  for (size_t v = v_begin; v < v_end; ++v) {
    one.x = a.x + v * a.vec_dim;  // position v as position 0 of `tmp`
    f32_build(one, 0, 1);
    for (size_t i = 0; i < per_v; ++i) {
      uint32_t bits;
      std::memcpy(&bits, tmp + i, 4);
      const size_t s = i / a.entries, c = i % a.entries;
      uint8_t* p = a.planes + ((v * a.stages + s) * 4) * a.entries + c;
      for (size_t b = 0; b < 4; ++b) p[b * a.entries] = static_cast<uint8_t>(bits >> (8 * b));
    }
  }
}

void RegisterBaseline(KernelTable& t) {
  t.dot_f32 = DotF32;
  t.axpy_f32 = AxpyF32;
  t.matvec_f32 = MatVecF32;
  t.matvec_q8g = MatVecQ8G;
  t.matvec_q4g = MatVecQ4G;
  t.matvec_q3g = MatVecQ3G;
  t.matmul_f32 = MatMulF32;
  t.matmul_q8g = MatMulQ8G;
  t.matmul_q4g = MatMulQ4G;
  t.matmul_q3g = MatMulQ3G;
  t.dequant_q8g = DequantQ8G;
  t.dequant_q4g = DequantQ4G;
  t.dequant_q3g = DequantQ3G;
  t.lut_build = LutBuild;
  t.vq_apply8 = VqApply8;
  t.vq_matmul8 = VqMatMul8;
  t.vq_apply6 = VqApply6;
  t.lut_quantize = LutQuantize;
  t.kda_step = KdaStep;
  t.on_device = false;
  t.name = "CPU";
}

void SetTableName(KernelTable& table, const char* name) { table.name = name; }

void AppendTableName(KernelTable& table, const char* suffix) { table.name += suffix; }

}  // namespace waste::kernels::baseline
