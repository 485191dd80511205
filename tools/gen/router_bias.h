// Skewed, realistic routing for synthetic containers: per-layer expert
// popularity from a routing trace (JSON lines {"tok": N, "layers": [[ids of
// the top-k experts of MoE layer 0], ...]}), and the e_score_correction_bias
// that makes the router reproduce it.
#pragma once

#include <string>
#include <vector>

#include "waste/status.h"

namespace waste::gen {

struct RoutingTrace {
  int tokens = 0;
  int experts = 0;                          // largest id + 1
  int top_k = 0;                            // ids per (token, layer)
  std::vector<std::vector<double>> counts;  // [trace layer][expert]
};

Result<RoutingTrace> LoadRoutingTrace(const std::string& path);

// Target selection frequency (tokens choosing the expert / tokens, summing
// to top_k) of each of `experts` experts of MoE layer `moe_layer` out of
// `n_moe`, taken from the trace layer at the same relative depth; experts
// are mapped by subsampling when the counts differ. Add-half smoothing keeps
// every expert reachable.
std::vector<double> TargetFrequencies(const RoutingTrace& trace, int moe_layer, int n_moe,
                                      int experts, int top_k);

// Fits bias b so that, for router logits z_e ~ N(0, logit_std[e]^2), top-k
// selection on sigmoid(z) + b picks expert e with frequency target[e].
// Deterministic in `seed`. `achieved` (optional) receives the fitted
// frequencies.
std::vector<float> FitRouterBias(const std::vector<double>& target,
                                 const std::vector<float>& logit_std, int top_k, uint64_t seed,
                                 std::vector<double>* achieved = nullptr);

}  // namespace waste::gen
