// Plain values of the public API: what a model reports about itself, what
// it holds in memory, generation parameters and statistics, the per-token
// callback. Shared by waste/model.h (Model, Session) and waste/engine.h
// (Engine, the one-session convenience).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "waste/export.h"

namespace waste {

class TokenConstraint;  // waste/grammar.h

// Prompts are fed in chunks of this many tokens, cut at multiples of it
// counted from position 0. A chunk rounds differently from token-at-a-time
// (batched products, the recurrence's chunked form; within the documented
// tolerance), so the cut decides the logits' last bits: a host that saves a
// prefilled session and resumes it later (prefix reuse) does so at a
// multiple of this to get exactly what one long prefill would give.
inline constexpr int kPrefillChunkTokens = 128;

// Long prompts run layer by layer over spans of up to this many tokens
// (whole chunks): each layer's attention still steps chunk by chunk, but its
// experts serve the whole span, so an expert the cache cannot keep is read
// once per span instead of once per chunk. The bits are the chunks' (a span
// only changes timing), so resuming at any multiple of kPrefillChunkTokens
// stays exact; a span is how often prefill checks for cancellation.
inline constexpr int kPrefillSpanTokens = 4 * kPrefillChunkTokens;
// Most tokens one drafting pass guesses (Config::draft_tokens); a pass
// feeds one more, the token it starts from.
inline constexpr int kMaxDraftTokens = 16;

struct ModelInfo {
  std::string arch;                  // kimi-linear, kimi-k3, ...
  int layers = 0;
  int experts = 0;
  int top_k = 0;
  int hidden = 0;
  int vocab = 0;
  uint64_t params_total = 0;
  uint64_t params_active = 0;
  std::string quantization;          // "experts VQ3R, trunk Q4G/Q8G/F32"
  bool has_tokenizer = false;
  bool has_chat_template = false;
  int bos_id = -1;
  int eos_id = -1;
  uint32_t ctx_tokens = 0;           // the model's default session context
  bool bounded_context = true;       // false when no layer keeps per-position KV
  // Values proven finite at open (F32 trunk tensors, quantized tensors'
  // scales, codebook entries); the logits are also checked every step.
  uint64_t finite_checked_values = 0;
};

// What a model holds. state_bytes and scratch_bytes sum the sessions open
// now (each session owns its state and its forward-pass scratch).
struct MemoryUsage {
  uint64_t trunk_bytes = 0;
  uint64_t state_bytes = 0;
  uint64_t scratch_bytes = 0;
  uint64_t expert_cache_bytes = 0;   // slots * slot size, really allocated
  uint64_t slots = 0;
  uint64_t budget_bytes = 0;
  bool budget_defaulted = false;
  uint32_t sessions = 0;             // sessions open now
  uint32_t max_sessions = 0;         // sessions the budget reserves room for
  uint64_t session_reserve_bytes = 0;  // state + scratch the budget keeps for sessions
};

struct Stats {
  uint64_t tokens_generated = 0;
  uint64_t experts_hit = 0;
  uint64_t experts_missed = 0;
  uint64_t bytes_read = 0;
  double sec_total = 0;              // prefill + decode wall time of Generate calls
  double sec_io = 0;                 // time blocked waiting for expert reads
  double prefill_s = 0;
  double decode_s = 0;
  uint64_t prefill_tokens = 0;        // prompt tokens Generate fed (a stopped prompt: its spans fed)
  uint64_t evictions = 0;
  uint64_t prefetched = 0;
  uint64_t spec_reads = 0;
  // Drafting (Config::draft_tokens): verifying passes run, tokens guessed,
  // guesses kept (each one a decode step saved).
  uint64_t draft_passes = 0;
  uint64_t draft_tokens = 0;
  uint64_t draft_accepted = 0;
  bool direct_io = true;
  // Expert streaming (ENGINE.md §5): how records are read and how it went.
  std::string io_backend;            // "io_uring", "threads" or "sync"
  int io_threads = 0;                // reader (threads) or reaper (io_uring) threads
  int io_depth = 0;                  // reads in flight at most
  bool io_fixed_buffers = false;     // io_uring reads into registered buffers
  std::string cache_policy;          // "lfru", "lru", "lfu-history"
  bool huge_pages = false;           // the expert cache arena is advised for huge pages
  uint64_t spec_used = 0;            // lookahead reads later demanded
  uint64_t warm_reads = 0;           // hotlist records loaded at open
  uint64_t read_waits = 0;           // demand accesses that blocked on a read in flight
  uint64_t io_reads = 0;             // records read, warm-up included
  uint64_t io_bytes = 0;             // bytes read, warm-up included
  double io_busy_s = 0;              // wall time with at least one read in flight
  // WASTE_PROFILE=1: seconds per phase (attention, router, experts, read
  // wait, lm_head, ...), cumulative since open; empty otherwise.
  std::vector<std::pair<std::string, double>> phase_seconds;
};

// A token and the log-probability (natural log) the model gives it: the
// log-softmax of the raw logits, before temperature, penalties, logit_bias
// or a constraint change what is sampled, so it does not depend on how the
// token was picked.
struct TokenLogprob {
  int token = 0;
  double logprob = 0;
};

// One scored position (Session::ScoreTop, GenParams::prompt_scores): the
// log-probability of the token that came there, and the most likely tokens
// at that position, most likely first (ties: the lower id first).
struct TokenScore {
  double logprob = 0;
  std::vector<TokenLogprob> top;
};

struct GenParams {
  int max_tokens = 256;
  float temperature = 0.0f;
  float top_p = 1.0f;
  int top_k = 0;
  uint64_t seed = 0;                 // 0 = the fixed default seed
  std::vector<int> stop_tokens;
  // Generation stops once the generated bytes contain one of these (the
  // token that completes it is still reported to the callback; a host that
  // prints text hides the stop string with StopStringFilter, waste/text.h).
  std::vector<std::string> stop_strings;
  // Constrained decoding (waste/grammar.h): when set, every sampled token
  // is one the constraint allows, and each generated token is passed to
  // its Accept(). Not owned; must outlive the Generate call.
  TokenConstraint* constraint = nullptr;
  // Beyond temperature / top-k / top-p; the defaults leave sampling (and
  // greedy) exactly as without them.
  float min_p = 0.0f;                // drop p < min_p * p_max (0 = off)
  float repeat_penalty = 1.0f;       // seen token: logit / rp if > 0, else * rp
  int repeat_last_n = 64;            // tokens (prompt + generated) penalties look at
  float presence_penalty = 0.0f;     // subtracted once per seen token
  float frequency_penalty = 0.0f;    // subtracted per occurrence
  bool ignore_eos = false;           // keep going past the end-of-text token
  std::vector<std::pair<int, float>> logit_bias;  // added to the logit (-inf bans)
  // Prefill progress: called after each prompt span (kPrefillSpanTokens)
  // with (tokens done, prompt length). Return false to cancel: Generate then
  // returns FinishReason::kCancelled before any token (the spans fed stay
  // in the session's state).
  std::function<bool(int done, int total)> on_prefill;
  // Log-probabilities (TokenLogprob says of which distribution). With
  // `logprobs`, every TokenEvent carries its token's log-probability and
  // the `top_logprobs` most likely tokens of that step (0 = none; at most
  // the vocabulary). Off, nothing is computed (a pass over the vocabulary
  // per token when on).
  bool logprobs = false;
  int top_logprobs = 0;
  // When set, the prompt is scored as it is fed (Session::ScoreTop, with
  // `top_logprobs` alternatives): the vector is replaced by prompt.size() - 1
  // entries, entry i for prompt[i + 1] (the first prompt token has nothing
  // before it in this call to be scored by). Costs an lm_head per prompt
  // position; a prefill that stops early leaves the entries it reached.
  // Not owned; must outlive the Generate call.
  std::vector<TokenScore>* prompt_scores = nullptr;
  // Prompt-lookup drafting (Config::draft_tokens, docs/DRAFTING.md): -1 =
  // the model's setting, 0 = off for this call, else at most the model's.
  int draft_tokens = -1;
  // Tokens before `prompt` that drafting may quote from as well (the
  // conversation a host resumed from a cache and did not feed again); the
  // prompt and the reply are always searched. Not owned.
  std::span<const int> draft_context;
  // What the reply is expected to be (OpenAI's predicted outputs: an editor
  // sends the file it asks the model to rewrite): drafting guesses it from
  // its first token on, and after a difference goes on quoting it where the
  // reply agrees with it again. Never changes the reply, only how many
  // tokens one pass confirms. Ignored when drafting is off. Not owned.
  std::span<const int> draft_prediction;
};

// Per generated token. Return false to cancel.
struct TokenEvent {
  int index = 0;
  int token = 0;
  std::string_view piece;            // raw bytes (may split a UTF-8 character)
  uint64_t experts_hit = 0, experts_missed = 0, bytes_read = 0;
  double ms_total = 0;
  double ms_io = 0;                  // of ms_total, waiting for expert reads
  // With GenParams::logprobs: log p(token) at this step and the step's
  // top_logprobs most likely tokens (valid during the callback); else 0 and
  // empty.
  double logprob = 0;
  std::span<const TokenLogprob> top_logprobs;
  // The token was a drafted guess the verifying pass confirmed (its
  // ms_total is then only this token's bookkeeping: the pass is counted on
  // the token it started from).
  bool drafted = false;
};
using TokenCallback = std::function<bool(const TokenEvent&)>;

}  // namespace waste

namespace waste {

// Why Session::Generate (and Engine::Generate) stopped.
enum class FinishReason : int {
  kEos = 0,          // the model emitted its end-of-sequence token
  kStopToken = 1,    // a token of GenParams::stop_tokens
  kStopString = 2,   // the generated text now contains a GenParams::stop_strings entry
  kLength = 3,       // GenParams::max_tokens tokens were generated
  kContextFull = 4,  // the session's context has no room for another token
  kCancelled = 5,    // the token callback (or GenParams::on_prefill) returned false
};

// "eos", "stop_token", "stop_string", "length", "context_full", "cancelled".
WASTE_EXPORT const char* FinishReasonName(FinishReason reason) noexcept;

}  // namespace waste
