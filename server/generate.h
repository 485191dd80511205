// Running one prepared request on the engine (on the worker thread):
// pick a session slot (reusing a prompt prefix), generate, feed every token through a ChatTurn,
// and hand out either the blocking body or the stream's SSE events.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api_error.h"
#include "openai_shapes.h"
#include "prepare.h"
#include "session_pool.h"

namespace waste::server {

// Streaming: called with each SSE event ("data: ...\n\n"); returns false
// when the client is gone (generation then stops within one token).
using EventSink = std::function<bool(const std::string& event)>;

struct GenerateResult {
  std::optional<ApiError> error;  // blocking: the 500 to answer
  Json body;                      // blocking: the response object
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int reasoning_tokens = 0;       // of completion_tokens, thinking (ChatTurn::reasoning_tokens)
  int cached_tokens = 0;          // prompt tokens restored from a snapshot
  // Drafting's guesses (serve --draft) confirmed and refused over the
  // request's replies: usage's accepted_ and rejected_prediction_tokens.
  int draft_accepted = 0;
  int draft_rejected = 0;
  double prefill_ms = 0;          // time to first token
  double total_ms = 0;
  double queued_ms = -1;          // waited in the queue before it ran (the HTTP layer's; -1: not known)
  bool cancelled = false;         // the client went away
  bool resumed_ahead = false;     // cached_tokens came from a follow-on prefill's point
  bool resumed_earlier = false;   // ... from one of the slot's earlier points
  bool restored = false;          // ... from a point loaded from the prompt cache's store
  // A chat reply that ran to its end: its slot, kept for the follow-on
  // prefill (SessionPool::ReserveFollowOn; null when the pool does not
  // follow on), and what computes the tokens to prefill (follow_on.h).
  // The worker runs them once the reply is delivered.
  std::shared_ptr<SessionPool::FollowOn> follow_on;
  std::function<std::vector<int>()> next_turn;
};

// `sink` null = blocking. `cancel` is polled once per token. The prompt
// runs on the pool's best slot (prefix reuse, session_pool.h).
GenerateResult GenerateChat(Engine& engine, SessionPool& pool, const PreparedChat& chat,
                            const ChatFormat& format, const ReplyHeader& header,
                            const EventSink& sink, const std::atomic<bool>& cancel);

// /v1/completions, blocking (`sink` null) or streamed as text_completion
// chunks. The text goes through the same ChatTurn as a chat.json reply
// (stop strings, whole UTF-8 characters), so the streamed texts always
// concatenate to the blocking text.
GenerateResult GenerateCompletion(Engine& engine, SessionPool& pool, const PreparedCompletion& req,
                                  const ChatFormat& format, const ReplyHeader& header,
                                  const EventSink& sink, const std::atomic<bool>& cancel);

}  // namespace waste::server
