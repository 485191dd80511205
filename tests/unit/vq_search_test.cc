// The nearest-entry search (convert/vq.h, vq_search.h) against a brute-force
// loop, for every kernel this CPU runs: the answer must be argmin of
// ExactDist2 with the lowest index on ties, whichever kernel scanned. Inputs
// are random and adversarial: exact ties on a coarse grid, duplicate
// entries, vectors equal to entries, entries one ulp apart, huge and tiny
// magnitudes, codebook sizes the SIMD kernels do not take, batch tails.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "convert/vq.h"
#include "convert/vq_search.h"

namespace waste::convert {
namespace {

struct Found {
  int c;
  float d;
};

Found BruteForce(const std::vector<float>& book, int n, const float* x) {
  Found f{0, std::numeric_limits<float>::infinity()};
  for (int c = 0; c < n; ++c) {
    const float d = ExactDist2(x, book.data() + static_cast<size_t>(c) * kVecDim);
    if (d < f.d) f = {c, d};
  }
  return f;
}

// Every kernel against the brute force on every vector of xs; batch sizes
// vary so that group and batch tails are covered.
void ExpectExact(const std::vector<float>& book, int n, const std::vector<float>& xs,
                 const std::string& what) {
  const size_t count = xs.size() / kVecDim;
  for (const SearchKernel* k : SupportedSearchKernels()) {
    BookSearch s(book.data(), n, k);
    std::vector<int32_t> got(count, -1);
    std::vector<float> dist(count, -1.0f);
    size_t done = 0;
    for (size_t step : {1, 3, 4, 5, 63, 64, 65, 130}) {
      if (done >= count) break;
      const size_t m = std::min(step, count - done);
      s.NearestBatch(xs.data() + done * kVecDim, m, got.data() + done, dist.data() + done);
      done += m;
    }
    if (done < count) s.NearestBatch(xs.data() + done * kVecDim, count - done, got.data() + done, dist.data() + done);
    int wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      const Found f = BruteForce(book, n, xs.data() + i * kVecDim);
      if (got[i] != f.c || !(dist[i] == f.d || (std::isnan(dist[i]) && std::isnan(f.d)))) {
        if (++wrong <= 3) {
          ADD_FAILURE() << what << " kernel " << k->name << " n " << n << " vector " << i << ": got "
                        << got[i] << " (" << dist[i] << "), brute force " << f.c << " (" << f.d << ")";
        }
      }
      if (i % 7 == 0) EXPECT_EQ(s.Nearest(xs.data() + i * kVecDim), f.c);
    }
    EXPECT_EQ(wrong, 0) << what << " kernel " << k->name;
  }
}

std::vector<float> HeavyTailed(size_t n, uint32_t seed, float scale = 0.02f) {
  std::mt19937 g(seed);
  std::student_t_distribution<float> t(3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = scale * t(g);
  return v;
}

// Values on a grid of 1/4 in [-1, 1]: distances tie exactly and often.
std::vector<float> Grid(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> q(-4, 4);
  std::vector<float> v(n);
  for (float& x : v) x = 0.25f * static_cast<float>(q(g));
  return v;
}

TEST(VqSearch, KernelsAreListedPortableFirst) {
  const std::vector<const SearchKernel*> ks = SupportedSearchKernels();
  ASSERT_FALSE(ks.empty());
  EXPECT_EQ(ks.front(), PortableSearchKernel());
  EXPECT_EQ(ChosenSearchKernel(), ks.back());  // ctest does not set WASTE_BACKEND=cpu
  for (const SearchKernel* k : ks) std::printf("search kernel: %s\n", k->name);
}

TEST(VqSearch, RandomHeavyTailedMatchesBruteForce) {
  for (int n : {256, 64, 16, 8}) {
    ExpectExact(HeavyTailed(static_cast<size_t>(n) * kVecDim, 11 + n), n,
                HeavyTailed(2000 * kVecDim, 12 + n), "heavy-tailed");
  }
}

TEST(VqSearch, SizesTheSimdKernelsDoNotTakeFallBackExactly) {
  for (int n : {1, 7, 24, 100, 4096 + 16}) {
    ExpectExact(HeavyTailed(static_cast<size_t>(n) * kVecDim, 21 + n), n,
                HeavyTailed(300 * kVecDim, 22 + n), "odd size");
  }
}

TEST(VqSearch, ExactTiesTakeTheLowestIndex) {
  // A coarse grid: many entries at exactly the same distance, duplicates.
  std::vector<float> book = Grid(256 * kVecDim, 31);
  for (int c = 200; c < 256; ++c) {  // exact duplicates of earlier entries
    std::copy_n(book.data() + (c - 150) * kVecDim, kVecDim, book.data() + c * kVecDim);
  }
  std::vector<float> xs = Grid(3000 * kVecDim, 32);
  // Midpoints of entry pairs (equidistant by construction) and entries themselves.
  for (int i = 0; i < 200; ++i) {
    for (int j = 0; j < kVecDim; ++j) {
      xs.push_back(0.5f * (book[i * 8 + j] + book[(255 - i) * 8 + j]));
    }
  }
  xs.insert(xs.end(), book.begin(), book.end());
  ExpectExact(book, 256, xs, "grid ties");
}

TEST(VqSearch, AllEntriesEqualOrZero) {
  std::vector<float> same(256 * kVecDim, 0.125f);
  ExpectExact(same, 256, HeavyTailed(200 * kVecDim, 41, 0.5f), "all equal");
  std::vector<float> zero(256 * kVecDim, 0.0f);
  std::vector<float> xs = HeavyTailed(200 * kVecDim, 42);
  xs.insert(xs.end(), 8 * kVecDim, 0.0f);
  ExpectExact(zero, 256, xs, "all zero");
}

TEST(VqSearch, EntriesOneUlpApart) {
  std::vector<float> book = HeavyTailed(256 * kVecDim, 51, 0.3f);
  // Pairs that differ in one coordinate by one ulp, and vectors right between.
  std::vector<float> xs;
  for (int c = 0; c < 128; c += 2) {
    std::copy_n(book.data() + c * kVecDim, kVecDim, book.data() + (c + 1) * kVecDim);
    float& v = book[(c + 1) * kVecDim + c % 8];
    v = std::nextafter(v, 1.0f);
    for (int j = 0; j < kVecDim; ++j) xs.push_back(book[c * kVecDim + j]);
    for (int j = 0; j < kVecDim; ++j) xs.push_back(book[(c + 1) * kVecDim + j]);
    for (int j = 0; j < kVecDim; ++j) xs.push_back(book[c * kVecDim + j] + 1e-3f);
  }
  std::vector<float> more = HeavyTailed(1000 * kVecDim, 52, 0.3f);
  xs.insert(xs.end(), more.begin(), more.end());
  ExpectExact(book, 256, xs, "one ulp");
}

TEST(VqSearch, HugeAndTinyMagnitudes) {
  for (float scale : {1e-30f, 1e-20f, 1e-3f, 1e3f, 1e12f, 1e18f, 1e30f}) {
    ExpectExact(HeavyTailed(256 * kVecDim, 61, scale), 256, HeavyTailed(300 * kVecDim, 62, scale),
                "scale " + std::to_string(scale));
  }
  // Mixed: one huge entry among small ones, small vectors; subnormal vectors.
  std::vector<float> book = HeavyTailed(256 * kVecDim, 63);
  for (int j = 0; j < kVecDim; ++j) book[17 * kVecDim + j] = 6.0e4f;
  std::vector<float> xs = HeavyTailed(300 * kVecDim, 64);
  for (int i = 0; i < 20; ++i) {
    for (int j = 0; j < kVecDim; ++j) xs.push_back(1e-40f * static_cast<float>(j - i % 5));
  }
  ExpectExact(book, 256, xs, "mixed");
}

}  // namespace
}  // namespace waste::convert
