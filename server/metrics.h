// /metrics: Prometheus text exposition of requests, tokens, speeds, queue
// depth and the engine's expert-cache counters. Engine counters are copied
// here by the worker after each generation, so a scrape never touches the
// engine while it runs.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "generate.h"

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
  uint64_t follow_on_runs_ = 0, follow_on_tokens_ = 0;
  double ttft_ms_sum_ = 0;
  Stats stats_;
};

}  // namespace waste::server
