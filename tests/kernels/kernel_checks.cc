// Random-input comparisons of every KernelTable slot (see kernel_checks.h).
// For each case the reference table runs over the whole range once; the
// table under test runs over the whole range and again split into three
// uneven pieces, which must reproduce its own whole-range result exactly
// (results never depend on how the thread pool splits the rows).
#include "kernels/kernel_checks.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <vector>

#include "kernels/kernel_args.h"
#include "kernels/numerics.h"

namespace waste::kernels::testing {
namespace {

constexpr size_t kCols[] = {8, 120, 128, 136, 200, 256, 1000, 2304};
constexpr size_t kRows[] = {1, 7, 31, 33, 64, 65, 127, 129};

// A buffer whose last byte is followed by an unreadable page.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t bytes) : bytes_(bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t body = (bytes + page - 1) / page * page;
    map_bytes_ = body + page;
    void* p = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      std::perror("mmap");
      std::abort();
    }
    map_ = static_cast<uint8_t*>(p);
    mprotect(map_ + body, page, PROT_NONE);
    data_ = map_ + body - bytes;
  }
  ~GuardedBuffer() { munmap(map_, map_bytes_); }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  template <typename T>
  T* as() const {
    return reinterpret_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  size_t bytes_;
  size_t map_bytes_ = 0;
  uint8_t* map_ = nullptr;
  uint8_t* data_ = nullptr;
};

std::mt19937& Rng() {
  static std::mt19937 rng(12345);
  return rng;
}

// Uniform in [lo, hi) from raw mt19937 bits (the standard distributions are
// not specified bit-for-bit across library versions).
float Uniform(float lo, float hi) {
  const double u = static_cast<double>(Rng()()) / 4294967296.0;
  return static_cast<float>(lo + (hi - lo) * u);
}

void FillBytes(uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(Rng()() >> 24);
}

void FillFloats(float* p, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; ++i) p[i] = Uniform(lo, hi);
}

// Trunk scales: mostly normal f16, with a sprinkling of subnormals so the
// subnormal decode path is exercised in every ISA.
void FillScales(uint16_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    p[i] = (Rng()() % 17 == 0) ? static_cast<uint16_t>(1 + Rng()() % 1023)
                               : F32ToF16(Uniform(1e-3f, 0.05f) * ((Rng()() & 1) ? 1.0f : -1.0f));
  }
}

std::string Describe(const char* what, size_t a, size_t b, size_t c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s (%zu, %zu, %zu)", what, a, b, c);
  return buf;
}

// Compares ref/test with |t - r| <= rel * mag[i] (+ a denormal floor);
// rel = 0 demands bit-identical results.
bool Near(const float* ref, const float* test, const double* mag, size_t n, double rel,
          const std::string& where, CheckReport& rep) {
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(ref[i]) - static_cast<double>(test[i]));
    const bool ok = (rel == 0.0) ? (F32ToBits(ref[i]) == F32ToBits(test[i]) ||
                                    (ref[i] == 0.0f && test[i] == 0.0f))
                                 : (d <= rel * mag[i] + 1e-30) && std::isfinite(test[i]);
    if (!ok) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "%s: element %zu ref %.9g test %.9g (mag %.3g)", where.c_str(), i,
                    ref[i], test[i], mag ? mag[i] : 0.0);
      rep.Fail(buf);
      return false;
    }
  }
  return true;
}

bool SameBits(const float* a, const float* b, size_t n, const std::string& where, CheckReport& rep) {
  if (std::memcmp(a, b, n * sizeof(float)) == 0) return true;
  rep.Fail(where + ": split ranges changed the result");
  return false;
}

// Runs fn over [0,n) once and in three uneven pieces; returns whether the
// piecewise result equals the whole-range one. `out`/`n_out` is the output.
template <typename Fn>
bool SplitInvariant(Fn fn, size_t n, float* out, size_t n_out, const std::string& where,
                    CheckReport& rep) {
  std::fill(out, out + n_out, -7.0f);  // poison: what no call writes must stay
  fn(0, n);
  std::vector<float> whole(out, out + n_out);
  std::fill(out, out + n_out, -7.0f);
  const size_t a = n / 3, b = std::min(n, 2 * n / 3 + 1);
  fn(0, a);
  fn(a, b);
  fn(b, n);
  return SameBits(whole.data(), out, n_out, where, rep);
}

// ---- trunk matrices ---------------------------------------------------------

enum class Fmt { kF32, kQ8G, kQ4G, kQ3G };

size_t RowBytes(Fmt f, size_t cols, size_t group) {
  const size_t np = (cols + group - 1) / group * group;
  switch (f) {
    case Fmt::kF32: return 4 * cols;
    case Fmt::kQ8G: return np;
    case Fmt::kQ4G: return np / 2;
    case Fmt::kQ3G: return np * 3 / 8 + 1;
  }
  return 0;
}

int ElementValue(Fmt f, const uint8_t* row, size_t i) {
  switch (f) {
    case Fmt::kQ8G: return static_cast<int8_t>(row[i]);
    case Fmt::kQ4G: return static_cast<int>((i & 1) ? (row[i / 2] >> 4) : (row[i / 2] & 15)) - 8;
    case Fmt::kQ3G: return Q3gValue(row, i);
    case Fmt::kF32: break;
  }
  return 0;
}

