#include "model/logprobs.h"

#include <algorithm>
#include <cmath>

namespace waste {
namespace {

// Up to this many alternatives a single pass keeping them in order is
// fastest (an API asks for at most 20); beyond, select then sort.
constexpr size_t kInsertionLimit = 64;

}  // namespace

LogSoftmax::LogSoftmax(std::span<const float> logits) : logits_(logits) {
  double max = -INFINITY;
  for (float v : logits) max = std::max(max, double(v));
  double sum = 0;
  for (float v : logits) sum += std::exp(double(v) - max);
  max_ = max;
  log_sum_ = std::log(sum);
}

double LogSoftmax::operator()(int id) const {
  return double(logits_[static_cast<size_t>(id)]) - max_ - log_sum_;
}

void LogSoftmax::Top(int k, std::vector<TokenLogprob>* out) const {
  out->clear();
  const size_t n = std::min<size_t>(k > 0 ? static_cast<size_t>(k) : 0, logits_.size());
  if (n == 0) return;
  // One pass keeping the n best in order (n is small: an API asks for up
  // to 20); a candidate enters only when it beats the current n-th.
  auto better = [&](int a, int b) {
    float la = logits_[static_cast<size_t>(a)], lb = logits_[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  if (n > kInsertionLimit) {
    // Many alternatives (an embedding host may ask for hundreds): select,
    // then sort the selection; the same order as the insertion pass.
    std::vector<int> ids(logits_.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int>(i);
    std::nth_element(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n - 1), ids.end(), better);
    ids.resize(n);
    std::sort(ids.begin(), ids.end(), better);
    out->reserve(n);
    for (int id : ids) out->push_back({id, (*this)(id)});
    return;
  }
  std::vector<int> best;
  best.reserve(n + 1);
  for (size_t i = 0; i < logits_.size(); ++i) {
    const int id = static_cast<int>(i);
    if (best.size() == n && !better(id, best.back())) continue;
    auto at = std::upper_bound(best.begin(), best.end(), id, better);
    best.insert(at, id);
    if (best.size() > n) best.pop_back();
  }
  out->reserve(n);
  for (int id : best) out->push_back({id, (*this)(id)});
}

}  // namespace waste
