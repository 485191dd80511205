#include "histogram.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace waste::server {
namespace {

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  if (!std::isfinite(value)) return;
  const size_t bucket =
      static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

void Histogram::Render(std::string* out, const char* name, const char* help) const {
  const std::string n = name;
  *out += "# HELP " + n + " " + help + "\n# TYPE " + n + " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? Num(bounds_[i]) : "+Inf";
    *out += n + "_bucket{le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  *out += n + "_sum " + Num(sum_) + "\n" + n + "_count " + std::to_string(count_) + "\n";
}

}  // namespace waste::server