struct Trunk {
  Fmt fmt;
  size_t rows, cols, group, groups, row_bytes;
  GuardedBuffer weights, scales;
  Trunk(Fmt f, size_t r, size_t c, size_t g)
      : fmt(f), rows(r), cols(c), group(g), groups((c + g - 1) / g), row_bytes(RowBytes(f, c, g)),
        weights(r * row_bytes), scales(f == Fmt::kF32 ? 2 : 2 * r * groups) {
    if (f == Fmt::kF32) {
      FillFloats(weights.as<float>(), r * c, -1.0f, 1.0f);
    } else {
      FillBytes(weights.as<uint8_t>(), weights.bytes());  // padding and guard bytes random too
      FillScales(scales.as<uint16_t>(), r * groups);
    }
  }
  MatVecArgs Args() const {
    MatVecArgs a;
    a.weights = weights.as<uint8_t>();
    a.row_bytes = row_bytes;
    a.scales = scales.as<uint16_t>();
    a.groups = groups;
    a.group = group;
    a.cols = cols;
    return a;
  }
  double W(size_t r, size_t i) const {  // dequantised, for magnitudes
    const uint8_t* row = weights.as<uint8_t>() + r * row_bytes;
    if (fmt == Fmt::kF32) return reinterpret_cast<const float*>(row)[i];
    return ElementValue(fmt, row, i) * static_cast<double>(F16ToF32(scales.as<uint16_t>()[r * groups + i / group]));
  }
};

MatVecFn MatVecSlot(const KernelTable& t, Fmt f) {
  switch (f) {
    case Fmt::kF32: return t.matvec_f32;
    case Fmt::kQ8G: return t.matvec_q8g;
    case Fmt::kQ4G: return t.matvec_q4g;
    case Fmt::kQ3G: return t.matvec_q3g;
  }
  return nullptr;
}

MatMulFn MatMulSlot(const KernelTable& t, Fmt f) {
  switch (f) {
    case Fmt::kF32: return t.matmul_f32;
    case Fmt::kQ8G: return t.matmul_q8g;
    case Fmt::kQ4G: return t.matmul_q4g;
    case Fmt::kQ3G: return t.matmul_q3g;
  }
  return nullptr;
}

// (cols, rows, group) cases: every cols x rows at group 128, plus smaller
// groups (fast paths and fallbacks) at a few shapes.
struct Shape {
  size_t cols, rows, group;
};

std::vector<Shape> TrunkShapes() {
  std::vector<Shape> s;
  for (size_t c : kCols)
    for (size_t r : kRows) s.push_back({c, r, 128});
  for (size_t g : {8, 24, 32, 64}) {
    s.push_back({200, 33, g});
    s.push_back({1000, 7, g});
  }
  return s;
}

void CheckMatVec(const KernelTable& ref, const KernelTable& test, Fmt fmt, const char* name,
                 CheckReport& rep) {
  for (const Shape& sh : TrunkShapes()) {
    Trunk m(fmt, sh.rows, sh.cols, sh.group);
    GuardedBuffer xb(4 * sh.cols);
    float* x = xb.as<float>();
    FillFloats(x, sh.cols, -1.0f, 1.0f);
    std::vector<float> yr(sh.rows), yt(sh.rows);
    std::vector<double> mag(sh.rows, 0.0);
    for (size_t r = 0; r < sh.rows; ++r)
      for (size_t i = 0; i < sh.cols; ++i) mag[r] += std::fabs(m.W(r, i) * x[i]);
    MatVecArgs a = m.Args();
    a.x = x;
    a.y = yr.data();
    MatVecSlot(ref, fmt)(a, 0, sh.rows);
    a.y = yt.data();
    const std::string where = Describe(name, sh.cols, sh.rows, sh.group);
    ++rep.cases;
    if (!SplitInvariant([&](size_t b, size_t e) { MatVecSlot(test, fmt)(a, b, e); }, sh.rows,
                        yt.data(), sh.rows, where, rep)) {
      continue;
    }
    Near(yr.data(), yt.data(), mag.data(), sh.rows, kSumRelTol, where, rep);
  }
}

void CheckMatMul(const KernelTable& ref, const KernelTable& test, Fmt fmt, const char* name,
                 CheckReport& rep) {
  const Shape shapes[] = {{8, 7, 128}, {120, 33, 128}, {136, 65, 128}, {200, 31, 128},
                          {1000, 129, 128}, {2304, 64, 128}, {200, 33, 32}, {1000, 7, 8}};
  for (const Shape& sh : shapes) {
    for (size_t tokens : {1, 2, 3, 4, 5, 9, 12, 13, 30}) {
      Trunk m(fmt, sh.rows, sh.cols, sh.group);
      const size_t x_stride = sh.cols + 3, y_stride = sh.rows + 5;
      GuardedBuffer xb(4 * x_stride * tokens);
      float* x = xb.as<float>();
      FillFloats(x, x_stride * tokens, -1.0f, 1.0f);
      // Both start poisoned (-7): the padding between rows (y_stride > rows)
      // must come back untouched, which the comparison below then covers.
      std::vector<float> yr(y_stride * tokens, -7.0f), yt(y_stride * tokens, -7.0f);
      std::vector<double> mag(y_stride * tokens, 0.0);
      for (size_t t = 0; t < tokens; ++t)
        for (size_t r = 0; r < sh.rows; ++r)
          for (size_t i = 0; i < sh.cols; ++i)
            mag[t * y_stride + r] += std::fabs(m.W(r, i) * x[t * x_stride + i]);
      MatMulArgs a;
      a.w = m.Args();
      a.tokens = tokens;
      a.x = x;
      a.x_stride = x_stride;
      a.y_stride = y_stride;
      a.y = yr.data();
      MatMulSlot(ref, fmt)(a, 0, sh.rows);
      a.y = yt.data();
      const std::string where = Describe(name, sh.cols, sh.rows, tokens);
      ++rep.cases;
      if (!SplitInvariant([&](size_t b, size_t e) { MatMulSlot(test, fmt)(a, b, e); }, sh.rows,
                          yt.data(), yt.size(), where, rep)) {
        continue;
      }
      Near(yr.data(), yt.data(), mag.data(), yr.size(), kSumRelTol, where, rep);
    }
  }
}

