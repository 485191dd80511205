// Cost of log-probabilities per token at Kimi's vocabulary (163,840):
// the log-softmax's normaliser (one max and one exp pass in double) and the
// top-k alternatives (one pass keeping k), as GenParams::logprobs pays them
// per generated token and Session::ScoreTop per scored position.
// docs/SERVER.md ("Log probabilities") quotes the figures.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "model/logprobs.h"

namespace {

const std::vector<float>& Logits() {
  static const std::vector<float> logits = [] {
    std::mt19937 rng(11);
    std::normal_distribution<float> d(0.0f, 3.0f);
    std::vector<float> v(163840);
    for (float& x : v) x = d(rng);
    return v;
  }();
  return logits;
}

void BM_LogSoftmaxTop(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  std::vector<waste::TokenLogprob> top;
  for (auto _ : state) {
    waste::LogSoftmax ls(Logits());
    double lp = ls(42);
    ls.Top(k, &top);
    benchmark::DoNotOptimize(lp);
    benchmark::DoNotOptimize(top.data());
  }
}
BENCHMARK(BM_LogSoftmaxTop)->Arg(0)->Arg(5)->Arg(20)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
