// Nearest-entry search of the converter (convert/vq.h): vectors per second
// for each kernel this CPU runs, on a 256-entry book of heavy-tailed f16
// values and row-normalised-like vectors, through BookSearch::NearestBatch
// (the scan plus its exactness proof and any rescan; with the distances as
// k-means asks, and without as expert encoding does) and through the raw
// scan alone. Results: docs/CONVERT.md "Measurements".
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "convert/vq.h"
#include "convert/vq_search.h"

namespace {

using waste::convert::BookSearch;
using waste::convert::kVecDim;
using waste::convert::SearchKernel;

std::vector<float> HeavyTailed(size_t n, uint32_t seed, float scale) {
  std::mt19937 g(seed);
  std::student_t_distribution<float> t(3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = waste::convert::RoundBookValue(scale * t(g));
  return v;
}

constexpr size_t kVectors = 4096;

// with_dist: k-means asks for each vector's distance too; encoding does not.
void NearestBatch(benchmark::State& state, const SearchKernel* k, bool with_dist) {
  const int n = static_cast<int>(state.range(0));
  const std::vector<float> book = HeavyTailed(static_cast<size_t>(n) * kVecDim, 1, 0.1f);
  const std::vector<float> x = HeavyTailed(kVectors * kVecDim, 2, 0.1f);
  BookSearch s(book.data(), n, k);
  std::vector<int32_t> out(kVectors);
  std::vector<float> dist(kVectors);
  for (auto _ : state) {
    s.NearestBatch(x.data(), kVectors, out.data(), with_dist ? dist.data() : nullptr);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kVectors));
  state.counters["GMAC/s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * kVectors) * n * kVecDim / 1e9, benchmark::Counter::kIsRate);
}

void BM_NearestBatch(benchmark::State& state, const SearchKernel* k) { NearestBatch(state, k, true); }
void BM_NearestBatchNoDist(benchmark::State& state, const SearchKernel* k) { NearestBatch(state, k, false); }

void BM_ScanOnly(benchmark::State& state, const SearchKernel* k) {
  const int n = static_cast<int>(state.range(0));
  const std::vector<float> book = HeavyTailed(static_cast<size_t>(n) * kVecDim, 1, 0.1f);
  const std::vector<float> x = HeavyTailed(kVectors * kVecDim, 2, 0.1f);
  std::vector<float> t(book.size()), norm(static_cast<size_t>(n));
  for (int c = 0; c < n; ++c) {
    float s = 0;
    for (int j = 0; j < kVecDim; ++j) {
      t[static_cast<size_t>(j) * n + c] = book[static_cast<size_t>(c) * kVecDim + j];
      s += book[static_cast<size_t>(c) * kVecDim + j] * book[static_cast<size_t>(c) * kVecDim + j];
    }
    norm[c] = s;
  }
  std::vector<int32_t> idx(64);
  std::vector<float> best(64), second(64);
  for (auto _ : state) {
    for (size_t b = 0; b < kVectors; b += 64) {
      k->scan(t.data(), norm.data(), n, x.data() + b * kVecDim, 64, idx.data(), best.data(), second.data());
      benchmark::DoNotOptimize(idx.data());
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kVectors));
}

int Register() {
  for (const SearchKernel* k : waste::convert::SupportedSearchKernels()) {
    benchmark::RegisterBenchmark((std::string("NearestBatch/") + k->name).c_str(), BM_NearestBatch, k)
        ->Arg(256)->Arg(16);
    benchmark::RegisterBenchmark((std::string("NearestBatchNoDist/") + k->name).c_str(), BM_NearestBatchNoDist, k)
        ->Arg(256);
    benchmark::RegisterBenchmark((std::string("ScanOnly/") + k->name).c_str(), BM_ScanOnly, k)->Arg(256);
  }
  return 0;
}
const int registered = Register();

}  // namespace

BENCHMARK_MAIN();