DequantFn DequantSlot(const KernelTable& t, Fmt f) {
  switch (f) {
    case Fmt::kQ8G: return t.dequant_q8g;
    case Fmt::kQ4G: return t.dequant_q4g;
    case Fmt::kQ3G: return t.dequant_q3g;
    case Fmt::kF32: break;
  }
  return nullptr;
}

// Row dequantisation: bit-identical (one rounding of q * s per element).
void CheckDequant(const KernelTable& ref, const KernelTable& test, Fmt fmt, const char* name,
                  CheckReport& rep) {
  const Shape shapes[] = {{8, 7, 128}, {120, 33, 128}, {136, 65, 128}, {200, 31, 128},
                          {512, 129, 128}, {2304, 64, 128}, {200, 33, 32}, {1000, 7, 8}};
  for (const Shape& sh : shapes) {
    Trunk m(fmt, sh.rows, sh.cols, sh.group);
    const size_t stride = sh.cols + 5;
    std::vector<float> outr(stride * sh.rows, -7.0f), outt(stride * sh.rows, -7.0f);
    DequantArgs a;
    a.w = m.Args();
    a.out_stride = stride;
    a.out = outr.data();
    DequantSlot(ref, fmt)(a, 0, sh.rows);
    a.out = outt.data();
    const std::string where = Describe(name, sh.cols, sh.rows, sh.group);
    ++rep.cases;
    if (SplitInvariant([&](size_t b, size_t e) { DequantSlot(test, fmt)(a, b, e); }, sh.rows,
                       outt.data(), outt.size(), where, rep)) {
      Near(outr.data(), outt.data(), nullptr, outr.size(), 0.0, where, rep);
    }
  }
}

// ---- small vector ops ---------------------------------------------------------

void CheckDot(const KernelTable& ref, const KernelTable& test, CheckReport& rep) {
  for (size_t n : {0, 1, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 100, 1000, 2304, 4099}) {
    GuardedBuffer ab(4 * n + 4), bb(4 * n + 4);
    float* a = ab.as<float>() + 1;  // end exactly at the guard page
    float* b = bb.as<float>() + 1;
    FillFloats(a, n, -1.0f, 1.0f);
    FillFloats(b, n, -1.0f, 1.0f);
    double mag = 0.0;
    for (size_t i = 0; i < n; ++i) mag += std::fabs(static_cast<double>(a[i]) * b[i]);
    const float r = ref.dot_f32(a, b, n), t = test.dot_f32(a, b, n);
    ++rep.cases;
    Near(&r, &t, &mag, 1, kSumRelTol, Describe("dot_f32", n, 0), rep);
  }
}

void CheckAxpy(const KernelTable& ref, const KernelTable& test, CheckReport& rep) {
  for (size_t n : {0, 1, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 100, 1000, 2304, 4099}) {
    GuardedBuffer xb(4 * n + 4), yb(4 * n + 4);
    float* x = xb.as<float>() + 1;
    float* y = yb.as<float>() + 1;
    FillFloats(x, n, -1.0f, 1.0f);
    FillFloats(y, n, -1.0f, 1.0f);
    std::vector<float> yr(y, y + n);
    const float alpha = Uniform(-2.0f, 2.0f);
    ref.axpy_f32(alpha, x, yr.data(), n);
    test.axpy_f32(alpha, x, y, n);
    ++rep.cases;
    Near(yr.data(), y, nullptr, n, 0.0, Describe("axpy_f32 (bit-identical)", n, 0), rep);
  }
}

// ---- VQ tables and applies ---------------------------------------------------

// Byte-plane tables (LutBuildArgs::planes) to and from f32 [nv][stages][entries].
void PlanesToFloats(const uint8_t* planes, size_t nv, size_t stages, size_t entries, float* out) {
  for (size_t vs = 0; vs < nv * stages; ++vs) {
    for (size_t c = 0; c < entries; ++c) {
      uint32_t bits = 0;
      for (size_t b = 0; b < 4; ++b) bits |= uint32_t{planes[(vs * 4 + b) * entries + c]} << (8 * b);
      out[vs * entries + c] = BitsToF32(bits);
    }
  }
}

void FloatsToPlanes(const float* t, size_t nv, size_t stages, size_t entries, uint8_t* planes) {
  for (size_t vs = 0; vs < nv * stages; ++vs) {
    for (size_t c = 0; c < entries; ++c) {
      const uint32_t bits = F32ToBits(t[vs * entries + c]);
      for (size_t b = 0; b < 4; ++b) planes[(vs * 4 + b) * entries + c] = static_cast<uint8_t>(bits >> (8 * b));
    }
  }
}

