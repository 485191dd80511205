// Kernels against values worked out by hand from the spec (FORMAT.md §4.4,
// §6.3, §12; MODEL.md §6.4), for every ISA, and the baseline against a
// straightforward double-precision evaluation of the same formulas.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/kernel_table.h"
#include "kernels/numerics.h"

namespace waste::kernels {
namespace {

std::vector<KernelTable> AllTables() {
  std::vector<KernelTable> out;
  for (Isa isa : SupportedIsas()) out.push_back(BuildKernelTable(isa));
  return out;
}

// ---- f16 ------------------------------------------------------------------

TEST(KnownValues, F16DecodeIncludingSubnormals) {
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(F16ToF32(0x03FF), 1023.0f * std::ldexp(1.0f, -24));
  EXPECT_EQ(F16ToF32(0x8200), -512.0f * std::ldexp(1.0f, -24));
  EXPECT_EQ(F16ToF32(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(F16ToF32(0x3C00), 1.0f);
  EXPECT_EQ(F16ToF32(0xC000), -2.0f);
  EXPECT_EQ(F16ToF32(0x7BFF), 65504.0f);
  EXPECT_EQ(F16ToF32(0x1C6C), 0.0043182373046875f);  // FORMAT.md §12
  EXPECT_EQ(F16ToF32(0x225C), 0.012420654296875f);
  EXPECT_EQ(F16ToF32(0x289E), 0.03607177734375f);
}

TEST(KnownValues, F16CodebookDecodeFlushesSubnormals) {
  EXPECT_EQ(F16ToF32FlushSubnormals(0x03FF), 0.0f);
  EXPECT_TRUE(std::signbit(F16ToF32FlushSubnormals(0x8001)));
  EXPECT_EQ(F16ToF32FlushSubnormals(0x8001), 0.0f);
  EXPECT_EQ(F16ToF32FlushSubnormals(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(F16ToF32FlushSubnormals(0xB555), F16ToF32(0xB555));
}

TEST(KnownValues, F32ToF16RoundTripsEveryFiniteHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00) == 0x7C00) continue;  // inf/NaN
    ASSERT_EQ(F32ToF16(F16ToF32(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie -> even
  EXPECT_EQ(F32ToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie -> even (up)
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -25)), 0x0000);             // tie -> even (zero)
  EXPECT_EQ(F32ToF16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7C00);
}

// ---- trunk matvec: FORMAT.md §12 worked values ------------------------------

struct OneRow {
  std::vector<uint8_t> row;
  uint16_t scale;
  size_t cols;
};

float RunMatVec(const KernelTable& t, MatVecFn fn, const OneRow& m, size_t hot) {
  std::vector<float> x(m.cols, 0.0f);
  x[hot] = 1.0f;
  float y = -1.0f;
  MatVecArgs a;
  a.weights = m.row.data();
  a.row_bytes = m.row.size();
  a.scales = &m.scale;
  a.groups = 1;
  a.group = 128;
  a.cols = m.cols;
  a.x = x.data();
  a.y = &y;
  fn(a, 0, 1);
  return y;
}

TEST(KnownValues, Q8gEmbedRow0) {
  OneRow m{std::vector<uint8_t>(128, 0), 0x1C6C, 128};
  const uint8_t head[] = {0x59, 0xE3, 0x43, 0x64};
  std::memcpy(m.row.data(), head, 4);
  for (const KernelTable& t : AllTables()) {
    EXPECT_NEAR(RunMatVec(t, t.matvec_q8g, m, 0), 0.38432312, 5e-8) << t.name;
    EXPECT_NEAR(RunMatVec(t, t.matvec_q8g, m, 1), -0.12522888, 5e-8) << t.name;
    EXPECT_EQ(RunMatVec(t, t.matvec_q8g, m, 3), 100.0f * 0.0043182373046875f) << t.name;
  }
}

TEST(KnownValues, Q4gQProjRow0) {
  OneRow m{std::vector<uint8_t>(64, 0x88), 0x225C, 128};  // 0x88 = two zeros
  m.row[0] = 0x6A;
  for (const KernelTable& t : AllTables()) {
    EXPECT_EQ(RunMatVec(t, t.matvec_q4g, m, 0), 0.02484130859375f) << t.name;
    EXPECT_EQ(RunMatVec(t, t.matvec_q4g, m, 1), -0.02484130859375f) << t.name;
    EXPECT_EQ(RunMatVec(t, t.matvec_q4g, m, 2), 0.0f) << t.name;
  }
}

// Codes u = 7,0,5,2,1,6,3,4 at bit 3i LSB-first: w = 0x8F1547 -> bytes
// 47 15 8F; element 2 straddles bytes 0 and 1, element 5 bytes 1 and 2.
TEST(KnownValues, Q3gHandPackedCodes) {
  OneRow m{std::vector<uint8_t>(128 * 3 / 8 + 1, 0x00), 0x3C00, 128};
  // Zero codes would be value -4; fill elements 8.. with code 4 (value 0):
  // code 4 repeating = bit pattern 100 100 100 ... = bytes 0x24 0x49 0x92.
  for (size_t i = 3; i + 2 < m.row.size() - 1; i += 3) {
    m.row[i] = 0x24;
    m.row[i + 1] = 0x49;
    m.row[i + 2] = 0x92;
  }
  m.row[0] = 0x47;
  m.row[1] = 0x15;
  m.row[2] = 0x8F;
  const float expected[8] = {3, -4, 1, -2, -3, 2, -1, 0};
  for (const KernelTable& t : AllTables()) {
    for (size_t i = 0; i < 8; ++i) EXPECT_EQ(RunMatVec(t, t.matvec_q3g, m, i), expected[i]) << t.name << " " << i;
    EXPECT_EQ(RunMatVec(t, t.matvec_q3g, m, 100), 0.0f) << t.name;
  }
}

// ---- VQ: FORMAT.md §12 "Decoding gate row 0, vector 0" ----------------------

TEST(KnownValues, Vq3rGateRow0Vector0) {
  const float c0[8] = {-0.06915283f, -0.09344482f, 0.28027344f, -0.23254395f,
                       -0.16625977f, -0.12854004f, 0.18444824f, 0.20410156f};
  const float c1[8] = {-0.18627930f, 0.26855469f, 0.04202271f, 0.16589355f,
                       0.25122070f,  0.20544434f, -0.12487793f, -0.03472900f};
  const float c2[8] = {0.22058105f, 0.12048340f, 0.04550171f, 0.07702637f,
                       0.26538086f, -0.27685547f, -0.05606079f, -0.09771729f};
  const double expected[8] = {-0.0012571, 0.0106626, 0.0132671, 0.0003743,
                              0.0126375, -0.0072126, 0.0001266, 0.0025847};
  std::vector<float> books[3];
  for (auto& b : books) b.assign(256 * 8, 0.5f);
  for (int t = 0; t < 8; ++t) {
    books[0][196 * 8 + t] = F16ToF32FlushSubnormals(F32ToF16(c0[t]));
    books[1][248 * 8 + t] = F16ToF32FlushSubnormals(F32ToF16(c1[t]));
    books[2][163 * 8 + t] = F16ToF32FlushSubnormals(F32ToF16(c2[t]));
  }
  const float* book_ptrs[3] = {books[0].data(), books[1].data(), books[2].data()};
  // One row, one vector position; the index region is one 64-row block.
  std::vector<uint8_t> idx(64 * 3, 0);
  idx[0] = 0xC4;
  idx[1] = 0xF8;
  idx[2] = 0xA3;
  const uint16_t scale = 0x289E;
  for (const KernelTable& k : AllTables()) {
    for (int t = 0; t < 8; ++t) {
      float x[8] = {0};
      x[t] = 1.0f;
      std::vector<float> table(3 * 256);
      LutBuildArgs lb;
      lb.x = x;
      lb.books = book_ptrs;
      lb.stages = 3;
      lb.entries = 256;
      lb.vec_dim = 8;
      lb.table = table.data();
      k.lut_build(lb, 0, 1);
      float y = 0.0f;
      VqApply8Args va;
      va.indices = idx.data();
      va.nv = 1;
      va.stages = 3;
      va.entries = 256;
      va.table = table.data();
      va.scales = &scale;
      va.y = &y;
      k.vq_apply8(va, 0, 1);
      EXPECT_NEAR(y, expected[t], 1e-7) << k.name << " t=" << t;
    }
  }
}

// (5, 63, 1, 42) packs to C5 1F A8 (FORMAT.md §6.3); row 1 of the block.
TEST(KnownValues, Vq4pPackedRun) {
  std::vector<int8_t> table(256);
  for (int s = 0; s < 4; ++s)
    for (int c = 0; c < 64; ++c) table[s * 64 + c] = static_cast<int8_t>((s * 37 + c * 3) % 255 - 127);
  const int expected_sum = table[5] + table[64 + 63] + table[128 + 1] + table[192 + 42];
  std::vector<uint8_t> idx(64 * 3, 0);
  idx[3] = 0xC5;
  idx[4] = 0x1F;
  idx[5] = 0xA8;
  const float tau = 0.25f;
  const uint16_t scales[2] = {0x3C00, 0x4000};  // 1.0, 2.0
  for (const KernelTable& k : AllTables()) {
    float y[2] = {0, 0};
    VqApply6Args a;
    a.indices = idx.data();
    a.nv = 1;
    a.table = table.data();
    a.tau = &tau;
    a.scales = scales;
    a.y = y;
    k.vq_apply6(a, 0, 2);
    EXPECT_EQ(y[1], 0.25f * static_cast<float>(expected_sum) * 2.0f) << k.name;
    EXPECT_EQ(y[0], 0.25f * static_cast<float>(table[0] + table[64] + table[128] + table[192])) << k.name;
  }
}

TEST(KnownValues, LutQuantizeRoundsHalfToEven) {
  std::vector<float> t(256, 0.0f);
  const float in[] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 126.5f, -127.4f, 3.49f};
  const int8_t want[] = {127, 0, 2, 2, 0, -2, 126, -127, 3};
  std::memcpy(t.data(), in, sizeof in);
  for (const KernelTable& k : AllTables()) {
    std::vector<int8_t> out(256, 99);
    float tau = -1.0f;
    LutQuantizeArgs a;
    a.table = t.data();
    a.nv = 1;
    a.per_v = 256;
    a.out = out.data();
    a.tau = &tau;
    k.lut_quantize(a, 0, 1);
    EXPECT_EQ(tau, 127.4f / 127.0f) << k.name;
    // m = 127.4: the tie inputs are scaled first, so check the scaled rule.
    for (size_t i = 0; i < sizeof in / sizeof in[0]; ++i) {
      const float p = in[i] * (127.0f / 127.4f);
      EXPECT_EQ(out[i], static_cast<int8_t>(std::nearbyint(p))) << k.name << " " << i;
    }
    EXPECT_EQ(out[200], 0);
    // With m = 127 exactly the scale is 1 and the ties are exact.
    std::vector<float> t2(t);
    t2[7] = -127.0f;
    a.table = t2.data();
    k.lut_quantize(a, 0, 1);
    EXPECT_EQ(tau, 1.0f) << k.name;
    for (size_t i = 0; i < sizeof in / sizeof in[0]; ++i) EXPECT_EQ(out[i], want[i]) << k.name << " " << i;
  }
}

// ---- baseline against double-precision evaluation of the spec formulas ------

TEST(BaselineVsDouble, KdaStepTwoTokens) {
  const size_t d = 8, heads = 2;
  std::mt19937 rng(7);
  auto u = [&](double lo, double hi) { return lo + (hi - lo) * (rng() / 4294967296.0); };
  std::vector<float> s(heads * d * d), q(heads * d), k(heads * d), v(heads * d), g(heads * d), beta(heads);
  for (auto& e : s) e = static_cast<float>(u(-1, 1));
  std::vector<double> sd(s.begin(), s.end());
  const KernelTable base = BuildKernelTable(Isa::kBaseline);
  for (int step = 0; step < 2; ++step) {
    for (auto* vec : {&q, &k, &v}) for (auto& e : *vec) e = static_cast<float>(u(-0.5, 0.5));
    for (auto& e : g) e = static_cast<float>(u(-0.3, 0));
    for (auto& e : beta) e = static_cast<float>(u(0, 1));
    std::vector<float> out(heads * d);
    KdaStepArgs a;
    a.state = s.data();
    a.q = q.data();
    a.k = k.data();
    a.v = v.data();
    a.g = g.data();
    a.beta = beta.data();
    a.out = out.data();
    a.dim = d;
    base.kda_step(a, 0, heads);
    for (size_t h = 0; h < heads; ++h) {
      double* S = sd.data() + h * d * d;
      for (size_t i = 0; i < d; ++i)
        for (size_t j = 0; j < d; ++j) S[i * d + j] *= std::exp(static_cast<double>(g[h * d + i]));
      std::vector<double> delta(d, 0.0);
      for (size_t j = 0; j < d; ++j) {
        double uj = 0;
        for (size_t i = 0; i < d; ++i) uj += S[i * d + j] * k[h * d + i];
        delta[j] = beta[h] * (v[h * d + j] - uj);
      }
      for (size_t i = 0; i < d; ++i)
        for (size_t j = 0; j < d; ++j) S[i * d + j] += k[h * d + i] * delta[j];
      for (size_t j = 0; j < d; ++j) {
        double o = 0;
        for (size_t i = 0; i < d; ++i) o += S[i * d + j] * q[h * d + i];
        EXPECT_NEAR(out[h * d + j], o, 1e-5) << "step " << step << " h " << h << " j " << j;
      }
    }
    for (size_t i = 0; i < s.size(); ++i) EXPECT_NEAR(s[i], sd[i], 1e-5);
  }
}

// The spec's per-row loop (MODEL.md §6.4), written out plainly; the
// baseline interleaves rows but must produce the same bits.
TEST(BaselineVsSpec, VqApply8PerRowOrder) {
  std::mt19937 rng(11);
  for (size_t stages : {2, 3, 4}) {
    const size_t rows = 129, nv = 17, entries = 256;
    std::vector<uint8_t> idx((rows + 63) / 64 * nv * 64 * stages);
    for (auto& b : idx) b = static_cast<uint8_t>(rng() >> 24);
    std::vector<float> table(nv * stages * entries);
    for (auto& e : table) e = static_cast<float>(rng() / 4294967296.0 - 0.5);
    std::vector<uint16_t> scales(rows);
    for (auto& e : scales) e = F32ToF16(static_cast<float>(0.01 + rng() / 4294967296.0));
    std::vector<float> y(rows, -1.0f);
    VqApply8Args a;
    a.indices = idx.data();
    a.nv = nv;
    a.stages = stages;
    a.entries = entries;
    a.table = table.data();
    a.scales = scales.data();
    a.y = y.data();
    const size_t begin = 5, end = 100;
    BuildKernelTable(Isa::kBaseline).vq_apply8(a, begin, end);
    for (size_t r = 0; r < rows; ++r) {
      if (r < begin || r >= end) {
        EXPECT_EQ(y[r], -1.0f) << "row outside the range was written: " << r;
        continue;
      }
      float acc = 0.0f;
      for (size_t v = 0; v < nv; ++v) {
        const uint8_t* run = idx.data() + ((r / 64 * nv + v) * 64 + r % 64) * stages;
        float sum = table[(v * stages) * entries + run[0]];
        for (size_t s = 1; s < stages; ++s) sum += table[(v * stages + s) * entries + run[s]];
        acc += sum;
      }
      EXPECT_EQ(y[r], acc * F16ToF32(scales[r])) << "stages " << stages << " row " << r;
    }
  }
}

TEST(BaselineVsDouble, MatVecQ4gWithPartialGroupAndSubnormalScale) {
  // 2 rows x 200 cols, group 128: the second group holds 72 real elements and
  // 56 padding elements that must be ignored.
  const size_t rows = 2, cols = 200, group = 128, groups = 2, rb = 128;
  std::mt19937 rng(3);
  std::vector<uint8_t> w(rows * rb);
  for (auto& b : w) b = static_cast<uint8_t>(rng() >> 24);
  const uint16_t scales[4] = {0x2E66, 0x0123 /* subnormal */, 0xA400, 0x1C00};
  std::vector<float> x(cols);
  for (auto& e : x) e = static_cast<float>(rng() / 4294967296.0 - 0.5);
  float y[2];
  MatVecArgs a;
  a.weights = w.data();
  a.row_bytes = rb;
  a.scales = scales;
  a.groups = groups;
  a.group = group;
  a.cols = cols;
  a.x = x.data();
  a.y = y;
  BuildKernelTable(Isa::kBaseline).matvec_q4g(a, 0, rows);
  for (size_t r = 0; r < rows; ++r) {
    double want = 0;
    for (size_t i = 0; i < cols; ++i) {
      const uint8_t b = w[r * rb + i / 2];
      const int q = ((i % 2) ? (b >> 4) : (b & 15)) - 8;
      want += static_cast<double>(F16ToF32(scales[r * groups + i / group])) * q * x[i];
    }
    EXPECT_NEAR(y[r], want, 1e-6 * std::fabs(want) + 1e-9) << r;
  }
}

}  // namespace
}  // namespace waste::kernels
