#include "router_bias.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "rng.h"

namespace waste::gen {

Result<RoutingTrace> LoadRoutingTrace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return IoError(fmt::format("{}: cannot open the routing trace", path));
  RoutingTrace t;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    const nlohmann::json* layers = nullptr;
    if (j.is_object()) {
      auto it = j.find("layers");
      if (it != j.end() && it->is_array()) layers = &*it;
    }
    if (layers == nullptr) {
      return FormatError(fmt::format("{}:{}: expected {{\"tok\": N, \"layers\": [[ids], ...]}}",
                                     path, line_no));
    }
    if (t.counts.empty()) t.counts.resize(layers->size());
    if (layers->size() != t.counts.size()) {
      return FormatError(fmt::format("{}:{}: {} layers, earlier lines had {}", path, line_no,
                                     layers->size(), t.counts.size()));
    }
    for (size_t l = 0; l < layers->size(); ++l) {
      const nlohmann::json& ids = (*layers)[l];
      if (!ids.is_array()) return FormatError(fmt::format("{}:{}: layer {} is not a list", path, line_no, l));
      t.top_k = std::max(t.top_k, static_cast<int>(ids.size()));
      for (const nlohmann::json& id : ids) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= 65536) {
          return FormatError(fmt::format("{}:{}: expert id {} is not in 0..65535", path, line_no,
                                         id.dump()));
        }
        int e = id.get<int>();
        if (e >= static_cast<int>(t.counts[l].size())) t.counts[l].resize(e + 1, 0.0);
        t.counts[l][e] += 1.0;
        t.experts = std::max(t.experts, e + 1);
      }
    }
    ++t.tokens;
  }
  if (t.tokens == 0 || t.counts.empty()) return FormatError(fmt::format("{}: empty trace", path));
  for (auto& c : t.counts) c.resize(t.experts, 0.0);
  return t;
}

std::vector<double> TargetFrequencies(const RoutingTrace& trace, int moe_layer, int n_moe,
                                      int experts, int top_k) {
  const int layers = static_cast<int>(trace.counts.size());
  const int tl = std::min(layers - 1, moe_layer * layers / std::max(n_moe, 1));
  std::vector<double> f(static_cast<size_t>(experts));
  for (int e = 0; e < experts; ++e) {
    int te = static_cast<int>(static_cast<int64_t>(e) * trace.experts / experts);
    f[e] = trace.counts[tl][te] + 0.5;
  }
  double sum = std::accumulate(f.begin(), f.end(), 0.0);
  for (double& v : f) v = v / sum * top_k;
  // A frequency above 1 is impossible (an expert is picked once per token).
  for (double& v : f) v = std::min(v, 0.95);
  return f;
}

std::vector<float> FitRouterBias(const std::vector<double>& target,
                                 const std::vector<float>& logit_std, int top_k, uint64_t seed,
                                 std::vector<double>* achieved) {
  const int e_count = static_cast<int>(target.size());
  constexpr int kSamples = 2048;
  constexpr int kIterations = 120;
  // Fixed samples (common random numbers): the fit is a deterministic
  // function of the seed and converges without noise between iterations.
  Rng rng(seed, "router-bias");
  std::vector<float> score(static_cast<size_t>(kSamples) * e_count);
  for (int n = 0; n < kSamples; ++n) {
    for (int e = 0; e < e_count; ++e) {
      double z = logit_std[e] * rng.Normal();
      score[static_cast<size_t>(n) * e_count + e] = static_cast<float>(1.0 / (1.0 + std::exp(-z)));
    }
  }
  std::vector<float> bias(static_cast<size_t>(e_count), 0.0f);
  std::vector<double> freq(static_cast<size_t>(e_count));
  std::vector<int> order(static_cast<size_t>(e_count));
  std::vector<float> biased(static_cast<size_t>(e_count));
  const int k = std::min(top_k, e_count);
  for (int it = 0; it <= kIterations; ++it) {
    std::fill(freq.begin(), freq.end(), 0.0);
    for (int n = 0; n < kSamples; ++n) {
      const float* s = score.data() + static_cast<size_t>(n) * e_count;
      for (int e = 0; e < e_count; ++e) biased[e] = s[e] + bias[e];
      std::iota(order.begin(), order.end(), 0);
      std::nth_element(order.begin(), order.begin() + (k - 1), order.end(),
                       [&](int a, int b) { return biased[a] > biased[b]; });
      for (int j = 0; j < k; ++j) freq[order[j]] += 1.0 / kSamples;
    }
    if (it == kIterations) break;
    // Dual ascent on the selection constraint: raise under-picked experts.
    const double lr = 0.6 / (1.0 + it / 40.0);
    for (int e = 0; e < e_count; ++e) bias[e] += static_cast<float>(lr * (target[e] - freq[e]));
  }
  if (achieved != nullptr) *achieved = freq;
  return bias;
}

}  // namespace waste::gen
