// The public engine API. The CLI uses nothing else. Every function is
// noexcept: failures come back as Status / Result, never as exceptions,
// and the library never prints or exits.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "waste/chat.h"
#include "waste/config.h"
#include "waste/memplan.h"
#include "waste/status.h"

namespace waste {

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
  uint32_t ctx_tokens = 0;
  bool bounded_context = true;       // false when no layer keeps per-position KV
};

struct MemoryUsage {
  uint64_t trunk_bytes = 0;
  uint64_t state_bytes = 0;
  uint64_t scratch_bytes = 0;
  uint64_t expert_cache_bytes = 0;   // slots * slot size, really allocated
  uint64_t slots = 0;
  uint64_t budget_bytes = 0;
  bool budget_defaulted = false;
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
  uint64_t prefill_tokens = 0;
  uint64_t evictions = 0;
  uint64_t prefetched = 0;
  uint64_t spec_reads = 0;
  bool direct_io = true;
  // Expert streaming (ENGINE.md §5): how records are read and how it went.
  std::string io_backend;            // "io_uring", "threads" or "sync"
  int io_threads = 0;                // reader (threads) or reaper (io_uring) threads
  int io_depth = 0;                  // reads in flight at most
  bool io_fixed_buffers = false;     // io_uring reads into registered buffers
  std::string cache_policy;          // "lfru", "lru", "lfu-history"
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

struct GenParams {
  int max_tokens = 256;
  float temperature = 0.0f;
  float top_p = 1.0f;
  int top_k = 0;
  uint64_t seed = 0;                 // 0 = the fixed default seed
  std::vector<int> stop_tokens;
  // Beyond temperature / top-k / top-p; the defaults leave sampling (and
  // greedy) exactly as without them.
  float min_p = 0.0f;                // drop p < min_p * p_max (0 = off)
  float repeat_penalty = 1.0f;       // seen token: logit / rp if > 0, else * rp
  int repeat_last_n = 64;            // tokens (prompt + generated) penalties look at
  float presence_penalty = 0.0f;     // subtracted once per seen token
  float frequency_penalty = 0.0f;    // subtracted per occurrence
  bool ignore_eos = false;           // keep going past the end-of-text token
  std::vector<std::pair<int, float>> logit_bias;  // added to the logit (-inf bans)
  // Prefill progress: called after each prompt chunk (at most 64 tokens)
  // with (tokens done, prompt length). Return false to cancel: Generate then
  // returns kCancelled before any token (the chunks fed stay in the state).
  std::function<bool(int done, int total)> on_prefill;
};

// Per generated token. Return false to cancel (Generate returns kCancelled).
struct TokenEvent {
  int index = 0;
  int token = 0;
  std::string_view piece;            // raw bytes (may split a UTF-8 character)
  uint64_t experts_hit = 0, experts_missed = 0, bytes_read = 0;
  double ms_total = 0;
};
using TokenCallback = std::function<bool(const TokenEvent&)>;

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> Open(const std::string& container_dir,
                                              const Config& config) noexcept;
  ~Engine();

  const ModelInfo& info() const noexcept;
  MemoryUsage memory_used() const noexcept;
  Stats stats() const noexcept;
  std::string backend_name() const noexcept;
  int threads() const noexcept;
  int position() const noexcept;     // next absolute position
  // Why the last call failed or stopped early ("expert 3 of layer 1: ..."),
  // or empty.
  const std::string& error_detail() const noexcept;

  // Tokenizer (kUnsupported when the container has none).
  Result<std::vector<int>> Tokenize(std::string_view text, bool markup, bool add_bos) const noexcept;
  // A prompt built by waste/chat.h: each segment encoded on its own in its
  // own mode (markup or plain), the ids concatenated, BOS first if asked.
  Result<std::vector<int>> TokenizeSegments(std::span<const PromptSegment> segments,
                                            bool add_bos) const noexcept;
  Result<std::string> Detokenize(std::span<const int> ids) const noexcept;
  std::string TokenPiece(int id) const noexcept;  // raw bytes, "" when unknown

  // Feeds `ids` at the current position; returns the last position's logits
  // (valid until the next call). Prompt must fit: ctx - position >= n.
  Result<std::span<const float>> Eval(std::span<const int> ids) noexcept;
  // Prefill + sampling loop (ENGINE.md §7.2).
  Status Generate(std::span<const int> prompt, const GenParams& params,
                  const TokenCallback& on_token) noexcept;

  Status SaveState(const std::string& path) const noexcept;
  Status LoadState(const std::string& path) noexcept;
  void ResetState() noexcept;

  // Hotlist (usage.waste, FORMAT.md §9.5); empty path = the configured one.
  Status SaveUsage(const std::string& path = "") const noexcept;

  struct Impl;

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace waste
