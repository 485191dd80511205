#include "base/profile.h"

namespace waste {

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kEmbed: return "embed";
    case Phase::kKda: return "kda";
    case Phase::kMla: return "mla";
    case Phase::kRouter: return "router";
    case Phase::kLutBuild: return "lut_build";
    case Phase::kExperts: return "experts";
    case Phase::kReadWait: return "read_wait";
    case Phase::kShared: return "shared_experts";
    case Phase::kDense: return "dense_ffn";
    case Phase::kNorms: return "norms";
    case Phase::kLmHead: return "lm_head";
    case Phase::kCount: break;
  }
  return "?";
}

std::vector<std::pair<std::string, double>> Profiler::Breakdown() const {
  std::vector<std::pair<std::string, double>> out;
  for (int i = 0; i < static_cast<int>(Phase::kCount); ++i) {
    out.emplace_back(PhaseName(static_cast<Phase>(i)), seconds_[static_cast<size_t>(i)]);
  }
  return out;
}

}  // namespace waste