void CheckLutBuild(const KernelTable& ref, const KernelTable& test, CheckReport& rep) {
  struct Case {
    size_t stages, entries, vec_dim;
  };
  const Case cases[] = {{3, 256, 8}, {2, 256, 8}, {4, 64, 8}, {3, 16, 8}, {2, 256, 4}, {3, 24, 8}};
  for (const Case& c : cases) {
    for (size_t nv : {1, 15, 16, 17, 33, 288}) {
      std::vector<GuardedBuffer*> owned;
      std::vector<const float*> books;
      for (size_t s = 0; s < c.stages; ++s) {
        owned.push_back(new GuardedBuffer(4 * c.entries * c.vec_dim));
        float* b = owned.back()->as<float>();
        // Codebooks arrive as flushed f16 in the engine; use f16-exact values.
        for (size_t i = 0; i < c.entries * c.vec_dim; ++i) {
          b[i] = F16ToF32FlushSubnormals(F32ToF16(Uniform(-0.3f, 0.3f)));
        }
        books.push_back(b);
      }
      GuardedBuffer xb(4 * nv * c.vec_dim);
      float* x = xb.as<float>();
      FillFloats(x, nv * c.vec_dim, -2.0f, 2.0f);
      const size_t n_out = nv * c.stages * c.entries;
      std::vector<float> tr(n_out), tt(n_out);
      std::vector<double> mag(n_out, 0.0);
      for (size_t v = 0; v < nv; ++v)
        for (size_t s = 0; s < c.stages; ++s)
          for (size_t e = 0; e < c.entries; ++e)
            for (size_t t = 0; t < c.vec_dim; ++t)
              mag[(v * c.stages + s) * c.entries + e] +=
                  std::fabs(static_cast<double>(x[v * c.vec_dim + t]) * books[s][e * c.vec_dim + t]);
      LutBuildArgs a;
      a.x = x;
      a.books = books.data();
      a.stages = c.stages;
      a.entries = c.entries;
      a.vec_dim = c.vec_dim;
      a.table = tr.data();
      ref.lut_build(a, 0, nv);
      a.table = tt.data();
      const std::string where = Describe("lut_build", c.stages * 1000 + c.entries, nv, c.vec_dim);
      ++rep.cases;
      if (SplitInvariant([&](size_t b, size_t e) { test.lut_build(a, b, e); }, nv, tt.data(), n_out,
                         where, rep)) {
        Near(tr.data(), tt.data(), mag.data(), n_out, kSumRelTol, where, rep);
      }
      // Caller-transposed books (books_t): the same bits as without them.
      {
        std::vector<std::vector<float>> bt(c.stages);
        std::vector<const float*> btp;
        for (size_t s = 0; s < c.stages; ++s) {
          bt[s].resize(c.entries * c.vec_dim);
          for (size_t e = 0; e < c.entries; ++e)
            for (size_t t = 0; t < c.vec_dim; ++t) bt[s][t * c.entries + e] = books[s][e * c.vec_dim + t];
          btp.push_back(bt[s].data());
        }
        std::vector<float> tb(n_out, -7.0f);
        LutBuildArgs ta = a;
        ta.books_t = btp.data();
        ta.table = tb.data();
        test.lut_build(ta, 0, nv);
        ++rep.cases;
        Near(tt.data(), tb.data(), nullptr, n_out, 0.0,
             Describe("lut_build books_t", c.stages * 1000 + c.entries, nv, c.vec_dim), rep);
      }
      // Byte-plane output: the same values (as the same kernel's f32
      // output, bit for bit), and `table` untouched.
      {
        GuardedBuffer pb(4 * n_out);
        std::vector<float> tf(tt), tp(n_out);
        LutBuildArgs pa = a;
        pa.table = nullptr;
        pa.planes = pb.as<uint8_t>();
        const std::string pw = Describe("lut_build planes", c.stages * 1000 + c.entries, nv, c.vec_dim);
        ++rep.cases;
        auto run = [&](size_t b, size_t e) {
          test.lut_build(pa, b, e);
          PlanesToFloats(pb.as<uint8_t>(), nv, c.stages, c.entries, tp.data());
        };
        std::fill(pb.as<uint8_t>(), pb.as<uint8_t>() + 4 * n_out, 0xA5);
        test.lut_build(pa, 0, nv);
        PlanesToFloats(pb.as<uint8_t>(), nv, c.stages, c.entries, tp.data());
        std::vector<float> whole(tp);
        std::fill(pb.as<uint8_t>(), pb.as<uint8_t>() + 4 * n_out, 0xA5);
        const size_t s1 = nv / 3, s2 = std::min(nv, 2 * nv / 3 + 1);
        run(0, s1);
        run(s1, s2);
        run(s2, nv);
        if (SameBits(whole.data(), tp.data(), n_out, pw, rep)) {
          Near(tf.data(), tp.data(), nullptr, n_out, 0.0, pw + " vs f32 output", rep);
        }
      }
      for (GuardedBuffer* g : owned) delete g;
    }
  }
}

