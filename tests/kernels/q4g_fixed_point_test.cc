// The Q4G matvec of every table (and the AVX-512 VNNI fixed-point prototype,
// which is in none) against a double-precision evaluation, on the
// inputs that stress a block-fixed-point x: groups of very different size,
// zero and subnormal groups, lone outliers, heavy tails, every group count
// the models use plus ragged column counts. Results must also not depend on
// how rows are split (the thread pool's split).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/dispatch.h"
#include "kernels/isa_register.h"
#include "kernels/kernel_table.h"
#include "kernels/numerics.h"

namespace waste::kernels {
namespace {

// f32 accumulation error budget, as the kernel checks (kernel_checks.h).
constexpr double kTol = 1e-5;

struct Kernel {
  std::string name;
  MatVecFn fn;
};

std::vector<Kernel> Kernels() {
  std::vector<Kernel> out;
  for (Isa isa : SupportedIsas()) {
    const KernelTable t = BuildKernelTable(isa);
    out.push_back({t.name, t.matvec_q4g});
  }
#if defined(WASTE_HAVE_KERNEL_PROTOTYPES)  // built on x86-64 only, outside the library
  if (CpuHasAvx512Vnni()) out.push_back({"VNNI fixed point", avx512_vnni::MatVecQ4GFixedPoint});
#endif
  return out;
}

// x placed so that its last element ends a page followed by PROT_NONE.
class GuardedFloats {
 public:
  explicit GuardedFloats(size_t n) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    body_ = (n * sizeof(float) + page - 1) / page * page;
    void* p = mmap(nullptr, body_ + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) std::abort();
    map_ = static_cast<uint8_t*>(p);
    mprotect(map_ + body_, page, PROT_NONE);
    data_ = reinterpret_cast<float*>(map_ + body_) - n;
  }
  ~GuardedFloats() { munmap(map_, body_ + static_cast<size_t>(sysconf(_SC_PAGESIZE))); }
  GuardedFloats(const GuardedFloats&) = delete;
  GuardedFloats& operator=(const GuardedFloats&) = delete;
  float* data() const { return data_; }

