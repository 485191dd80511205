// /metrics: Prometheus text exposition of requests, tokens, speeds, queue
// depth, latency histograms (queue wait, time to first token, time per
// output token, generation time) and the engine's expert-cache counters. Engine counters are copied
// here by the worker after each generation, so a scrape never touches the
// engine while it runs.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "generate.h"
#include "histogram.h"

namespace waste::server {

class Metrics {
 public:
  void CountRequest(const std::string& path, int status);
  void CountRejected();
  void CountGeneration(const GenerateResult& r, const Stats& engine_stats);
  // A follow-on prefill (session_pool.h) fed `tokens` ahead.
  void CountFollowOn(int tokens);
  // `store`: the prompt cache's stored points (null without one).
  std::string Render(size_t queue_waiting, size_t running, const PointStore* store = nullptr) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t rejected_ = 0;
  uint64_t generations_ = 0, cancelled_ = 0, failed_ = 0;
  uint64_t prompt_tokens_ = 0, completion_tokens_ = 0;
  uint64_t cached_tokens_ = 0, follow_on_cached_tokens_ = 0, restored_tokens_ = 0;
  uint64_t earlier_cached_tokens_ = 0;
  uint64_t follow_on_runs_ = 0, follow_on_tokens_ = 0;
  double ttft_ms_sum_ = 0;
  // Seconds, per generation that ran: how long it waited for a slot in the
  // queue; for one that completed, its first token (the prompt's prefill),
  // the mean gap between its later tokens, and its whole time.
  Histogram queue_wait_{kLatencyBounds}, ttft_{kLatencyBounds}, tpot_{kTokenBounds},
      duration_{kLatencyBounds};
  static inline const std::vector<double> kLatencyBounds = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                                                            10,   30,  60,   120, 300, 600};
  static inline const std::vector<double> kTokenBounds = {0.005, 0.01, 0.025, 0.05, 0.1,
                                                          0.25,  0.5,  1,     2.5};
  Stats stats_;
};

}  // namespace waste::server