struct VqMatrix {
  size_t rows, nv, run;
  GuardedBuffer indices, scales;
  VqMatrix(size_t r, size_t n, size_t rl)
      : rows(r), nv(n), run(rl), indices((r + 63) / 64 * n * 64 * rl), scales(2 * r) {
    FillBytes(indices.as<uint8_t>(), indices.bytes());  // padding rows random too
    uint16_t* s = scales.as<uint16_t>();
    for (size_t i = 0; i < r; ++i) s[i] = F32ToF16(Uniform(0.01f, 0.2f));
  }
};

// The shared sizes plus what the tiled VQ kernels add: 264 columns (33
// vector positions, one past a 32-position table tile) and 1089 rows (17
// blocks, one past a 16-block super-chunk, and a partial last block).
std::vector<size_t> VqCols() {
  std::vector<size_t> c(std::begin(kCols), std::end(kCols));
  c.push_back(264);
  return c;
}
std::vector<size_t> VqRows(size_t cols) {
  std::vector<size_t> r(std::begin(kRows), std::end(kRows));
  if (cols == 264 || cols == 2304) r.push_back(1089);
  return r;
}

void CheckVqApply8(const KernelTable& ref, const KernelTable& test, CheckReport& rep) {
  for (size_t stages : {3, 2}) {
    for (size_t cols : VqCols()) {
      for (size_t rows : VqRows(cols)) {
        const size_t nv = cols / 8;
        VqMatrix m(rows, nv, stages);
        GuardedBuffer tb(4 * nv * stages * 256);
        FillFloats(tb.as<float>(), nv * stages * 256, -1.0f, 1.0f);
        std::vector<float> yr(rows), yt(rows);
        VqApply8Args a;
        a.indices = m.indices.as<uint8_t>();
        a.nv = nv;
        a.stages = stages;
        a.entries = 256;
        a.table = tb.as<float>();
        a.scales = m.scales.as<uint16_t>();
        a.y = yr.data();
        ref.vq_apply8(a, 0, rows);
        a.y = yt.data();
        const std::string where = Describe("vq_apply8 (bit-identical)", stages, nv, rows);
        ++rep.cases;
        if (SplitInvariant([&](size_t b, size_t e) { test.vq_apply8(a, b, e); }, rows, yt.data(),
                           rows, where, rep)) {
          Near(yr.data(), yt.data(), nullptr, rows, 0.0, where, rep);
        }
        // The same table as byte planes.
        GuardedBuffer pb(4 * nv * stages * 256);
        FloatsToPlanes(tb.as<float>(), nv, stages, 256, pb.as<uint8_t>());
        VqApply8Args pa = a;
        pa.table = nullptr;
        pa.planes = pb.as<uint8_t>();
        const std::string pw = Describe("vq_apply8 planes (bit-identical)", stages, nv, rows);
        ++rep.cases;
        if (SplitInvariant([&](size_t b, size_t e) { test.vq_apply8(pa, b, e); }, rows, yt.data(),
                           rows, pw, rep)) {
          Near(yr.data(), yt.data(), nullptr, rows, 0.0, pw, rep);
        }
        // Batched: three inputs sharing the indices (one of them the table
        // above), as f32 tables and as planes; each must equal its single run.
        if (cols == 2304 || cols == 136 || rows == 65 || rows == 1089) {
          constexpr size_t kIn = 3;
          std::vector<GuardedBuffer*> tabs, pls;
          std::vector<const float*> tptr;
          std::vector<const uint8_t*> pptr;
          std::vector<std::vector<float>> want(kIn, std::vector<float>(rows)), got(kIn, std::vector<float>(rows));
          std::vector<float*> yptr;
          for (size_t i = 0; i < kIn; ++i) {
            tabs.push_back(new GuardedBuffer(4 * nv * stages * 256));
            pls.push_back(new GuardedBuffer(4 * nv * stages * 256));
            FillFloats(tabs.back()->as<float>(), nv * stages * 256, -1.0f, 1.0f);
            FloatsToPlanes(tabs.back()->as<float>(), nv, stages, 256, pls.back()->as<uint8_t>());
            tptr.push_back(tabs.back()->as<float>());
            pptr.push_back(pls.back()->as<uint8_t>());
            yptr.push_back(got[i].data());
            VqApply8Args one = a;
            one.table = tptr.back();
            one.y = want[i].data();
            ref.vq_apply8(one, 0, rows);
          }
          for (int planes = 0; planes < 2; ++planes) {
            VqApply8Args ba = a;
            ba.table = nullptr;
            ba.y = nullptr;
            ba.count = kIn;
            ba.tables = planes ? nullptr : tptr.data();
            ba.plane_sets = planes ? pptr.data() : nullptr;
            ba.ys = yptr.data();
            for (auto& g : got) std::fill(g.begin(), g.end(), -7.0f);
            const size_t s1 = rows / 3, s2 = std::min(rows, 2 * rows / 3 + 1);
            test.vq_apply8(ba, 0, s1);
            test.vq_apply8(ba, s1, s2);
            test.vq_apply8(ba, s2, rows);
            for (size_t i = 0; i < kIn; ++i) {
              ++rep.cases;
              Near(want[i].data(), got[i].data(), nullptr, rows, 0.0,
                   Describe(planes ? "vq_apply8 batched planes" : "vq_apply8 batched", stages, nv, rows), rep);
            }
          }
          for (GuardedBuffer* g : tabs) delete g;
          for (GuardedBuffer* g : pls) delete g;
        }
      }
    }
  }
}

