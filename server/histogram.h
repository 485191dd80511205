// A Prometheus histogram: cumulative counts of observations at or below
// each bound, their sum and their count, rendered in the text exposition
// (name_bucket{le="..."}, name_sum, name_count). Not locked: its owner
// (Metrics) guards it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace waste::server {

class Histogram {
 public:
  // `bounds`: the buckets' upper bounds, ascending (+Inf is added).
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  // HELP and TYPE lines, then the buckets, _sum and _count.
  void Render(std::string* out, const char* name, const char* help) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

}  // namespace waste::server
