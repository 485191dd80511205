#include "generate_common.h"

#include <algorithm>

namespace waste::server {

Status AsStatus(const Result<FinishReason>& finished) {
  if (!finished) return finished.error();
  if (*finished == FinishReason::kCancelled) return Status(Errc::kCancelled, "cancelled by callback");
  return Status::Ok();
}

ApiError EngineFailure(const Status& st, const Session* session) {
  if (st.code() == Errc::kBusy) {  // every slot held (more workers than slots)
    return ApiError{503, "server_busy", st.message(), std::nullopt, std::nullopt};
  }
  std::string detail = st.message().empty() && session ? session->error_detail() : st.message();
  std::string msg = std::string("generate: ") + ErrcText(st.code());
  if (!detail.empty()) msg += " (" + detail + ")";
  return ApiError{500, "engine_error", msg, std::nullopt, std::nullopt};
}

std::unique_lock<std::mutex> ImageQueueFor(Engine& engine, SessionPool& pool, bool has_images,
                                           std::span<const int> ids) {
  const int pad = engine.media_pad_id();
  if (!has_images && (pad < 0 || std::find(ids.begin(), ids.end(), pad) == ids.end())) return {};
  std::unique_lock<std::mutex> lock(pool.image_queue());
  engine.ClearImages();
  return lock;
}

bool GoOn(bool more, const std::atomic<bool>& cancel, bool client_gone, bool* turn_stopped,
          GenerateResult* r) {
  if (!more) *turn_stopped = true;
  if (cancel.load() || client_gone) {
    r->cancelled = true;
    return false;
  }
  return more;
}

GenerateResult FailRequest(GenerateResult r, const ApiError& e, const EventSink& sink) {
  if (!sink) {
    r.error = e;
    return r;
  }
  sink("data: " + ErrorBody(e) + "\n\n");
  sink("data: [DONE]\n\n");
  return r;
}

Json UsageWithCache(const GenerateResult& r) {
  Json u = Usage(r.prompt_tokens, r.completion_tokens);
  u["prompt_tokens_details"] = {{"cached_tokens", r.cached_tokens}};
  u["completion_tokens_details"] = {{"reasoning_tokens", r.reasoning_tokens},
                                    {"accepted_prediction_tokens", r.draft_accepted},
                                    {"rejected_prediction_tokens", r.draft_rejected}};
  return u;
}

void CountDrafts(const Stats& before, const Stats& after, GenerateResult* r) {
  auto diff = [](uint64_t a, uint64_t b) { return static_cast<int>(b >= a ? b - a : 0); };
  const int guessed = diff(before.draft_tokens, after.draft_tokens);
  r->draft_accepted = diff(before.draft_accepted, after.draft_accepted);
  r->draft_rejected = guessed - std::min(guessed, r->draft_accepted);
}

void AddTraffic(const Stats& before, const Stats& after, Stats* sum) {
  auto diff = [](uint64_t a, uint64_t b) { return b >= a ? b - a : 0; };
  sum->tokens_generated += diff(before.tokens_generated, after.tokens_generated);
  sum->experts_hit += diff(before.experts_hit, after.experts_hit);
  sum->experts_missed += diff(before.experts_missed, after.experts_missed);
  sum->bytes_read += diff(before.bytes_read, after.bytes_read);
  sum->draft_passes += diff(before.draft_passes, after.draft_passes);
  sum->draft_tokens += diff(before.draft_tokens, after.draft_tokens);
  sum->draft_accepted += diff(before.draft_accepted, after.draft_accepted);
  sum->direct_io = after.direct_io;
}

uint64_t ChoiceSeed(uint64_t seed, int index) {
  if (index == 0) return seed;
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(index);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return z != 0 ? z : 1;
}

}  // namespace waste::server