// vq_matmul8 against its definition evaluated in double (the decoded weight
// itself rounded as defined, in f32), for the reference table and the tested
// one, and split-invariant for every input.
void CheckVqMatMul8(const KernelTable& ref, const KernelTable& test, CheckReport& rep) {
  for (size_t stages : {3, 2}) {
    for (size_t cols : VqCols()) {
      for (size_t rows : {size_t{1}, size_t{7}, size_t{33}, size_t{65}, size_t{129}}) {
        const size_t nv = cols / 8;
        VqMatrix m(rows, nv, stages);
        std::vector<GuardedBuffer*> owned;
        const float* books[3] = {};
        for (size_t s = 0; s < stages; ++s) {
          owned.push_back(new GuardedBuffer(4 * 256 * 8));
          FillFloats(owned.back()->as<float>(), 256 * 8, -1.0f, 1.0f);
          books[s] = owned.back()->as<float>();
        }
        for (size_t count : {1, 3, 5, 9}) {
          std::vector<std::vector<float>> x(count, std::vector<float>(cols));
          for (auto& xi : x) FillFloats(xi.data(), cols, -1.0f, 1.0f);
          std::vector<float> want(count * rows);
          std::vector<double> mag(count * rows, 0.0);
          const uint8_t* idx = m.indices.as<uint8_t>();
          const uint16_t* sc = m.scales.as<uint16_t>();
          for (size_t t = 0; t < count; ++t) {
            for (size_t r = 0; r < rows; ++r) {
              double acc = 0.0, a = 0.0;
              for (size_t v = 0; v < nv; ++v) {
                const uint8_t* p = idx + VqRunOffset(r, v, nv, stages);
                for (size_t d = 0; d < 8; ++d) {
                  float w = books[0][p[0] * 8 + d];
                  for (size_t s = 1; s < stages; ++s) w += books[s][p[s] * 8 + d];
                  acc += static_cast<double>(w) * x[t][v * 8 + d];
                  a += std::fabs(static_cast<double>(w) * x[t][v * 8 + d]);
                }
              }
              const double scale = F16ToF32(sc[r]);
              want[t * rows + r] = static_cast<float>(acc * scale);
              mag[t * rows + r] = a * scale;
            }
          }
          VqMatMul8Args args;
          args.indices = idx;
          args.nv = nv;
          args.stages = stages;
          args.entries = 256;
          args.books = books;
          args.scales = sc;
          args.count = count;
          std::vector<const float*> xs;
          for (auto& xi : x) xs.push_back(xi.data());
          args.xs = xs.data();
          for (const KernelTable* kt : {&ref, &test}) {
            std::vector<float> whole(count * rows, -7.0f), split(count * rows, -7.0f);
            std::vector<float*> ys;
            for (size_t t = 0; t < count; ++t) ys.push_back(whole.data() + t * rows);
            args.ys = ys.data();
            kt->vq_matmul8(args, 0, rows);
            const std::string where = Describe(kt == &ref ? "vq_matmul8 (reference table)" : "vq_matmul8", stages, nv, rows) +
                                      " x" + std::to_string(count);
            ++rep.cases;
            if (!Near(want.data(), whole.data(), mag.data(), want.size(), kSumRelTol, where, rep)) continue;
            for (size_t t = 0; t < count; ++t) ys[t] = split.data() + t * rows;
            const size_t s1 = rows / 3, s2 = std::min(rows, 2 * rows / 3 + 1);
            kt->vq_matmul8(args, 0, s1);
            kt->vq_matmul8(args, s1, s2);
            kt->vq_matmul8(args, s2, rows);
            SameBits(whole.data(), split.data(), whole.size(), where, rep);
          }
        }
        for (GuardedBuffer* g : owned) delete g;
      }
    }
  }
}

void CheckVqApply6(const KernelTable& ref, const KernelTable& test, CheckReport& rep) {
  for (size_t cols : kCols) {
    for (size_t rows : kRows) {
      const size_t nv = cols / 8, nb = (nv + 31) / 32;
      VqMatrix m(rows, nv, 3);
      GuardedBuffer tb(nv * 256), taub(4 * nb);
      FillBytes(tb.as<uint8_t>(), nv * 256);
      int8_t* tq = tb.as<int8_t>();
      for (size_t i = 0; i < nv * 256; ++i) {
        if (tq[i] == -128) tq[i] = -127;  // lut_quantize never writes -128
      }
      FillFloats(taub.as<float>(), nb, 1e-4f, 1e-2f);
      std::vector<float> yr(rows), yt(rows);
      VqApply6Args a;
      a.indices = m.indices.as<uint8_t>();
      a.nv = nv;
      a.table = tq;
      a.tau = taub.as<float>();
      a.scales = m.scales.as<uint16_t>();
      a.y = yr.data();
      ref.vq_apply6(a, 0, rows);
      a.y = yt.data();
      const std::string where = Describe("vq_apply6 (bit-identical)", nv, rows);
      ++rep.cases;
      if (SplitInvariant([&](size_t b, size_t e) { test.vq_apply6(a, b, e); }, rows, yt.data(), rows,
                         where, rep)) {
        Near(yr.data(), yt.data(), nullptr, rows, 0.0, where, rep);
      }
    }
  }
}

