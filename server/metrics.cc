#include "metrics.h"

#include <algorithm>
#include <cstdio>

namespace waste::server {
namespace {

void Line(std::string* out, const char* name, const char* type, const char* help) {
  *out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

void Metrics::CountRequest(const std::string& path, int status) {
  // Known routes only, so scanners cannot grow the label set.
  static const char* kRoutes[] = {"/",         "/health",     "/v1/models",           "/metrics",
                                  "/tokenize", "/detokenize", "/v1/chat/completions", "/v1/completions",
                                  "/v1/responses"};
  std::string route = "other";
  for (const char* r : kRoutes) if (path == r) route = r;
  if (path.rfind("/v1/models/", 0) == 0) route = "/v1/models/{id}";
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{route, status}];
}

void Metrics::CountRejected() {
  std::lock_guard<std::mutex> lock(mu_);
  ++rejected_;
}

void Metrics::CountGeneration(const GenerateResult& r, const Stats& s) {
  std::lock_guard<std::mutex> lock(mu_);
  ++generations_;
  if (r.cancelled) ++cancelled_;
  if (r.error) ++failed_;
  prompt_tokens_ += static_cast<uint64_t>(r.prompt_tokens);
  cached_tokens_ += static_cast<uint64_t>(r.cached_tokens);
  if (r.resumed_ahead) follow_on_cached_tokens_ += static_cast<uint64_t>(r.cached_tokens);
  if (r.restored) restored_tokens_ += static_cast<uint64_t>(r.cached_tokens);
  if (r.resumed_earlier) earlier_cached_tokens_ += static_cast<uint64_t>(r.cached_tokens);
  completion_tokens_ += static_cast<uint64_t>(r.completion_tokens);
  ttft_ms_sum_ += r.prefill_ms;
  if (r.queued_ms >= 0) queue_wait_.Observe(r.queued_ms / 1000);
  if (!r.cancelled && !r.error && r.completion_tokens > 0) {
    ttft_.Observe(r.prefill_ms / 1000);
    duration_.Observe(r.total_ms / 1000);
    // With several choices (n) the later ones' prefill counts as gaps.
    if (r.completion_tokens > 1) {
      tpot_.Observe((r.total_ms - r.prefill_ms) / 1000 / (r.completion_tokens - 1));
    }
  }
  // Requests end in any order and each read the engine's counters when it
  // ended: keep the newest value of each (they only grow), so a counter
  // never goes backwards when an older snapshot arrives last.
  stats_.prefill_tokens = std::max(stats_.prefill_tokens, s.prefill_tokens);
  stats_.prefill_s = std::max(stats_.prefill_s, s.prefill_s);
  stats_.tokens_generated = std::max(stats_.tokens_generated, s.tokens_generated);
  stats_.decode_s = std::max(stats_.decode_s, s.decode_s);
  stats_.experts_hit = std::max(stats_.experts_hit, s.experts_hit);
  stats_.experts_missed = std::max(stats_.experts_missed, s.experts_missed);
  stats_.bytes_read = std::max(stats_.bytes_read, s.bytes_read);
  stats_.draft_tokens = std::max(stats_.draft_tokens, s.draft_tokens);
  stats_.draft_accepted = std::max(stats_.draft_accepted, s.draft_accepted);
}

void Metrics::CountFollowOn(int tokens) {
  if (tokens <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  ++follow_on_runs_;
  follow_on_tokens_ += static_cast<uint64_t>(tokens);
}

std::string Metrics::Render(size_t queue_waiting, size_t running, const PointStore* store) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  Line(&out, "waste_http_requests_total", "counter", "HTTP requests by route and status.");
  for (const auto& [key, n] : requests_) {
    out += "waste_http_requests_total{route=\"" + key.first + "\",status=\"" +
           std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
  }
  Line(&out, "waste_requests_rejected_total", "counter", "Requests refused with 503 (queue full).");
  out += "waste_requests_rejected_total " + std::to_string(rejected_) + "\n";
  Line(&out, "waste_generations_total", "counter", "Generations run on the engine.");
  out += "waste_generations_total " + std::to_string(generations_) + "\n";
  Line(&out, "waste_generations_cancelled_total", "counter", "Generations stopped by a client leaving.");
  out += "waste_generations_cancelled_total " + std::to_string(cancelled_) + "\n";
  Line(&out, "waste_generations_failed_total", "counter", "Generations that ended in an engine error.");
  out += "waste_generations_failed_total " + std::to_string(failed_) + "\n";
  Line(&out, "waste_prompt_tokens_total", "counter", "Prompt tokens prefilled.");
  out += "waste_prompt_tokens_total " + std::to_string(prompt_tokens_) + "\n";
  Line(&out, "waste_prompt_cached_tokens_total", "counter",
       "Prompt tokens resumed from a conversation slot's restore point instead of prefilled.");
  out += "waste_prompt_cached_tokens_total " + std::to_string(cached_tokens_) + "\n";
  Line(&out, "waste_follow_on_cached_tokens_total", "counter",
       "Of those, prompt tokens resumed from a follow-on prefill's point.");
  out += "waste_follow_on_cached_tokens_total " + std::to_string(follow_on_cached_tokens_) + "\n";
  Line(&out, "waste_prompt_cache_restored_tokens_total", "counter",
       "Of those, prompt tokens resumed from a point loaded from the prompt cache's store.");
  out += "waste_prompt_cache_restored_tokens_total " + std::to_string(restored_tokens_) + "\n";
  Line(&out, "waste_earlier_point_cached_tokens_total", "counter",
       "Of those, prompt tokens resumed from an earlier point of the slot (--earlier-points).");
  out += "waste_earlier_point_cached_tokens_total " + std::to_string(earlier_cached_tokens_) + "\n";
  if (store != nullptr) {
    const PointStore::Counts c = store->counts();
    Line(&out, "waste_prompt_cache_points", "gauge",
         "Restore points of conversations no slot holds, stored on disk (--prompt-cache).");
    out += "waste_prompt_cache_points " + std::to_string(c.points) + "\n";
    Line(&out, "waste_prompt_cache_bytes", "gauge", "Disk those points take.");
    out += "waste_prompt_cache_bytes " + std::to_string(c.bytes) + "\n";
    Line(&out, "waste_prompt_cache_stores_total", "counter",
         "Points stored (a slot given to another conversation).");
    out += "waste_prompt_cache_stores_total " + std::to_string(c.stored) + "\n";
    Line(&out, "waste_prompt_cache_loads_total", "counter", "Points loaded back into a slot.");
    out += "waste_prompt_cache_loads_total " + std::to_string(c.loaded) + "\n";
    Line(&out, "waste_prompt_cache_evictions_total", "counter",
         "Points removed to stay within --prompt-cache-size.");
    out += "waste_prompt_cache_evictions_total " + std::to_string(c.evicted) + "\n";
    Line(&out, "waste_prompt_cache_failed_loads_total", "counter",
         "Points dropped because their state could not be loaded.");
    out += "waste_prompt_cache_failed_loads_total " + std::to_string(c.failed) + "\n";
  }
  Line(&out, "waste_follow_on_prefills_total", "counter",
       "Follow-on prefills that fed tokens after a reply (the next turn prefilled while idle).");
  out += "waste_follow_on_prefills_total " + std::to_string(follow_on_runs_) + "\n";
  Line(&out, "waste_follow_on_tokens_total", "counter", "Tokens the follow-on prefills fed.");
  out += "waste_follow_on_tokens_total " + std::to_string(follow_on_tokens_) + "\n";
  Line(&out, "waste_completion_tokens_total", "counter", "Tokens generated.");
  out += "waste_completion_tokens_total " + std::to_string(completion_tokens_) + "\n";
  Line(&out, "waste_time_to_first_token_ms_sum", "counter", "Sum of time to first token.");
  out += "waste_time_to_first_token_ms_sum " + Num(ttft_ms_sum_) + "\n";
  queue_wait_.Render(&out, "waste_queue_wait_seconds",
                     "Time a generation waited in the queue for a slot.");
  ttft_.Render(&out, "waste_time_to_first_token_seconds",
               "Time to a completed generation's first token (its prompt's prefill).");
  tpot_.Render(&out, "waste_time_per_output_token_seconds",
               "Mean time between a completed generation's later tokens.");
  duration_.Render(&out, "waste_generation_duration_seconds",
                   "Time a completed generation ran, first token to last.");
  Line(&out, "waste_prefill_tokens_per_second", "gauge", "Engine prefill speed since start.");
  out += "waste_prefill_tokens_per_second " +
         Num(stats_.prefill_s > 0 ? static_cast<double>(stats_.prefill_tokens) / stats_.prefill_s : 0) + "\n";
  Line(&out, "waste_decode_tokens_per_second", "gauge", "Engine decode speed since start.");
  out += "waste_decode_tokens_per_second " +
         Num(stats_.decode_s > 0 ? static_cast<double>(stats_.tokens_generated) / stats_.decode_s : 0) + "\n";
  Line(&out, "waste_queue_waiting", "gauge", "Requests waiting for the engine.");
  out += "waste_queue_waiting " + std::to_string(queue_waiting) + "\n";
  Line(&out, "waste_engine_busy", "gauge", "1 while a request runs on the engine.");
  out += std::string("waste_engine_busy ") + (running > 0 ? "1" : "0") + "\n";
  Line(&out, "waste_requests_running", "gauge", "Requests running at once (up to --parallel).");
  out += "waste_requests_running " + std::to_string(running) + "\n";
  uint64_t all = stats_.experts_hit + stats_.experts_missed;
  Line(&out, "waste_expert_hit_rate", "gauge", "Expert cache hit rate since start.");
  out += "waste_expert_hit_rate " +
         Num(all ? static_cast<double>(stats_.experts_hit) / static_cast<double>(all) : 0) + "\n";
  Line(&out, "waste_expert_bytes_read_total", "counter", "Expert bytes read from disk.");
  out += "waste_expert_bytes_read_total " + std::to_string(stats_.bytes_read) + "\n";
  Line(&out, "waste_draft_tokens_total", "counter", "Tokens guessed by --draft and verified.");
  out += "waste_draft_tokens_total " + std::to_string(stats_.draft_tokens) + "\n";
  Line(&out, "waste_draft_accepted_total", "counter",
       "Guessed tokens kept (each a decode step saved).");
  out += "waste_draft_accepted_total " + std::to_string(stats_.draft_accepted) + "\n";
  Line(&out, "waste_peak_rss_bytes", "gauge", "Peak resident set size of the process.");
  out += "waste_peak_rss_bytes " + std::to_string(PeakRssBytes()) + "\n";
  return out;
}

}  // namespace waste::server