 private:
  size_t body_ = 0;
  uint8_t* map_ = nullptr;
  float* data_ = nullptr;
};

enum class XKind { kUniform, kHeavyTail, kMixedGroups, kOutliers, kZeroAndTiny, kSubnormal, kWideSpread };

const char* KindName(XKind k) {
  switch (k) {
    case XKind::kUniform: return "uniform";
    case XKind::kHeavyTail: return "heavy-tail";
    case XKind::kMixedGroups: return "mixed-groups";
    case XKind::kOutliers: return "outliers";
    case XKind::kZeroAndTiny: return "zero-and-tiny";
    case XKind::kSubnormal: return "subnormal";
    case XKind::kWideSpread: return "wide-spread";
  }
  return "?";
}

void FillX(XKind kind, float* x, size_t n, std::mt19937& rng) {
  auto u = [&] { return (rng() + 0.5) / 4294967296.0; };
  for (size_t i = 0; i < n; ++i) {
    const size_t g = i / 128;
    double v = 2 * u() - 1;
    switch (kind) {
      case XKind::kUniform: break;
      case XKind::kHeavyTail: v = std::tan(3.14159265358979 * (u() - 0.5)); break;  // Cauchy
      case XKind::kMixedGroups: v *= std::pow(10.0, static_cast<double>(g % 7) * 2 - 6); break;  // 1e-6..1e6
      case XKind::kOutliers: v = (rng() % 97 == 0) ? v * 3e4 : v * 1e-2; break;
      case XKind::kZeroAndTiny: v = g % 3 == 0 ? 0.0 : (g % 3 == 1 ? v * 1e-30 : v); break;
      case XKind::kSubnormal: v *= 1e-39; break;
      // Groups 2^70 apart: past the fixed-point kernel's range, which must
      // then hand the call to the float kernel.
      case XKind::kWideSpread: v *= g % 2 ? 0x1p-40 : 0x1p30; break;
    }
    x[i] = static_cast<float>(v);
  }
}

struct Matrix {
  size_t rows, cols, groups, row_bytes;
  std::vector<uint8_t> w;
  std::vector<uint16_t> s;
  Matrix(size_t r, size_t c, std::mt19937& rng)
      : rows(r), cols(c), groups((c + 127) / 128), row_bytes(groups * 64), w(r * row_bytes), s(r * groups) {
    for (auto& b : w) b = static_cast<uint8_t>(rng() >> 24);  // padding nibbles random too
    for (auto& e : s) {
      const double v = (rng() % 17 == 0) ? 1e-6 : 1e-3 + 0.05 * (rng() / 4294967296.0);
      e = F32ToF16(static_cast<float>((rng() & 1) ? v : -v));
    }
  }
  MatVecArgs Args(const float* x, float* y) const {
    MatVecArgs a;
    a.weights = w.data();
    a.row_bytes = row_bytes;
    a.scales = s.data();
    a.groups = groups;
    a.group = 128;
    a.cols = cols;
    a.x = x;
    a.y = y;
    return a;
  }
  // Σ_i s·(q-8)·x in double, and Σ|terms|.
  void Reference(const float* x, std::vector<double>& want, std::vector<double>& mag) const {
    want.assign(rows, 0.0);
    mag.assign(rows, 0.0);
    for (size_t r = 0; r < rows; ++r) {
      for (size_t i = 0; i < cols; ++i) {
        const uint8_t b = w[r * row_bytes + i / 2];
        const int q = ((i & 1) ? (b >> 4) : (b & 15)) - 8;
        const double t = static_cast<double>(F16ToF32(s[r * groups + i / 128])) * q * x[i];
        want[r] += t;
        mag[r] += std::fabs(t);
      }
    }
  }
};

// Group counts of the Kimi-Linear / DeepSeek-style trunks (1024, 2304, 4096,
// 7168, 11264 and 16384 columns) and ragged column counts, including one
// beyond the fixed-point kernel's 16384-column stack buffer.
constexpr size_t kCols[] = {8, 100, 128, 130, 1000, 1024, 2300, 2304, 4095, 4096, 7168, 11264, 16384, 16512};
constexpr size_t kRows[] = {1, 3, 7, 33};

TEST(Q4gMatVec, MatchesDoubleOnHardInputsAndIgnoresTheRowSplit) {
  std::mt19937 rng(20261202);
  const std::vector<Kernel> kernels = Kernels();
  const XKind kinds[] = {XKind::kUniform, XKind::kHeavyTail, XKind::kMixedGroups, XKind::kOutliers,
                         XKind::kZeroAndTiny, XKind::kSubnormal, XKind::kWideSpread};
  constexpr size_t kKinds = sizeof(kinds) / sizeof(kinds[0]);
  // Worst error relative to Σ|terms| per kernel and kind (rows whose Σ|terms|
  // is a normal float; subnormal sums only have to meet the absolute floor).
  std::vector<std::vector<double>> worst(kernels.size(), std::vector<double>(kKinds, 0.0));
  for (size_t ki = 0; ki < kKinds; ++ki) {
    const XKind kind = kinds[ki];
    for (size_t cols : kCols) {
      const size_t rows = kRows[(cols / 8) % 4];
      const Matrix m(rows, cols, rng);
      GuardedFloats xb(cols);
      FillX(kind, xb.data(), cols, rng);
      std::vector<double> want, mag;
      m.Reference(xb.data(), want, mag);
      for (size_t k = 0; k < kernels.size(); ++k) {
        std::vector<float> y(rows, -7.0f), ys(rows, -7.0f);
        kernels[k].fn(m.Args(xb.data(), y.data()), 0, rows);
        const MatVecArgs as = m.Args(xb.data(), ys.data());
        const size_t a = rows / 3, b = std::min(rows, 2 * rows / 3 + 1);
        kernels[k].fn(as, 0, a);
        kernels[k].fn(as, a, b);
        kernels[k].fn(as, b, rows);
        for (size_t r = 0; r < rows; ++r) {
          const double err = std::fabs(static_cast<double>(y[r]) - want[r]);
          if (mag[r] > 1e-30) worst[k][ki] = std::max(worst[k][ki], err / mag[r]);
          EXPECT_LE(err, kTol * mag[r] + 1e-38)
              << kernels[k].name << " " << KindName(kind) << " cols " << cols << " row " << r << ": got "
              << y[r] << " want " << want[r] << " (sum |terms| " << mag[r] << ")";
          EXPECT_EQ(F32ToBits(y[r]), F32ToBits(ys[r])) << kernels[k].name << " split, cols " << cols;
        }
      }
    }
  }
  std::printf("  worst |y - exact| / sum|terms| per x kind:\n  %-20s", "");
  for (XKind kind : kinds) std::printf(" %13s", KindName(kind));
  for (size_t k = 0; k < kernels.size(); ++k) {
    std::printf("\n  %-20s", kernels[k].name.c_str());
    for (size_t ki = 0; ki < kKinds; ++ki) std::printf(" %13.2e", worst[k][ki]);
  }
  std::printf("\n");
}

TEST(Q4gMatVec, NonFiniteXGivesNonFiniteResultsLikeTheBaseline) {
  std::mt19937 rng(7);
  const Matrix m(5, 2304, rng);
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    GuardedFloats xb(2304);
    FillX(XKind::kUniform, xb.data(), 2304, rng);
    xb.data()[1000] = bad;
    std::vector<float> ref(5), y(5);
    BuildKernelTable(Isa::kBaseline).matvec_q4g(m.Args(xb.data(), ref.data()), 0, 5);
    for (const Kernel& k : Kernels()) {
      k.fn(m.Args(xb.data(), y.data()), 0, 5);
      for (size_t r = 0; r < 5; ++r) {
        EXPECT_EQ(std::isfinite(y[r]), std::isfinite(ref[r])) << k.name << " row " << r << " x " << bad;
      }
    }
  }
}

}  // namespace
}  // namespace waste::kernels