void CheckLutQuantize(const KernelTable& ref, const KernelTable& test, CheckReport& rep) {
  for (size_t per_v : {256, 192}) {
    for (size_t nv : {1, 31, 32, 33, 64, 65, 288}) {
      const size_t n = nv * per_v, nb = (nv + 31) / 32;
      GuardedBuffer tb(4 * n);
      float* t = tb.as<float>();
      FillFloats(t, n, -3.0f, 3.0f);
      // Block 1 (if any) all zero: tau 0 and all-zero bytes.
      for (size_t i = 32 * per_v; i < std::min(n, 64 * per_v); ++i) t[i] = 0.0f;
      // Exact ties in block 0: m = 127 makes 127/m = 1, so k + 0.5 must round to even.
      if (n >= 8) {
        t[0] = 127.0f;
        t[1] = 0.5f;
        t[2] = 1.5f;
        t[3] = 2.5f;
        t[4] = -0.5f;
        t[5] = -2.5f;
        t[6] = 126.5f;
        t[7] = -127.0f;
        for (size_t i = 8; i < std::min(n, 32 * per_v); ++i) t[i] = std::round(t[i]) + 0.5f;
      }
      std::vector<int8_t> qr(n), qt(n);
      std::vector<float> taur(nb), taut(nb);
      LutQuantizeArgs a;
      a.table = t;
      a.nv = nv;
      a.per_v = per_v;
      a.out = qr.data();
      a.tau = taur.data();
      ref.lut_quantize(a, 0, nb);
      a.out = qt.data();
      a.tau = taut.data();
      const size_t split = nb / 2;
      test.lut_quantize(a, 0, split);
      test.lut_quantize(a, split, nb);
      ++rep.cases;
      const std::string where = Describe("lut_quantize (bit-identical)", per_v, nv);
      if (std::memcmp(qr.data(), qt.data(), n) != 0) {
        rep.Fail(where + ": int8 tables differ");
      } else {
        Near(taur.data(), taut.data(), nullptr, nb, 0.0, where + " tau", rep);
      }
    }
  }
}

void CheckKdaStep(const KernelTable& ref, const KernelTable& test, CheckReport& rep) {
  for (size_t dim : {16, 32, 40, 64, 128}) {
    for (size_t heads : {1, 3, 5}) {
      const size_t hd = heads * dim;
      GuardedBuffer qb(4 * hd), kb(4 * hd), vb(4 * hd), gb(4 * hd), bb(4 * heads);
      FillFloats(qb.as<float>(), hd, -0.1f, 0.1f);
      FillFloats(kb.as<float>(), hd, -0.2f, 0.2f);
      FillFloats(vb.as<float>(), hd, -1.0f, 1.0f);
      FillFloats(gb.as<float>(), hd, -0.5f, 0.0f);
      FillFloats(bb.as<float>(), heads, 0.0f, 1.0f);
      std::vector<float> s0(hd * dim);
      FillFloats(s0.data(), s0.size(), -1.0f, 1.0f);
      std::vector<float> sr = s0, st = s0, outr(hd), outt(hd);
      KdaStepArgs a;
      a.q = qb.as<float>();
      a.k = kb.as<float>();
      a.v = vb.as<float>();
      a.g = gb.as<float>();
      a.beta = bb.as<float>();
      a.dim = dim;
      // Two steps, so the second starts from the state the first wrote.
      for (int step = 0; step < 2; ++step) {
        a.state = sr.data();
        a.out = outr.data();
        ref.kda_step(a, 0, heads);
        a.state = st.data();
        a.out = outt.data();
        const size_t split = heads / 2;
        test.kda_step(a, 0, split);
        test.kda_step(a, split, heads);
      }
      ++rep.cases;
      const std::string where = Describe("kda_step (bit-identical)", dim, heads);
      if (Near(sr.data(), st.data(), nullptr, sr.size(), 0.0, where + " state", rep)) {
        Near(outr.data(), outt.data(), nullptr, hd, 0.0, where + " out", rep);
      }
    }
  }
}


}  // namespace

void CheckFewTokenMatMulEqualsMatVec(const KernelTable& t, CheckReport& rep) {
  struct Case {
    Fmt fmt;
    size_t rows, cols, group;
  };
  const Case cases[] = {{Fmt::kQ4G, 7, 128, 128},   {Fmt::kQ4G, 33, 2304, 128},
                        {Fmt::kQ4G, 9, 1000, 128},  {Fmt::kQ8G, 7, 128, 128},
                        {Fmt::kQ8G, 33, 2304, 128}, {Fmt::kQ8G, 9, 1000, 32},
                        {Fmt::kQ8G, 5, 200, 64}};
  for (const Case& c : cases) {
    for (size_t tokens = 1; tokens < 12; ++tokens) {
      Trunk m(c.fmt, c.rows, c.cols, c.group);
      const size_t x_stride = c.cols + 3, y_stride = c.rows + 5;
      GuardedBuffer xb(4 * x_stride * tokens);
      float* x = xb.as<float>();
      FillFloats(x, x_stride * tokens, -1.0f, 1.0f);
      std::vector<float> ymm(y_stride * tokens, -7.0f);
      MatMulArgs a;
      a.w = m.Args();
      a.tokens = tokens;
      a.x = x;
      a.x_stride = x_stride;
      a.y = ymm.data();
      a.y_stride = y_stride;
      MatMulSlot(t, c.fmt)(a, 0, c.rows);
      for (size_t tok = 0; tok < tokens; ++tok) {
        std::vector<float> yv(c.rows, -7.0f);
        MatVecArgs v = m.Args();
        v.x = x + tok * x_stride;
        v.y = yv.data();
        MatVecSlot(t, c.fmt)(v, 0, c.rows);
        ++rep.cases;
        Near(yv.data(), ymm.data() + tok * y_stride, nullptr, c.rows, 0.0,
             Describe(c.fmt == Fmt::kQ4G ? "few-token matmul_q4g vs matvec"
                                         : "few-token matmul_q8g vs matvec",
                      c.cols, c.rows, tokens),
             rep);
      }
    }
  }
}

