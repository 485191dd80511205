// What the chat and completions routes share while they generate
// (generate.cc, generate_completion.cc): timing, the engine's outcome as a
// Status and as the API error a request ends with, the model's image
// queue, the token callback's stop rule, usage, and each choice's seed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <span>

#include "api_error.h"
#include "generate.h"
#include "session_pool.h"

namespace waste::server {

using Clock = std::chrono::steady_clock;

inline double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Generate's outcome as the Status these routes reason about: a callback
// that stopped the run is kCancelled, as before Generate returned a reason.
Status AsStatus(const Result<FinishReason>& finished);

// An engine failure as the API error a request ends with (503 when every
// slot is held, else 500 with the session's detail).
ApiError EngineFailure(const Status& st, const Session* session);

// The model's image queue for a request that uses it: one with images, or
// whose prompt holds a media pad (token ids may name one). Held until its
// prompt is fed (the first token, or the end), so concurrent requests never
// see each other's images; the queue starts empty (nothing a failed request
// queued may leak into this one). A request that does not use it gets an
// empty lock and leaves the queue alone: the engine arms the queue only for
// a call whose tokens hold a pad.
std::unique_lock<std::mutex> ImageQueueFor(Engine& engine, SessionPool& pool, bool has_images,
                                           std::span<const int> ids);

// Gives the queue back, cleared, once the request's prompt has been fed
// for the last time (Done, at the first token of its last choice) or when
// it ends, whichever comes first.
struct ImageQueueHold {
  Engine& engine;
  std::unique_lock<std::mutex> lock;
  void Done() {
    if (!lock.owns_lock()) return;
    engine.ClearImages();
    lock.unlock();
  }
  ~ImageQueueHold() { Done(); }
};

// The end of both routes' token callbacks: whether generation goes on. The
// turn says whether it wants more (`more`: no end marker or stop string
// yet); a cancelled request or a client gone stops it and marks the result.
bool GoOn(bool more, const std::atomic<bool>& cancel, bool client_gone, bool* turn_stopped,
          GenerateResult* r);

// A failure the request ends with: the blocking reply's status, or (the
// event-stream headers are out) an error event and the end of the stream.
GenerateResult FailRequest(GenerateResult r, const ApiError& e, const EventSink& sink);

// usage with the prompt tokens restored from a snapshot, the thinking
// tokens among the completion's and drafting's guesses kept and refused
// (OpenAI's fields; docs/SERVER.md, "Predicted outputs").
Json UsageWithCache(const GenerateResult& r);

// The guesses confirmed and refused between two readings of a session's
// (or a request's summed) statistics, into r->draft_accepted / draft_rejected.
void CountDrafts(const Stats& before, const Stats& after, GenerateResult* r);

// Adds a slot's expert traffic over part of a request (`after` minus
// `before`, the fields WasteCounters reports) to `sum`, so a request that
// ran on several slots in turn (one per prompt) reports
// WasteCounters(Stats{}, sum, ms).
void AddTraffic(const Stats& before, const Stats& after, Stats* sum);

// The seed of a request's `index`-th completion (`n`, `best_of`): the
// request's own for the first (so it is what the same request with n = 1
// gives), then a mix of the seed and the index (SplitMix64's finaliser),
// never 0 (the engine's fixed default seed).
uint64_t ChoiceSeed(uint64_t seed, int index);

}  // namespace waste::server
