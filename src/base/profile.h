// Per-phase wall-clock timers for WASTE_PROFILE=1 (ENGINE.md §2). A null
// Profiler* costs one branch per phase; timings never affect results.
// Phases never nest: each second is booked to one phase (a read wait inside
// the MoE step is kReadWait, not kExperts), so the breakdown sums to the step.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace waste {

enum class Phase : int {
  kEmbed,
  kKda,          // KDA layers (projections, conv, recurrence, gate, o_proj)
  kMla,          // MLA layers
  kRouter,       // router matvec + top-k (+ the prefetcher's guess)
  kLutBuild,     // VQ lookup-table builds
  kExperts,      // routed expert apply, latent projections, combine
  kReadWait,     // blocked waiting for expert records
  kShared,       // shared experts
  kDense,        // dense FFN
  kNorms,        // norms, residual adds, AttnRes mixes
  kLmHead,
  kCount
};

const char* PhaseName(Phase p);

class Profiler {
 public:
  void Add(Phase p, double seconds) { seconds_[static_cast<size_t>(p)] += seconds; }
  double seconds(Phase p) const { return seconds_[static_cast<size_t>(p)]; }
  void Reset() { seconds_.fill(0.0); }
  std::vector<std::pair<std::string, double>> Breakdown() const;

 private:
  std::array<double, static_cast<size_t>(Phase::kCount)> seconds_{};
};

class ScopedPhase {
 public:
  ScopedPhase(Profiler* p, Phase phase) : p_(p), phase_(phase) {
    if (p_ != nullptr) t0_ = std::chrono::steady_clock::now();
  }
  ~ScopedPhase() {
    if (p_ != nullptr) {
      p_->Add(phase_, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
    }
  }
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  Profiler* p_;
  Phase phase_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace waste