void CheckReport::Fail(const std::string& what) {
  ++failed;
  if (failures.size() < 8) failures.push_back(what);
}

const std::vector<SlotCheck>& AllSlotChecks() {
  static const std::vector<SlotCheck> checks = {
      {"dot_f32", CheckDot, [](const KernelTable& r, const KernelTable& t) { return r.dot_f32 != t.dot_f32; }},
      {"axpy_f32", CheckAxpy, [](const KernelTable& r, const KernelTable& t) { return r.axpy_f32 != t.axpy_f32; }},
      {"matvec_f32", [](const KernelTable& r, const KernelTable& t, CheckReport& p) { CheckMatVec(r, t, Fmt::kF32, "matvec_f32", p); },
       [](const KernelTable& r, const KernelTable& t) { return r.matvec_f32 != t.matvec_f32; }},
      {"matvec_q8g", [](const KernelTable& r, const KernelTable& t, CheckReport& p) { CheckMatVec(r, t, Fmt::kQ8G, "matvec_q8g", p); },
       [](const KernelTable& r, const KernelTable& t) { return r.matvec_q8g != t.matvec_q8g; }},
      {"matvec_q4g", [](const KernelTable& r, const KernelTable& t, CheckReport& p) { CheckMatVec(r, t, Fmt::kQ4G, "matvec_q4g", p); },
       [](const KernelTable& r, const KernelTable& t) { return r.matvec_q4g != t.matvec_q4g; }},
      {"matvec_q3g", [](const KernelTable& r, const KernelTable& t, CheckReport& p) { CheckMatVec(r, t, Fmt::kQ3G, "matvec_q3g", p); },
       [](const KernelTable& r, const KernelTable& t) { return r.matvec_q3g != t.matvec_q3g; }},
      {"matmul_f32", [](const KernelTable& r, const KernelTable& t, CheckReport& p) { CheckMatMul(r, t, Fmt::kF32, "matmul_f32", p); },
       [](const KernelTable& r, const KernelTable& t) { return r.matmul_f32 != t.matmul_f32; }},
      {"matmul_q8g", [](const KernelTable& r, const KernelTable& t, CheckReport& p) { CheckMatMul(r, t, Fmt::kQ8G, "matmul_q8g", p); },
       [](const KernelTable& r, const KernelTable& t) { return r.matmul_q8g != t.matmul_q8g; }},
      {"matmul_q4g", [](const KernelTable& r, const KernelTable& t, CheckReport& p) { CheckMatMul(r, t, Fmt::kQ4G, "matmul_q4g", p); },
       [](const KernelTable& r, const KernelTable& t) { return r.matmul_q4g != t.matmul_q4g; }},
      {"matmul_q3g", [](const KernelTable& r, const KernelTable& t, CheckReport& p) { CheckMatMul(r, t, Fmt::kQ3G, "matmul_q3g", p); },
       [](const KernelTable& r, const KernelTable& t) { return r.matmul_q3g != t.matmul_q3g; }},
      {"dequant_q8g", [](const KernelTable& r, const KernelTable& t, CheckReport& p) { CheckDequant(r, t, Fmt::kQ8G, "dequant_q8g", p); },
       [](const KernelTable& r, const KernelTable& t) { return r.dequant_q8g != t.dequant_q8g; }},
      {"dequant_q4g", [](const KernelTable& r, const KernelTable& t, CheckReport& p) { CheckDequant(r, t, Fmt::kQ4G, "dequant_q4g", p); },
       [](const KernelTable& r, const KernelTable& t) { return r.dequant_q4g != t.dequant_q4g; }},
      {"dequant_q3g", [](const KernelTable& r, const KernelTable& t, CheckReport& p) { CheckDequant(r, t, Fmt::kQ3G, "dequant_q3g", p); },
       [](const KernelTable& r, const KernelTable& t) { return r.dequant_q3g != t.dequant_q3g; }},
      {"lut_build", CheckLutBuild, [](const KernelTable& r, const KernelTable& t) { return r.lut_build != t.lut_build; }},
      {"vq_apply8", CheckVqApply8, [](const KernelTable& r, const KernelTable& t) { return r.vq_apply8 != t.vq_apply8; }},
      {"vq_matmul8", CheckVqMatMul8, [](const KernelTable& r, const KernelTable& t) { return r.vq_matmul8 != t.vq_matmul8; }},
      {"vq_apply6", CheckVqApply6, [](const KernelTable& r, const KernelTable& t) { return r.vq_apply6 != t.vq_apply6; }},
      {"lut_quantize", CheckLutQuantize, [](const KernelTable& r, const KernelTable& t) { return r.lut_quantize != t.lut_quantize; }},
      {"kda_step", CheckKdaStep, [](const KernelTable& r, const KernelTable& t) { return r.kda_step != t.kda_step; }},
  };
  return checks;
}

}  // namespace waste::kernels::testing
